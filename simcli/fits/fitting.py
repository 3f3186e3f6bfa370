"""Fit the model to measurements: alpha-beta all-reduce costs per tier (the fits of compute, overlap and the
device spread are :mod:`simcli.fits.fit_compute`'s, NCCL's constants :mod:`simcli.fits.fit_nccl`'s).

Pure maths on numpy arrays: no files, no YAML, no CLI (``simcli.cli.calibrate``
reads the CSVs and writes the calibrated profile).

The all-reduce fit
------------------
Every all-reduce algorithm's alpha-beta cost is linear in ``(alpha, 1/B)``::

    t = c_lat(k)·alpha + c_bw(k)·n/B   (+ a known offset, the gamma term)

For ring (Patarasuk & Yuan 2009; Thakur, Rabenseifner & Gropp 2005)
``c_lat = 2(k-1)`` and ``c_bw = 2(k-1)/k`` (the row's ``coefficients``). Inside a
profile the ring's ``B`` is what a tier offers the ring, ``g_i(k)·b_i`` with
``g`` from :func:`simcli.comm.topology.tier_bandwidth` (1 for a ``per: device``
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
  ``alpha`` from ``B``: the one that matters less at that size is kept at the
  base profile's value and the other fitted (a profiler trace whose buckets are
  all one size). Two distinct points solve both exactly (no standard error). A
  parameter whose relative standard error exceeds 100%, or that sits on its
  bound (``alpha = 0``), is reported as not identified and kept at the base
  profile's value while the other one is refitted.
* **Hold-out**: never leaves the fit fewer than :data:`MIN_FIT_POINTS` points
  (all of them when there are fewer), and says when it held out fewer than asked.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from ..base.types import InputError, Tier
from ..base.units import fmt_bytes
from ..comm import registry, topology
from ..comm.textbook import ring_coefficients

__all__ = [
    "coefficients",
    "ring_coefficients",
    "LinkFit",
    "fit_alpha_beta",
    "fit_link",
    "outer_tier",
    "tier_scale",
    "rel_error",
    "holdout_mask",
    "holdout_split",
    "MIN_FIT_POINTS",
    "r2_log",
    "HUBER_C",
]

#: Huber's tuning constant (95% efficiency under normal errors; Huber 1964)
HUBER_C = 1.345
#: scale floor for the robust weights: below 0.5% relative residual nothing is an outlier
_SCALE_FLOOR = 0.005
#: a parameter whose standard error exceeds this fraction of its value is "not identified"
_MAX_REL_SE = 1.0


def coefficients(algorithm: str) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """k -> (c_lat(k), c_bw(k)) of t = c_lat·alpha + c_bw·n/B for an algorithm whose registry row gives them
    (simcli.comm.registry: ``AlgorithmSpec.coefficients``), else an InputError naming the ones that do."""
    spec = registry.SPECS.get(algorithm)
    if spec is None or spec.coefficients is None:
        known = ", ".join(a.name for a in registry.REGISTRY if a.coefficients is not None)
        raise InputError(f"--algorithm: cannot fit {algorithm!r}; calibration knows {known}")
    return spec.coefficients


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


#: a hold-out never leaves a fit fewer points than this: two parameters and one to spare (a residual to judge by)
MIN_FIT_POINTS = 3


def holdout_split(m: int, fraction: float, seed: int, *, keep: int = MIN_FIT_POINTS) -> tuple[np.ndarray, str | None]:
    """:func:`holdout_mask`, but never leaving the fit fewer than ``keep`` points (or all ``m`` when there are
    fewer): a trace of two or three bucket sizes is fitted on all of them rather than refused. Returns the mask
    and, when fewer points were held out than ``fraction`` asks, a note saying so."""
    mask = holdout_mask(m, fraction, seed)
    asked = int(mask.sum())
    allowed = max(0, m - keep)
    if asked <= allowed:
        return mask, None
    out = np.zeros(m, dtype=bool)
    out[np.flatnonzero(mask)[:allowed]] = True
    note = (
        f"--holdout {fraction:g}: {allowed} of the {m} point(s) held out, not {asked}: a fit keeps at least "
        f"{keep} points (two parameters and one to judge them by)"
    )
    return out, note


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
    A: np.ndarray, t: np.ndarray, offset: np.ndarray, *, fixed: Mapping[int, float], loss: str, max_iter: int = 50
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
    A: np.ndarray, t: np.ndarray, offset: np.ndarray, *, x: np.ndarray, w: np.ndarray, free: Sequence[int]
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


def r2_log(pred: np.ndarray, meas: np.ndarray) -> float:
    lp, lm = np.log(np.maximum(pred, 1e-300)), np.log(meas)
    ss_tot = float(np.sum((lm - lm.mean()) ** 2))
    if ss_tot == 0:
        return float("nan")
    return 1.0 - float(np.sum((lm - lp) ** 2)) / ss_tot


_NAMES = ("alpha", "bandwidth")


def _check_link_data(k: np.ndarray, n: np.ndarray, t: np.ndarray, *, algorithm: str, what: str) -> None:
    """The rows a link fit reads: a known algorithm, one shape, world sizes >= 2, positive times and sizes."""
    coefficients(algorithm)  # an InputError naming the algorithms calibration knows
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


def _base_value(j: int, base_alpha_s: float | None, base_bandwidth_Bps: float | None, *, what: str) -> float:
    """The base value kept for parameter ``j`` (0: alpha, 1: 1/B) where the data cannot identify it."""
    v = base_alpha_s if j == 0 else (None if base_bandwidth_Bps is None else 1.0 / base_bandwidth_Bps)
    if v is None:
        raise InputError(
            f"{what}: the data cannot identify {_NAMES[j]} and no base value was given; measure several message sizes"
        )
    return v


def _design_notes(
    Af: np.ndarray,
    sizes: tuple[float, ...],
    worlds: tuple[int, ...],
    *,
    base_alpha_s: float | None,
    base_bandwidth_Bps: float | None,
    one_point: bool,
    what: str,
) -> tuple[dict[int, float], list[str]]:
    """What the spread of sizes and world sizes lets the fit tell apart: the parameters held at their base value
    from the start (one size at one world size pins one of them) and the warnings that say so."""
    fixed: dict[int, float] = {}
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
        fixed[j_keep] = _base_value(j_keep, base_alpha_s, base_bandwidth_Bps, what=what)
        share = (bw_share if j_keep == 1 else lat_share) / (lat_share + bw_share)
        return fixed, [
            f"one message size and one world size only ({fmt_bytes(sizes[0])} at k = {worlds[0]}) pin one "
            "parameter: "
            f"{_NAMES[j_keep]} kept at the base value ({share:.0%} of the base profile's time at this size), "
            f"{_NAMES[1 - j_keep]} fitted{' (one point: no standard error)' if one_point else ''}; "
            "measure a second size to fit both"
        ]
    if len(sizes) == 1:
        return fixed, [
            f"one message size only ({sizes[0]:.0f} bytes): alpha and B are told apart only "
            "through the world sizes; measure several sizes"
        ]
    if len(worlds) == 1:
        return fixed, [
            f"one world size only (k={worlds[0]}): alpha and B describe this k; "
            "measure several world sizes to describe the link"
        ]
    return fixed, []


def _identification_problems(
    x: np.ndarray, se: dict[int, float | None], free: list[int], *, exact: bool
) -> list[tuple[int, str]]:
    """The free parameters the fit does not identify, each with the reason: alpha at its bound 0, a singular
    design, a standard error above ``_MAX_REL_SE`` of the value (none where the points solve it exactly)."""
    problems = []
    for j in free:
        sej = se.get(j)
        if j == 0 and x[0] <= 0:
            problems.append((j, "alpha is at its bound 0 (the smallest sizes do not resolve a latency)"))
        elif exact:
            continue
        elif sej is None:
            problems.append((j, f"{_NAMES[j]} is not identified (the design is singular)"))
        elif sej > _MAX_REL_SE * abs(x[j]):
            problems.append(
                (
                    j,
                    f"{_NAMES[j]} is not identified by these data (standard error {sej / abs(x[j]):.0%} of the value)",
                )
            )
    return problems


def _fit_identified(
    Af: np.ndarray,
    tf: np.ndarray,
    of: np.ndarray,
    *,
    fixed: dict[int, float],
    loss: str,
    points: int,
    base_alpha_s: float | None,
    base_bandwidth_Bps: float | None,
    warnings: list[str],
    sizes: tuple[float, ...],
    worlds: tuple[int, ...],
    what: str,
) -> tuple[np.ndarray, np.ndarray, int, dict[int, float | None]]:
    """The IRLS fit, refitted at most twice with a parameter the data do not identify held at its base value
    (``fixed`` and ``warnings`` updated in place); returns (x, the weights, the iterations, standard errors)."""
    for _ in range(3):  # refit at most twice when a parameter turns out not to be identified
        x, w, iters = _irls(Af, tf, of, fixed=fixed, loss=loss)
        if x[1] <= 0 and 1 not in fixed:
            raise InputError(
                f"{what}: the fit gives infinite bandwidth (the times do not grow with the size); "
                "check the data, or measure larger sizes"
            )
        free = [j for j in range(2) if j not in fixed]
        cov = _covariance(Af, tf, of, x=x, w=w, free=free)
        se = {j: (math.sqrt(max(cov[i, i], 0.0)) if cov is not None else None) for i, j in enumerate(free)}
        # as many distinct points as free parameters (and they tell them apart): solved exactly, no standard error
        exact = points == len(free) and np.linalg.matrix_rank(Af[:, free] / tf[:, None]) == len(free)
        problems = _identification_problems(x, se, free, exact=exact)
        if not problems:
            if exact and len(free) == 2:
                warnings.append(
                    f"two points ({' and '.join(fmt_bytes(v) for v in sizes)}"
                    f"{'' if len(worlds) == 1 else ' at k = ' + ', '.join(map(str, worlds))}) for two parameters: "
                    "alpha and B solved exactly from them, with no standard error and no residual to check the "
                    "model by; measure a third size for both"
                )
            break
        j, msg = problems[0]
        base = base_alpha_s if j == 0 else base_bandwidth_Bps
        if len(free) == 1 or base is None:  # nothing left to hold fixed: report it, with the caveat
            warnings.append(msg + "; reported as fitted, treat it with care")
            break
        fixed[j] = _base_value(j, base_alpha_s, base_bandwidth_Bps, what=what)
        warnings.append(msg + "; kept at the base value")
    return x, w, iters, se


def fit_alpha_beta(
    k: np.ndarray,
    n: np.ndarray,
    t: np.ndarray,
    *,
    algorithm: str,
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
    _check_link_data(k, n, t, algorithm=algorithm, what=what)
    g = np.ones(k.shape) if bw_scale is None else np.asarray(bw_scale, dtype=np.float64)
    off = np.zeros(k.shape) if offset is None else np.asarray(offset, dtype=np.float64)
    c_lat, c_bw = coefficients(algorithm)(k)
    A = np.column_stack([c_lat, c_bw * n / g])

    test, note = holdout_split(len(t), holdout, seed)
    fit = ~test
    Af, tf, of = A[fit], t[fit], off[fit]
    sizes = tuple(float(s) for s in np.unique(n[fit]))
    worlds = tuple(int(x) for x in np.unique(k[fit]))
    #: distinct (k, n) points the fit sees: a trace's buckets are one row per size already
    points = len({(int(a), float(b)) for a, b in zip(k[fit], n[fit])})
    fixed, notes = _design_notes(
        Af,
        sizes,
        worlds,
        base_alpha_s=base_alpha_s,
        base_bandwidth_Bps=base_bandwidth_Bps,
        one_point=len(tf) == 1,
        what=what,
    )
    warnings: list[str] = ([note] if note else []) + notes
    x, w, iters, se = _fit_identified(
        Af,
        tf,
        of,
        fixed=fixed,
        loss=loss,
        points=points,
        base_alpha_s=base_alpha_s,
        base_bandwidth_Bps=base_bandwidth_Bps,
        warnings=warnings,
        sizes=sizes,
        worlds=worlds,
        what=what,
    )

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
        r2_log=r2_log(pred[fit], t[fit]),
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

    unit = list(network)
    unit[tier] = dataclasses.replace(network[tier], bandwidth_Bps=1.0, efficiency=1.0)
    return topology.tier_bandwidth(unit, np.asarray(k, dtype=np.int64))[tier]


def fit_link(
    network: Sequence[Tier],
    tier: int,
    k: np.ndarray,
    *,
    n: np.ndarray,
    t: np.ndarray,
    algorithm: str,
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
