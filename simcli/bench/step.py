"""A real data-parallel training step and the identity it rests on (run by every rank; imports torch).

Model: one of :mod:`simcli.bench.models` (the MLP of ``depth`` layers ``Linear(width, width)`` by
default, a GPT-style decoder stack, a ResNet-style CNN), on synthetic data; every rank builds it from
the same seed. The global batch of each step is generated from a seed on every rank and rank r takes
rows ``r·b .. (r+1)·b``, so rank 0 also holds the whole global batch. ``dtype``: fp32, tf32 (CUDA's
TF32 matmuls), bf16 or fp16 (``torch.autocast``; fp16 and tf32 on CUDA only).

Per world and per mode (``flat``: one all_reduce of the flattened gradient,
then divide by k; ``ddp``: DistributedDataParallel with its gradient buckets),
timed with a barrier before each step and the slowest rank's time per step
(wall time on CPU, CUDA events on a GPU), after ``warmup`` untimed steps, medians:

* T_compute: forward + backward, no communication (shared by both modes), with
  T_forward (forward and loss) and T_backward timed apart in the same steps;
* T_comm: the all-reduce of the gradients alone (flat: one tensor of all
  parameters; ddp: one all_reduce per DDP bucket, as DDP issues them);
* T_step: the whole step: forward, backward, all-reduce, SGD update θ ← θ − η·g;
* T_update: ``torch.optim.AdamW(...).step()`` alone on the gradients of the T_compute model, in the
  implementation torch picks on the device (``foreach`` on CUDA, the per-tensor loop on CPU: the same passes,
  80 B per parameter, simcli.step.update), as ``t_update_s`` with the bandwidth it achieved (``update_Bps``):
  what ``simcli calibrate`` fits ``device.update_bandwidth`` from.

The identity, checked once per mode before timing (an error, not a warning):
after the all-reduce every rank holds the same averaged gradient, and it
equals, within :func:`simcli.bench.models.grad_rtol` of its largest element (``GRAD_RTOL``
in fp32), the gradient one process computes on the whole global batch (the mean of k
equal-sized per-rank means is the global mean; with BatchNorm, the mean of the k slices'
gradients); after one update the parameters are identical on every rank.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..io.measured.stats import summarize
from ..step.update import SPECS
from .launch import IdentityError
from .models import (
    ModelSpec,
    autocast_settings,
    batch_dependent,
    build,
    describe,
    flops_per_sample,
    flops_per_sample_exact,
    grad_rtol,
    loss,
    make_batches,
)

if TYPE_CHECKING:  # the worker runs this module's measure_step; a type-only import keeps them out of a circle
    from .dist import Dist

__all__ = ["GRAD_RTOL", "mlp_width_for_params", "mlp_params", "measure_step"]

#: tolerance of the averaged gradient against the one-process global-batch gradient, relative to the
#: largest gradient element (fp32 sums in a different order differ by ~1e-7 relative)
GRAD_RTOL = 1e-4
#: the optimizer whose step alone ``t_update_s`` times, and the bytes it moves per parameter (simcli.step.update:
#: torch.optim.AdamW's default implementation, foreach on CUDA, the per-tensor loop on CPU, the same eight passes)
UPDATE_OPTIMIZER = "adamw"
UPDATE_BYTES = SPECS[UPDATE_OPTIMIZER].bytes_per_param
#: DDP's default bucket_cap_mb (MiB) and its first, smaller bucket (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES)
DDP_BUCKET_MB = 25.0
DDP_FIRST_BUCKET_BYTES = 1024 * 1024


def mlp_params(width: int, depth: int) -> int:
    """Parameters of ``depth`` Linear(width, width) layers with bias."""
    return depth * (width * width + width)


def mlp_width_for_params(params: float, depth: int) -> int:
    """The width whose MLP of ``depth`` layers has about ``params`` parameters: depth·(w²+w) = N."""
    return max(1, int(round((-1.0 + math.sqrt(1.0 + 4.0 * params / depth)) / 2.0)))


def _flat_grad(model):
    import torch  # heavy

    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def _flat_params(model):
    import torch  # heavy

    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def _set_grads(model, flat) -> None:
    off = 0
    for p in model.parameters():
        n = p.numel()
        p.grad.copy_(flat[off : off + n].view_as(p))
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


class _Clock:
    """Time marks: wall time on CPU (every op is done when it returns), CUDA events on a GPU.

    GPU kernels run asynchronously, so a CUDA step is timed by events recorded on the stream before and after
    it and read after a device synchronisation (as torch.utils.benchmark and nccl-tests do).
    """

    def __init__(self, device) -> None:
        self.cuda = device.type == "cuda"

    def mark(self):
        if self.cuda:
            import torch  # heavy

            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def seconds(self, a, b) -> float:
        """Seconds from mark a to mark b (CUDA: call after synchronising)."""
        return a.elapsed_time(b) / 1e3 if self.cuda else b - a


def _precision(dtype: str, device):
    """Set TF32 as ``dtype`` asks and return a factory of the autocast context for forward and loss."""

    import torch  # heavy

    st = autocast_settings(dtype, device.type)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = st["allow_tf32"]
        torch.backends.cudnn.allow_tf32 = st["allow_tf32"]
    if st["autocast"]:
        return lambda: torch.autocast(device.type, dtype=getattr(torch, st["autocast_dtype"]))
    return contextlib.nullcontext


class _Timer:
    """How every timed loop runs on every rank: a progress checkpoint, a barrier and a device sync before each
    timed step, and the slowest rank's time per step (a step ends when its slowest rank ends)."""

    def __init__(self, d: Dist, clock: _Clock) -> None:
        self.d, self.clock, self.counter = d, clock, 0

    def reduce_max(self, series: list[list[float]]) -> list[Any]:
        """Each series' per-step maximum over the ranks, summarised."""
        import torch  # heavy
        import torch.distributed as dist  # heavy

        tt = torch.tensor(series, dtype=torch.float64, device=self.d.device)
        dist.all_reduce(tt, op=dist.ReduceOp.MAX)  # a step ends when its slowest rank ends
        return [summarize(row) for row in tt.cpu().tolist()]

    def ready(self) -> None:
        """Before a timed step: the next progress checkpoint, a barrier, a device sync."""
        import torch.distributed as dist  # heavy

        self.d.checkpoint(self.counter)
        self.counter += 1
        dist.barrier()
        self.d.sync()

    def timed(self, fn: Callable[[int], Any], n: int, nwarm: int) -> Any:
        """``fn(i)`` run ``nwarm`` times untimed, then ``n`` times timed: the summary of the slowest rank's times."""
        for i in range(nwarm):
            fn(i)
        self.d.sync()
        times = []
        for i in range(n):
            self.ready()
            t0 = self.clock.mark()
            fn(i)
            t1 = self.clock.mark()
            self.d.sync()
            times.append(self.clock.seconds(t0, t1))
        return self.reduce_max([times])[0]

    def timed_compute(self, compute: Callable[[int], tuple[Any, Any, Any]], steps: int, warmup: int) -> list[Any]:
        """T_forward, T_backward and T_compute from the same steps: ``compute(i)`` returns the three marks."""
        for i in range(warmup):
            compute(i)
        self.d.sync()
        fw: list[float] = []
        bw: list[float] = []
        tot: list[float] = []
        for i in range(steps):
            self.ready()
            t0, t1, t2 = compute(i)
            self.d.sync()
            fw.append(self.clock.seconds(t0, t1))
            bw.append(self.clock.seconds(t1, t2))
            tot.append(self.clock.seconds(t0, t2))
        return self.reduce_max([fw, bw, tot])


