"""The analytic engine: step time, speedup and efficiency over a range of device counts.

A pure function of frozen data (:class:`Scenario`) and an array of device
counts; it prints nothing, reads no files and imports no CLI, YAML, pandas or
torch. Vectorised over k: no Python loop per device count.

Equations (the README repeats them)::

    T_compute(k) = FLOP per sample · b_k / (peak[dtype] · mfu)      (or --compute-time)
                   · (1 + σ · m_k) / (1 + σ · m_k0)   with a device spread σ: the slowest of k (simcli.step.straggler;
                   m_1 = 0), less the wait already in a speed measured on k0 devices (--compute-time-at-k, mfu_at_k)
    T_comm(k)    = all-reduce of params · bytes(grad dtype) over k devices
    T_step(k)    = m · T_compute(k) + T_comm,exposed(k) + T_update(k)   (m = --accum micro-steps per all-reduce)
    T_update(k)  = params held · bytes per param (optimizer, extras) / memory bandwidth   (simcli.step.update;
                   once per optimizer step)

    weak scaling   (fixed batch b per device):  b_k = b,       S(k) = k · T_1 / T_step(k)
    strong scaling (fixed global batch B):      b_k = B/(k·m), S(k) = T_1(B on one device) / T_step(k)
    T_1 = m · T_compute(1) + T_update(k): one device alone, with the update as a device runs it at k
    E(k) = S(k) / k;  samples/s = k · m · b_k / T_step(k)

Overlap with backward: :mod:`simcli.step.buckets` (DDP's gradient buckets, closed form over k).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.ranges import MAX_UNITS
from ..base.types import DTYPE_BYTES, InputError, NonFiniteResult, Profile, Workload
from ..comm import bands, collectives, topology
from ..comm.cost import COMM_TERMS, CommCost
from ..comm.nccl import generation
from . import memory as memory_model
from . import sharding, straggler, strategies, update
from .buckets import BucketPlan, bucket_exposure, bucket_plan

__all__ = [
    "Scenario",
    "Result",
    "simulate",
    "accumulated",
    "OVERLAPS",
    "fsdp_units",
    "update_seconds",
]

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
    #: all-reduce algorithm, one of simcli.comm.collectives.CHOICES ("auto": the fastest per k); None: the profile's
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
    #: data parallelism: "ddp", or sharded "zero1", "zero2", "fsdp", "hsdp" (simcli.step.sharding)
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
    #: spread of the devices' speed (a fraction of the step; simcli.step.straggler): each synchronised step waits for
    #: the slowest of k, T_compute · (1 + spread · m_k); None: the profile's device.spread, else the default of the
    #: device's kind (simcli.step.straggler.default_spread)
    spread: float | None = None
    #: the device count at which --compute-time was measured: its step already waited for the slowest of that many,
    #: so only the excess slowest-of-k factor is applied ((1 + σ·m_k) / (1 + σ·m_k0)); None: 1 (one device)
    compute_time_at_k: int | None = None
    #: the optimizer whose step is priced once per optimizer step (simcli.step.update.OPTIMIZERS)
    optimizer: str = "adamw"
    #: passes around the optimizer step, each priced over the memory bandwidth (simcli.step.update.EXTRAS)
    update_extras: tuple[str, ...] = ()
    #: measured seconds of one optimizer step per device (replaces the memory-bandwidth price; constant in k)
    update_time_s: float | None = None

    def __post_init__(self) -> None:
        """Every field checked, group by group (the first bad one is named); algorithm and protocol resolved."""
        self._check_batch_and_compute()
        if self.algorithm is None:  # the profile's default
            object.__setattr__(self, "algorithm", collectives.default_algorithm(self.profile))
        collectives.check_algorithm(str(self.algorithm))
        object.__setattr__(self, "protocol", collectives.check_protocol(self.protocol))
        self._check_buckets_and_accumulation()
        self._check_sharding()
        self._check_spread_and_update()

    def _check_batch_and_compute(self) -> None:
        """The batch (weak or strong scaling) and the compute rate's inputs: dtypes, mfu, compute time."""
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

    def _check_buckets_and_accumulation(self) -> None:
        """How communication overlaps backward: the overlap mode, DDP's buckets, accumulation, the backward share."""
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

    def _check_sharding(self) -> None:
        """The strategy and what sharding reads: the parameters' dtype, the shard group, the FSDP units."""
        strategies.check_strategy(self.strategy)
        if self.param_dtype not in DTYPE_BYTES:
            raise InputError(
                f"--param-dtype: unknown dtype {self.param_dtype!r}; choose one of {', '.join(DTYPE_BYTES)}"
            )
        for name in ("shard_group", "units"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or int(v) != v or v < 1):
                raise InputError(f"--{name.replace('_', '-')}: {v} must be a whole number, at least 1")

        if fsdp_units(self) > MAX_UNITS:  # the per-unit timeline loops over them: refused before the loop
            src = "--units" if self.units else f"the workload's layers ({self.workload.name})"
            raise InputError(
                f"{src}: {fsdp_units(self):,} FSDP units is more than simcli models (at most {MAX_UNITS:,}); "
                "give fewer units"
            )

    def _check_spread_and_update(self) -> None:
        """The devices' spread, the optimizer step, the compute time's k and a source for the compute time."""
        if self.spread is not None and not (0 <= self.spread <= 1 and np.isfinite(self.spread)):
            raise InputError(
                f"--spread: {self.spread} is not in [0, 1]; give the spread of the devices' speed as a fraction "
                "of the step, for example 3%"
            )
        update.check_optimizer(self.optimizer)
        object.__setattr__(self, "update_extras", update.check_extras(tuple(self.update_extras)))
        if self.update_time_s is not None and not (self.update_time_s >= 0 and np.isfinite(self.update_time_s)):
            raise InputError(f"--update-time: {self.update_time_s} must be a non-negative number of seconds")
        v = self.compute_time_at_k
        if v is not None and (isinstance(v, bool) or int(v) != v or v < 1):
            raise InputError(f"--compute-time-at-k: {v} must be a whole number of devices, at least 1")
        if self.compute_time_s is None and not self.workload.flops_per_sample:
            raise InputError("the workload has no FLOPs per sample: give --flops-per-sample or --compute-time")

    # -- derived inputs ---------------------------------------------------
    @property
    def compute_dtype(self) -> str:
        return self.dtype or self.profile.device.default_dtype()

    @property
    def achieved_mfu(self) -> float:
        return self.mfu_choice[0]

    @property
    def mfu_choice(self) -> tuple[float, str, int | None]:
        """(mfu, where it came from, the k it was measured at): --mfu, the workload family's MFU on this device
        kind (simcli/io/data/families.yaml) where the profile's was measured on another family, else the
        profile's device.mfu / mfu_by_dtype."""
        dev = self.profile.device
        if self.mfu is not None:
            return float(self.mfu), "--mfu", 1
        fam = _family_mfu(self.workload, dev, self.compute_dtype)
        if fam is not None:
            return fam
        src = f"device.mfu_by_dtype.{self.compute_dtype}" if self.compute_dtype in dev.mfu_by_dtype else "device.mfu"
        return float(dev.mfu_for(self.compute_dtype)), src, dev.mfu_at_k

    @property
    def mfu_fallback(self) -> dict[str, Any] | None:
        """Where the FLOP model prices a workload family with an MFU measured on another: the preset's family
        (cnn, transformer) differs from the profile's device.mfu_family and simcli/io/data/families.yaml has no
        figure of that family for the device's generation (None: unknown) and dtype, so device.mfu stands in.
        None when no stand-in is used (--mfu, --compute-time, a custom workload, or a figure of the family)."""
        dev = self.profile.device
        fam = self.workload.family
        if self.mfu is not None or self.compute_time_s is not None or fam is None:
            return None
        measured_on = dev.mfu_family or "transformer"
        if fam == measured_on or _family_mfu(self.workload, dev, self.compute_dtype) is not None:
            return None

        mfu, source, _ = self.mfu_choice
        return {
            "family": fam,
            "generation": generation(dev.name),
            "dtype": self.compute_dtype,
            "mfu": mfu,
            "source": source,
            "measured_on": measured_on,
        }

    @property
    def reference_k(self) -> int:
        """The device count the compute speed was measured at (its slowest-of-k wait is already in it):
        --compute-time-at-k with --compute-time; the MFU's (family table or device.mfu_at_k) with the FLOP
        model; 1 with --mfu or when nothing says."""
        if self.compute_time_s is not None:
            return int(self.compute_time_at_k or 1)
        return int(self.mfu_choice[2] or 1)

    @property
    def achieved_flops(self) -> float:
        """FLOP/s one device achieves: peak[dtype] · mfu."""
        return self.profile.device.peak(self.compute_dtype) * self.achieved_mfu

    @property
    def device_spread(self) -> float:
        """σ of the slowest-of-k model: --spread, else the profile's device.spread, else the default of the
        device's kind (the same for a built-in and a user-written profile)."""
        return self.spread_and_source[0]

    @property
    def spread_and_source(self) -> tuple[float, str]:
        """(σ, where it came from): --spread, device.spread, or the default of the device's kind with its source."""
        if self.spread is not None:
            return float(self.spread), "--spread"
        if self.profile.device.spread is not None:
            return float(self.profile.device.spread), "device.spread"
        return straggler.default_spread(self.profile)

    @property
    def update_bandwidth(self) -> tuple[float | None, str]:
        """(bytes/s an optimizer step moves, its field): device.update_bandwidth (calibrated), else
        device.memory_bandwidth (the datasheet's), else None (the update is not priced)."""
        dev = self.profile.device
        if dev.update_Bps:
            return float(dev.update_Bps), "device.update_bandwidth"
        return dev.memory_bandwidth_Bps, "device.memory_bandwidth"

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
            "spread_source": self.spread_and_source[1],
            "reference_k": self.reference_k,
            "optimizer": self.optimizer,
            "update_extras": list(self.update_extras),
            "update_time_s": self.update_time_s,
            "update_bandwidth_Bps": self.update_bandwidth[0],
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
    comm: CommCost = field(repr=False)
    #: T_comm that backward does not hide (T_step = t_compute_s + t_comm_exposed_s)
    t_comm_exposed_s: np.ndarray = field(repr=False)
    t_comm_hidden_s: np.ndarray = field(repr=False)
    #: forward and backward seconds per optimizer step (all m micro-steps)
    t_forward_s: np.ndarray = field(repr=False)
    t_backward_s: np.ndarray = field(repr=False)
    #: bytes each device sends per step
    comm_bytes: np.ndarray = field(repr=False)
    #: of t_compute_s, the seconds spent waiting for the slowest of k devices (0 without a spread; negative below
    #: the k the compute speed was measured at)
    t_straggler_s: np.ndarray = field(repr=False)
    #: seconds of the optimizer step (and its extra passes) per device, once per optimizer step (simcli.step.update)
    t_update_s: np.ndarray = field(repr=False)
    #: how the gradient was split into all-reduces
    plan: "BucketPlan | None" = field(repr=False, default=None)
    #: one all-reduce of a full bucket (None when there is none) and of the remainder (None when none)
    comm_bucket: CommCost | None = field(repr=False, default=None)
    comm_last: CommCost | None = field(repr=False, default=None)
    #: bytes per device (simcli.step.memory)
    memory: "memory_model.Memory | None" = field(repr=False, default=None)
    #: a sharded strategy's communication, collective by collective (None for ddp)
    sharded: "sharding.Step | None" = field(repr=False, default=None)
    #: how sure: the band of T_step, S(k), E(k) and samples/s (simcli.step.band.banded; None until asked for)
    band: Any = field(repr=False, default=None)

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
            "t_update_s": self.t_update_s,
            **(self.band.columns() if self.band is not None else {}),
        }

    def _sharding_columns(self) -> dict[str, np.ndarray | list]:
        if self.memory is None:
            return {}
        mem = self.memory
        return {
            "strategy": [self.scenario.strategy] * len(self.devices),
            "comm_bytes": self.comm_bytes,
            "memory_bytes": mem.total,
            # params: the weights held plus fsdp/hsdp's gathered units (also given alone)
            "memory_params_bytes": mem.params,
            **{f"memory_{part}_bytes": getattr(mem, part) for part in memory_model.PARTS if part != "weights"},
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
        import pandas as pd  # heavy

        return pd.DataFrame(self.columns())


def _compute_time(sc: Scenario, per_device_batch: np.ndarray) -> np.ndarray:
    """Seconds of forward + backward for ``per_device_batch`` samples on one device."""
    if sc.compute_time_s is not None:
        # measured at the per-device batch (weak) or for the whole global batch on one device (strong)
        return sc.compute_time_s * per_device_batch / sc.batch
    return sc.workload.flops_per_sample * per_device_batch / sc.achieved_flops


def _family_mfu(workload: Workload, dev: Any, dtype: str) -> tuple[float, str, int | None] | None:
    """(mfu, source, at_k) of the workload's family on the device's kind (simcli/io/data/families.yaml, carried by
    the workload) where the profile's mfu was measured on another family (device.mfu_family, default transformer)
    and the table gives one for the dtype; None otherwise (the profile's mfu applies)."""

    fam = workload.family
    if fam is None or fam == (dev.mfu_family or "transformer") or not workload.family_mfu:
        return None
    gen = generation(dev.name)
    entry = workload.family_mfu.get(gen) if gen else None
    if not entry or dtype not in entry:
        return None
    return float(entry[dtype]), f"{fam} on {gen} GPUs (simcli/io/data/families.yaml)", entry.get("at_k")


def _reference(sc: Scenario) -> float:
    """1 / (1 + σ·m_k0): what the measured (or MFU-derived) compute time is divided by to take out the wait for
    the slowest of the k0 devices it was measured on (1 when k0 = 1)."""
    return float(1.0 / straggler.slowdown(sc.reference_k, sc.device_spread))


def update_seconds(sc: Scenario, k: np.ndarray) -> np.ndarray:
    """Seconds of one optimizer step per device at each k (simcli.step.update): --update-time, else the
    optimizer's and the extras' bytes over the update bandwidth (0 when the profile gives none)."""
    k = np.asarray(k, dtype=np.int64)
    if sc.update_time_s is not None:
        return np.full(k.shape, float(sc.update_time_s))
    return update.update_time(
        sc.strategy,
        k,
        sc.workload.params,
        bandwidth_Bps=sc.update_bandwidth[0],
        optimizer=sc.optimizer,
        extras=sc.update_extras,
        group=sc.shard_group,
        node_size=sc.profile.network[0].size,
    )


def _total(plan: BucketPlan, full: CommCost | None, last: CommCost | None) -> CommCost:
    """The step's communication: ``plan.full`` all-reduces of a full bucket plus the remainder's, added up."""
    main = full if full is not None else last
    assert main is not None

    def add(name: str) -> np.ndarray | None:
        parts = [(times, getattr(c, name)) for times, c in ((plan.full, full), (1, last)) if c is not None]
        if all(v is None for _, v in parts):
            return None
        return np.asarray(sum(times * v for times, v in parts if v is not None))

    terms: dict[str, Any] = {name: add(name) for name in COMM_TERMS}  # None only for the optional ones
    return dataclasses.replace(main, **terms)


def simulate(
    scenario: Scenario,
    devices: np.ndarray | list[int],
    micro_batch: np.ndarray | None = None,
    *,
    comm_end: str | None = None,
) -> Result:
    """Predict step time, speedup and efficiency for every device count in ``devices``.

    ``micro_batch`` (weak scaling only): samples per device per micro-step for each element of ``devices``,
    replacing the scenario's batch per device, so that one call prices a (k, micro-batch) grid (plan best).
    ``comm_end`` ("lo" or "hi"): every collective of the step priced at that end of its band
    (simcli.comm.bands.at_end; simcli.step.band reads the step's band from it)."""
    sc = scenario
    k = np.asarray(devices, dtype=np.int64).ravel()
    if k.size == 0 or np.any(k < 1):
        raise InputError("--devices: every device count must be at least 1")
    net = sc.profile.network
    topology.check_devices(net, k)
    kf = k.astype(np.float64)
    m = int(sc.accum)
    if micro_batch is not None:
        if sc.strong:
            raise ValueError("simulate(micro_batch=...) is for weak scaling")
        b = np.broadcast_to(np.asarray(micro_batch, dtype=np.float64).ravel(), kf.shape).copy()
    else:
        b = sc.batch / (kf * m) if sc.strong else np.full(kf.shape, float(sc.batch))
    # forward + backward of one micro-step, at the pace of the slowest of k devices (simcli.step.straggler), less
    # the wait for the slowest of the k0 devices the speed was measured on (only the excess is applied)
    slow = straggler.slowdown(k, sc.device_spread) * _reference(sc)
    t_micro = _compute_time(sc, b) * slow
    t_bwd_micro = sc.backward_fraction * t_micro
    if strategies.SPECS[sc.strategy].timeline != "buckets":  # the sharded strategies' own step
        return _simulate_sharded(sc, k, b, t_micro=t_micro, t_bwd_micro=t_bwd_micro, slow=slow, comm_end=comm_end)
    n = float(sc.grad_bytes)
    plan = bucket_plan(n, sc.bucket_bytes if sc.overlap == "buckets" else None)

    def all_reduce(size: float) -> Any:
        return collectives.collective(
            sc.profile,
            sc.algorithm,
            k,
            nbytes=np.float64(size),
            collective="all_reduce",
            protocol=sc.protocol,
            message_dtype=sc.grad_dtype,
        )

    comm_full = all_reduce(plan.size) if plan.full else None
    comm_last = all_reduce(plan.last) if plan.last else None
    if comm_end is not None:
        comm_full = comm_full and bands.at_end(
            comm_full, sc.profile, k, n=plan.size, collective="all_reduce", end=comm_end
        )
        comm_last = comm_last and bands.at_end(
            comm_last, sc.profile, k, n=plan.last, collective="all_reduce", end=comm_end
        )
    zero = np.zeros(kf.shape)
    t_comm, end = bucket_exposure(
        plan, t_bwd_micro, comm_full.time if comm_full else zero, c_last=comm_last.time if comm_last else zero
    )
    if sc.overlap == "buckets":
        exposed = np.clip(end - t_bwd_micro, 0.0, t_comm)  # clip: rounding of t_j at k = 1 and full queues
    else:
        exposed = t_comm
    return _result(
        sc,
        k,
        b,
        t_micro=t_micro,
        t_bwd_micro=t_bwd_micro,
        t_comm=t_comm,
        exposed=exposed,
        slow=slow,
        comm=_total(plan, comm_full, comm_last),
        plan=plan,
        comm_bucket=comm_full,
        comm_last=comm_last,
        memory=_memory(sc, k, b),
        comm_bytes=m
        * sharding.comm_bytes(
            "ddp",
            k,
            params=sc.workload.params,
            param_bytes=0.0,
            grad_bytes=DTYPE_BYTES[sc.grad_dtype],
            reshard_after_forward=sc.reshard_after_forward,
        ),
    )


def fsdp_units(sc: Scenario) -> int:
    """FSDP units: --units, else the workload's layers, else 1 (the whole model one unit)."""
    return int(sc.units or sc.workload.layers or 1)


def _memory(sc: Scenario, k: np.ndarray, b: np.ndarray) -> "memory_model.Memory":
    return memory_model.for_scenario(sc, k, b=b)


def memory(sc: Scenario, k: np.ndarray | list[int]) -> "memory_model.Memory":
    """Bytes per device of ``sc``'s strategy at each k (simcli.step.memory, the one memory model), activations
    included."""
    return memory_model.for_scenario(sc, k)


def memory_fit(sc: Scenario, k: np.ndarray | list[int]) -> dict[str, Any] | None:
    """Where ``sc`` does not fit the device's memory: the first such k, its bytes per device and, per k that does
    not fit, the least sharded strategy that would (None: none). None when every k fits or the profile gives no
    device memory."""
    cap = sc.profile.device.memory_bytes
    if cap is None:
        return None
    k = np.asarray(k, dtype=np.int64).ravel()
    kw = memory_model.scenario_kwargs(sc, memory_model.micro_batch(sc, k))
    need = memory_model.per_device(sc.strategy, k, **kw).total
    bad = need > cap
    if not np.any(bad):
        return None
    best = memory_model.smallest_fitting(
        cap, k[bad], strategies.STRATEGIES, **{**kw, "activations": np.asarray(kw["activations"])[bad]}
    )
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
    *,
    t_micro: np.ndarray,
    t_bwd_micro: np.ndarray,
    t_comm: np.ndarray,
    exposed: np.ndarray,
    slow: np.ndarray,
    **rest: Any,
) -> Result:
    """The step of m micro-steps, its speedup and throughput, from the compute and the exposed communication.

    ``slow`` is the slowest-of-k factor already in ``t_micro`` ((1 + σ·m_k)/(1 + σ·m_k0); t_straggler_s is its
    share, negative below k0). One device runs the same samples per optimizer step with no communication and no
    wait, and its update as a device runs it at k (a sharded update's gain shows in samples/s, not in S(k), so that
    E(k) <= 1 keeps meaning "lost to scaling"): T_1 = m·T_compute(b1) + T_update(k); weak scaling counts samples
    (S = k·T_1/T_step), strong scaling the global batch (S = T_1/T_step).
    """
    kf = k.astype(np.float64)
    m = int(sc.accum)
    t_compute = m * t_micro
    t_update = update_seconds(sc, k)
    t_step = t_compute + exposed + t_update
    # one device alone: the global batch (strong), or this k's micro-batch m times (weak; the scenario's, or plan
    # best's), plus the update as a device runs it at k
    ref = _reference(sc)
    if sc.strong:
        speedup = (float(_compute_time(sc, np.array([float(sc.batch)]))[0]) * ref + t_update) / t_step
    else:
        speedup = kf * (m * _compute_time(sc, b) * ref + t_update) / t_step
    _finite(k, {"t_compute_s": t_compute, "t_step_s": t_step, "speedup": speedup})  # the cause first
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
        t_update_s=t_update,
        **rest,
    )


