"""Write a real PyTorch profiler (Kineto) trace of a 2-rank gloo DDP run on CPU: one JSON per rank.

A 3-layer MLP of 512x512 weights without biases (786,432 parameters, 3 MiB of fp32 gradient) trained with SGD
at batch 64 per rank, DDP with ``bucket_cap_mb=1``: each weight is one 1 MiB bucket, so every step all-reduces
three 1 MiB buckets during backward. torch.profiler records one warm-up step and then ``--steps`` steps with
``record_shapes=True`` (gloo's ops carry their input dims only then).

    python measurements/kineto_ddp.py OUT_DIR [--steps 3] [--port 29517]

Used by tests/test_live.py (once per test session) and for the examples in docs/bench.md and
docs/calibration.md (``measurements/kineto-ddp-gloo-cpu/``).
"""

from __future__ import annotations

import argparse
import os
import socket

PARAMS = 3 * 512 * 512
BATCH = 64


def _rank(rank: int, world: int, out: str, port: int, steps: int) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.profiler import ProfilerActivity, profile, schedule

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        model = nn.Sequential(
            nn.Linear(512, 512, bias=False), nn.ReLU(), nn.Linear(512, 512, bias=False), nn.ReLU(),
            nn.Linear(512, 512, bias=False),
        )  # fmt: skip
        ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        x, y = torch.randn(BATCH, 512), torch.randn(BATCH, 512)
        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
            record_shapes=True,
            on_trace_ready=lambda p: p.export_chrome_trace(os.path.join(out, f"rank{rank}.json")),
        ) as prof:
            for _ in range(steps + 1):
                loss = ((ddp(x) - y) ** 2).mean()
                loss.backward()
                opt.step()
                opt.zero_grad()
                prof.step()
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--port", type=int, default=None)
    a = ap.parse_args(argv)
    import torch.multiprocessing as mp

    os.makedirs(a.out, exist_ok=True)
    mp.spawn(_rank, args=(2, a.out, a.port or _free_port(), a.steps), nprocs=2)


if __name__ == "__main__":
    main()