def _solo_step_time(
    d: Dist,
    spec: Any,
    batches: list[Any],
    *,
    seed: int,
    lr: float,
    steps: int,
    warmup: int,
    clock: _Clock,
    fwd_loss: Callable[..., Any],
) -> float | None:
    """T_step(1) under torchrun: rank 0 alone runs the step without communication (the median; None on the other
    ranks, which wait)."""
    import torch  # heavy
    import torch.distributed as dist  # heavy

    from .models import build  # lazy

    solo = None
    solo_model = build(spec, seed, d.device)
    opt = torch.optim.SGD(solo_model.parameters(), lr=lr)
    if d.rank == 0:
        ts = []
        for i in range(warmup + steps):
            d.sync()
            t0 = clock.mark()
            opt.zero_grad(set_to_none=False)
            _, _, x, y = batches[i % len(batches)]
            fwd_loss(solo_model, x, y).backward()
            opt.step()
            t1 = clock.mark()
            d.sync()
            if i >= warmup:
                ts.append(clock.seconds(t0, t1))
        solo = summarize(ts).median
    dist.barrier()
    return solo


def _mode_identity(
    d: Dist,
    mode: str,
    spec: Any,
    *,
    batch: tuple[Any, Any, Any, Any],
    seed: int,
    lr: float,
    bucket_cap_mb: float,
    fwd_loss: Callable[..., Any],
    dtype: str,
    b: int,
) -> dict[str, float]:
    """The identity of ``mode`` (module docstring), on a fresh model at step 0. Raises IdentityError."""
    import torch  # heavy
    import torch.distributed as dist  # heavy

    from .models import build  # lazy

    ident_model = build(spec, seed, d.device)
    opt = torch.optim.SGD(ident_model.parameters(), lr=lr)
    xg, yg, x, y = batch
    if mode == "ddp":
        ddp = torch.nn.parallel.DistributedDataParallel(ident_model, bucket_cap_mb=bucket_cap_mb)
        fwd_loss(ddp, x, y).backward()
        g_avg = _flat_grad(ident_model)
    else:
        fwd_loss(ident_model, x, y).backward()
        g_avg = _flat_grad(ident_model)
        dist.all_reduce(g_avg)
        g_avg.div_(d.world_size)
        _set_grads(ident_model, g_avg)
    if d.fault("grad"):  # test hook: a rank whose gradient is wrong must fail the check
        g_avg = g_avg + 1e-2
    opt.step()
    return _check_identity(
        d,
        g_avg,
        _flat_params(ident_model),
        xg=xg,
        yg=yg,
        spec=spec,
        seed=seed,
        lr=lr,
        fwd_loss=fwd_loss,
        dtype=dtype,
        b=b,
    )


