"""The worlds a bench command measures, and what its parent process adds to each record.

* where the ranks run: world sizes from ``--world-sizes`` or the one world a launcher (torchrun) set; the backend
  (``auto``: nccl with CUDA devices, gloo otherwise); the torch threads of a CPU rank;
* :func:`run_worlds`: spawn each world in turn on 127.0.0.1 (or be one rank of the launcher's world) and hand each
  record, as it is measured, to a callback; a command's progress bar and messages are callbacks too;
* for ``bench step``: whether a step fits the memory there, and each record's prediction and MFU.

torch is imported only inside the functions that need it (:func:`resolve_backend`, the torchrun branch of
:func:`run_worlds`, :func:`check_memory` under nccl).
"""

from __future__ import annotations

import os
from typing import Any, Callable

from ..base.ranges import parse_devices
from ..base.types import InputError
from ..base.units import fmt_bytes
from ..io.workloads import custom_workload
from ..step.engine import Scenario, simulate
from .models import memory_estimate

__all__ = [
    "BACKENDS",
    "world_sizes",
    "is_writer",
    "resolve_backend",
    "check_worlds",
    "default_threads",
    "run_worlds",
    "check_memory",
    "available_memory",
    "add_prediction",
    "add_mfu",
]

#: --backend's choices: auto picks nccl where torch sees a CUDA device, gloo otherwise (:func:`resolve_backend`)
BACKENDS = ("auto", "gloo", "nccl")


def world_sizes(text: str | None, default: str) -> tuple[list[int], dict[str, Any] | None]:
    """The world sizes to spawn (``--world-sizes``, else ``default``), or under a launcher its one world and its
    environment (:func:`~simcli.bench.launch.torchrun_env`)."""
    from .launch import torchrun_env  # lazy

    tr = torchrun_env()
    if tr is not None:
        if text is not None and [int(x) for x in parse_devices(text, "--world-sizes")] != [tr["world_size"]]:
            raise InputError(
                f"--world-sizes: {text!r} differs from the launcher's WORLD_SIZE={tr['world_size']}; "
                "under torchrun leave --world-sizes out (the launcher sets the world)"
            )
        return [int(tr["world_size"])], tr
    return [int(x) for x in parse_devices(text or default, "--world-sizes")], None


def is_writer(tr: dict[str, Any] | None) -> bool:
    """Whether this process writes the results: the spawning parent, or rank 0 of a launcher's world."""
    return tr is None or int(tr["rank"]) == 0


def resolve_backend(backend: str) -> tuple[str, int | None]:
    """``(backend, CUDA devices torch sees)``: auto is nccl with CUDA devices, gloo otherwise; nccl needs one."""
    import torch  # heavy

    cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if backend == "auto":
        return ("nccl" if cuda else "gloo"), cuda
    if backend == "nccl" and not cuda:
        raise InputError("--backend nccl: this host has no CUDA device torch can use; use --backend gloo")
    return backend, cuda


def check_worlds(sizes: list[int], backend: str, oversubscribe: bool, *, cuda: int | None, port: int) -> None:
    """Refuse, before any rank starts, a world this host cannot run and a --port that is out of range or busy."""
    from .launch import check_port, check_world_size  # lazy

    for k in sizes:
        check_world_size(k, backend, oversubscribe, devices=cuda)
    if port:
        check_port(port)


