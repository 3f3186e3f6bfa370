"""How far a step's prediction has been from training runs: the band of r = predicted / measured throughput per
device (relative to a series' smallest k) that the published DDP and FSDP scaling series say a run falls in.

The error model is measured, as simcli.comm.bands' is for a collective. :mod:`simcli.step.error_table` (written
by ``python benchmarks/validate_ddp.py --write-errors``, never by hand) holds every row of the published series
``validate_ddp.py`` and ``validate_fsdp.py`` price, as ``r`` with what decides its kind: the **strategy** (ddp,
fsdp, ...), the **scale** (the number of nodes the row spans, in :data:`NODE_BANDS`) and the **base** (how the
step at the series' smallest k was known: "measured" from the published throughput, or "mfu" from a FLOP model;
every published row today is "measured").

A series is one cluster: its rows share an offset (its framework, its fabric, what the profile gets wrong about
it), log r = offset of the series + the row's residual. The band of a kind is the p10-p90 of every sum of an
offset drawn from the series of its strategy and base and a residual of its grouping (:func:`ratio_band`), backing
off down :data:`LEVELS` where a grouping has fewer than :data:`MIN_ROWS` rows or :data:`MIN_SERIES` series, widened
to hold 1. A kind with no row at all takes the widest band of its neighbours (the measured kinds of the same node
band, else every measured kind): never a narrow default. docs/model.md#measured-against-training-runs says what
leaving one series out found (:func:`leave_one_out`, ``benchmarks/validate_bands.py``).

Pure numpy; no ``np.quantile``, ``np.median`` or ``np.unique`` (their first calls import ``numpy.ma``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..base.ranges import sorted_unique
from ..comm.bands import quantile

__all__ = [
    "NODE_BANDS",
    "QUANTILES",
    "MIN_ROWS",
    "MIN_SERIES",
    "LEVELS",
    "UNMEASURED",
    "Corpus",
    "RatioBand",
    "node_band",
    "step_kind",
    "ratio_band",
    "published",
    "leave_one_out",
    "kind_words",
]

#: the scale bands: label and the most nodes a row may span (one node, 2-8, more)
NODE_BANDS = (("one node", 1), ("2-8 nodes", 8), ("> 8 nodes", 1 << 62))
#: the band's ends: the 10th and 90th percentile of r (linear interpolation, numpy's default)
QUANTILES = (0.1, 0.9)
#: a grouping is read only where it has this many rows ...
MIN_ROWS = 8
#: ... from this many series (a series' rows share its offset: one series is one sample of it)
MIN_SERIES = 2
#: the groupings, finest first: a kind backs off down this list to the first with MIN_ROWS and MIN_SERIES
LEVELS = (("strategy", "base", "nodes"), ("strategy", "base"), ("base",), ())
#: the LEVELS entry a series' offset is read from (its strategy and base, any scale)
OFFSET_LEVEL = 1
#: how the words of a band of a kind with no published row begin
UNMEASURED = "no published training row of this kind"

Kind = tuple[str, str, int]


def node_band(nodes: Any) -> np.ndarray:
    """The index into :data:`NODE_BANDS` of each node count."""
    edges = np.array([hi for _, hi in NODE_BANDS[:-1]])
    return np.searchsorted(edges, np.asarray(nodes, dtype=np.int64), side="left")


def step_kind(strategy: str, base: str, devices: int, *, per_node: int) -> Kind:
    """The kind of a step over ``devices`` devices of ``per_node`` a node (nodes spanned: rounded up)."""
    nodes = -(-int(devices) // max(int(per_node), 1))
    return (str(strategy), str(base), int(node_band(nodes)))


def kind_words(kind: Kind, level: int = 0) -> str:
    strategy, base, band = kind
    words = {"strategy": strategy, "base": f"base {base}", "nodes": NODE_BANDS[band][0]}
    return ", ".join(words[w] for w in LEVELS[level]) or "every row"


@dataclass(frozen=True)
class RatioBand:
    """The p10 and p90 of r = predicted / measured that one kind's band is read from, and what they stand on."""

    p10: float
    p90: float
    rows: int  #: the published rows the quantiles are taken over (0: the kind has none)
    series: int
    basis: str  #: in words: the grouping read, or the neighbours whose widest band this is
    measured: bool  #: False where the kind has no published row

    @property
    def lo(self) -> float:
        """The low end, widened to hold 1 (the prediction itself)."""
        return min(self.p10, 1.0)

    @property
    def hi(self) -> float:
        return max(self.p90, 1.0)

    def words(self) -> str:
        if not self.measured:
            return self.basis
        return f"p10-p90 of {self.rows} rows of {self.series} series: {self.basis}"

    def holds(self, r: Any) -> Any:
        return (np.asarray(r) >= self.lo) & (np.asarray(r) <= self.hi)