def _comm_step(mode: str, flat: Any, buckets: list[int]) -> Callable[[int], None]:
    """T_comm's step: one all_reduce of the flat gradient (flat), one per DDP bucket (ddp)."""
    import torch  # heavy
    import torch.distributed as dist  # heavy

    if mode == "flat":

        def comm(i: int) -> None:
            dist.all_reduce(flat)

        return comm
    chunks = list(torch.split(flat, buckets))

    def comm_buckets(i: int) -> None:
        for c in chunks:
            dist.all_reduce(c)

    return comm_buckets


def _train_step(
    mode: str,
    model: Any,
    batches: list[Any],
    *,
    lr: float,
    bucket_cap_mb: float,
    fwd_loss: Callable[..., Any],
    k: int,
) -> Callable[[int], None]:
    """T_step's step on ``model``: forward, backward, the all-reduce (DDP's buckets, or one flat all_reduce and a
    division by k) and the SGD update."""
    import torch  # heavy
    import torch.distributed as dist  # heavy

    opt = torch.optim.SGD(model.parameters(), lr=lr)
    if mode == "ddp":
        net = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket_cap_mb)

        def step(i: int) -> None:
            opt.zero_grad(set_to_none=False)
            _, _, x, y = batches[i % len(batches)]
            fwd_loss(net, x, y).backward()
            opt.step()

        return step

    def flat_step(i: int) -> None:
        opt.zero_grad(set_to_none=False)
        _, _, x, y = batches[i % len(batches)]
        fwd_loss(model, x, y).backward()
        g = _flat_grad(model)
        dist.all_reduce(g)
        g.div_(k)
        _set_grads(model, g)
        opt.step()

    return flat_step


