"""Fit the model to measurements: alpha-beta all-reduce costs, and compute rate and overlap of a step.

Pure maths on numpy arrays: no files, no YAML, no CLI (``simcli.cli.calibrate``
reads the CSVs and writes the calibrated profile).

The all-reduce fit
------------------
Every all-reduce algorithm's alpha-beta cost is linear in ``(alpha, 1/B)``::

    t = c_lat(k)·alpha + c_bw(k)·n/B   (+ a known offset, the gamma term)

For ring (Patarasuk & Yuan 2009; Thakur, Rabenseifner & Gropp 2005)
``c_lat = 2(k-1)`` and ``c_bw = 2(k-1)/k`` (:data:`COEFFICIENTS`). Inside a
profile the ring's ``B`` is what a tier offers the ring, ``g_i(k)·b_i`` with
``g`` from :func:`simcli.comm.collectives.tier_bandwidth` (1 for a ``per: device``
link, ``1/min(k, size)`` for a shared ``per: node`` medium, ``r`` links for the
smallest domain of an outer ``per: device`` tier), so the fitted ``b`` is the
tier's *effective* bandwidth ``bandwidth · efficiency``.

* **Weighted least squares on relative error**: minimise
  ``sum_i w_i·((pred_i - t_i)/t_i)^2``; a 10 µs miss matters at 32 KiB, not
  at 1 GiB. Rows are divided by ``t_i`` and the problem is solved with
  ``x = (alpha, 1/B) >= 0`` by an exact active-set search (with two unknowns,
  the non-negative optimum is the best feasible optimum over the four
  supports {}, {alpha}, {1/B}, {alpha, 1/B}; Lawson & Hanson 1974, ch. 23).
  ``1/B = 0`` (infinite bandwidth) is refused as a fit, not written.
* **Robust**: Huber's loss by iteratively re-weighted least squares (Huber
  1964; Holland & Welsch 1977): a point whose relative residual exceeds
  ``c = 1.345·s`` gets weight ``c/|r|``, with ``s = 1.4826·MAD`` of the
  residuals (floored at 0.5%), repeated until the parameters settle. A noisy
  machine's outliers are down-weighted, not dropped.
* **Uncertainty**: standard errors from the covariance of the weighted fit,
  ``cov = s^2 (J^T W J)^-1`` with ``s^2 = sum w r^2 / (m - p)``; the
  bandwidth's by the delta method, ``se(B) = se(1/B)·B^2``.
* **Quality**: R^2 on log time (the data span decades; R^2 on raw times
  would only measure the largest sizes), median and max relative error on the
  fitting points and on held-out points (a seeded random fraction).
* **Identifiability**: one message size with one world size cannot tell
  ``alpha`` from ``B``; a parameter whose relative standard error exceeds 100%,
  or that sits on its bound (``alpha = 0``), is reported as not identified and
  kept at the base profile's value while the other one is refitted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..base.types import InputError, Tier
from ..comm import collectives, specs, topology

__all__ = [
    "COEFFICIENTS",
    "ring_coefficients",
    "LinkFit",
    "StepFit",
    "fit_alpha_beta",
    "fit_link",
    "outer_tier",
    "tier_scale",
    "fit_step",
    "SpreadFit",
    "fit_spread",
    "minimise_scalar",
    "rel_error",
    "holdout_mask",
    "HUBER_C",
]

#: Huber's tuning constant (95% efficiency under normal errors; Huber 1964)
HUBER_C = 1.345
#: scale floor for the robust weights: below 0.5% relative residual nothing is an outlier
_SCALE_FLOOR = 0.005
#: a parameter whose standard error exceeds this fraction of its value is "not identified"
_MAX_REL_SE = 1.0


def ring_coefficients(k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ring all-reduce: ``c_lat = 2(k-1)`` steps of alpha, ``c_bw = 2(k-1)/k`` of n/B (Patarasuk & Yuan 2009)."""
    kf = np.asarray(k, dtype=np.float64)
    return 2.0 * (kf - 1.0), specs.busbw_factor(kf)