def _finite(k: np.ndarray, terms: dict[str, np.ndarray]) -> None:
    """The finiteness gate at its source: a step, compute time or speedup that is NaN, infinite or not positive
    (inputs each valid, their result beyond float64: ``--compute-time 1e308``, ``--mfu 1e-320``) is refused here,
    once for every command that simulates (tables, explain, plan, pictures), naming the quantity and the k."""
    for name, v in terms.items():
        v = np.broadcast_to(v, np.shape(v))
        bad = ~(np.isfinite(v) & (v > 0))
        if np.any(bad):
            i = np.unravel_index(int(np.argmax(bad)), bad.shape)
            x = float(v[i])
            shown = "NaN" if x != x else ("infinite" if np.isinf(x) else f"{x:g}")
            at = int(np.broadcast_to(k, bad.shape)[i]) if np.size(k) else None
            raise NonFiniteResult(
                f"the result {name} is {shown} at k = {at}, not a positive finite number: the inputs "
                "are each valid but their result is beyond what simcli computes; give values in a realistic range"
            )


def accumulated(res: Result, accum: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(T_step, E) of ``res`` (simulated with accum 1, weak scaling) at ``accum`` micro-steps per optimizer step,
    per k, without simulating again: :func:`_result`'s rule, m·T_compute + the exposed communication, m times for
    the sharded strategies (every micro-step communicates, simcli.step.sharding) and once for ddp (no_sync: only the
    last micro-step's backward reduces), plus the update once. E = (m·T_1 + T_update(k))/T_step with T_1 one
    device's micro-step alone."""
    sc = res.scenario
    if sc.accum != 1 or sc.strong:
        raise ValueError("accumulated() takes a weak-scaling result simulated with accum 1")
    m = np.asarray(accum, dtype=np.float64)
    exposed = res.t_comm_exposed_s * (m if strategies.SPECS[sc.strategy].timeline != "buckets" else 1.0)
    t_step = m * res.t_compute_s + exposed + res.t_update_s
    return t_step, (m * _compute_time(sc, res.batch_per_device) * _reference(sc) + res.t_update_s) / t_step


def _simulate_sharded(
    sc: Scenario,
    k: np.ndarray,
    b: np.ndarray,
    *,
    t_micro: np.ndarray,
    t_bwd_micro: np.ndarray,
    slow: np.ndarray,
    comm_end: str | None = None,
) -> Result:
    """zero1/zero2/fsdp/hsdp: every micro-step communicates (simcli.step.sharding.step)."""
    m = int(sc.accum)
    pb, gb = DTYPE_BYTES[sc.param_dtype], DTYPE_BYTES[sc.grad_dtype]
    st = sharding.step(
        sc.strategy,
        sc.profile,
        k,
        algorithm=sc.algorithm,
        protocol=sc.protocol,
        params=sc.workload.params,
        units=fsdp_units(sc),
        param_bytes=pb,
        grad_bytes=gb,
        t_forward=t_micro - t_bwd_micro,
        t_backward=t_bwd_micro,
        bucket_bytes=sharding.ZERO_BUCKET_ELEMENTS * gb if sc.overlap == "buckets" else None,
        group=sc.shard_group,
        reshard_after_forward=sc.reshard_after_forward,
        comm_end=comm_end,
    )
    comm = dataclasses.replace(
        st.comm,
        **{name: m * getattr(st.comm, name) for name in COMM_TERMS if getattr(st.comm, name) is not None},
    )
    return _result(
        sc,
        k,
        b,
        t_micro=t_micro,
        t_bwd_micro=t_bwd_micro,
        t_comm=m * st.t_comm,
        exposed=m * st.exposed,
        slow=slow,
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