def measure_step(
    d: Dist,
    width: int = 1024,
    depth: int = 8,
    *,
    batch_per_device: int,
    dtype: str,
    steps: int = 20,
    warmup: int = 3,
    modes: Sequence[str] = ("flat", "ddp"),
    lr: float = 0.01,
    seed: int = 0,
    bucket_cap_mb: float = DDP_BUCKET_MB,
    solo_reference: bool = False,
    n_batches: int = 4,
    model: dict[str, Any] | None = None,
) -> None:
    """Measure T_compute (forward and backward apart), T_comm and T_step of ``model`` in every mode; emit rows.

    ``model`` is a :class:`simcli.bench.models.ModelSpec` as a dict (None: the MLP of ``depth`` x ``width``);
    ``dtype`` one of fp32, tf32, bf16, fp16 (tf32 and fp16 on CUDA only).
    """
    import torch  # heavy

    spec = ModelSpec.from_dict(model) if model else ModelSpec(kind="mlp", width=width, depth=depth)
    autocast = _precision(dtype, d.device)
    clock = _Clock(d.device)
    timer = _Timer(d, clock)

    def fwd_loss(net, x, y):
        with autocast():
            return loss(spec, net(x), y)

    k, r, b = d.world_size, d.rank, batch_per_device
    gen = torch.Generator().manual_seed(seed + 1)
    batches = [
        (xg, yg, xg[r * b : (r + 1) * b], yg[r * b : (r + 1) * b])
        for xg, yg in make_batches(spec, k * b, n_batches, gen=gen, device=d.device)
    ]

    # ---- T_compute: forward + backward, no communication, the two timed apart
    net0 = build(spec, seed, d.device)
    nparams = sum(p.numel() for p in net0.parameters())

    def compute(i: int):
        net0.zero_grad(set_to_none=False)
        _, _, x, y = batches[i % n_batches]
        t0 = clock.mark()
        lo = fwd_loss(net0, x, y)
        t1 = clock.mark()
        lo.backward()
        return t0, t1, clock.mark()

    t_fwd, t_bwd, t_compute = timer.timed_compute(compute, steps, warmup)
    buckets = _bucket_sizes(net0, bucket_cap_mb)
    # ---- T_update: the optimizer step alone, AdamW as torch runs it by default on this device (its state: two fp32
    # tensors per parameter; the gradients are the last compute step's)
    opt_u = [torch.optim.AdamW(net0.parameters(), lr=1e-6)]

    def update_step(i: int) -> None:
        opt_u[0].step()

    t_update = timer.timed(update_step, steps, warmup)
    opt_u.clear()  # its state: two tensors per parameter
    net0 = None  # one model at a time on the device from here on (a large model on one GPU)
    flat = torch.zeros(nparams, dtype=torch.float32, device=d.device)

    solo = None
    if solo_reference and k > 1:
        solo = _solo_step_time(
            d, spec, batches, seed=seed, lr=lr, steps=steps, warmup=warmup, clock=clock, fwd_loss=fwd_loss
        )

    for mode in modes:
        # ---- the identity, on a fresh model, step 0
        ident = _mode_identity(
            d,
            mode,
            spec,
            batch=batches[0],
            seed=seed,
            lr=lr,
            bucket_cap_mb=bucket_cap_mb,
            fwd_loss=fwd_loss,
            dtype=dtype,
            b=b,
        )
        # ---- T_comm and T_step
        t_comm = timer.timed(_comm_step(mode, flat, buckets), steps, warmup)
        step = _train_step(
            mode, build(spec, seed, d.device), batches, lr=lr, bucket_cap_mb=bucket_cap_mb, fwd_loss=fwd_loss, k=k
        )
        t_step = timer.timed(step, steps, warmup)
        del step  # its model (and DDP's wrapper) with it

        fps, fpx = flops_per_sample(spec), flops_per_sample_exact(spec)
        d.emit(
            {
                "world_size": k,
                "backend": d.backend,
                "mode": mode,
                "model": describe(spec),
                "params": nparams,
                "batch_per_device": b,
                "steps": steps,
                "threads": torch.get_num_threads(),
                "t_compute_s": t_compute.median,
                "t_compute_p10_s": t_compute.p10,
                "t_compute_p90_s": t_compute.p90,
                "t_comm_s": t_comm.median,
                "t_comm_p10_s": t_comm.p10,
                "t_comm_p90_s": t_comm.p90,
                "t_step_s": t_step.median,
                "t_step_p10_s": t_step.p10,
                "t_step_p90_s": t_step.p90,
                "t_solo_step_s": solo,
                "achieved_flops": fpx * b / t_compute.median,
                "dtype": dtype,
                "flops_per_sample": fps,
                "flops_per_sample_exact": fpx,
                "t_forward_s": t_fwd.median,
                "t_backward_s": t_bwd.median,
                "backward_fraction": t_bwd.median / (t_fwd.median + t_bwd.median),
                "device": _device_name(d.device),
                "spread": max(t_compute.spread, t_comm.spread if k > 1 else 0.0, t_step.spread),
                "step_optimizer": "sgd",  # what T_step's update runs (torch.optim.SGD, no momentum)
                "t_update_s": t_update.median,
                "update_optimizer": UPDATE_OPTIMIZER,
                "update_bytes_per_param": UPDATE_BYTES,
                "update_Bps": nparams * UPDATE_BYTES / t_update.median,
                **ident,
            }
        )


