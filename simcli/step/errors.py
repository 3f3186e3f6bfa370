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
from typing import Any, Iterator

import numpy as np

from ..base import ratio_bands as RB
from ..base.ratio_bands import QUANTILES, RatioBand
from .error_table import ROWS, SERIES

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
#: how the kinds are read: MIN_ROWS rows of MIN_SERIES series
GROUPING = RB.Grouping(MIN_ROWS, MIN_SERIES, unit="rows", group_unit="series", one="series", unmeasured=UNMEASURED)

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
class Corpus(RB.Columns):
    """Validated rows: one entry per row, each a series label, its kind and its ratio; ``of`` reads rows
    ``(series, strategy, base, nodes, ratio)``."""

    series: np.ndarray
    strategy: np.ndarray
    base: np.ndarray
    band: np.ndarray
    ratio: np.ndarray
    cache: dict = field(default_factory=dict, compare=False, repr=False)

    COLUMNS = (
        lambda c: np.array(c, dtype=object),
        lambda c: np.array(c, dtype=object),
        lambda c: np.array(c, dtype=object),
        lambda c: node_band(np.array(c, dtype=np.int64)),
        lambda c: np.array(c, dtype=np.float64),
    )

    def kind(self, i: int) -> Kind:
        return (str(self.strategy[i]), str(self.base[i]), int(self.band[i]))

    def masks(self, kind: Kind) -> list[np.ndarray]:
        """One mask per :data:`LEVELS` entry: the rows in the kind's grouping at that level."""
        strategy, base, band = kind
        m_base = self.base == base
        m_strategy = m_base & (self.strategy == strategy)
        return [m_strategy & (self.band == band), m_strategy, m_base, np.ones(self.ratio.shape, bool)]


def ratio_band(corpus: Corpus, kind: Kind) -> RatioBand:
    """The ratio band of a kind ``(strategy, base, node band index)``: see the module. A kind with no row, or the
    rows of one series, takes the widest band of the measured kinds of the same node band (else of any), each read
    from its own rows, and its own."""
    return RB.kind_band(
        corpus,
        kind,
        grouping=GROUPING,
        own_of=_own,
        neighbours=lambda masks: _neighbours(corpus, kind),
        empty="no validated row to read a band from (simcli/step/error_table.py is empty)",
    )


def _neighbours(corpus: Corpus, kind: Kind) -> Iterator[tuple[list[Kind], str]]:
    """The measured kinds of the same node band, then of any, with their words (lazily)."""
    same_scale = corpus.band == kind[2]
    for near_mask, words in ((same_scale, NODE_BANDS[kind[2]][0]), (np.ones(same_scale.shape, bool), "any scale")):
        yield sorted({corpus.kind(int(i)) for i in np.flatnonzero(near_mask)} - {kind}), words


def _own(corpus: Corpus, kind: Kind, masks: list[np.ndarray]) -> RatioBand | None:
    """The band read from the kind's own grouping, backing off down :data:`LEVELS`; None where it has no row."""
    return RB.own_band(
        corpus,
        kind,
        masks,
        grouping=GROUPING,
        offsets_from=lambda level: masks[OFFSET_LEVEL] if level <= OFFSET_LEVEL else masks[level],
        words=lambda level: kind_words(kind, level),
        offsets=lambda n: f"; a cluster's offset from {n} series",
    )


_PUBLISHED: list[Corpus] = []


def published() -> Corpus:
    """The validated rows of :mod:`simcli.step.error_table` (read once)."""
    if not _PUBLISHED:
        _PUBLISHED.append(Corpus.of([(SERIES[r[0]][0], r[4], r[5], r[3], r[6]) for r in ROWS]))
    return _PUBLISHED[0]


def leave_one_out(corpus: Corpus) -> np.ndarray:
    """For each row, whether its ratio lies inside the band read without its own series' rows."""
    return RB.leave_one_out(corpus, ratio_band)
