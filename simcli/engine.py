"""The analytic engine: step time, speedup and efficiency over a range of device counts.

A pure function of frozen data (:class:`Scenario`) and an array of device
counts; it prints nothing, reads no files and imports no CLI, YAML, pandas or
torch. Vectorised over k: no Python loop per device count.

Equations (the README repeats them)::

    T_compute(k) = FLOP per sample · b_k / (peak[dtype] · mfu)      (or --compute-time)
    T_comm(k)    = all-reduce of params · bytes(grad dtype) over k devices
    T_step(k)    = T_compute(k) + T_comm(k)

    weak scaling   (fixed batch b per device):  b_k = b,   S(k) = k · T_step(1) / T_step(k)
    strong scaling (fixed global batch B):      b_k = B/k, S(k) = T_step(1) / T_step(k)
    E(k) = S(k) / k;  samples/s = k · b_k / T_step(k)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import collectives
from .model import DTYPE_BYTES, InputError, Profile, Workload

__all__ = ["Scenario", "Result", "simulate", "COLUMNS"]


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
    algorithm: str = "ring"
    #: how communication hides behind backward: "none" or "buckets" (PyTorch DDP's gradient buckets)
    overlap: str = "none"
    #: DDP bucket size in MB (1e6 bytes; DDP's bucket_cap_mb, default 25)
    bucket_mb: float = 25.0
    #: gradient accumulation: micro-steps of compute per all-reduce (DDP's no_sync)
    accum: int = 1
    #: share of forward+backward compute spent in backward
    backward_fraction: float = 2.0 / 3.0

    def __post_init__(self) -> None:
        if self.batch_per_device is not None and self.global_batch is not None:
            raise InputError("--batch-per-device and --global-batch exclude each other: give one "
                             "(weak scaling or strong scaling)")
        dev = self.profile.device
        if self.dtype is not None and self.dtype not in dev.peak_flops:
            raise InputError(f"--dtype: {self.profile.name} gives no peak for {self.dtype!r}; it has "
                             f"{', '.join(dev.peak_flops)}")
        if self.grad_dtype not in DTYPE_BYTES:
            raise InputError(f"--grad-dtype: unknown dtype {self.grad_dtype!r}; choose one of "
                             f"{', '.join(DTYPE_BYTES)}")
        if self.mfu is not None and not (0 < self.mfu <= 1):
            raise InputError(f"--mfu: {self.mfu} is not in (0, 1]; give the achieved fraction of peak, "
                             "for example 0.4")
        for name in ("batch_per_device", "global_batch"):
            v = getattr(self, name)
            if v is not None and not v >= 1:
                raise InputError(f"--{name.replace('_', '-')}: {v} must be at least 1")
        if self.compute_time_s is not None and not self.compute_time_s > 0:
            raise InputError(f"--compute-time: {self.compute_time_s} must be a positive number of seconds")
        if self.compute_time_s is None and not self.workload.flops_per_sample:
            raise InputError("the workload has no FLOPs per sample: give --flops-per-sample or "
                             "--compute-time")

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
        }


#: record keys of a simulation, in order; units are in the names
COLUMNS = ("devices", "batch_per_device", "t_compute_s", "t_comm_s", "t_step_s", "speedup", "efficiency",
           "samples_per_s", "alpha_s", "bus_GBps", "bottleneck")


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
    comm: collectives.CommCost = field(repr=False)

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
            "bus_GBps": np.where(np.isfinite(self.comm.bus_Bps), self.comm.bus_Bps / 1e9, np.nan),
            "bottleneck": self.bottleneck_names,
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


def _compute_time(sc: Scenario, per_device_batch: np.ndarray) -> np.ndarray:
    """Seconds of forward + backward for ``per_device_batch`` samples on one device."""
    if sc.compute_time_s is not None:
        # measured at the per-device batch (weak) or for the whole global batch on one device (strong)
        return sc.compute_time_s * per_device_batch / sc.batch
    return sc.workload.flops_per_sample * per_device_batch / sc.achieved_flops


def simulate(scenario: Scenario, devices: np.ndarray | list[int]) -> Result:
    """Predict step time, speedup and efficiency for every device count in ``devices``."""
    sc = scenario
    k = np.asarray(devices, dtype=np.int64).ravel()
    if k.size == 0 or np.any(k < 1):
        raise InputError("--devices: every device count must be at least 1")
    net = sc.profile.network
    collectives.check_devices(net, k)
    kf = k.astype(np.float64)
    b = sc.batch / kf if sc.strong else np.full(kf.shape, float(sc.batch))
    t_compute = _compute_time(sc, b)
    comm = collectives.allreduce(sc.algorithm, net, k, np.float64(sc.grad_bytes), sc.profile.device.reduce_Bps)
    t_comm = comm.time
    t_step = t_compute + t_comm
    # T_step(1): the same workload on one device, no communication
    t1 = float(_compute_time(sc, np.array([float(sc.batch)]))[0])
    speedup = t1 / t_step if sc.strong else kf * t1 / t_step
    return Result(
        scenario=sc,
        devices=k,
        batch_per_device=b,
        t_compute_s=t_compute,
        t_comm_s=t_comm,
        t_step_s=t_step,
        speedup=speedup,
        efficiency=speedup / kf,
        samples_per_s=kf * b / t_step,
        comm=comm,
    )
