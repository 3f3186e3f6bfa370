"""Fit NCCL's constants to measurements: per-tier hop latency and effective bandwidth that make NCCL's model
(:mod:`simcli.comm.nccl`) match a measured all-reduce curve, NCCL's own choice priced at each size."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.types import InputError
from ..comm import collectives
from .fitting import holdout_split

__all__ = ["NcclFit", "fit_nccl"]


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
    *,
    k: np.ndarray,
    n: np.ndarray,
    algorithm: str,
    gpus: np.ndarray | None = None,
) -> np.ndarray:
    """``gpus``: per point, the GPUs one thread launched on (nccl-tests' -g; None: one per process)."""

    net = tuple(
        dataclasses.replace(t, latency_s=float(a), bandwidth_Bps=float(b), efficiency=1.0)
        for t, a, b in zip(profile.network, lat, bw)
    )
    prof = dataclasses.replace(profile, network=net)
    return collectives.measured_allreduce(prof, algorithm, k, nbytes=n, protocol=None, gpus=gpus)


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
            for d in _directions(free):
                for sign in (1.0, -1.0):
                    y = x + sign * step * d
                    v = loss(y)
                    if v < best - 1e-12:
                        x, best, improved = y, v, True
                        break
    return x


def _directions(free: np.ndarray) -> list[np.ndarray]:
    """The moves of the search: each free coordinate alone, then each pair of them together and against each
    other at slopes 1, 1/2 and 2 (a latency and a bandwidth trade along a bent valley, which moves along one axis
    at a time cross only in tiny steps: under 2.21.5's Ring/LL factor a trace's small bucket runs LL at NCCL's LL
    cap, and a 2-size trace's fit stopped 3% off its own model's times before these moves)."""
    idx = np.flatnonzero(free)
    out = []
    for j in idx:
        e = np.zeros(free.shape)
        e[j] = 1.0
        out.append(e)
    for a in range(len(idx)):
        for b in range(a + 1, len(idx)):
            for wa, wb in ((1.0, 1.0), (1.0, -1.0), (1.0, 0.5), (1.0, -0.5), (0.5, 1.0), (0.5, -1.0)):
                e = np.zeros(free.shape)
                e[idx[a]], e[idx[b]] = wa, wb
                out.append(e)
    return out


#: the multipliers of the base values a fit of one or two values also starts from (a coarse grid, log 2 steps)
_GRID = np.log(2.0 ** np.arange(-3, 4))


def _start_and_descend(loss: Any, x0: np.ndarray, free: np.ndarray) -> np.ndarray:
    """:func:`_descend` from the base values and, when one or two values are free, also from the four lowest
    points of a coarse grid around them (x 1/8 .. x 8). NCCL's cost bends the valley between a latency and a
    bandwidth, and a coordinate search from the base values alone can stop in it far from the minimum (two
    bucket sizes of a trace pin both values, but only from a start in the right basin). The lowest end wins."""
    best = _descend(loss, x0, free)
    idx = np.flatnonzero(free)
    if idx.size > 2:
        return best
    grid = np.array(np.meshgrid(*([_GRID] * idx.size))).reshape(idx.size, -1).T
    starts = []
    for g in grid:
        y = x0.copy()
        y[idx] += g
        starts.append((loss(y), tuple(y)))
    for _, y in sorted(starts)[:4]:  # the valley can hold more than one low start: descend from the best four
        x1 = _descend(loss, np.array(y), free)
        if loss(x1) < loss(best) - 1e-12:
            best = x1
    return best


def _at(gpus: np.ndarray | None, sel: np.ndarray) -> np.ndarray | None:
    return None if gpus is None else gpus[sel]


def fit_nccl(
    profile: Any,
    k: np.ndarray,
    n: np.ndarray,
    *,
    t: np.ndarray,
    algorithm: str,
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
    if t.size == 0:
        raise InputError(f"{what}: no measurements to fit (need all-reduce rows with world_size >= 2)")
    mask, note = holdout_split(len(t), holdout, seed)
    fit_i = ~mask
    base_lat = np.array([x.latency_s for x in net])
    base_bw = np.array([x.effective_Bps for x in net])
    x0 = np.log(np.concatenate([base_lat, base_bw]))
    # identified: changing the value by 20% moves some fitted prediction by at least 2%
    ref = np.log(
        _nccl_predict(profile, base_lat, base_bw, k=k[fit_i], n=n[fit_i], algorithm=algorithm, gpus=_at(gpus, fit_i))
    )
    influence = np.zeros(2 * nt)
    for j in range(2 * nt):
        for step in (np.log(1.2), -np.log(1.2)):  # both ways: a bandwidth may only matter through a minimum
            y = x0.copy()
            y[j] += step
            moved = (
                np.log(
                    _nccl_predict(
                        profile,
                        np.exp(y[:nt]),
                        np.exp(y[nt:]),
                        k=k[fit_i],
                        n=n[fit_i],
                        algorithm=algorithm,
                        gpus=_at(gpus, fit_i),
                    )
                )
                - ref
            )
            influence[j] = max(influence[j], float(np.max(np.abs(moved))))
    free = influence >= 0.02
    warnings: list[str] = [note] if note else []
    # d distinct points pin at most d values: keep the d that move the predictions most (a trace whose buckets
    # are one size fits the bandwidth that carries it), the others at the base profile's
    g_fit = np.ones(int(fit_i.sum())) if gpus is None else gpus[fit_i]
    points = len(set(zip(k[fit_i].tolist(), n[fit_i].tolist(), np.asarray(g_fit).tolist())))
    if int(free.sum()) > points:
        order = sorted(np.flatnonzero(free), key=lambda j: -influence[j])
        free[:] = False
        free[order[:points]] = True
        label = [f"{x.name} latency" for x in net] + [f"{x.name} bandwidth" for x in net]
        kept = [label[j] for j in order[points:]]
        warnings.append(
            f"{points} distinct point(s) pin at most {points} value(s): fitted "
            f"{', '.join(label[j] for j in order[:points])} "
            f"(the one(s) the times depend on most); kept at the base profile's: {', '.join(kept)}"
            + ("; measure a second size to fit more" if points == 1 else "")
        )
    lat_free, bw_free = free[:nt], free[nt:]
    if not free.any():
        warnings.append("no tier's latency or bandwidth is identified by these sizes and world sizes: nothing fitted")

    def make_loss(sel: np.ndarray):
        def loss(x: np.ndarray) -> float:
            p = _nccl_predict(
                profile, np.exp(x[:nt]), np.exp(x[nt:]), k=k[sel], n=n[sel], algorithm=algorithm, gpus=_at(gpus, sel)
            )
            return float(np.mean(np.log(p / t[sel]) ** 2))

        return loss

    x = _start_and_descend(make_loss(fit_i), x0, free) if free.any() else x0
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
    pred = _nccl_predict(profile, lat, bw, k=k, n=n, algorithm=algorithm, gpus=gpus)
    rel = np.abs(pred / t - 1.0)
    lt = np.log(t[fit_i])
    ss_tot = float(np.sum((lt - lt.mean()) ** 2))
    r2 = 1.0 - float(np.sum((np.log(pred[fit_i]) - lt) ** 2)) / ss_tot if ss_tot > 0 else float("nan")

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
