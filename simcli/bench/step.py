"""A real data-parallel training step and the identity it rests on (run by every rank; imports torch).

Model: an MLP of ``depth`` layers ``Linear(width, width)`` with ReLU between
them, MSE loss on synthetic data; every rank builds it from the same seed. The
global batch of each step is generated from a seed on every rank and rank r
takes rows ``r·b .. (r+1)·b``, so rank 0 also holds the whole global batch.

Per world and per mode (``flat``: one all_reduce of the flattened gradient,
then divide by k; ``ddp``: DistributedDataParallel with its gradient buckets),
timed with a barrier before each step and the slowest rank's time per step:

* T_compute: forward + backward, no communication (shared by both modes);
* T_comm: the all-reduce of the gradients alone (flat: one tensor of all
  parameters; ddp: one all_reduce per DDP bucket, as DDP issues them);
* T_step: the whole step: forward, backward, all-reduce, SGD update θ ← θ − η·g.

The identity, checked once per mode before timing (an error, not a warning):
after the all-reduce every rank holds the same averaged gradient, and it
equals, within ``GRAD_RTOL`` of its largest element, the gradient one process
computes on the whole global batch (the mean of k equal-sized per-rank means is
the global mean); after one update the parameters are identical on every rank.
"""

from __future__ import annotations

import math
import time
from typing import Any, Sequence

from .stats import summarize
from .launch import IdentityError
from .worker import Dist

__all__ = ["GRAD_RTOL", "mlp_width_for_params", "mlp_params", "measure_step"]

#: tolerance of the averaged gradient against the one-process global-batch gradient, relative to the
#: largest gradient element (fp32 sums in a different order differ by ~1e-7 relative)
GRAD_RTOL = 1e-4
#: DDP's default bucket_cap_mb (MiB) and its first, smaller bucket (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES)
DDP_BUCKET_MB = 25.0
DDP_FIRST_BUCKET_BYTES = 1024 * 1024


def mlp_params(width: int, depth: int) -> int:
    """Parameters of ``depth`` Linear(width, width) layers with bias."""
    return depth * (width * width + width)


def mlp_width_for_params(params: float, depth: int) -> int:
    """The width whose MLP of ``depth`` layers has about ``params`` parameters: depth·(w²+w) = N."""
    return max(1, int(round((-1.0 + math.sqrt(1.0 + 4.0 * params / depth)) / 2.0)))


def _make_model(width: int, depth: int, seed: int, device):
    import torch
    from torch import nn

    torch.manual_seed(seed)
    layers: list[Any] = []
    for i in range(depth):
        layers.append(nn.Linear(width, width))
        if i < depth - 1:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers).to(device)


def _flat_grad(model):
    import torch

    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def _flat_params(model):
    import torch

    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def _set_grads(model, flat) -> None:
    off = 0
    for p in model.parameters():
        n = p.numel()
        p.grad.copy_(flat[off:off + n].view_as(p))
        off += n


def _bucket_sizes(model, cap_mb: float, elem_bytes: int = 4) -> list[int]:
    """Element counts of DDP's gradient buckets: parameters in reverse order, greedily, first bucket 1 MiB."""
    sizes, cur, cap = [], 0, DDP_FIRST_BUCKET_BYTES
    for p in reversed(list(model.parameters())):
        cur += p.numel()
        if cur * elem_bytes >= cap:
            sizes.append(cur)
            cur, cap = 0, int(cap_mb * 1024 * 1024)
    if cur:
        sizes.append(cur)
    return sizes


