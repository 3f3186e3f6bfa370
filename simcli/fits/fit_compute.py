"""Fit the compute side to measurements: a bench step's compute rate, MFU per dtype and overlap, and the device
spread (the slowest of k) from a training run's scaling table. Pure maths on numpy arrays."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..base.types import InputError
from ..step.engine import simulate

__all__ = [
    "StepFit",
    "DtypeFit",
    "fit_step",
    "fit_mfu_by_dtype",
    "overlap_fraction",
    "SpreadFit",
    "fit_spread",
    "minimise_scalar",
]


# --------------------------------------------------------------------------- bench step


@dataclass(frozen=True)
class StepFit:
    """Compute rate and overlap that measured training steps show."""

    seconds_per_sample: float
    seconds_per_sample_se: float | None
    #: achieved fraction of peak (None when no FLOP count or peak is known)
    mfu: float | None
    mfu_se: float | None
    #: share of the shorter of T_compute and T_comm hidden by the other (0: none, 1: all); None without k > 1 rows
    overlap: float | None
    overlap_se: float | None
    n_rows: int
    n_overlap_rows: int
    warnings: tuple[str, ...] = field(default_factory=tuple)


def _mean_se(x: np.ndarray) -> tuple[float, float | None]:
    m = float(np.mean(x))
    return m, (float(np.std(x, ddof=1) / math.sqrt(len(x))) if len(x) > 1 else None)


@dataclass(frozen=True)
class DtypeFit:
    """The compute rate of one dtype from ``bench step`` rows: mfu and the backward fraction, each mean ± s.e."""

    dtype: str
    n_rows: int  #: distinct T_compute measurements (one per world size; both modes share one)
    achieved_flops: float  #: mean FLOP/s per device in the preset count (flops_per_sample x b / T_compute)
    mfu: float | None  #: achieved_flops / peak[dtype]; None without a peak for the dtype
    mfu_se: float | None
    backward_fraction: float | None  #: T_backward / (T_forward + T_backward); None without those columns
    backward_fraction_se: float | None
    warnings: tuple[str, ...] = field(default_factory=tuple)


def fit_mfu_by_dtype(
    dtype: Sequence[str],
    k: np.ndarray,
    batch_per_device: np.ndarray,
    *,
    t_compute: np.ndarray,
    flops_per_sample: np.ndarray,
    peaks: Mapping[str, float],
    t_forward: np.ndarray | None = None,
    t_backward: np.ndarray | None = None,
    t_p10: np.ndarray | None = None,
    t_p90: np.ndarray | None = None,
    steps: np.ndarray | None = None,
    what: str = "steps",
) -> dict[str, DtypeFit]:
    """Per compute dtype: mfu = FLOPs per sample · b / (T_compute · peak[dtype]), and T_b / (T_f + T_b).

    Every distinct (dtype, k, T_compute) row is one estimate (the flat and ddp rows of one world share their
    T_compute and count once); the value is their mean and its uncertainty the standard error of the mean
    (from a single row with its p10/p90 and step count: the standard error of that row's median, from its
    p10..p90 spread as a normal distribution's, 1.2533·σ/√steps with σ = (p90 - p10)/2.563; else None).
    A dtype without a peak in ``peaks`` gets no mfu (and a warning); an mfu above 1
    means the peak is too low for the machine (a warning; the caller keeps the old value).
    """
    k = np.asarray(k, dtype=np.int64)
    b, tc, f = (np.asarray(a, dtype=np.float64) for a in (batch_per_device, t_compute, flops_per_sample))
    for name, a in (("batch_per_device", b), ("t_compute_s", tc), ("flops_per_sample", f)):
        bad = ~(np.isfinite(a) & (a > 0))
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(f"{what}: row {i + 1}: {name} {a[i]!r} must be a positive number")
    tf = None if t_forward is None else np.asarray(t_forward, dtype=np.float64)
    tb = None if t_backward is None else np.asarray(t_backward, dtype=np.float64)
    out: dict[str, DtypeFit] = {}
    for dt in dict.fromkeys(dtype):
        seen: set[tuple[int, float]] = set()
        idx = []
        for i in range(len(dtype)):
            if dtype[i] == dt and (int(k[i]), float(tc[i])) not in seen:
                seen.add((int(k[i]), float(tc[i])))
                idx.append(i)
        sel = np.array(idx)
        rate = f[sel] * b[sel] / tc[sel]
        warnings: list[str] = []
        mfu = mfu_se = None
        peak = peaks.get(dt)
        if peak:
            mfu, mfu_se = _mean_se(rate / peak)
            if mfu_se is None and t_p10 is not None and t_p90 is not None and steps is not None:
                i = int(sel[0])
                sd = (float(t_p90[i]) - float(t_p10[i])) / 2.563
                if np.isfinite(sd) and sd >= 0 and steps[i] >= 2:
                    mfu_se = mfu * 1.2533 * sd / math.sqrt(float(steps[i])) / float(tc[i])
            if mfu > 1:
                warnings.append(
                    f"{dt}: the measured rate is {mfu:.2f} x the profile's peak: the peak is too low "
                    "for this machine; mfu not written"
                )
        else:
            warnings.append(
                f"{dt}: the profile has no peak_flops.{dt}, so no mfu for it (add the peak to the "
                "base profile, e.g. from simcli profiles detect)"
            )
        bf = bf_se = None
        if tf is not None and tb is not None:
            ok = sel[np.isfinite(tf[sel]) & np.isfinite(tb[sel]) & (tf[sel] > 0) & (tb[sel] > 0)]
            if ok.size:
                bf, bf_se = _mean_se(tb[ok] / (tf[ok] + tb[ok]))
        out[dt] = DtypeFit(
            dtype=dt,
            n_rows=int(sel.size),
            achieved_flops=float(np.mean(rate)),
            mfu=mfu,
            mfu_se=mfu_se,
            backward_fraction=bf,
            backward_fraction_se=bf_se,
            warnings=tuple(warnings),
        )
    return out


def overlap_fraction(t_compute: np.ndarray, t_comm: np.ndarray, t_step: np.ndarray) -> np.ndarray:
    """Measured overlap: ``(T_compute + T_comm - T_step) / min(T_compute, T_comm)``, clipped to [0, 1].

    0 means the step is the sum of its parts (nothing hidden), 1 that the
    shorter part is hidden entirely (T_step = max(T_compute, T_comm)).
    """
    tc, tm, ts = (np.asarray(a, dtype=np.float64) for a in (t_compute, t_comm, t_step))
    with np.errstate(divide="ignore", invalid="ignore"):
        phi = (tc + tm - ts) / np.minimum(tc, tm)
    return np.clip(phi, 0.0, 1.0)


def fit_step(
    k: np.ndarray,
    batch_per_device: np.ndarray,
    t_compute: np.ndarray,
    *,
    t_comm: np.ndarray,
    t_step: np.ndarray,
    flops_per_sample: np.ndarray | None = None,
    peak_flops: float | None = None,
    what: str = "steps",
) -> StepFit:
    """Seconds per sample (T_compute / batch per device), mfu = FLOPs per sample / (s per sample · peak), overlap.

    Weak-scaling rows: T_compute per sample does not depend on k, so every row
    is an estimate of it; the mean and its standard error are reported.
    """
    k = np.asarray(k, dtype=np.int64)
    b = np.asarray(batch_per_device, dtype=np.float64)
    tc, tm, ts = (np.asarray(a, dtype=np.float64) for a in (t_compute, t_comm, t_step))
    if k.size == 0:
        raise InputError(f"{what}: no step rows to fit")
    for name, a in (("batch_per_device", b), ("t_compute_s", tc), ("t_step_s", ts)):
        if not np.all(np.isfinite(a) & (a > 0)):
            i = int(np.argmax(~(np.isfinite(a) & (a > 0))))
            raise InputError(f"{what}: row {i + 1}: {name} {a[i]!r} must be a positive number")
    warnings: list[str] = []
    sps = tc / b
    sps_m, sps_se = _mean_se(sps)
    mfu = mfu_se = None
    if flops_per_sample is not None and peak_flops:
        f = np.asarray(flops_per_sample, dtype=np.float64)
        u = f / (sps * peak_flops)
        mfu, mfu_se = _mean_se(u)
        if mfu > 1:
            warnings.append(
                f"the measured rate is {mfu:.2f} x the base profile's peak: the peak is too low "
                "for this machine; mfu not written"
            )
    multi = (k > 1) & np.isfinite(tm) & (tm > 0)
    ov = ov_se = None
    if multi.any():
        ov, ov_se = _mean_se(overlap_fraction(tc[multi], tm[multi], ts[multi]))
    else:
        warnings.append("no rows with world_size > 1: the overlap cannot be measured")
    return StepFit(
        seconds_per_sample=sps_m,
        seconds_per_sample_se=sps_se,
        mfu=mfu,
        mfu_se=mfu_se,
        overlap=ov,
        overlap_se=ov_se,
        n_rows=int(k.size),
        n_overlap_rows=int(multi.sum()),
        warnings=tuple(warnings),
    )


# --------------------------------------------------------------------------- the slowest of k (device.spread)


@dataclass(frozen=True)
class SpreadFit:
    """The devices' speed spread σ (simcli.step.straggler) that makes a scenario meet a measured scaling table."""

    spread: float
    spread_se: float | None
    #: the reference device count: every ratio is per-device throughput at k over that at k0
    k0: int
    n_rows: int
    #: per row: k, measured ratio, predicted ratio without a spread and with the fitted one
    rows: tuple[dict[str, float], ...]
    warnings: tuple[str, ...] = field(default_factory=tuple)


#: the largest spread the fit searches (the engine refuses 1 and above)
_MAX_SPREAD = 0.9


def minimise_scalar(loss: Callable[[float], float], lo: float, hi: float) -> float:
    """The x in [lo, hi] that minimises a unimodal ``loss``, by golden-section search (Kiefer 1953); the lower
    bound itself when it is no worse (a spread of 0 is a common answer)."""
    g = (math.sqrt(5.0) - 1.0) / 2.0
    floor = lo
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = loss(a), loss(b)
    for _ in range(60):  # the bracket shrinks by 0.618 each step: 60 steps reach 1e-13 of it
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = loss(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = loss(b)
    x = (lo + hi) / 2.0
    return floor if loss(floor) <= loss(x) else x


def fit_spread(sc: Any, k: np.ndarray, speedup: np.ndarray, *, what: str = "scaling") -> SpreadFit:
    """σ by least squares on log(per-device throughput ratio): pred(k; σ) = E_σ(k)/E_σ(k0) against S(k)/k ÷ S(k0)/k0.

    ``sc`` is the :class:`simcli.step.engine.Scenario` that ran the table (its own spread is replaced); k0 is the
    smallest k of the table, so the speedups may be relative to any reference throughput. The model's
    communication stays in the prediction: σ explains only what the model does not. One unknown, so a
    bounded golden-section search on [0, 0.9]; the standard error from the residuals and the slope of the
    log ratio in σ (None with a single row beyond k0).
    """

    k = np.asarray(k, dtype=np.int64)
    s = np.asarray(speedup, dtype=np.float64)
    if not np.all(np.isfinite(s) & (s > 0)):
        i = int(np.argmax(~(np.isfinite(s) & (s > 0))))
        raise InputError(f"{what}: row {i + 1}: speedup {s[i]!r} must be a positive number")
    k0 = int(k.min())
    if not np.any(k > k0):
        raise InputError(
            f"{what}: every row is at k = {k0}; the spread shows only between device counts: measure two or more"
        )
    eff = s / k
    base = float(np.mean(eff[k == k0]))
    sel = k > k0
    ks = np.unique(k)
    meas = np.log(eff[sel] / base)

    def log_pred(sigma: float) -> np.ndarray:
        res = simulate(sc.replace(spread=sigma), ks)
        e = dict(zip(res.devices.tolist(), res.efficiency.tolist()))
        return np.log(np.array([e[int(x)] for x in k[sel]]) / e[k0])

    def loss(sigma: float) -> float:
        return float(np.sum((log_pred(sigma) - meas) ** 2))

    sigma = minimise_scalar(loss, 0.0, _MAX_SPREAD)
    warnings = []
    if sigma >= _MAX_SPREAD - 1e-6:
        warnings.append(
            f"the fit ran to the largest spread searched ({_MAX_SPREAD}): the model misses more than a spread"
        )
    p0, p1 = log_pred(0.0), log_pred(sigma)
    n = int(sel.sum())
    se = None
    if n >= 2:
        h = 1e-4
        slope = (log_pred(sigma + h) - log_pred(max(sigma - h, 0.0))) / (sigma + h - max(sigma - h, 0.0))
        denom = float(np.sum(slope**2))
        if denom > 0:
            se = math.sqrt(float(np.sum((p1 - meas) ** 2)) / (n - 1) / denom)
    rows = tuple(
        {
            "devices": int(kk),
            "measured": float(math.exp(mm)),
            "predicted_before": float(math.exp(a0)),
            "predicted_after": float(math.exp(a1)),
        }
        for kk, mm, a0, a1 in zip(k[sel].tolist(), meas.tolist(), p0.tolist(), p1.tolist())
    )
    return SpreadFit(spread=sigma, spread_se=se, k0=k0, n_rows=n, rows=rows, warnings=tuple(warnings))
