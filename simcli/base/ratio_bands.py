"""A measured error model's band, one home for both: the p10-p90 of r = predicted / measured over the validated rows of
a kind, read with each cluster's offset drawn, backing off to coarser groupings, the widest band of the neighbours
where a kind has no row of its own (simcli.comm.bands: a collective against nccl-tests curves; simcli.step.errors: a
step against training series).

A row belongs to a **group** (a published curve, a training series: one cluster) whose rows share an offset (its
framework, fabric, release: what the profile gets wrong about it): log r = offset of the group + the row's
residual. A band is the p10-p90 of every sum of an offset drawn from the groups a new cluster may be like and a
residual of the kind (:func:`predictive`). Reading the residuals alone (each group's offset fixed) covers fewer
held-out rows (docs/nccl.md#how-sure).

Pure numpy; no ``np.quantile``, ``np.median`` or ``np.unique`` (their first calls import ``numpy.ma``, a start-up
cost).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import numpy as np

__all__ = [
    "QUANTILES",
    "RatioBand",
    "quantile",
    "sorted_labels",
    "count_labels",
    "predictive",
    "backed_off",
    "widest",
    "leave_one_out",
]

#: the band's ends: the 10th and 90th percentile of r (linear interpolation, numpy's default)
QUANTILES = (0.1, 0.9)


def quantile(x: np.ndarray, q: float) -> float:
    """numpy's default (linear) quantile of a 1-d array, by hand: ``np.quantile`` imports ``numpy.ma``."""
    s = np.sort(np.asarray(x, dtype=np.float64))
    h = (s.size - 1) * q
    lo = int(math.floor(h))
    hi = min(lo + 1, s.size - 1)
    return float(s[lo] + (h - lo) * (s[hi] - s[lo]))


def sorted_labels(labels: np.ndarray) -> list[str]:
    """The distinct labels, sorted (``np.unique`` imports ``numpy.ma``)."""
    return sorted(set(np.asarray(labels, dtype=str).tolist()))


def count_labels(labels: np.ndarray) -> int:
    return len(set(np.asarray(labels, dtype=str).tolist()))


@dataclass(frozen=True)
class RatioBand:
    """The p10 and p90 of r = predicted / measured that one kind's band is read from, and what they stand on."""

    p10: float
    p90: float
    rows: int  #: the validated rows the quantiles are taken over (0: the kind has none)
    groups: int  #: the groups (curves, series) they come from
    basis: str  #: in words: the grouping read, or the neighbours whose widest band this is
    measured: bool  #: False where the kind has no validated row
    unit: str = "points"  #: what a row is called in words
    group_unit: str = "curves"  #: what a group is called in words

    @property
    def lo(self) -> float:
        """The low end of the ratio band, widened to hold 1 (the prediction itself)."""
        return min(self.p10, 1.0)

    @property
    def hi(self) -> float:
        return max(self.p90, 1.0)

    def words(self) -> str:
        """What the band stands on, for a record or a table."""
        if not self.measured or not self.rows:
            return self.basis
        return f"p10-p90 of {self.rows} {self.unit} of {self.groups} {self.group_unit}: {self.basis}"

    def holds(self, r: Any) -> Any:
        """Whether each ratio lies inside the (widened) band."""
        return (np.asarray(r) >= self.lo) & (np.asarray(r) <= self.hi)


def predictive(
    ratio: np.ndarray, labels: np.ndarray, group: np.ndarray, offsets_from: np.ndarray
) -> tuple[np.ndarray, int]:
    """Every sum of a group's offset (the median log r of its rows in ``offsets_from | group``) drawn from the groups
    of ``offsets_from`` (all where it is empty) and a residual of ``group`` (a row's log r less its own group's
    offset), as ratios; and how many offsets were drawn."""
    logr = np.log(ratio)
    m = offsets_from | group
    offsets = {s: quantile(logr[m & (labels == s)], 0.5) for s in sorted_labels(labels[m])}
    idx = np.flatnonzero(group)
    resid = logr[idx] - np.array([offsets[str(s)] for s in labels[idx]])
    drawn = np.array([offsets[s] for s in sorted_labels(labels[offsets_from])])
    if not drawn.size:
        drawn = np.array(list(offsets.values()))
    return np.exp(drawn[:, None] + resid[None, :]).ravel(), drawn.size


def backed_off(
    ratio: np.ndarray,
    labels: np.ndarray,
    masks: Sequence[np.ndarray],
    *,
    min_rows: int,
    min_groups: int,
    offsets_from: Callable[[int], np.ndarray],
    describe: Callable[[int, int], str],
    unit: str,
    group_unit: str,
) -> RatioBand | None:
    """The band read from the first of ``masks`` (finest first) with ``min_rows`` rows of ``min_groups`` groups; the
    offsets of level i drawn from ``offsets_from(i)``; ``describe(level, offsets)`` its words. None where none has."""
    for level, m in enumerate(masks):
        rows, groups = int(m.sum()), count_labels(labels[m])
        if rows >= min_rows and groups >= min_groups:
            r, n_off = predictive(ratio, labels, m, offsets_from(level))
            lo, hi = quantile(r, QUANTILES[0]), quantile(r, QUANTILES[1])
            return RatioBand(lo, hi, rows, groups, describe(level, n_off), True, unit, group_unit)
    return None


def widest(bands: Sequence[RatioBand], basis: str, *, measured: bool = False) -> RatioBand:
    """The lowest p10 and the highest p90 of ``bands``: what a kind with no (or too little) evidence of its own
    takes from its neighbours, never a narrow default."""
    first = bands[0]
    if measured:
        return RatioBand(
            min(b.p10 for b in bands),
            max(b.p90 for b in bands),
            first.rows,
            first.groups,
            basis,
            True,
            first.unit,
            first.group_unit,
        )
    return RatioBand(
        min(b.p10 for b in bands), max(b.p90 for b in bands), 0, 0, basis, False, first.unit, first.group_unit
    )


class _Corpus(Protocol):
    @property
    def ratio(self) -> np.ndarray: ...

    @property
    def labels(self) -> np.ndarray: ...

    def without(self, label: str) -> Any: ...

    def kind(self, i: int) -> Any: ...


def leave_one_out(corpus: _Corpus, band: Callable[[Any, Any], RatioBand]) -> np.ndarray:
    """For each row, whether its ratio lies inside the band (``band(corpus, kind)``) read without its own group."""
    inside = np.zeros(corpus.ratio.shape, dtype=bool)
    for s in sorted_labels(corpus.labels):
        rest = corpus.without(s)
        for i in np.flatnonzero(corpus.labels == s):
            inside[i] = bool(band(rest, corpus.kind(int(i))).holds(corpus.ratio[i]))
    return inside