def measure_step(d: Dist, width: int, depth: int, batch_per_device: int, steps: int = 20, warmup: int = 3,
                 modes: Sequence[str] = ("flat", "ddp"), lr: float = 0.01, seed: int = 0,
                 bucket_cap_mb: float = DDP_BUCKET_MB, solo_reference: bool = False, n_batches: int = 4) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.functional import mse_loss

    k, r, b = d.world_size, d.rank, batch_per_device
    gen = torch.Generator().manual_seed(seed + 1)
    batches = []
    for _ in range(n_batches):
        xg = torch.randn(k * b, width, generator=gen).to(d.device)
        yg = torch.randn(k * b, width, generator=gen).to(d.device)
        batches.append((xg, yg, xg[r * b:(r + 1) * b], yg[r * b:(r + 1) * b]))
    counter = [0]

    def timed(fn, n: int, nwarm: int):
        for i in range(nwarm):
            fn(i)
        d.sync()
        times = []
        for i in range(n):
            d.checkpoint(counter[0])
            counter[0] += 1
            dist.barrier()
            d.sync()
            t0 = time.perf_counter()
            fn(i)
            d.sync()
            times.append(time.perf_counter() - t0)
        tt = torch.tensor(times, dtype=torch.float64, device=d.device)
        dist.all_reduce(tt, op=dist.ReduceOp.MAX)
        return summarize(tt.cpu().tolist())

    # ---- T_compute: forward + backward, no communication
    model = _make_model(width, depth, seed, d.device)
    nparams = sum(p.numel() for p in model.parameters())

    def compute(i: int) -> None:
        model.zero_grad(set_to_none=False)
        _, _, x, y = batches[i % n_batches]
        mse_loss(model(x), y).backward()

    t_compute = timed(compute, steps, warmup)
    flat = torch.zeros(nparams, dtype=torch.float32, device=d.device)

    solo = None
    if solo_reference and k > 1:
        # T_step(1) under torchrun: rank 0 alone runs the step without communication; the others wait
        solo_model = _make_model(width, depth, seed, d.device)
        opt = torch.optim.SGD(solo_model.parameters(), lr=lr)
        if r == 0:
            ts = []
            for i in range(warmup + steps):
                d.sync()
                t0 = time.perf_counter()
                opt.zero_grad(set_to_none=False)
                _, _, x, y = batches[i % n_batches]
                mse_loss(solo_model(x), y).backward()
                opt.step()
                d.sync()
                if i >= warmup:
                    ts.append(time.perf_counter() - t0)
            solo = summarize(ts).median
        dist.barrier()

    for mode in modes:
        # ---- the identity, on a fresh model, step 0
        ident_model = _make_model(width, depth, seed, d.device)
        opt = torch.optim.SGD(ident_model.parameters(), lr=lr)
        xg, yg, x, y = batches[0]
        if mode == "ddp":
            ddp = torch.nn.parallel.DistributedDataParallel(ident_model, bucket_cap_mb=bucket_cap_mb)
            mse_loss(ddp(x), y).backward()
            g_avg = _flat_grad(ident_model)
        else:
            mse_loss(ident_model(x), y).backward()
            g_avg = _flat_grad(ident_model)
            dist.all_reduce(g_avg)
            g_avg.div_(k)
            _set_grads(ident_model, g_avg)
        if d.fault("grad"):  # test hook: a rank whose gradient is wrong must fail the check
            g_avg = g_avg + 1e-2
        opt.step()
        ident = _check_identity(d, g_avg, _flat_params(ident_model), xg, yg, width, depth, seed, lr)
        if mode == "ddp":
            del ddp

        # ---- T_comm and T_step
        if mode == "flat":
            def comm(i: int) -> None:
                dist.all_reduce(flat)
        else:
            chunks = list(torch.split(flat, _bucket_sizes(model, bucket_cap_mb)))

            def comm(i: int) -> None:
                for c in chunks:
                    dist.all_reduce(c)
        t_comm = timed(comm, steps, warmup)

        step_model = _make_model(width, depth, seed, d.device)
        opt = torch.optim.SGD(step_model.parameters(), lr=lr)
        if mode == "ddp":
            net = torch.nn.parallel.DistributedDataParallel(step_model, bucket_cap_mb=bucket_cap_mb)

            def step(i: int) -> None:
                opt.zero_grad(set_to_none=False)
                _, _, x, y = batches[i % n_batches]
                mse_loss(net(x), y).backward()
                opt.step()
        else:
            def step(i: int) -> None:
                opt.zero_grad(set_to_none=False)
                _, _, x, y = batches[i % n_batches]
                mse_loss(step_model(x), y).backward()
                g = _flat_grad(step_model)
                dist.all_reduce(g)
                g.div_(k)
                _set_grads(step_model, g)
                opt.step()
        t_step = timed(step, steps, warmup)
        if mode == "ddp":
            del net

        fwd_flops = 2.0 * nparams * b  # a multiply-add per weight and sample
        d.emit({"world_size": k, "backend": d.backend, "mode": mode, "model": f"mlp {depth}x{width}",
                "params": nparams, "batch_per_device": b, "steps": steps, "threads": torch.get_num_threads(),
                "t_compute_s": t_compute.median, "t_compute_p10_s": t_compute.p10,
                "t_compute_p90_s": t_compute.p90, "t_comm_s": t_comm.median, "t_comm_p10_s": t_comm.p10,
                "t_comm_p90_s": t_comm.p90, "t_step_s": t_step.median, "t_step_p10_s": t_step.p10,
                "t_step_p90_s": t_step.p90, "t_solo_step_s": solo,
                "achieved_flops": 3.0 * fwd_flops / t_compute.median,
                "spread": max(t_compute.spread, t_comm.spread if k > 1 else 0.0, t_step.spread), **ident})


def _check_identity(d: Dist, g_avg, params_after, xg, yg, width: int, depth: int, seed: int,
                    lr: float) -> dict[str, float]:
    """Ranks agree on g and θ; g equals the one-process global-batch gradient. Raises IdentityError."""
    import torch
    import torch.distributed as dist
    from torch.nn.functional import mse_loss

    def rank_diff(t) -> float:
        ref = t.clone()
        dist.broadcast(ref, 0)
        return float((t - ref).abs().max())

    dg, dp = rank_diff(g_avg), rank_diff(params_after)
    stats = torch.zeros(4, dtype=torch.float64, device=d.device)
    stats[0], stats[1] = dg, dp
    if d.rank == 0:
        ref_model = _make_model(width, depth, seed, d.device)
        theta0 = _flat_params(ref_model).clone()
        mse_loss(ref_model(xg), yg).backward()
        g_ref = _flat_grad(ref_model)
        tol = GRAD_RTOL * max(float(g_ref.abs().max()), 1e-30)
        stats[2] = float((g_avg - g_ref).abs().max())
        stats[3] = tol
        # the update: θ1 = θ0 − η·g must match with the global gradient too
        upd_err = float((params_after - (theta0 - lr * g_ref)).abs().max())
        if upd_err > lr * tol + 1e-7 * float(theta0.abs().max()):
            stats[2] = max(float(stats[2]), tol * 2)  # report as a gradient mismatch
    dist.all_reduce(stats, op=dist.ReduceOp.MAX)
    dg, dp, err, tol = (float(v) for v in stats.tolist())
    if dg > 0 or dp > 0:
        raise IdentityError(f"ranks disagree after the all-reduce: max |g_r - g_0| = {dg:.3g}, "
                            f"max |θ_r - θ_0| = {dp:.3g} (must be 0)")
    if not err <= tol:
        raise IdentityError(f"the averaged gradient differs from the one-process global-batch gradient: "
                            f"max abs error {err:.3g} > tolerance {tol:.3g}")
    return {"grad_max_abs_err": err, "grad_tolerance": tol, "grad_rank_max_diff": dg, "param_rank_max_diff": dp}