def default_threads(threads: int | None, k_max: int, backend: str) -> int | None:
    """torch threads per CPU rank: the same for every world size (a fixed "device"), cores // largest k."""
    if threads is not None:
        return threads
    if backend == "nccl":
        return None
    return max(1, (os.cpu_count() or 1) // k_max)


def run_worlds(
    task: str,
    sizes_k: list[int],
    tr: dict[str, Any] | None,
    *,
    backend: str,
    config: dict[str, Any],
    timeout: float,
    port: int,
    threads: int | None,
    on_record: Callable[[dict], None],
    on_world_done: Callable[[int], None],
    on_world_start: Callable[[int, int], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> None:
    """Spawn each world in turn (or, under torchrun, be one rank of the given world).

    ``on_record`` gets rank 0's records as they are measured; ``on_world_start(i, k)`` is called before the i-th
    world (of size k) is spawned, ``on_world_done(k)`` after it (under torchrun on rank 0 only), and
    ``on_progress`` with the unit (a size, a timed step) the slowest rank of the running world has reached."""
    from .launch import BenchError  # lazy

    if tr is not None:
        from . import worker  # lazy
        from .launch import IdentityError  # lazy

        d = worker.init(
            backend,
            int(tr["rank"]),
            int(tr["world_size"]),
            local_rank=int(tr["local_rank"]),
            local_world_size=int(tr["local_world_size"]),
            timeout_s=timeout,
            emit_fn=on_record,
        )
        cfg = {k: v for k, v in config.items() if k not in ("backend", "progress_unit")}
        try:
            worker.run_task(task, d, cfg)
        except IdentityError as e:
            raise BenchError(f"rank {d.rank} of world size {d.world_size}: {e}") from None
        except RuntimeError as e:  # a peer died: torch.distributed raises on the survivors
            raise BenchError(f"rank {d.rank} of world size {d.world_size}: {str(e).splitlines()[0]}") from None
        finally:
            import torch.distributed as dist  # heavy

            if dist.is_initialized():
                dist.destroy_process_group()
        if d.rank == 0:
            on_world_done(d.world_size)
        return
    from .launch import run_world  # lazy

    for i, k in enumerate(sizes_k):
        if on_world_start is not None:
            on_world_start(i, k)
        run_world(
            k,
            task,
            dict(config, backend=backend),
            timeout_s=timeout,
            on_record=on_record,
            port=port,
            threads=default_threads(threads, max(sizes_k), backend),
            on_progress=on_progress,
        )
        on_world_done(k)


# --------------------------------------------------------------------------- bench step


def check_memory(spec: Any, batch: int, backend: str, *, ranks_here: int, kind: str) -> None:
    """Refuse a model whose step cannot fit: parameters x 4 B x 4 + activations, per rank, vs the memory there."""

    need = memory_estimate(spec, batch)
    if backend == "nccl":
        import torch  # heavy

        have, where, total = float(torch.cuda.get_device_properties(0).total_memory), "GPU 0 has", need
    else:
        have, where, total = available_memory(), "this host has available", need * ranks_here
    if have and total > have:
        per = f"{fmt_bytes(need, binary=False)} per rank: parameters x 4 B x 4 + activations"
        if total != need:
            per += f", x {ranks_here} ranks"
        raise InputError(
            f"--model {kind}: a step needs about {fmt_bytes(total, binary=False)} ({per}) but {where} "
            f"{fmt_bytes(have, binary=False)}; use a smaller model or --batch-per-device"
        )


def available_memory() -> float:
    """MemAvailable from /proc/meminfo (Linux), else physical pages x page size, else 0 (unknown: no check)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0.0


def add_prediction(
    rec: dict[str, Any], ref: dict[str, float], prof: Any, *, tr: dict[str, Any] | None, bucket_cap_mb: float = 25.0
) -> None:
    """Measured S(k), E(k) and the engine's prediction for the same profile and params.

    The prediction's compute time is the measured T_step(1) of the same mode: at k = 1 there is no
    communication, so it is everything else the step does (forward, backward, flattening, the
    optimizer), and the comparison isolates the communication model. The flat mode all-reduces
    after backward (``--overlap none``); DDP overlaps its buckets with backward (``buckets``).
    ``ref`` keeps each mode's T_step(1) from one record to the next.
    """

    k, mode = int(rec["world_size"]), rec["mode"]
    if k == 1:
        ref[mode] = rec["t_step_s"]
    t_ref = ref.get(mode) if tr is None else (rec["t_step_s"] if k == 1 else rec.get("t_solo_step_s"))
    rec["profile"] = prof.name
    rec["t_step_ref_s"] = t_ref
    if t_ref:
        rec["speedup"] = k * t_ref / rec["t_step_s"]
        rec["efficiency"] = rec["speedup"] / k
    wl = custom_workload(float(rec["params"]), None, int(rec["batch_per_device"]))
    sc = Scenario(
        profile=prof,
        workload=wl,
        batch_per_device=int(rec["batch_per_device"]),
        compute_time_s=float(t_ref or rec["t_compute_s"]),
        grad_dtype="fp32",
        overlap="buckets" if mode == "ddp" else "none",
        bucket_mb=bucket_cap_mb,
        update_time_s=0.0,  # the measured T_step(1) holds the step's SGD update (simcli.step.update)
    )
    res = simulate(sc, [k])
    rec.update(
        {
            "predicted_t_comm_s": float(res.t_comm_s[0]),
            "predicted_t_step_s": float(res.t_step_s[0]),
            "predicted_speedup": float(res.speedup[0]),
            "predicted_efficiency": float(res.efficiency[0]),
        }
    )


def add_mfu(rec: dict[str, Any], prof: Any) -> None:
    """The profile's peak FLOP/s for the record's dtype, and the model FLOP utilisation of its compute time."""
    peak = prof.device.peak_flops.get(rec.get("dtype") or "fp32")
    rec["peak_flops"] = peak
    rec["mfu"] = (
        rec["flops_per_sample"] * rec["batch_per_device"] / rec["t_compute_s"] / peak
        if peak and rec.get("flops_per_sample")
        else None
    )