@dataclass(frozen=True)
class Corpus:
    """Validated rows: one entry per row, each a series label, its kind and its ratio."""

    series: np.ndarray
    strategy: np.ndarray
    base: np.ndarray
    band: np.ndarray
    ratio: np.ndarray
    cache: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, rows: Sequence[Sequence[Any]]) -> "Corpus":
        """From rows ``(series, strategy, base, nodes, ratio)``."""
        cols = list(zip(*rows)) if rows else [()] * 5
        return cls(
            np.array(cols[0], dtype=object),
            np.array(cols[1], dtype=object),
            np.array(cols[2], dtype=object),
            node_band(np.array(cols[3], dtype=np.int64)),
            np.array(cols[4], dtype=np.float64),
        )

    def without(self, series: str) -> "Corpus":
        keep = self.series != series
        return Corpus(self.series[keep], self.strategy[keep], self.base[keep], self.band[keep], self.ratio[keep])

    def kind(self, i: int) -> Kind:
        return (str(self.strategy[i]), str(self.base[i]), int(self.band[i]))

    def masks(self, kind: Kind) -> list[np.ndarray]:
        """One mask per :data:`LEVELS` entry: the rows in the kind's grouping at that level."""
        strategy, base, band = kind
        m_base = self.base == base
        m_strategy = m_base & (self.strategy == strategy)
        return [m_strategy & (self.band == band), m_strategy, m_base, np.ones(self.ratio.shape, bool)]


def _count(labels: np.ndarray) -> int:
    return int(sorted_unique([np.asarray(labels, dtype=str)]).size) if labels.size else 0


def _predictive(corpus: Corpus, group: np.ndarray, offsets_from: np.ndarray) -> tuple[np.ndarray, int]:
    """Every sum of a series' offset (the median log r of its rows in ``offsets_from``) and a residual of
    ``group`` (a row's log r less its own series' offset), as ratios; and how many offsets there were."""
    logr = np.log(corpus.ratio)
    m = offsets_from | group
    offsets: dict[str, float] = {}
    for s in sorted_unique([np.asarray(corpus.series[m], dtype=str)]).tolist():
        offsets[s] = quantile(logr[m & (corpus.series == s)], 0.5)  # np.median imports numpy.ma
    idx = np.flatnonzero(group)
    resid = logr[idx] - np.array([offsets[str(s)] for s in corpus.series[idx]])
    drawn = np.array([offsets[s] for s in sorted_unique([np.asarray(corpus.series[offsets_from], dtype=str)]).tolist()])
    if not drawn.size:
        drawn = np.array(list(offsets.values()))
    return np.exp(drawn[:, None] + resid[None, :]).ravel(), drawn.size


def ratio_band(corpus: Corpus, kind: Kind) -> RatioBand:
    """The ratio band of a kind ``(strategy, base, node band index)``: see the module."""
    if kind in corpus.cache:
        return corpus.cache[kind]
    masks = corpus.masks(kind)
    own = int(masks[0].sum())
    out = None
    if own:
        for level, m in enumerate(masks):
            rows, series = int(m.sum()), _count(corpus.series[m])
            if rows >= MIN_ROWS and series >= MIN_SERIES:
                r, n_off = _predictive(corpus, m, masks[OFFSET_LEVEL] if level <= OFFSET_LEVEL else m)
                what = kind_words(kind, level) + ("" if level == 0 else f" (this kind: {own} rows)")
                what += f"; a cluster's offset from {n_off} series"
                out = RatioBand(quantile(r, QUANTILES[0]), quantile(r, QUANTILES[1]), rows, series, what, True)
                break
    else:
        same_scale = corpus.band == kind[2]
        for near_mask, words in ((same_scale, NODE_BANDS[kind[2]][0]), (np.ones(same_scale.shape, bool), "any scale")):
            if not near_mask.any():
                continue
            near = sorted({corpus.kind(i) for i in np.flatnonzero(near_mask)})
            bands = [ratio_band(corpus, nk) for nk in near]
            out = RatioBand(
                min(b.p10 for b in bands),
                max(b.p90 for b in bands),
                0,
                0,
                f"{UNMEASURED}: the widest band of the {len(near)} measured kinds of {words}",
                False,
            )
            break
    if out is None:
        raise ValueError("no validated row to read a band from (simcli/step/error_table.py is empty)")
    corpus.cache[kind] = out
    return out


_PUBLISHED: list[Corpus] = []


def published() -> Corpus:
    """The validated rows of :mod:`simcli.step.error_table` (read once)."""
    if not _PUBLISHED:
        from .error_table import ROWS, SERIES

        _PUBLISHED.append(Corpus.of([(SERIES[r[0]][0], r[4], r[5], r[3], r[6]) for r in ROWS]))
    return _PUBLISHED[0]


def leave_one_out(corpus: Corpus) -> np.ndarray:
    """For each row, whether its ratio lies inside the band read without its own series' rows."""
    inside = np.zeros(corpus.ratio.shape, dtype=bool)
    for s in sorted_unique([np.asarray(corpus.series, dtype=str)]).tolist():
        rest = corpus.without(s)
        for i in np.flatnonzero(corpus.series == s):
            inside[i] = bool(ratio_band(rest, corpus.kind(int(i))).holds(corpus.ratio[i]))
    return inside
