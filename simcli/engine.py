"""The analytic engine: step time, speedup and efficiency over a range of device counts.

A pure function of frozen data (:class:`Scenario`) and an array of device
counts; it prints nothing, reads no files and imports no CLI, YAML, pandas or
torch. Vectorised over k: no Python loop per device count.

Equations (the README repeats them)::

    T_compute(k) = FLOP per sample · b_k / (peak[dtype] · mfu)      (or --compute-time)
                   · (1 + σ · m_k)   with a device spread σ: the slowest of k (simcli.straggler; m_1 = 0)
    T_comm(k)    = all-reduce of params · bytes(grad dtype) over k devices
    T_step(k)    = m · T_compute(k) + T_comm,exposed(k)       (m = --accum micro-steps per all-reduce)

    weak scaling   (fixed batch b per device):  b_k = b,       S(k) = k · m · T_compute(1) / T_step(k)
    strong scaling (fixed global batch B):      b_k = B/(k·m), S(k) = T_compute(B on one device) / T_step(k)
    E(k) = S(k) / k;  samples/s = k · m · b_k / T_step(k)

Overlap with backward (``overlap="buckets"``, PyTorch DDP's gradient buckets;
Li et al. 2020, "PyTorch Distributed", VLDB): the n gradient bytes fall into
N_f = floor(n/c) full buckets of c = bucket_mb·2^20 bytes in reverse layer
order, plus a remainder bucket of r = n - N_f·c bytes (the first layers). We
assume backward produces gradient bytes at a steady rate over T_b =
backward_fraction · T_compute (one micro-step), so full bucket j (0-based) is
ready at t_j = T_b·(j+1)·c/n and the remainder at T_b. Buckets are reduced one
after another, each as soon as it is ready and the previous one is done::

    e_j = max(t_j, e_{j-1}) + C(c)          (C: one all-reduce of the algorithm)
    e_last = max(T_b, e_{N_f-1}) + C(r)
    T_comm         = N_f·C(c) + C(r)          (total)
    T_comm,exposed = max(0, e_last - T_b)     (what is left when backward ends)
    T_comm,hidden  = T_comm - T_comm,exposed

With equal full buckets the recursion has a closed form, e_{N_f-1} =
max(t_0 + N_f·C(c), t_{N_f-1} + C(c)) (the arrival times are linear in j),
so the timeline costs O(1) per k and stays vectorised; ``bucket_timeline``
runs the recursion bucket by bucket for one k (for explanations and tests).
With ``overlap="none"`` the whole gradient is one all-reduce after backward
(T_comm,exposed = T_comm). With ``accum = m`` (DDP's no_sync) only the last
micro-step's backward hides communication.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import collectives, sharding, straggler
from .model import DTYPE_BYTES, InputError, Profile, Workload

__all__ = ["Scenario", "Result", "simulate", "OVERLAPS", "BucketPlan", "bucket_plan", "bucket_timeline"]

#: values of Scenario.overlap
OVERLAPS = ("buckets", "none")


#: the smallest DDP bucket, in MiB: 1 KiB (issue 12)
MIN_BUCKET_MB = 1.0 / 1024


@dataclass(frozen=True)
class Scenario:
    """Everything a prediction depends on. Build one, then call :func:`simulate`."""

    profile: Profile
    workload: Workload
    #: compute dtype (picks peak_flops); None = the device's default (bf16, fp16, tf32, fp32 in that order)
    dtype: str | None = None
    #: gradient dtype (sets the all-reduce bytes)
    grad_dtype: str = "fp32"
    #: model FLOPs utilisation; None = the profile's device.mfu
    mfu: float | None = None
    #: weak scaling: samples per device per step; None = the workload's default
    batch_per_device: int | None = None
    #: strong scaling: samples per step over all devices (split over k); excludes batch_per_device
    global_batch: int | None = None
    #: measured single-device compute time per step (s); replaces the FLOP model
    compute_time_s: float | None = None
    #: all-reduce algorithm, one of simcli.collectives.CHOICES ("auto": the fastest per k); None: the profile's
    #: default ("nccl" on a profile that models NCCL, else "ring")
    algorithm: str | None = None
    #: NCCL protocol to force ("ll", "ll128", "simple"); None: the one NCCL would pick
    protocol: str | None = None
    #: how communication hides behind backward: "none" or "buckets" (PyTorch DDP's gradient buckets)
    overlap: str = "buckets"
    #: DDP bucket size in MiB: DDP's bucket_cap_mb (default 25), which torch multiplies by 1024·1024
    #: (torch/nn/parallel/distributed.py, _MB_TO_BYTES)
    bucket_mb: float = 25.0
    #: gradient accumulation: micro-steps of compute per all-reduce (DDP's no_sync)
    accum: int = 1
    #: share of forward+backward compute spent in backward
    backward_fraction: float = 2.0 / 3.0
    #: data parallelism: "ddp", or sharded "zero1", "zero2", "fsdp", "hsdp" (simcli.sharding)
    strategy: str = "ddp"
    #: dtype of the all-gathered parameters (zero1/zero2/fsdp/hsdp) and of the parameters in memory
    param_dtype: str = "bf16"
    #: hsdp: devices per shard group; None: one node (profile.network[0].size)
    shard_group: int | None = None
    #: FSDP units (wrapped modules); None: the workload's layers (1 when it gives none)
    units: int | None = None
    #: fsdp/hsdp: all-gather each unit again before its backward (FSDP's reshard_after_forward)
    reshard_after_forward: bool = True
    #: the activation estimate assumes activation checkpointing (memory only: the MFU absorbs the recompute)
    activation_checkpointing: bool = True
    #: activations kept for backward per sample (bytes), given by the user: replaces the estimate; None: the
    #: workload's figure, else the estimate
    activation_bytes_per_sample: float | None = None
    #: spread of the devices' speed (a fraction of the step; simcli.straggler): each synchronised step waits for
    #: the slowest of k, T_compute · (1 + spread · m_k); None: the profile's device.spread (none when it gives none)
    spread: float | None = None

    def __post_init__(self) -> None:
        if self.batch_per_device is not None and self.global_batch is not None:
            raise InputError(
                "--batch-per-device and --global-batch exclude each other: give one (weak scaling or strong scaling)"
            )
        dev = self.profile.device
        if self.dtype is not None and self.dtype not in dev.peak_flops:
            raise InputError(
                f"--dtype: {self.profile.name} gives no peak for {self.dtype!r}; it has {', '.join(dev.peak_flops)}"
            )
        if self.grad_dtype not in DTYPE_BYTES:
            raise InputError(f"--grad-dtype: unknown dtype {self.grad_dtype!r}; choose one of {', '.join(DTYPE_BYTES)}")
        if self.mfu is not None and not (0 < self.mfu <= 1):
            raise InputError(f"--mfu: {self.mfu} is not in (0, 1]; give the achieved fraction of peak, for example 0.4")
        for name in ("batch_per_device", "global_batch"):
            v = getattr(self, name)
            if v is not None and not v >= 1:
                raise InputError(f"--{name.replace('_', '-')}: {v} must be at least 1")
        if self.compute_time_s is not None and not self.compute_time_s > 0:
            raise InputError(f"--compute-time: {self.compute_time_s} must be a positive number of seconds")
        if self.algorithm is None:
            object.__setattr__(self, "algorithm", collectives.default_algorithm(self.profile))
        collectives.check_algorithm(self.algorithm)
        object.__setattr__(self, "protocol", collectives.check_protocol(self.protocol))
        if self.overlap not in OVERLAPS:
            raise InputError(f"--overlap: unknown mode {self.overlap!r}; choose one of {', '.join(OVERLAPS)}")
        if not (self.bucket_mb > 0 and np.isfinite(self.bucket_mb)):
            raise InputError(
                f"--bucket-mb: {self.bucket_mb} must be a positive number of MiB (DDP's bucket_cap_mb), for example 25"
            )
        if self.bucket_mb < MIN_BUCKET_MB:  # smaller buckets only multiply latencies (1e-300 MiB: 1e308 buckets)
            raise InputError(
                f"--bucket-mb: {self.bucket_mb:g} MiB is below the smallest bucket simcli models, "
                f"1 KiB ({MIN_BUCKET_MB:g} MiB); DDP's default is 25"
            )
        if isinstance(self.accum, bool) or int(self.accum) != self.accum or self.accum < 1:
            raise InputError(f"--accum: {self.accum} must be a whole number of micro-steps, at least 1")
        if not 0 <= self.backward_fraction <= 1:
            raise InputError(
                f"backward_fraction: {self.backward_fraction} is not in [0, 1]; give the share "
                "of forward+backward spent in backward, for example 2/3"
            )
        sharding.check_strategy(self.strategy)
        if self.param_dtype not in DTYPE_BYTES:
            raise InputError(
                f"--param-dtype: unknown dtype {self.param_dtype!r}; choose one of {', '.join(DTYPE_BYTES)}"
            )
        for name in ("shard_group", "units"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or int(v) != v or v < 1):
                raise InputError(f"--{name.replace('_', '-')}: {v} must be a whole number, at least 1")
        from .ranges import MAX_UNITS

        if _units(self) > MAX_UNITS:  # the per-unit timeline loops over them: refused before the loop
            src = "--units" if self.units else f"the workload's layers ({self.workload.name})"
            raise InputError(
                f"{src}: {_units(self):,} FSDP units is more than simcli models (at most {MAX_UNITS:,}); "
                "give fewer units"
            )
        if self.spread is not None and not (0 <= self.spread <= 1 and np.isfinite(self.spread)):
            raise InputError(
                f"--spread: {self.spread} is not in [0, 1]; give the spread of the devices' speed as a fraction "
                "of the step, for example 3%"
            )
        if self.compute_time_s is None and not self.workload.flops_per_sample:
            raise InputError("the workload has no FLOPs per sample: give --flops-per-sample or --compute-time")

    # -- derived inputs ---------------------------------------------------
    @property
    def compute_dtype(self) -> str:
        return self.dtype or self.profile.device.default_dtype()

    @property
    def achieved_mfu(self) -> float:
        return self.mfu if self.mfu is not None else self.profile.device.mfu_for(self.compute_dtype)

    @property
    def achieved_flops(self) -> float:
        """FLOP/s one device achieves: peak[dtype] · mfu."""
        return self.profile.device.peak(self.compute_dtype) * self.achieved_mfu

    @property
    def device_spread(self) -> float:
        """σ of the slowest-of-k model: --spread, else the profile's device.spread, else 0."""
        if self.spread is not None:
            return float(self.spread)
        return float(self.profile.device.spread or 0.0)

    @property
    def strong(self) -> bool:
        return self.global_batch is not None

    @property
    def batch(self) -> int:
        """Per-device batch (weak scaling) or global batch (strong scaling)."""
        if self.global_batch is not None:
            return self.global_batch
        return self.batch_per_device if self.batch_per_device is not None else self.workload.batch_per_device

    @property
    def grad_bytes(self) -> float:
        return self.workload.grad_bytes(self.grad_dtype)

    def replace(self, **changes: Any) -> "Scenario":
        return dataclasses.replace(self, **changes)

    def inputs(self) -> dict[str, Any]:
        """The formula's inputs in SI, for headers, JSON and explanations."""
        w = self.workload
        return {
            "profile": self.profile.name,
            "model": w.name,
            "params": w.params,
            "grad_dtype": self.grad_dtype,
            "grad_bytes": self.grad_bytes,
            "scaling": "strong" if self.strong else "weak",
            "batch_per_device": None if self.strong else self.batch,
            "global_batch": self.batch if self.strong else None,
            "compute_dtype": self.compute_dtype,
            "peak_flops": self.profile.device.peak(self.compute_dtype),
            "mfu": self.achieved_mfu,
            "flops_per_sample": w.flops_per_sample,
            "compute_time_s": self.compute_time_s,
            "algorithm": self.algorithm,
            "protocol": self.protocol,
            "library": self.profile.library,
            "overlap": self.overlap,
            "bucket_bytes": self.bucket_bytes if self.overlap == "buckets" else None,
            "accum": self.accum,
            "backward_fraction": self.backward_fraction,
            "spread": self.device_spread,
        }

    @property
    def bucket_bytes(self) -> float:
        """DDP bucket size in bytes: ``bucket_mb`` · 2^20, as DDP reads bucket_cap_mb."""
        return self.bucket_mb * 2.0**20