def _device_name(device) -> str:
    if device.type == "cuda":
        import torch  # heavy

        return str(torch.cuda.get_device_name(device))
    return "cpu"


def _check_identity(
    d: Dist, g_avg, params_after, *, xg, yg, spec, seed: int, lr: float, fwd_loss, dtype: str, b: int
) -> dict[str, float]:
    """Ranks agree on g and θ; g equals one process's gradient on the global batch. Raises IdentityError.

    The MLP's reference is one backward pass over all k·b samples. The gpt's and resnet's is accumulated
    over the k slices of b samples, each loss divided by k (gradient accumulation: the same global-batch
    gradient for the transformer, without k·b samples' activations on one device at once). With
    BatchNorm (resnet) each rank normalises over its own samples, as DDP without SyncBatchNorm does, and
    the mean of the slices' gradients is what the ranks must agree with.
    """
    import torch  # heavy
    import torch.distributed as dist  # heavy

    def rank_diff(t) -> float:
        ref = t.clone()
        dist.broadcast(ref, 0)
        return float((t - ref).abs().max())

    dg, dp = rank_diff(g_avg), rank_diff(params_after)
    stats = torch.zeros(4, dtype=torch.float64, device=d.device)
    stats[0], stats[1] = dg, dp
    if d.rank == 0:
        ref_model = build(spec, seed, d.device)
        theta0 = _flat_params(ref_model).clone()
        if batch_dependent(spec) or spec.kind != "mlp":
            k = d.world_size
            for r in range(k):
                (fwd_loss(ref_model, xg[r * b : (r + 1) * b], yg[r * b : (r + 1) * b]) / k).backward()
        else:
            fwd_loss(ref_model, xg, yg).backward()
        g_ref = _flat_grad(ref_model)
        tol = grad_rtol(dtype) * max(float(g_ref.abs().max()), 1e-30)
        stats[2] = float((g_avg - g_ref).abs().max())
        stats[3] = tol
        # the update: θ1 = θ0 − η·g must match with the global gradient too
        upd_err = float((params_after - (theta0 - lr * g_ref)).abs().max())
        if upd_err > lr * tol + 1e-7 * float(theta0.abs().max()):
            stats[2] = max(float(stats[2]), tol * 2)  # report as a gradient mismatch
    dist.all_reduce(stats, op=dist.ReduceOp.MAX)
    dg, dp, err, tol = (float(v) for v in stats.tolist())
    if dg > 0 or dp > 0:
        raise IdentityError(
            f"ranks disagree after the all-reduce: max |g_r - g_0| = {dg:.3g}, max |θ_r - θ_0| = {dp:.3g} (must be 0)"
        )
    if not err <= tol:
        raise IdentityError(
            f"the averaged gradient differs from the one-process global-batch gradient: "
            f"max abs error {err:.3g} > tolerance {tol:.3g}"
        )
    return {"grad_max_abs_err": err, "grad_tolerance": tol, "grad_rank_max_diff": dg, "param_rank_max_diff": dp}
