"""A measured error model's band, one home for both: the p10-p90 of r = predicted / measured over the validated rows of
a kind, read with each cluster's offset drawn, backing off to coarser groupings, the widest band of the neighbours
where a kind has no row of its own (simcli.comm.bands: a collective against nccl-tests curves; simcli.step.errors: a
step against training series).

A row belongs to a **group** (a published curve, a training series: one cluster) whose rows share an offset (its
framework, fabric, release: what the profile gets wrong about it): log r = offset of the group + the row's
residual. A band is the p10-p90 of every sum of an offset drawn from the groups a new cluster may be like and a
residual of the kind (:func:`predictive`), each group's offset first pulled toward the others by the noise of the
few rows it was read from (:func:`deconvolved`), so that the offsets drawn spread as the clusters do. Reading the
residuals alone (each group's offset fixed) covers fewer held-out rows (docs/nccl.md#how-sure).

Pure numpy; no ``np.quantile``, ``np.median`` or ``np.unique`` (their first calls import ``numpy.ma``, a start-up
cost).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterable, Protocol, Sequence, TypeVar

import numpy as np

__all__ = [
    "QUANTILES",
    "RatioBand",
    "quantile",
    "sorted_labels",
    "count_labels",
    "predictive",
    "deconvolved",
    "backed_off",
    "widest",
    "widest_of_neighbours",
    "Columns",
    "Grouping",
    "own_band",
    "kind_band",
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
    ratio: np.ndarray, labels: np.ndarray, group: np.ndarray, *, offsets_from: np.ndarray
) -> tuple[np.ndarray, int]:
    """Every sum of a group's offset drawn from the groups of ``offsets_from`` (all where it is empty) and a residual
    of ``group`` (a row's log r less its own group's offset), as ratios; and how many offsets were drawn.

    A group's offset is the median log r of its rows in ``offsets_from | group``: an estimate, read from n rows, of
    its cluster's offset, and the spread of those estimates is the clusters' spread **plus** each estimate's noise
    (its rows' own variance over n), which the residual drawn beside it carries a second time. So the offsets drawn
    are first pulled toward their median (:func:`deconvolved`) until their spread is the clusters' alone."""
    logr = np.log(ratio)
    m = offsets_from | group
    names = sorted_labels(labels[m])
    rows = {s: logr[m & (labels == s)] for s in names}
    offsets = {s: quantile(rows[s], 0.5) for s in names}
    idx = np.flatnonzero(group)
    resid = logr[idx] - np.array([offsets[str(s)] for s in labels[idx]])
    drawn_names = sorted_labels(labels[offsets_from]) or names
    drawn = deconvolved(
        np.array([offsets[s] for s in drawn_names]),
        [rows[s] - offsets[s] for s in drawn_names],
        np.concatenate([rows[s] - offsets[s] for s in names]),
        dof=sum(rows[s].size - 1 for s in names),
    )
    return np.exp(drawn[:, None] + resid[None, :]).ravel(), drawn.size


def deconvolved(offsets: np.ndarray, own: Sequence[np.ndarray], pooled: np.ndarray, *, dof: int) -> np.ndarray:
    """The estimated offsets pulled toward their median so that their spread is the clusters' (tau^2), not the
    clusters' plus each estimate's noise.

    Each estimate's noise is v = s^2 / n, s^2 its group's own rows' variance about their median (``own``: a row's log
    r less the offset), or, for a group of one row, the variance pooled over every group (``pooled`` over ``dof``
    degrees of freedom); tau^2 is the offsets' variance about their median less the mean v (the method of moments of
    a random-effects meta-analysis, DerSimonian and Laird 1986, Control. Clin. Trials 7:177; floored at 0); each
    offset moves toward the median by the factor sqrt(tau^2 / (tau^2 + v)), which leaves the drawn offsets with the
    clusters' variance (the variance-matched "constrained Bayes" estimate of a population of offsets, Louis 1984,
    JASA 79:393), where the shrunken posterior means (the factor without the root) would leave less."""
    if offsets.size < 2:
        return offsets
    s2 = float((pooled**2).sum() / dof) if dof > 0 else 0.0
    v = np.array([float((r**2).sum()) / (r.size - 1) / r.size if r.size > 1 else s2 for r in own])
    center = quantile(offsets, 0.5)
    tau2 = max(0.0, float(((offsets - center) ** 2).sum()) / (offsets.size - 1) - float(v.mean()))
    total = tau2 + v
    factor = np.sqrt(np.divide(tau2, total, out=np.ones_like(total), where=total > 0))
    return center + (offsets - center) * factor


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
            r, n_off = predictive(ratio, labels, m, offsets_from=offsets_from(level))
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


def widest_of_neighbours(
    own: RatioBand | None,
    levels: Iterable[tuple[Sequence[Any], str]],
    band_of: Callable[[Any], RatioBand | None],
    *,
    unmeasured: str,
    one: str,
) -> RatioBand | None:
    """A kind with no evidence of its own (``own`` None) or of one ``one`` (curve, series): the widest of the bands
    of the nearest neighbours that have one, and of its own. ``levels``: (neighbour kinds, their words), nearest
    first, read lazily; ``band_of``: a neighbour's band from its own rows (None: it has none)."""
    for near, words in levels:
        bands = [b for b in (band_of(nk) for nk in near) if b is not None]
        if not bands:
            continue
        what = f"the widest band of the {len(near)} measured kinds of {words}"
        if own is None:
            return widest(bands, f"{unmeasured}: {what}")
        return widest([own, *bands], f"{own.basis}; one {one} of this kind, so no narrower than {what}", measured=True)
    return own


class _Corpus(Protocol):
    @property
    def ratio(self) -> np.ndarray: ...

    @property
    def labels(self) -> np.ndarray: ...

    @property
    def cache(self) -> dict: ...

    def without(self, label: str) -> Any: ...

    def kind(self, i: int) -> Any: ...

    def masks(self, kind: Any) -> list[np.ndarray]: ...


C = TypeVar("C", bound="Columns")


@dataclass(frozen=True)
class Columns:
    """A corpus kept as columns: a frozen dataclass of arrays, one entry per row, the first the row's group, then
    a ``cache`` past the columns."""

    #: how each column is made from the rows' values, in the order of the fields
    COLUMNS: ClassVar[tuple[Callable[[Sequence[Any]], np.ndarray], ...]] = ()

    @classmethod
    def of(cls: type[C], rows: Sequence[Sequence[Any]]) -> C:
        """From rows of one value per column."""
        cols = list(zip(*rows)) if rows else [()] * len(cls.COLUMNS)
        return cls(*(make(c) for make, c in zip(cls.COLUMNS, cols)))

    @property
    def labels(self) -> np.ndarray:
        """The group of each row (the first column)."""
        return getattr(self, dataclasses.fields(self)[0].name)

    def without(self: C, label: str) -> C:
        """The corpus less one group's rows (leave one out), with a cache of its own."""
        keep = self.labels != label
        return type(self)(*(getattr(self, f.name)[keep] for f in dataclasses.fields(self)[: len(self.COLUMNS)]))


@dataclass(frozen=True)
class Grouping:
    """How an error model reads its kinds: the rows and groups a grouping needs, and their names in words."""

    min_rows: int  #: a grouping is read only where it has this many rows ...
    min_groups: int  #: ... from this many groups
    unit: str  #: rows in words ("points", "rows")
    group_unit: str  #: groups in words ("curves", "series")
    one: str  #: one group in words ("curve", "series")
    unmeasured: str  #: how the words of a band of a kind with no row begin


def own_band(
    corpus: _Corpus,
    kind: tuple,
    masks: Sequence[np.ndarray],
    *,
    grouping: Grouping,
    offsets_from: Callable[[int], np.ndarray],
    words: Callable[[int], str],
    offsets: Callable[[int], str],
) -> RatioBand | None:
    """The band read from the kind's own grouping (``masks``, finest first: :func:`backed_off`), kept in
    ``corpus.cache``; None where the kind has no row. ``words(level)``: the grouping read, in words;
    ``offsets(n)``: where its n offsets were drawn from, in words."""
    own = int(masks[0].sum())
    if not own:
        return None
    key = ("own",) + kind
    if key not in corpus.cache:
        corpus.cache[key] = backed_off(
            corpus.ratio,
            corpus.labels,
            masks,
            min_rows=grouping.min_rows,
            min_groups=grouping.min_groups,
            offsets_from=offsets_from,
            describe=lambda level, n: (
                words(level) + ("" if level == 0 else f" (this kind: {own} {grouping.unit})") + offsets(n)
            ),
            unit=grouping.unit,
            group_unit=grouping.group_unit,
        )
    return corpus.cache[key]


def kind_band(
    corpus: _Corpus,
    kind: tuple,
    *,
    grouping: Grouping,
    own_of: Callable[[Any, Any, list[np.ndarray]], RatioBand | None],
    neighbours: Callable[[list[np.ndarray]], Iterable[tuple[Sequence[Any], str]]],
    empty: str,
) -> RatioBand:
    """The band of a kind, kept in ``corpus.cache``: its own (``own_of(corpus, kind, masks)``), or where it has no
    row or the rows of one group (one cluster: one draw of the kind's offset, which cannot narrow the kind below
    what its neighbours show) the widest band of its neighbours (``neighbours(masks)``: as
    :func:`widest_of_neighbours`' levels) and its own. ``empty``: the error where neither has a row."""
    if kind in corpus.cache:
        return corpus.cache[kind]
    masks = corpus.masks(kind)
    out = own_of(corpus, kind, masks)
    if out is None or count_labels(corpus.labels[masks[0]]) < grouping.min_groups:
        out = widest_of_neighbours(
            out,
            neighbours(masks),
            lambda nk: own_of(corpus, nk, corpus.masks(nk)),
            unmeasured=grouping.unmeasured,
            one=grouping.one,
        )
    if out is None:
        raise ValueError(empty)
    corpus.cache[kind] = out
    return out


def leave_one_out(corpus: _Corpus, band: Callable[[Any, Any], RatioBand]) -> np.ndarray:
    """For each row, whether its ratio lies inside the band (``band(corpus, kind)``) read without its own group."""
    inside = np.zeros(corpus.ratio.shape, dtype=bool)
    for s in sorted_labels(corpus.labels):
        rest = corpus.without(s)
        for i in np.flatnonzero(corpus.labels == s):
            inside[i] = bool(band(rest, corpus.kind(int(i))).holds(corpus.ratio[i]))
    return inside