@dataclass(frozen=True)
class Result:
    scenario: Scenario
    devices: np.ndarray
    batch_per_device: np.ndarray
    t_compute_s: np.ndarray
    t_comm_s: np.ndarray
    t_step_s: np.ndarray
    speedup: np.ndarray
    efficiency: np.ndarray
    samples_per_s: np.ndarray
    #: all the step's all-reduces added up (time, latency, bandwidth, reduction and per-tier terms);
    #: alpha, bus_Bps, bottleneck and algorithm are those of the main message (a full bucket, or the gradient)
    comm: collectives.CommCost = field(repr=False)
    #: T_comm that backward does not hide (T_step = t_compute_s + t_comm_exposed_s)
    t_comm_exposed_s: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    t_comm_hidden_s: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    #: forward and backward seconds per optimizer step (all m micro-steps)
    t_forward_s: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    t_backward_s: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    #: how the gradient was split into all-reduces
    plan: "BucketPlan | None" = field(repr=False, default=None)
    #: one all-reduce of a full bucket (None when there is none) and of the remainder (None when none)
    comm_bucket: collectives.CommCost | None = field(repr=False, default=None)
    comm_last: collectives.CommCost | None = field(repr=False, default=None)
    #: bytes per device (simcli.sharding.memory) and bytes each device sends per step
    memory: "sharding.Memory | None" = field(repr=False, default=None)
    comm_bytes: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    #: a sharded strategy's communication, collective by collective (None for ddp)
    sharded: "sharding.Step | None" = field(repr=False, default=None)
    #: of t_compute_s, the seconds spent waiting for the slowest of k devices (0 without a spread)
    t_straggler_s: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]

    @property
    def bottleneck_names(self) -> list[str]:
        names = [t.name for t in self.scenario.profile.network]
        return ["-" if i < 0 else names[i] for i in self.comm.bottleneck.tolist()]

    def columns(self) -> dict[str, np.ndarray | list]:
        return {
            "devices": self.devices,
            "batch_per_device": self.batch_per_device,
            "t_compute_s": self.t_compute_s,
            "t_comm_s": self.t_comm_s,
            "t_step_s": self.t_step_s,
            "speedup": self.speedup,
            "efficiency": self.efficiency,
            "samples_per_s": self.samples_per_s,
            "alpha_s": self.comm.alpha,
            # the bottleneck tier's bandwidth, not nccl-tests' busbw (comm's busbw_GBps): issue 12 renamed it
            "bottleneck_GBps": np.where(np.isfinite(self.comm.bus_Bps), self.comm.bus_Bps / 1e9, np.nan),
            "bottleneck": self.bottleneck_names,
            "t_comm_exposed_s": self.t_comm_exposed_s,
            "t_comm_hidden_s": self.t_comm_hidden_s,
            "t_forward_s": self.t_forward_s,
            "t_backward_s": self.t_backward_s,
            "algorithm": [str(a) for a in self.comm.algorithm.tolist()],
            "protocol": (
                [None] * len(self.devices)
                if self.comm.protocol is None
                else [None if p in (None, "-") else str(p) for p in np.asarray(self.comm.protocol).tolist()]
            ),
            "buckets": np.full(self.devices.shape, self.plan.count if self.plan else 1),
            **self._sharding_columns(),
            "t_straggler_s": self.t_straggler_s,
        }

    def _sharding_columns(self) -> dict[str, np.ndarray | list]:
        if self.memory is None:
            return {}
        mem = self.memory
        return {
            "strategy": [self.scenario.strategy] * len(self.devices),
            "comm_bytes": self.comm_bytes,
            "memory_bytes": mem.total,
            "memory_params_bytes": mem.params,
            "memory_grads_bytes": mem.grads,
            "memory_optimizer_bytes": mem.optimizer,
            "memory_activations_bytes": mem.activations,
        }

    def records(self) -> list[dict[str, Any]]:
        """One plain-Python dict per k (JSON-ready: NaN becomes None). Built column-wise, not per cell."""
        cols = self.columns()
        keys = list(cols)
        lists = []
        for arr in cols.values():
            vals = arr.tolist() if isinstance(arr, np.ndarray) else list(arr)
            lists.append([None if isinstance(v, float) and v != v else v for v in vals])
        return [dict(zip(keys, row)) for row in zip(*lists)]

    def to_frame(self):
        """The result as a pandas DataFrame (pandas is imported only here)."""
        import pandas as pd

        return pd.DataFrame(self.columns())


