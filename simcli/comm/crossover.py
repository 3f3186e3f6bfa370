"""Where the fastest algorithm changes with the message size (``simcli algorithms``' crossover table)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..base.ranges import sorted_unique
from ..base.types import Tier
from .collectives import collective
from .registry import ALGORITHMS, REGISTRY

__all__ = ["affine_terms", "crossovers", "algorithm_names", "allreduce_times", "crossovers_numeric"]


def affine_terms(
    network: Sequence[Tier], k: np.ndarray, reduce_Bps: float | None = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every algorithm's cost as ``T(n) = L + s·n``: name -> (L seconds, s seconds per byte), over k.

    Exact: each cost above is affine in the message size (the step counts depend on k only).
    """
    k = np.asarray(k, dtype=np.int64)
    out = {}
    for name, f in ALGORITHMS.items():
        c = f(network, k, np.float64(1.0), reduce_Bps=reduce_Bps)
        out[name] = (np.asarray(c.latency, dtype=np.float64), np.asarray(c.bandwidth + c.reduction, dtype=np.float64))
    return out


def crossovers(
    network: Sequence[Tier], k: np.ndarray, n_lo: float, *, n_hi: float, reduce_Bps: float | None = None
) -> list[dict]:
    """Message sizes in [n_lo, n_hi] where the fastest algorithm changes, per k (the lower envelope of lines).

    One record per change: ``devices``, ``bytes`` (where the two costs are equal), ``from``, ``to``.
    Ties go to the earlier algorithm of :data:`ALGORITHMS`. A short Python loop per k (this is a report over a
    handful of k, not the engine).
    """
    k = np.asarray(k, dtype=np.int64)
    terms = affine_terms(network, k, reduce_Bps)
    names = list(terms)
    L = np.stack([terms[a][0] for a in names])
    S = np.stack([terms[a][1] for a in names])
    out = []
    for j, kj in enumerate(k.tolist()):
        lat, slope = L[:, j], S[:, j]
        cur = int(np.argmin(lat + slope * n_lo))
        x = n_lo
        while True:
            best, best_x = None, None
            for b in range(len(names)):
                if slope[b] < slope[cur]:
                    xb = (lat[b] - lat[cur]) / (slope[cur] - slope[b])
                    if xb > x and (best_x is None or xb < best_x):
                        best, best_x = b, xb
            if best is None or best_x is None or best_x > n_hi:
                break
            out.append({"devices": kj, "bytes": float(best_x), "from": names[cur], "to": names[best]})
            cur, x = best, best_x
    return out


def algorithm_names(profile: Any) -> list[str]:
    """The all-reduce algorithms to compare on a profile (``simcli algorithms``): NCCL's own (each with its best
    protocol) and the textbook/MPI ones on a profile that models NCCL; the textbook ones elsewhere."""
    if profile.library != "nccl":
        return list(ALGORITHMS)
    return [a.name for a in REGISTRY if a.name != "nccl" and "all_reduce" in a.collectives]


def allreduce_times(profile: Any, names: Sequence[str], k: np.ndarray, *, n: np.ndarray) -> np.ndarray:
    """All-reduce time of each named algorithm on ``profile``, stacked: (algorithms, ...broadcast(k, n))."""
    return np.stack(
        [
            np.broadcast_to(collective(profile, a, k, nbytes=n, protocol=None).time, np.broadcast(k, n).shape)
            for a in names
        ]
    )


def crossovers_numeric(
    profile: Any, names: Sequence[str], k: np.ndarray, *, n_lo: float, n_hi: float, points: int = 512, iters: int = 40
) -> list[dict]:
    """Where the fastest of ``names`` changes, per k, for costs that are not affine in n (NCCL's).

    A log-spaced scan of ``points`` sizes finds each change; a search on log n then narrows every change at once to
    where the winner changes (to 2^-``iters`` of the step in log n): where the two costs are equal, unless one of
    them jumps there (NCCL switching protocol or channel count). Each round prices 15 sizes inside every interval,
    one call per algorithm for all the intervals it takes part in, and keeps the sixteenth where the earlier
    algorithm last wins (16x narrower a round: iters/4 rounds). Same records as :func:`crossovers`.
    """
    k = np.asarray(k, dtype=np.int64)
    grid = np.geomspace(n_lo, n_hi, points)
    t = allreduce_times(profile, names, k[:, None], n=grid[None, :])
    win = np.argmin(t, axis=0)
    jj, ii = np.nonzero(win[:, 1:] != win[:, :-1])  # k-major, sizes ascending: the records' order
    if jj.size == 0:
        return []
    a, b = win[jj, ii], win[jj, ii + 1]
    lo, hi = np.log(grid[ii]), np.log(grid[ii + 1])
    kc = k[jj][:, None]
    frac = np.arange(1, 16) / 16.0
    for _ in range(-(-iters // 4)):
        x = lo[:, None] + (hi - lo)[:, None] * frac  # (changes, 15) points inside each interval
        ta, tb = np.empty(x.shape), np.empty(x.shape)
        for u in sorted_unique([a, b]):
            rows = (a == u) | (b == u)
            tu = np.broadcast_to(
                collective(profile, names[u], kc[rows], nbytes=np.exp(x[rows]), protocol=None).time, x[rows].shape
            )
            ta[rows & (a == u)] = tu[(a == u)[rows]]
            tb[rows & (b == u)] = tu[(b == u)[rows]]
        b_wins = ta > tb
        first = np.where(b_wins.any(axis=1), np.argmax(b_wins, axis=1), x.shape[1])  # the first point b wins
        new_lo = np.where(first > 0, x[np.arange(x.shape[0]), np.maximum(first - 1, 0)], lo)
        new_hi = np.where(first < x.shape[1], x[np.arange(x.shape[0]), np.minimum(first, x.shape[1] - 1)], hi)
        lo, hi = new_lo, new_hi
    n_star = np.exp(0.5 * (lo + hi))
    return [
        {"devices": int(k[j]), "bytes": float(n), "from": names[int(x)], "to": names[int(y)]}
        for j, n, x, y in zip(jj, n_star, a, b)
    ]
