"""σ (the slowest of k) and the per-update time fitted together on a scaling table (k, throughput, accum) (issue 22).

The table is one training run at several device counts, each row the samples per second at k devices with m micro-
steps of b samples per optimizer step (``accum``). simcli's step at a row is::

    T(k, m) = m · x · r_k(σ) + n_k · E_k(x · r_k(σ)) + u_k,     r_k(σ) = (1 + σ·m_k) / (1 + σ·m_k0)

with x the micro-step's compute as measured at the table's smallest k (k0: its wait for the slowest of k0 is in
it), E_k(c) simcli's exposed communication of one micro-step whose compute is c (n_k = m for the sharded
strategies, whose every micro-step communicates; 1 for ddp), and u_k the optimizer step, u_k = θ · w_k with w_k the
bytes it moves at k (params held x bytes per parameter, simcli.step.update: constant in k for ddp, 1/k for the
sharded strategies) and θ its seconds per byte. x is solved at k0 so that the first row is met exactly; σ and θ are
fitted by least squares on log(predicted / measured throughput) over the other rows.

Vectorised: E_k(c) is priced once, by one :func:`simcli.step.engine.simulate` call over every (k, c) of a grid of
micro-step times (the engine prices a vector of per-device batches at once), and interpolated; x(u) is read off the
monotone k0 step curve; the loss is then evaluated on a (σ, θ) grid with numpy broadcasting and refined by
Gauss-Newton, whose Jacobian gives the standard errors and the correlation of the two. When the rows cannot tell
them apart (the same accumulation in every row: a per-update time then shifts every row's step as a slower compute
would; or |correlation| > 0.95) the result says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..base.types import InputError
from ..step import straggler, strategies, update
from ..step.engine import simulate

__all__ = [
    "SpreadUpdateFit",
    "fit_spread_update",
    "table_predictor",
    "MAX_SPREAD",
    "UpdateBandwidthFit",
    "fit_update_bandwidth",
]

#: the largest spread searched
MAX_SPREAD = 0.5
#: |correlation| of σ and the update above which the two are reported as not told apart
CORRELATION_LIMIT = 0.95


@dataclass(frozen=True)
class SpreadUpdateFit:
    """σ and the per-update time u (at k0; u_k = θ·w_k at every k) fitted together, with standard errors."""

    spread: float
    update_s: float  #: the per-update time at k0
    seconds_per_byte: float  #: θ: u_k = θ x the bytes the optimizer step moves at k
    spread_se: float | None
    update_se: float | None
    correlation: float | None
    separable: bool
    k0: int
    rows: tuple[dict[str, float], ...]
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def update_bandwidth_Bps(self) -> float | None:
        """The memory bandwidth the fitted update implies (1/θ); None when the fit found no update time."""
        return 1.0 / self.seconds_per_byte if self.seconds_per_byte > 0 else None


def _exposed_table(sc: Any, ks: np.ndarray, b: float, *, grid: np.ndarray) -> np.ndarray:
    """E_k(c) for every k of ``ks`` (rows) and micro-step time c of ``grid`` (columns), in one simulate call:
    no spread, no update, one micro-step, the compute set through the per-device batch."""

    base = sc.replace(
        spread=0.0,
        update_time_s=0.0,
        accum=1,
        compute_time_s=1.0,
        compute_time_at_k=None,
        batch_per_device=max(1, int(round(b))),
        global_batch=None,
    )
    scale = base.batch  # compute = compute_time_s · micro_batch / batch = c
    devices = np.repeat(ks, grid.size)
    res = simulate(base, devices, micro_batch=np.tile(grid * scale, ks.size))
    return np.asarray(res.t_comm_exposed_s, dtype=np.float64).reshape(ks.size, grid.size)


def table_predictor(sc: Any, k: np.ndarray, thr: np.ndarray, *, m: np.ndarray, b: float) -> Any:
    """The vectorised prediction of a sorted (k, throughput, accum) table: predict(σ, u_k0) -> samples/s per row
    (broadcast over σ and u_k0), with the micro-step solved so that the first row is met; the first row's step;
    the bytes its optimizer step moves."""
    t_meas = k * b * m / thr  # the measured optimizer step of every row
    k0, m0, t0 = int(k[0]), int(m[0]), float(t_meas[0])
    sharded = strategies.SPECS[sc.strategy].timeline != "buckets"
    n_comm = m.astype(np.float64) if sharded else np.ones(k.size)

    # the bytes the optimizer step moves at each row's k (u_k = θ · w_k)
    w = update.params_held(
        sc.strategy, k, sc.workload.params, group=sc.shard_group, node_size=sc.profile.network[0].size
    )
    w = w * update.bytes_per_param(sc.optimizer, sc.update_extras)
    if not np.all(w > 0):
        w = np.ones(k.size)  # an optimizer that moves nothing: u constant in k
    w0 = float(w[0])

    # E_k(c) on a grid of micro-step times, one engine call; r_k(σ) <= 1 + σ·m_kmax bounds the c a row needs
    ks, inv = np.unique(k, return_inverse=True)
    c_hi = t0 / m0 * (1.0 + MAX_SPREAD * float(straggler.expected_max(int(ks.max())))) * 1.05
    grid = np.geomspace(c_hi * 1e-6, c_hi, 400)
    E = _exposed_table(sc, ks, b, grid=grid)[inv]  # rows x grid

    def exposed(i: np.ndarray, c: np.ndarray) -> np.ndarray:
        """E at rows i (broadcast) and compute c, linear in c between grid points."""
        cc = np.clip(c, 0.0, grid[-1])
        j = np.clip(np.searchsorted(grid, cc) - 1, 0, grid.size - 2)
        f = (cc - grid[j]) / (grid[j + 1] - grid[j])
        return E[i, j] * (1 - f) + E[i, j + 1] * f

    # x(u): m0·x + n0·E_k0(x) + u = t0, read off the monotone curve G(c) at k0
    G = m0 * grid + n_comm[0] * E[0]
    G = np.maximum.accumulate(G)
    mk = straggler.expected_max(k)
    mk0 = float(straggler.expected_max(k0))
    rows = np.arange(k.size)

    def predict(sigma: np.ndarray, upd: np.ndarray) -> np.ndarray:
        """Predicted samples/s for σ and the update at k0 (u_k = upd · w_k / w0), shape broadcast + (rows,)."""
        s = np.asarray(sigma, dtype=np.float64)[..., None]
        u0 = np.asarray(upd, dtype=np.float64)
        th = u0[..., None] / w0
        x = np.interp(t0 - u0, G, grid)[..., None]  # the micro-step that meets the first row
        r = (1.0 + s * mk) / (1.0 + s * mk0)
        c = x * r
        t = m * c + n_comm * exposed(np.broadcast_to(rows, c.shape), c) + th * w
        return k * b * m / t

    return predict, float(t0), w0


def fit_spread_update(
    sc: Any,
    k: Sequence[int] | np.ndarray,
    samples_per_s: Sequence[float] | np.ndarray,
    *,
    accum: Sequence[int] | np.ndarray,
    batch: float | None = None,
    what: str = "scaling",
) -> SpreadUpdateFit:
    """Fit σ in [0, 0.5] and the per-update time (θ ≥ 0, u_k0 up to 90% of the k0 step) to a (k, throughput,
    accum) table of the run ``sc`` describes (its profile, workload, strategy, overlap, grad dtype, optimizer and
    extras: they set the communication and the shape of u over k; its own spread and update are replaced)."""
    k = np.asarray(k, dtype=np.int64).ravel()
    thr = np.asarray(samples_per_s, dtype=np.float64).ravel()
    m = np.asarray(accum, dtype=np.int64).ravel()
    if not (k.size == thr.size == m.size):
        raise InputError(f"{what}: devices, samples_per_s and accum must have one value per row")
    bad = ~(np.isfinite(thr) & (thr > 0))
    if bad.any():
        row = int(np.argmax(bad))
        raise InputError(f"{what}: row {row + 1}: samples_per_s {thr[row]!r} must be a positive number")
    if np.any(m < 1):
        raise InputError(f"{what}: accum must be a whole number of micro-steps, at least 1")
    order = np.lexsort((m, k))
    k, thr, m = k[order], thr[order], m[order]
    if np.unique(k).size < 2 or k.size < 3:
        raise InputError(
            f"{what}: fitting the spread and the per-update time needs three rows or more at two or more device counts"
        )
    b = float(batch if batch is not None else sc.batch)
    predict, t0, w0 = table_predictor(sc, k, thr, m=m, b=b)
    k0 = int(k[0])
    rows = np.arange(k.size)
    others = rows[1:]
    lm = np.log(thr[others])

    def loss(sigma: np.ndarray, theta: np.ndarray) -> np.ndarray:
        p = predict(sigma, theta)[..., others]
        return np.sum((np.log(p) - lm) ** 2, axis=-1)

    th_hi = 0.9 * t0  # the update at k0: at most 90% of the first row's step
    # a coarse grid (σ linear, u_k0 geometric from 1e-6 of the step: the valley of a σ-u trade-off is narrow),
    # evaluated at once; then projected Gauss-Newton steps from its best cell, the better point kept each time
    sg = np.linspace(0.0, MAX_SPREAD, 101)
    th = np.concatenate([[0.0], np.geomspace(1e-6 * t0, th_hi, 240)])
    L = loss(sg[:, None], th[None, :])
    i, j = np.unravel_index(int(np.argmin(L)), L.shape)
    s_best, t_best, l_best = float(sg[i]), float(th[j]), float(L[i, j])

    def resid(s: float, t: float) -> np.ndarray:
        return np.log(predict(np.array(s), np.array(t))[others]) - lm

    def jacobian(s: float, t: float) -> np.ndarray:
        """d resid / d(σ, u_k0) by central differences (one-sided at the bounds)."""
        hs, ht = 1e-5, max(1e-6 * t0, 1e-4 * t)
        ds = (min(s + hs, MAX_SPREAD), max(s - hs, 0.0))
        dt = (min(t + ht, th_hi), max(t - ht, 0.0))
        return np.column_stack(
            [
                (resid(ds[0], t) - resid(ds[1], t)) / (ds[0] - ds[1]),
                (resid(s, dt[0]) - resid(s, dt[1])) / (dt[0] - dt[1]),
            ]
        )

    for _ in range(30):
        r = resid(s_best, t_best)
        J = jacobian(s_best, t_best)
        scale = np.array([1.0, t0])  # solve in (σ, u/t0): columns of one order
        Js = J * scale
        step = np.linalg.lstsq(Js.T @ Js + 1e-12 * np.eye(2), -Js.T @ r, rcond=None)[0] * scale
        moved = False
        for frac in (1.0, 0.5, 0.25, 0.1):
            s_new = float(np.clip(s_best + frac * step[0], 0.0, MAX_SPREAD))
            t_new = float(np.clip(t_best + frac * step[1], 0.0, th_hi))
            l_new = float(loss(np.array(s_new), np.array(t_new)))
            if l_new < l_best - 1e-15:
                s_best, t_best, l_best, moved = s_new, t_new, l_new, True
                break
        if not moved:
            break

    # Gauss-Newton standard errors from the Jacobian of the log residuals
    r0 = resid(s_best, t_best)
    J = jacobian(s_best, t_best)
    warnings: list[str] = []
    se_s = se_t = corr = None
    n = int(others.size)
    if n > 2:
        s2 = float(r0 @ r0) / (n - 2)
        scale = np.array([1.0, t0])
        jtj = (J * scale).T @ (J * scale)
        if np.linalg.cond(jtj) < 1e12:
            cov = np.linalg.inv(jtj) * s2 * np.outer(scale, scale)
            se_s, se_t = math.sqrt(max(cov[0, 0], 0.0)), math.sqrt(max(cov[1, 1], 0.0))
            d = math.sqrt(max(cov[0, 0] * cov[1, 1], 1e-300))
            corr = float(np.clip(cov[0, 1] / d, -1.0, 1.0))
        else:
            warnings.append("the spread and the per-update time are not identified by these rows (singular Jacobian)")
    else:
        warnings.append(f"{n} rows beyond the first for 2 unknowns: no standard errors")
    same_m = np.unique(m).size == 1
    separable = not same_m and corr is not None and abs(corr) <= CORRELATION_LIMIT
    if same_m:
        warnings.append(
            "the accumulation is the same in every row: a per-update time moves every row's step as a slower "
            "compute would, so the spread and the per-update time cannot be told apart; measure the same k with "
            "another --accum, or a fixed global batch (the accumulation falls as k grows)"
        )
    elif corr is not None and abs(corr) > CORRELATION_LIMIT:
        warnings.append(
            f"the spread and the per-update time cannot be told apart on these rows (correlation {corr:+.2f}): "
            "measure more device counts, or the same k with another accumulation"
        )
    if s_best >= MAX_SPREAD - 1e-9:
        warnings.append(f"the fit ran to the largest spread searched ({MAX_SPREAD}): the model misses more than this")
    p_none = predict(np.array(0.0), np.array(0.0))
    p_fit = predict(np.array(s_best), np.array(t_best))
    out_rows = tuple(
        {
            "devices": int(k[q]),
            "accum": int(m[q]),
            "measured": float(thr[q]),
            "predicted_before": float(p_none[q]),
            "predicted_after": float(p_fit[q]),
        }
        for q in range(k.size)
    )
    return SpreadUpdateFit(
        spread=s_best,
        update_s=t_best,
        seconds_per_byte=t_best / w0,
        spread_se=se_s,
        update_se=se_t,
        correlation=corr,
        separable=separable,
        k0=k0,
        rows=out_rows,
        warnings=tuple(warnings),
    )


@dataclass(frozen=True)
class UpdateBandwidthFit:
    """The memory bandwidth an optimizer step achieves, from timed optimizer steps (``bench step``'s t_update_s)."""

    bandwidth_Bps: float
    bandwidth_se: float | None
    n_rows: int
    #: per row: params, bytes per parameter, measured and predicted seconds
    rows: tuple[dict[str, float], ...]


def fit_update_bandwidth(
    params: Sequence[float] | np.ndarray,
    bytes_per_param: Sequence[float] | np.ndarray,
    t_update: Sequence[float] | np.ndarray,
    *,
    what: str = "step",
) -> UpdateBandwidthFit:
    """t_update = bytes moved / B, bytes moved = params x bytes per parameter: θ = 1/B by least squares on the
    relative error (weights 1/t²: each row counts alike whatever its size), through the origin; the standard error
    of B from θ's (delta method)."""
    w = np.asarray(params, dtype=np.float64) * np.asarray(bytes_per_param, dtype=np.float64)
    t = np.asarray(t_update, dtype=np.float64)
    ok = np.isfinite(t) & (t > 0) & np.isfinite(w) & (w > 0)
    if not ok.any():
        raise InputError(f"{what}: no row with a positive t_update_s and params: nothing to fit the update from")
    w, t = w[ok], t[ok]
    a = w / t  # minimise Σ (θ·w/t − 1)²
    theta = float(np.sum(a) / np.sum(a * a))
    se = None
    if w.size >= 2:
        r = theta * a - 1.0
        se_theta = math.sqrt(float(r @ r) / (w.size - 1) / float(a @ a))
        se = se_theta / theta**2
    rows = tuple(
        {"bytes": float(wi), "measured_s": float(ti), "predicted_s": float(theta * wi)} for wi, ti in zip(w, t)
    )
    return UpdateBandwidthFit(bandwidth_Bps=1.0 / theta, bandwidth_se=se, n_rows=int(w.size), rows=rows)