@dataclass(frozen=True)
class BucketPlan:
    """How ``n`` gradient bytes become all-reduces: ``full`` buckets of ``size`` bytes, then ``last`` bytes."""

    full: int
    size: float
    last: float

    @property
    def count(self) -> int:
        return self.full + (1 if self.last > 0 else 0)


def bucket_plan(nbytes: float, bucket_bytes: float | None) -> BucketPlan:
    """DDP's split of the gradient (reverse layer order; the remainder is the last bucket).

    ``bucket_bytes=None`` (no overlap): one message of all ``nbytes``.
    """
    if bucket_bytes is None or bucket_bytes >= nbytes:
        return BucketPlan(full=0, size=float(bucket_bytes or nbytes), last=float(nbytes))
    full = int(nbytes // bucket_bytes)
    last = nbytes - full * bucket_bytes
    if last < 0.5:  # a whole number of buckets (up to rounding)
        last = 0.0
    return BucketPlan(full=full, size=float(bucket_bytes), last=float(last))


def _exposed(
    plan: BucketPlan, t_backward: np.ndarray, c_full: np.ndarray, c_last: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(T_comm total, end of the last bucket's all-reduce measured from the start of backward), closed form."""
    n = plan.full * plan.size + plan.last
    end = np.zeros_like(t_backward)
    if plan.full:
        t0 = t_backward * plan.size / n
        t_last_full = t_backward * plan.full * plan.size / n
        end = np.maximum(t0 + plan.full * c_full, t_last_full + c_full)
    total = plan.full * c_full
    if plan.last > 0:
        end = np.maximum(t_backward, end) + c_last
        total = total + c_last
    return total, end


def bucket_timeline(plan: BucketPlan, t_backward: float, c_full: float, c_last: float) -> list[dict[str, float]]:
    """The bucket-by-bucket recursion for one k: ready, start and end of each all-reduce (s from backward's start).

    Bucket sizes, in the order DDP reduces them: ``plan.full`` of ``plan.size`` bytes, then ``plan.last``.
    """
    n = plan.full * plan.size + plan.last
    out = []
    prev = 0.0
    for j in range(plan.count):
        full = j < plan.full
        ready = t_backward * (j + 1) * plan.size / n if full else t_backward
        start = max(ready, prev)
        prev = start + (c_full if full else c_last)
        out.append(
            {"bucket": j, "bytes": plan.size if full else plan.last, "ready_s": ready, "start_s": start, "end_s": prev}
        )
    return out


def _compute_time(sc: Scenario, per_device_batch: np.ndarray) -> np.ndarray:
    """Seconds of forward + backward for ``per_device_batch`` samples on one device."""
    if sc.compute_time_s is not None:
        # measured at the per-device batch (weak) or for the whole global batch on one device (strong)
        return sc.compute_time_s * per_device_batch / sc.batch
    return sc.workload.flops_per_sample * per_device_batch / sc.achieved_flops


def _total(
    plan: BucketPlan, full: collectives.CommCost | None, last: collectives.CommCost | None
) -> collectives.CommCost:
    """The step's communication: ``plan.full`` all-reduces of a full bucket plus the remainder's, added up."""
    main = full if full is not None else last
    assert main is not None

    def add(name: str) -> np.ndarray | None:
        parts = [(times, getattr(c, name)) for times, c in ((plan.full, full), (1, last)) if c is not None]
        if all(v is None for _, v in parts):
            return None
        return np.asarray(sum(times * v for times, v in parts if v is not None))

    return dataclasses.replace(main, **{name: add(name) for name in collectives.COMM_TERMS})


def simulate(scenario: Scenario, devices: np.ndarray | list[int]) -> Result:
    """Predict step time, speedup and efficiency for every device count in ``devices``."""
    sc = scenario
    k = np.asarray(devices, dtype=np.int64).ravel()
    if k.size == 0 or np.any(k < 1):
        raise InputError("--devices: every device count must be at least 1")
    net = sc.profile.network
    collectives.check_devices(net, k)
    kf = k.astype(np.float64)
    m = int(sc.accum)
    b = sc.batch / (kf * m) if sc.strong else np.full(kf.shape, float(sc.batch))
    # forward + backward of one micro-step, at the pace of the slowest of k devices (simcli.straggler)
    slow = straggler.slowdown(k, sc.device_spread)
    t_micro = _compute_time(sc, b) * slow
    t_bwd_micro = sc.backward_fraction * t_micro
    if sc.strategy != "ddp":
        return _simulate_sharded(sc, k, b, t_micro, t_bwd_micro, slow)
    n = float(sc.grad_bytes)
    plan = bucket_plan(n, sc.bucket_bytes if sc.overlap == "buckets" else None)
    comm_full = (
        collectives.collective(sc.profile, sc.algorithm, k, np.float64(plan.size), "all_reduce", sc.protocol)
        if plan.full
        else None
    )
    comm_last = (
        collectives.collective(sc.profile, sc.algorithm, k, np.float64(plan.last), "all_reduce", sc.protocol)
        if plan.last
        else None
    )
    zero = np.zeros(kf.shape)
    t_comm, end = _exposed(
        plan, t_bwd_micro, comm_full.time if comm_full else zero, comm_last.time if comm_last else zero
    )
    if sc.overlap == "buckets":
        exposed = np.clip(end - t_bwd_micro, 0.0, t_comm)  # clip: rounding of t_j at k = 1 and full queues
    else:
        exposed = t_comm
    return _result(
        sc,
        k,
        b,
        t_micro,
        t_bwd_micro,
        t_comm,
        exposed,
        slow,
        comm=_total(plan, comm_full, comm_last),
        plan=plan,
        comm_bucket=comm_full,
        comm_last=comm_last,
        memory=_memory(sc, k, b),
        comm_bytes=m
        * sharding.comm_bytes(
            "ddp", k, params=sc.workload.params, param_bytes=0.0, grad_bytes=DTYPE_BYTES[sc.grad_dtype]
        ),
    )


def _units(sc: Scenario) -> int:
    """FSDP units: --units, else the workload's layers, else 1 (the whole model one unit)."""
    return int(sc.units or sc.workload.layers or 1)


def _memory_kwargs(sc: Scenario, b: np.ndarray) -> dict[str, Any]:
    """simcli.sharding.memory's arguments for this scenario (b: samples per device per micro-step)."""
    w = sc.workload
    given = sc.activation_bytes_per_sample
    if given is None:
        from .workloads import activations_for

        given = activations_for(w.activation_bytes_per_sample, sc.compute_dtype)
    if given is not None:
        act = np.asarray(b, dtype=np.float64) * given
    else:
        tokens = b * (w.seq_len or 0)
        act = sharding.activation_bytes(
            tokens=tokens, hidden=w.hidden, units=int(w.layers or _units(sc)), checkpointing=sc.activation_checkpointing
        )
    return dict(
        params=w.params,
        units=_units(sc),
        param_bytes=DTYPE_BYTES[sc.param_dtype],
        grad_bytes=DTYPE_BYTES[sc.grad_dtype],
        activations=act,
        group=sc.shard_group,
        node_size=sc.profile.network[0].size,
        reshard_after_forward=sc.reshard_after_forward,
    )


def _memory(sc: Scenario, k: np.ndarray, b: np.ndarray) -> "sharding.Memory":
    return sharding.memory(sc.strategy, k, **_memory_kwargs(sc, b))


def memory(sc: Scenario, k: np.ndarray | list[int]) -> "sharding.Memory":
    """Bytes per device of ``sc``'s strategy at each k (simcli.sharding.memory), activations included."""
    k = np.asarray(k, dtype=np.int64).ravel()
    b = sc.batch / (k * int(sc.accum)) if sc.strong else np.full(k.shape, float(sc.batch))
    return _memory(sc, k, b)


def memory_fit(sc: Scenario, k: np.ndarray | list[int]) -> dict[str, Any] | None:
    """Where ``sc`` does not fit the device's memory: the first such k, its bytes per device and, per k that does
    not fit, the least sharded strategy that would (None: none). None when every k fits or the profile gives no
    device memory."""
    cap = sc.profile.device.memory_bytes
    if cap is None:
        return None
    k = np.asarray(k, dtype=np.int64).ravel()
    b = sc.batch / (k * int(sc.accum)) if sc.strong else np.full(k.shape, float(sc.batch))
    kw = _memory_kwargs(sc, b)
    need = sharding.memory(sc.strategy, k, **kw).total
    bad = need > cap
    if not np.any(bad):
        return None
    best = sharding.smallest_fitting(cap, k[bad], **{**kw, "activations": np.asarray(kw["activations"])[bad]})
    return {
        "capacity_bytes": float(cap),
        "devices": k[bad].tolist(),
        "memory_bytes": need[bad].tolist(),
        "fits_with": best,
    }


def _result(
    sc: Scenario,
    k: np.ndarray,
    b: np.ndarray,
    t_micro: np.ndarray,
    t_bwd_micro: np.ndarray,
    t_comm: np.ndarray,
    exposed: np.ndarray,
    slow: np.ndarray,
    **rest: Any,
) -> Result:
    """The step of m micro-steps, its speedup and throughput, from the compute and the exposed communication.

    ``slow`` is the slowest-of-k factor already in ``t_micro`` (1 + σ·m_k; t_straggler_s is its share).
    One device runs the same samples per optimizer step with no communication: T_step(1) = T_compute(b1);
    weak scaling counts samples (S = k·m·T1/T_step), strong scaling the global batch (S = T1/T_step).
    """
    kf = k.astype(np.float64)
    m = int(sc.accum)
    t_compute = m * t_micro
    t_step = t_compute + exposed
    t1 = float(_compute_time(sc, np.array([float(sc.batch)]))[0])
    speedup = t1 / t_step if sc.strong else kf * m * t1 / t_step
    return Result(
        scenario=sc,
        devices=k,
        batch_per_device=b,
        t_compute_s=t_compute,
        t_comm_s=t_comm,
        t_step_s=t_step,
        speedup=speedup,
        efficiency=speedup / kf,
        samples_per_s=kf * b * m / t_step,
        t_comm_exposed_s=exposed,
        t_comm_hidden_s=t_comm - exposed,
        t_forward_s=t_compute - m * t_bwd_micro,
        t_backward_s=m * t_bwd_micro,
        t_straggler_s=t_compute - t_compute / slow,
        **rest,
    )


def _simulate_sharded(
    sc: Scenario, k: np.ndarray, b: np.ndarray, t_micro: np.ndarray, t_bwd_micro: np.ndarray, slow: np.ndarray
) -> Result:
    """zero1/zero2/fsdp/hsdp: every micro-step communicates (simcli.sharding.step)."""
    m = int(sc.accum)
    pb, gb = DTYPE_BYTES[sc.param_dtype], DTYPE_BYTES[sc.grad_dtype]
    st = sharding.step(
        sc.strategy,
        sc.profile,
        k,
        algorithm=sc.algorithm,
        protocol=sc.protocol,
        params=sc.workload.params,
        units=_units(sc),
        param_bytes=pb,
        grad_bytes=gb,
        t_forward=t_micro - t_bwd_micro,
        t_backward=t_bwd_micro,
        bucket_bytes=sharding.ZERO_BUCKET_ELEMENTS * gb if sc.overlap == "buckets" else None,
        group=sc.shard_group,
        reshard_after_forward=sc.reshard_after_forward,
    )
    comm = dataclasses.replace(
        st.comm,
        **{name: m * getattr(st.comm, name) for name in collectives.COMM_TERMS if getattr(st.comm, name) is not None},
    )
    return _result(
        sc,
        k,
        b,
        t_micro,
        t_bwd_micro,
        m * st.t_comm,
        m * st.exposed,
        slow,
        comm=comm,
        plan=None,
        memory=_memory(sc, k, b),
        sharded=st,
        comm_bytes=m
        * sharding.comm_bytes(
            sc.strategy,
            k,
            params=sc.workload.params,
            param_bytes=pb,
            grad_bytes=gb,
            group=sc.shard_group,
            node_size=sc.profile.network[0].size,
            reshard_after_forward=sc.reshard_after_forward,
        ),
    )