#: per algorithm: k -> (c_lat(k), c_bw(k)) of t = c_lat·alpha + c_bw·n/B
COEFFICIENTS: dict[str, Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]] = {"ring": ring_coefficients}


def rel_error(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    """Signed relative error of a prediction, ``(pred - meas)/meas``."""
    return (np.asarray(pred, dtype=np.float64) - meas) / meas


def holdout_mask(m: int, fraction: float, seed: int) -> np.ndarray:
    """Boolean mask of ``round(fraction·m)`` points held out of the fit, drawn with a seeded generator."""
    if not 0 <= fraction < 1:
        raise InputError(
            f"--holdout: {fraction} is not in [0, 1); give the fraction of points to hold out, for example 0.25"
        )
    n_out = int(round(fraction * m))
    mask = np.zeros(m, dtype=bool)
    if n_out:
        mask[np.random.default_rng(seed).choice(m, size=n_out, replace=False)] = True
    return mask


@dataclass(frozen=True)
class LinkFit:
    """Result of fitting alpha and B to one group of measurements (one tier)."""

    alpha_s: float
    bandwidth_Bps: float
    alpha_se_s: float | None
    bandwidth_se_Bps: float | None
    #: which parameters the data identified; an unidentified one holds the base value given
    identified: Mapping[str, bool]
    n_fit: int
    n_holdout: int
    r2_log: float
    fit_median_rel: float
    fit_max_rel: float
    holdout_median_rel: float | None
    holdout_max_rel: float | None
    #: points the robust loss down-weighted (weight < 1) in the final iteration
    downweighted: int
    iterations: int
    world_sizes: tuple[int, ...]
    sizes: tuple[float, ...]
    warnings: tuple[str, ...] = field(default_factory=tuple)


def _solve_nnls(M: np.ndarray, y: np.ndarray, free: Sequence[bool]) -> np.ndarray:
    """min ||M x - y||^2 over x >= 0 with x_j = 0 where not free; exact for small p (all supports tried)."""
    p = M.shape[1]
    cols = [j for j in range(p) if free[j]]
    best, best_cost = np.zeros(p), float(y @ y)
    for mask in range(1, 1 << len(cols)):
        support = [cols[i] for i in range(len(cols)) if mask >> i & 1]
        sub = M[:, support]
        x_s, *_ = np.linalg.lstsq(sub, y, rcond=None)
        if np.any(x_s < 0):
            continue
        x = np.zeros(p)
        x[support] = x_s
        r = M @ x - y
        cost = float(r @ r)
        if cost < best_cost:
            best, best_cost = x, cost
    return best


def _irls(
    A: np.ndarray, t: np.ndarray, offset: np.ndarray, fixed: Mapping[int, float], loss: str, max_iter: int = 50
) -> tuple[np.ndarray, np.ndarray, int]:
    """Robust non-negative weighted LS on relative error. Returns (x, robust weights, iterations)."""
    p = A.shape[1]
    # relative-error rows: (A x + offset)/t - 1  ->  M x - y with M = A/t, y = 1 - offset/t
    M = A / t[:, None]
    y = 1.0 - offset / t
    for j, v in fixed.items():
        y = y - M[:, j] * v
    free = [j not in fixed for j in range(p)]
    scale = np.where(np.any(M != 0, axis=0), np.max(np.abs(M), axis=0), 1.0)  # column scaling for conditioning
    Ms = M / scale
    w = np.ones(len(t))
    x_old = None
    it = 0
    for it in range(1, max_iter + 1):
        sw = np.sqrt(w)
        xs = _solve_nnls(Ms * sw[:, None], y * sw, free)
        x = xs / scale
        if loss != "huber":
            break
        r = Ms @ xs - y
        s = max(1.4826 * float(np.median(np.abs(r - np.median(r)))), _SCALE_FLOOR)
        c = HUBER_C * s
        w = np.where(np.abs(r) <= c, 1.0, c / np.maximum(np.abs(r), 1e-300))
        if x_old is not None and np.allclose(x, x_old, rtol=1e-9, atol=0.0):
            break
        x_old = x
    for j, v in fixed.items():
        x[j] = v
    return x, w, it


def _covariance(
    A: np.ndarray, t: np.ndarray, offset: np.ndarray, x: np.ndarray, w: np.ndarray, free: Sequence[int]
) -> np.ndarray | None:
    """Covariance of the free parameters of the weighted relative-error fit, or None if singular."""
    m = len(t)
    if m <= len(free) or not free:
        return None
    J = (A / t[:, None])[:, free]
    r = (A @ x + offset) / t - 1.0
    s2 = float(np.sum(w * r * r)) / (m - len(free))
    JtWJ = J.T @ (J * w[:, None])
    try:
        cond = np.linalg.cond(JtWJ / np.outer(np.sqrt(np.diag(JtWJ)), np.sqrt(np.diag(JtWJ))))
    except (np.linalg.LinAlgError, FloatingPointError):
        return None
    if not np.isfinite(cond) or cond > 1e12:
        return None
    return s2 * np.linalg.inv(JtWJ)


def _r2_log(pred: np.ndarray, meas: np.ndarray) -> float:
    lp, lm = np.log(np.maximum(pred, 1e-300)), np.log(meas)
    ss_tot = float(np.sum((lm - lm.mean()) ** 2))
    if ss_tot == 0:
        return float("nan")
    return 1.0 - float(np.sum((lm - lp) ** 2)) / ss_tot


def fit_alpha_beta(
    k: np.ndarray,
    n: np.ndarray,
    t: np.ndarray,
    *,
    algorithm: str = "ring",
    bw_scale: np.ndarray | None = None,
    offset: np.ndarray | None = None,
    base_alpha_s: float | None = None,
    base_bandwidth_Bps: float | None = None,
    holdout: float = 0.0,
    seed: int = 0,
    loss: str = "huber",
    what: str = "data",
) -> LinkFit:
    """Fit ``t = c_lat(k)·alpha + c_bw(k)·n/(g(k)·b) + offset`` for alpha >= 0 and b > 0.

    ``bw_scale`` is g(k) (default 1: b is the ring's bandwidth). ``offset`` a
    known time to add (the gamma term of a profile with a reduce rate). The
    base values are kept for a parameter the data cannot identify (and are
    then required). ``what`` names the data in error messages.
    """
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(n, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    if algorithm not in COEFFICIENTS:
        raise InputError(f"--algorithm: cannot fit {algorithm!r}; calibration knows {', '.join(COEFFICIENTS)}")
    if not (k.shape == n.shape == t.shape):
        raise ValueError("k, n and t must have the same shape")
    if k.size == 0:
        raise InputError(f"{what}: no measurements to fit (need all-reduce rows with world_size >= 2)")
    if np.any(k < 2):
        raise InputError(
            f"{what}: world size {int(k.min())} has no communication to fit; give rows with world_size >= 2"
        )
    bad = ~(np.isfinite(t) & (t > 0)) | ~(np.isfinite(n) & (n > 0))
    if np.any(bad):
        i = int(np.argmax(bad))
        raise InputError(
            f"{what}: row {i + 1}: time {t[i]!r} s at {n[i]!r} bytes; times and sizes must be positive numbers"
        )
    g = np.ones(k.shape) if bw_scale is None else np.asarray(bw_scale, dtype=np.float64)
    off = np.zeros(k.shape) if offset is None else np.asarray(offset, dtype=np.float64)
    c_lat, c_bw = COEFFICIENTS[algorithm](k)
    A = np.column_stack([c_lat, c_bw * n / g])

    test = holdout_mask(len(t), holdout, seed)
    fit = ~test
    if int(fit.sum()) < 3:
        raise InputError(
            f"{what}: {int(fit.sum())} point(s) left to fit after holding out {int(test.sum())}; "
            "measure more sizes or world sizes, or lower --holdout"
        )
    Af, tf, of = A[fit], t[fit], off[fit]
    sizes = tuple(float(s) for s in np.unique(n[fit]))
    worlds = tuple(int(x) for x in np.unique(k[fit]))
    warnings: list[str] = []
    fixed: dict[int, float] = {}
    names = ("alpha", "bandwidth")

    def base_for(j: int) -> float:
        v = base_alpha_s if j == 0 else (None if base_bandwidth_Bps is None else 1.0 / base_bandwidth_Bps)
        if v is None:
            raise InputError(
                f"{what}: the data cannot identify {names[j]} and no base value was given; "
                "measure several message sizes"
            )
        return v

    if len(sizes) == 1 and len(worlds) == 1:
        # alpha and 1/B enter through one column each scaled by constants: they cannot be told apart.
        # Keep the one that matters least at this size at its base value and fit the other.
        if base_alpha_s is None or base_bandwidth_Bps is None:
            raise InputError(
                f"{what}: one message size ({sizes[0]:.0f} bytes) and one world size "
                f"({worlds[0]}) cannot separate latency from bandwidth; measure several sizes"
            )
        lat_share = float(Af[0, 0]) * base_alpha_s
        bw_share = float(Af[0, 1]) / base_bandwidth_Bps
        j_keep = 1 if lat_share >= bw_share else 0
        fixed[j_keep] = base_for(j_keep)
        warnings.append(
            f"one message size and one world size only: {names[j_keep]} kept at the base value, "
            f"only {names[1 - j_keep]} fitted"
        )
    elif len(sizes) == 1:
        warnings.append(
            f"one message size only ({sizes[0]:.0f} bytes): alpha and B are told apart only "
            "through the world sizes; measure several sizes"
        )
    elif len(worlds) == 1:
        warnings.append(
            f"one world size only (k={worlds[0]}): alpha and B describe this k; "
            "measure several world sizes to describe the link"
        )

    for _ in range(3):  # refit at most twice when a parameter turns out not to be identified
        x, w, iters = _irls(Af, tf, of, fixed, loss)
        if x[1] <= 0 and 1 not in fixed:
            raise InputError(
                f"{what}: the fit gives infinite bandwidth (the times do not grow with the size); "
                "check the data, or measure larger sizes"
            )
        free = [j for j in range(2) if j not in fixed]
        cov = _covariance(Af, tf, of, x, w, free)
        se = {j: (math.sqrt(max(cov[i, i], 0.0)) if cov is not None else None) for i, j in enumerate(free)}
        problems = []
        for j in free:
            if j == 0 and x[0] <= 0:
                problems.append((j, "alpha is at its bound 0 (the smallest sizes do not resolve a latency)"))
            elif se.get(j) is None:
                problems.append((j, f"{names[j]} is not identified (the design is singular)"))
            elif se[j] > _MAX_REL_SE * abs(x[j]):
                problems.append(
                    (
                        j,
                        f"{names[j]} is not identified by these data (standard error "
                        f"{se[j] / abs(x[j]):.0%} of the value)",
                    )
                )
        if not problems:
            break
        j, msg = problems[0]
        base = base_alpha_s if j == 0 else base_bandwidth_Bps
        if len(free) == 1 or base is None:  # nothing left to hold fixed: report it, with the caveat
            warnings.append(msg + "; reported as fitted, treat it with care")
            break
        fixed[j] = base_for(j)
        warnings.append(msg + "; kept at the base value")

    identified = {"alpha": 0 not in fixed, "bandwidth": 1 not in fixed}
    alpha, beta = float(x[0]), float(x[1])
    B = 1.0 / beta
    alpha_se = se.get(0) if 0 not in fixed else None
    beta_se = se.get(1) if 1 not in fixed else None
    B_se = beta_se * B * B if beta_se is not None else None

    pred = A @ np.array([alpha, beta]) + off
    err = np.abs(rel_error(pred, t))
    return LinkFit(
        alpha_s=alpha,
        bandwidth_Bps=B,
        alpha_se_s=alpha_se,
        bandwidth_se_Bps=B_se,
        identified=identified,
        n_fit=int(fit.sum()),
        n_holdout=int(test.sum()),
        r2_log=_r2_log(pred[fit], t[fit]),
        fit_median_rel=float(np.median(err[fit])),
        fit_max_rel=float(np.max(err[fit])),
        holdout_median_rel=float(np.median(err[test])) if test.any() else None,
        holdout_max_rel=float(np.max(err[test])) if test.any() else None,
        downweighted=int(np.sum(w < 1.0)),
        iterations=iters,
        world_sizes=worlds,
        sizes=sizes,
        warnings=tuple(warnings),
    )


# --------------------------------------------------------------------------- tiers


def outer_tier(network: Sequence[Tier], k: np.ndarray) -> np.ndarray:
    """Index of the outermost tier a ring over k devices spans (the tier whose link a fit describes)."""
    spanned = topology.tier_spanned(network, np.asarray(k, dtype=np.int64))
    idx = np.zeros(spanned.shape[1:], dtype=np.int64)
    for i in range(spanned.shape[0]):
        idx = np.where(spanned[i], i, idx)
    return idx


def tier_scale(network: Sequence[Tier], tier: int, k: np.ndarray) -> np.ndarray:
    """g(k): the ring bandwidth tier ``tier`` offers per B/s of its effective bandwidth (see collectives)."""
    import dataclasses

    unit = list(network)
    unit[tier] = dataclasses.replace(network[tier], bandwidth_Bps=1.0, efficiency=1.0)
    return topology.tier_bandwidth(unit, np.asarray(k, dtype=np.int64))[tier]


def fit_link(
    network: Sequence[Tier],
    tier: int,
    k: np.ndarray,
    n: np.ndarray,
    t: np.ndarray,
    *,
    algorithm: str = "ring",
    reduce_Bps: float | None = None,
    holdout: float = 0.0,
    seed: int = 0,
    loss: str = "huber",
    what: str = "data",
) -> LinkFit:
    """Fit tier ``tier``'s latency and effective bandwidth to all-reduce times that cross it.

    The tier is taken to be the ring's bottleneck for every k given; the
    reduction (gamma) term of ``reduce_Bps`` is a known offset (it is
    proportional to the bandwidth term, so the two cannot be fitted together).
    """
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(n, dtype=np.float64)
    t_i = network[tier]
    g = tier_scale(network, tier, k)
    off = None
    if reduce_Bps:
        kf = k.astype(np.float64)
        off = (kf - 1.0) / kf * n / reduce_Bps
    return fit_alpha_beta(
        k,
        n,
        t,
        algorithm=algorithm,
        bw_scale=g,
        offset=off,
        base_alpha_s=t_i.latency_s,
        base_bandwidth_Bps=t_i.effective_Bps,
        holdout=holdout,
        seed=seed,
        loss=loss,
        what=what,
    )


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
    t_compute: np.ndarray,
    flops_per_sample: np.ndarray,
    peaks: Mapping[str, float],
    *,
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
    t_comm: np.ndarray,
    t_step: np.ndarray,
    *,
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


# --------------------------------------------------------------------------- NCCL's constants


@dataclass(frozen=True)
class NcclFit:
    """Per-tier hop latency and effective bandwidth that make NCCL's model (simcli.comm.nccl) match measurements."""

    latency_s: tuple[float, ...]
    bandwidth_Bps: tuple[float, ...]  #: effective bandwidth per tier (bandwidth x efficiency)
    #: which tier's latency / bandwidth the data identified (the others keep the base profile's)
    latency_identified: tuple[bool, ...]
    bandwidth_identified: tuple[bool, ...]
    #: the spread of each fitted value over half-samples of the data (a bootstrap standard error; None: too few)
    latency_se_s: tuple[float | None, ...]
    bandwidth_se_Bps: tuple[float | None, ...]
    n_fit: int
    n_holdout: int
    fit_median_rel: float
    fit_max_rel: float
    holdout_median_rel: float | None
    holdout_max_rel: float | None
    r2_log: float
    world_sizes: tuple[int, ...]
    sizes: tuple[float, ...]
    warnings: tuple[str, ...] = field(default_factory=tuple)


def _nccl_predict(
    profile: Any,
    lat: np.ndarray,
    bw: np.ndarray,
    k: np.ndarray,
    n: np.ndarray,
    algorithm: str,
    gpus: np.ndarray | None = None,
) -> np.ndarray:
    """``gpus``: per point, the GPUs one thread launched on (nccl-tests' -g; None: one per process)."""
    import dataclasses

    net = tuple(
        dataclasses.replace(t, latency_s=float(a), bandwidth_Bps=float(b), efficiency=1.0)
        for t, a, b in zip(profile.network, lat, bw)
    )
    prof = dataclasses.replace(profile, network=net)
    return collectives.collective(prof, algorithm, k, n, "all_reduce", None, 1 if gpus is None else gpus).time


def _descend(loss: Any, x0: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Minimise ``loss`` over the free entries of x (log values) by coordinate search with shrinking steps.

    NCCL's cost is piecewise smooth (the chosen pair changes with the parameters), so a derivative-free
    search on log parameters is used; each coordinate tries steps of ±s, s from ln 4 down to ln 1.005.
    """
    x = x0.copy()
    best = loss(x)
    for step in np.log([4.0, 2.0, 1.4, 1.15, 1.05, 1.015, 1.005]):
        improved = True
        rounds = 0
        while improved and rounds < 8:
            improved, rounds = False, rounds + 1
            for j in np.flatnonzero(free):
                for d in (step, -step):
                    y = x.copy()
                    y[j] += d
                    v = loss(y)
                    if v < best - 1e-12:
                        x, best, improved = y, v, True
                        break
    return x


def _at(gpus: np.ndarray | None, sel: np.ndarray) -> np.ndarray | None:
    return None if gpus is None else gpus[sel]


def fit_nccl(
    profile: Any,
    k: np.ndarray,
    n: np.ndarray,
    t: np.ndarray,
    *,
    algorithm: str = "nccl",
    holdout: float = 0.0,
    seed: int = 0,
    what: str = "data",
    gpus: np.ndarray | None = None,
) -> NcclFit:
    """Fit every spanned tier's hop latency (its Ring/Simple ``latency``) and effective bandwidth so that NCCL's
    model, with NCCL's own choice of algorithm and protocol, matches measured all-reduce times.

    Least squares on log(t_pred / t_meas) (relative errors, so small and large messages weigh alike), by a
    derivative-free coordinate search on log parameters. A value is identified when changing it by 20% either way
    moves some fitted prediction by 2% or more (NCCL's per-channel speeds are quantised and only the bottleneck
    counts, so a tier may not matter at all); the others keep the base profile's values. Two tiers whose
    bandwidths only matter through their minimum cannot be told apart: the fit then matches the times with
    one of the combinations, and the half-sample spread shows it. Standard errors: the spread of the fitted
    values over 8 half-samples (drawn with ``seed``). ``gpus``: per point, nccl-tests' -g (the host's launches
    floor those times, :func:`simcli.comm.nccl.host_floor`); None is one GPU per process.
    """
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(n, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    if not (np.all(np.isfinite(t)) and np.all(t > 0)):
        raise InputError(f"{what}: every measured time must be a positive number")
    net = profile.network
    nt = len(net)
    mask = holdout_mask(len(t), holdout, seed)
    fit_i = ~mask
    if fit_i.sum() < 2:
        raise InputError(f"{what}: {int(fit_i.sum())} point(s) left to fit; give at least 2 (lower --holdout)")
    base_lat = np.array([x.latency_s for x in net])
    base_bw = np.array([x.effective_Bps for x in net])
    x0 = np.log(np.concatenate([base_lat, base_bw]))
    # identified: changing the value by 20% moves some fitted prediction by at least 2%
    ref = np.log(_nccl_predict(profile, base_lat, base_bw, k[fit_i], n[fit_i], algorithm, _at(gpus, fit_i)))
    free = np.zeros(2 * nt, dtype=bool)
    for j in range(2 * nt):
        for step in (np.log(1.2), -np.log(1.2)):  # both ways: a bandwidth may only matter through a minimum
            y = x0.copy()
            y[j] += step
            moved = (
                np.log(
                    _nccl_predict(
                        profile, np.exp(y[:nt]), np.exp(y[nt:]), k[fit_i], n[fit_i], algorithm, _at(gpus, fit_i)
                    )
                )
                - ref
            )
            free[j] |= bool(np.max(np.abs(moved)) >= 0.02)
    lat_free, bw_free = free[:nt], free[nt:]
    warnings: list[str] = []
    if not free.any():
        warnings.append("no tier's latency or bandwidth is identified by these sizes and world sizes: nothing fitted")

    def make_loss(sel: np.ndarray):
        def loss(x: np.ndarray) -> float:
            p = _nccl_predict(profile, np.exp(x[:nt]), np.exp(x[nt:]), k[sel], n[sel], algorithm, _at(gpus, sel))
            return float(np.mean(np.log(p / t[sel]) ** 2))

        return loss

    x = _descend(make_loss(fit_i), x0, free) if free.any() else x0
    # bootstrap-like spread: refit on 8 random halves of the fitted points
    rng = np.random.default_rng(seed)
    idx = np.flatnonzero(fit_i)
    reps = []
    if free.any() and idx.size >= 8:
        for _ in range(8):
            sub = np.zeros(len(t), dtype=bool)
            sub[rng.choice(idx, size=max(2, idx.size // 2), replace=False)] = True
            reps.append(_descend(make_loss(sub), x, free))
    spread = np.std(np.exp(np.array(reps)), axis=0, ddof=1) if len(reps) >= 2 else None
    lat, bw = np.exp(x[:nt]), np.exp(x[nt:])
    pred = _nccl_predict(profile, lat, bw, k, n, algorithm, gpus)
    rel = np.abs(pred / t - 1.0)
    lt = np.log(t[fit_i])
    ss_tot = float(np.sum((lt - lt.mean()) ** 2))
    r2 = 1.0 - float(np.sum((np.log(pred[fit_i]) - lt) ** 2)) / ss_tot if ss_tot > 0 else 1.0

    def se(j: int, identified: bool) -> float | None:
        return None if spread is None or not identified else float(spread[j])

    return NcclFit(
        latency_s=tuple(float(v) for v in lat),
        bandwidth_Bps=tuple(float(v) for v in bw),
        latency_identified=tuple(bool(v) for v in lat_free),
        bandwidth_identified=tuple(bool(v) for v in bw_free),
        latency_se_s=tuple(se(i, lat_free[i]) for i in range(nt)),
        bandwidth_se_Bps=tuple(se(nt + i, bw_free[i]) for i in range(nt)),
        n_fit=int(fit_i.sum()),
        n_holdout=int(mask.sum()),
        fit_median_rel=float(np.median(rel[fit_i])),
        fit_max_rel=float(np.max(rel[fit_i])),
        holdout_median_rel=float(np.median(rel[mask])) if mask.any() else None,
        holdout_max_rel=float(np.max(rel[mask])) if mask.any() else None,
        r2_log=r2,
        world_sizes=tuple(sorted({int(v) for v in k})),
        sizes=tuple(sorted({float(v) for v in n})),
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
    from ..step.engine import simulate

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
