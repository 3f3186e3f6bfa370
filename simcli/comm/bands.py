"""How sure a collective's time is: the band the published runs of the same kind say the measured time falls in.

The error model is measured, not assumed. :mod:`simcli.comm.error_table` (written by
``python benchmarks/validate_nccl.py --write-errors``, never by hand) holds every point of the published
nccl-tests all-reduce curves that ``validate_nccl.py`` prices, as ``r = t_pred / t_meas`` with what decides its
kind: the **transport** (the link kind of the widest tier the collective crosses: nvswitch, mnnvl, infiniband,
efa, ...), whether that tier is past NCCL's **node** (tier 1 and out; a multi-node NVLink domain is one NCCL
node), the **size band** (:data:`SIZE_BANDS`) and the **family** NCCL ran (ring, tree, nvls, nvls-tree).

For a predicted time ``t`` of a kind, the band is ``[t / p90(r), t / p10(r)]`` over the points of that kind
(:func:`ratio_band`), widened so that it holds ``t`` itself (the ratio band holds 1). Where a kind has fewer
than :data:`MIN_ROWS` points or fewer than :data:`MIN_CURVES` curves, the band is read from the next coarser
grouping of :data:`LEVELS` that has them. Where a kind has **no** point at all (a transport, family, collective or
library no published curve ran), the band says so and is the widest band of its neighbours: the lowest p10 and
highest p90 of the measured kinds of the same size band on the same side of NCCL's node boundary
(:data:`NEIGHBOURS`). docs/nccl.md#how-sure says why, and what
the leave-one-out check (:func:`leave_one_out`, ``benchmarks/validate_bands.py``) found.

Pure numpy; no ``np.quantile`` or ``np.unique`` (their first calls import ``numpy.ma``, a start-up cost).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..base import ratio_bands as RB
from ..base.ranges import sorted_unique
from ..base.ratio_bands import QUANTILES, RatioBand, quantile
from ..base.types import Tier
from ..base.units import parse
from .nccl import tier_kind
from .specs import PROTOCOLS
from .topology import tier_spanned

__all__ = [
    "SIZE_BANDS",
    "QUANTILES",
    "MIN_ROWS",
    "MIN_CURVES",
    "LEVELS",
    "NEIGHBOURS",
    "UNMEASURED",
    "Corpus",
    "RatioBand",
    "TimeBand",
    "size_band_index",
    "point_kinds",
    "quantile",
    "ratio_band",
    "time_band",
    "published",
    "curve_label",
    "leave_one_out",
    "Z80",
    "at_end",
    "fitted_tiers",
    "fit_covers",
]

#: the size bands the NCCL model is held to (issue 10; nccl-tests' power-of-two sizes): label, low, high, with
#: low < n <= high, so 0.5-64 MiB is everything between 256 KiB and 128 MiB (simcli.checks.validate reads them)
SIZE_BANDS = (
    ("<= 256 KiB", 0.0, 256.0 * 1024),
    ("0.5-64 MiB", 256.0 * 1024, 128.0 * 2**20 - 1),
    (">= 128 MiB", 128.0 * 2**20 - 1, math.inf),
)
#: a grouping is read only where it has this many points ...
MIN_ROWS = 8
#: ... from this many curves (the points of one curve share its cluster's offset: one curve is one sample of it)
MIN_CURVES = 2
#: the groupings, finest first: a kind backs off down this list to the first that has MIN_ROWS and MIN_CURVES
LEVELS = (
    ("transport", "nodes", "size", "family"),
    ("transport", "nodes", "size"),
    ("nodes", "size"),
    ("size",),
    (),
)
#: the LEVELS entry a cluster's offset is read from: the size band, any transport (simcli.base.ratio_bands.predictive)
SIZE_LEVEL = 3
#: where a kind has no point, its neighbours are the measured kinds of this grouping of LEVELS (the same size
#: band on the same side of NCCL's node boundary, any transport or family), else of the next coarser one
NEIGHBOURS = 2
#: how a band of a kind with no published point begins its words (RatioBand.basis)
UNMEASURED = "no published point of this kind"
#: how the kinds are read: MIN_ROWS points of MIN_CURVES curves
GROUPING = RB.Grouping(MIN_ROWS, MIN_CURVES, unit="points", group_unit="curves", one="curve", unmeasured=UNMEASURED)
#: the transport of a single device (no collective crosses anything)
NO_LINK = "none"


def size_band_index(n: Any) -> np.ndarray:
    """The index into :data:`SIZE_BANDS` of each size in bytes (lo < n <= hi)."""
    edges = np.array([hi for _, _, hi in SIZE_BANDS[:-1]])
    return np.searchsorted(edges, np.asarray(n, dtype=np.float64), side="left")


def point_kinds(
    network: Sequence[Tier],
    k: Any,
    n: Any,
    *,
    algorithm: Any,
    protocol: Any,
    collective: str = "all_reduce",
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(transport, past NCCL's node, size band index, family) of each point, broadcast over k and n.

    ``algorithm`` and ``protocol`` are a :class:`~simcli.comm.cost.CommCost`'s (per element, or None). The family
    is the NCCL algorithm where NCCL's pairs priced the point (a protocol of :data:`PROTOCOLS`), ``"textbook
    <name>"`` where an alpha-beta formula did; a collective other than all-reduce is appended (``"ring
    all_gather"``): no published curve runs it, so its kind has no point.
    """
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(n, dtype=np.float64)
    shape = np.broadcast_shapes(k.shape, n.shape)
    widest = tier_spanned(network, k).sum(axis=0) - 1  # tiers fill outward: the spanned ones are 0..widest
    kinds = np.array([tier_kind(t, i) for i, t in enumerate(network)] + [NO_LINK], dtype=object)
    transport = np.broadcast_to(kinds[widest], shape)  # widest -1 (k == 1) reads the last entry: NO_LINK
    nodes = np.broadcast_to(widest >= 1, shape)
    band = np.broadcast_to(size_band_index(n), shape)
    alg = np.broadcast_to(np.asarray(algorithm, dtype=object), shape)
    proto = np.broadcast_to(np.asarray(protocol if protocol is not None else "-", dtype=object), shape)
    priced = np.zeros(shape, dtype=bool)
    for p in PROTOCOLS:  # not np.isin: its first call imports numpy.ma
        priced |= proto == p
    family = np.where(priced, alg, np.char.add("textbook ", alg.astype(str)).astype(object))
    if collective != "all_reduce":
        family = np.char.add(family.astype(str), " " + collective).astype(object)
    return transport, nodes, band, np.broadcast_to(family, shape)


Kind = tuple[str, bool, int, str]
#: k = 1: no collective, no error (the time is 0)
ONE_DEVICE = RatioBand(1.0, 1.0, 0, 0, "one device: nothing to communicate", True)


@dataclass(frozen=True)
class Corpus(RB.Columns):
    """Validated points: one entry per point, each a curve label, its kind and its ratio t_pred / t_meas; ``of``
    reads rows ``(curve, transport, past node, size band label, family, ratio)``."""

    curve: np.ndarray
    transport: np.ndarray
    nodes: np.ndarray
    band: np.ndarray
    family: np.ndarray
    ratio: np.ndarray
    cache: dict = field(default_factory=dict, compare=False, repr=False)

    COLUMNS = (
        lambda c: np.array(c, dtype=object),
        lambda c: np.array(c, dtype=object),
        lambda c: np.array(c, dtype=bool),
        lambda c: np.array([[b for b, _, _ in SIZE_BANDS].index(b) for b in c], dtype=np.int64),
        lambda c: np.array(c, dtype=object),
        lambda c: np.array(c, dtype=np.float64),
    )

    def kind(self, i: int) -> Kind:
        return (str(self.transport[i]), bool(self.nodes[i]), int(self.band[i]), str(self.family[i]))

    def masks(self, kind: Kind) -> list[np.ndarray]:
        """One mask per :data:`LEVELS` entry: the points in the kind's grouping at that level."""
        transport, nodes, band, family = kind
        m_size = self.band == band
        m_nodes = m_size & (self.nodes == nodes)
        m_transport = m_nodes & (self.transport == transport)
        return [m_transport & (self.family == family), m_transport, m_nodes, m_size, np.ones(self.ratio.shape, bool)]


def _describe(kind: Kind, level: int) -> str:
    transport, nodes, band, family = kind
    words = {
        "transport": transport,
        "nodes": "across nodes" if nodes else "inside a node",
        "size": SIZE_BANDS[band][0],
        "family": family,
    }
    return ", ".join(words[w] for w in LEVELS[level]) or "every size"


def ratio_band(corpus: Corpus, kind: Kind) -> RatioBand:
    """The ratio band of a kind ``(transport, past NCCL's node, size band index, family)``: see the module. A kind
    with no point, or the points of one curve, takes the widest band of its neighbours (:data:`NEIGHBOURS`; each
    read from its own points) and its own."""
    if kind[0] == NO_LINK:
        return ONE_DEVICE
    return RB.kind_band(
        corpus,
        kind,
        grouping=GROUPING,
        own_of=_own,
        neighbours=lambda masks: (
            (sorted({corpus.kind(int(i)) for i in np.flatnonzero(m)} - {kind}), _describe(kind, level))
            for level, m in enumerate(masks[NEIGHBOURS:], start=NEIGHBOURS)
        ),
        empty="no validated point to read a band from (simcli/comm/error_table.py is empty)",
    )


def _own(corpus: Corpus, kind: Kind, masks: list[np.ndarray]) -> RatioBand | None:
    """The band read from the kind's own grouping, backing off down :data:`LEVELS`; None where it has no point."""
    size = SIZE_BANDS[kind[2]][0]
    return RB.own_band(
        corpus,
        kind,
        masks,
        grouping=GROUPING,
        offsets_from=lambda level: masks[SIZE_LEVEL],
        words=lambda level: _describe(kind, level),
        offsets=lambda n: f"; a cluster's offset from the {n} curves of {size}",
    )


@dataclass(frozen=True)
class TimeBand:
    """The band of each predicted time: ``lo <= time <= hi``; ``which`` indexes ``bands`` per point."""

    lo: np.ndarray
    hi: np.ndarray
    which: np.ndarray
    bands: tuple[RatioBand, ...]


_PUBLISHED: list[Corpus] = []


def published() -> Corpus:
    """The validated points of :mod:`simcli.comm.error_table` (read once)."""
    if not _PUBLISHED:
        from .error_table import CURVES, ROWS  # lazy

        labels = [curve_label(c[0], c[1]) for c in CURVES]
        _PUBLISHED.append(Corpus.of([(labels[r[0]], r[3], r[4], r[5], r[6], r[7]) for r in ROWS]))
    return _PUBLISHED[0]


def curve_label(file: str, system: str | None) -> str:
    """A curve's name: its file's stem, and the system where one file holds several (``... [nd-h100-v5]``)."""
    return file.removesuffix(".csv") + (f" [{system}]" if system else "")


def time_band(
    network: Sequence[Tier],
    k: Any,
    n: Any,
    *,
    time: Any,
    algorithm: Any,
    protocol: Any,
    collective: str = "all_reduce",
    corpus: Corpus | None = None,
) -> TimeBand:
    """The band ``[time / p90(r), time / p10(r)]`` of each predicted ``time`` over the (k, n) grid, widened to
    hold ``time`` itself; ``corpus`` defaults to :func:`published`."""
    corpus = published() if corpus is None else corpus
    transport, nodes, band, family = point_kinds(
        network, k, n, algorithm=algorithm, protocol=protocol, collective=collective
    )
    t = np.asarray(time, dtype=np.float64)
    shape = np.broadcast_shapes(t.shape, transport.shape)
    # one code per point; each distinct kind is read once
    names = sorted_unique([np.asarray(transport, dtype=str).ravel(), np.asarray(family, dtype=str).ravel()])
    nb = len(SIZE_BANDS)
    code = (
        np.searchsorted(names, np.asarray(transport, dtype=str)) * (2 * nb * names.size)
        + np.searchsorted(names, np.asarray(family, dtype=str)) * (2 * nb)
        + nodes.astype(np.int64) * nb
        + band
    )
    code = np.broadcast_to(code, shape)
    distinct = sorted_unique([code.ravel()])
    bands = []
    for c in distinct.tolist():
        ti, rest = divmod(c, 2 * nb * names.size)
        fi, rest = divmod(rest, 2 * nb)
        ni, bi = divmod(rest, nb)
        bands.append(ratio_band(corpus, (str(names[ti]), bool(ni), int(bi), str(names[fi]))))
    which = np.searchsorted(distinct, code)
    lo_r = np.array([b.lo for b in bands])[which]
    hi_r = np.array([b.hi for b in bands])[which]
    t = np.broadcast_to(t, shape)
    return TimeBand(t / hi_r, t / lo_r, which, tuple(bands))


#: the standard normal's 90th percentile: a fitted value's p10-p90 is its value -+ Z80 standard errors, the same
#: central 80% the published curves' band is
Z80 = 1.2816


def fitted_tiers(profile: Any) -> dict[int, tuple[float, int]]:
    """Per network tier that ``simcli calibrate`` fitted (its ``calibration.network`` block: latency and bandwidth
    both identified, each with a standard error): (the relative standard error of a time on it, the largest world
    size of the fit). A time's relative error is at most the larger of its latency's and its bandwidth's (it is a
    positive sum of an alpha term and an n/B term, to first order). Empty for a profile not calibrated so."""

    cal = getattr(profile, "calibration", None) or {}
    names = [t.name for t in profile.network]
    out: dict[int, tuple[float, int]] = {}
    for rec in cal.get("network") or []:
        try:
            lat, bw = rec["latency"], rec["effective_bandwidth"]
            if not (lat.get("identified") and bw.get("identified")):
                continue
            rel = max(
                parse(lat["standard_error"], "time") / parse(lat["after"], "time"),
                parse(bw["standard_error"], "bandwidth") / parse(bw["after"], "bandwidth"),
            )
            out[names.index(rec["tier"])] = (float(rel), int(max(rec["world_sizes"])))
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            continue  # a record without what the band needs: the published band stays
    return out


def fit_covers(profile: Any, k: Any) -> np.ndarray:
    """Whether a calibrated profile's fits (:func:`fitted_tiers`) cover each k: the widest tier k spans was fitted,
    and k lies within the fit's world sizes. All False on a profile not calibrated so."""
    kk = np.asarray(k, dtype=np.int64)
    fitted = fitted_tiers(profile)
    out = np.zeros(kk.shape, dtype=bool)
    if fitted:
        widest = tier_spanned(profile.network, kk).sum(axis=0) - 1
        for tier, (_, k_max) in fitted.items():
            out |= (widest == tier) & (kk <= k_max)
    return out


def at_end(cost: Any, profile: Any, k: Any, *, n: Any, collective: str, end: str) -> Any:
    """``cost`` (a :class:`~simcli.comm.cost.CommCost`) with its time at the ``end`` ("lo" or "hi") of its band
    (:func:`time_band` on the published curves), the other terms as they were (a step prices its overlap from the
    time). On a calibrated profile, a point whose widest tier was fitted (:func:`fitted_tiers`) and whose k lies
    within the fit's world sizes takes the fit's band instead, time -+ :data:`Z80` relative standard errors, where
    that is the narrower (a fit narrows what is known; it never widens the published band)."""

    kk = np.asarray(k, dtype=np.int64)
    band = time_band(
        profile.network, kk, n, time=cost.time, algorithm=cost.algorithm, protocol=cost.protocol, collective=collective
    )
    t = np.broadcast_to(np.asarray(cost.time, dtype=np.float64), band.lo.shape)
    new = band.lo if end == "lo" else band.hi
    fitted = fitted_tiers(profile)
    if fitted:
        widest = np.broadcast_to(tier_spanned(profile.network, kk).sum(axis=0) - 1, t.shape)
        kb = np.broadcast_to(kk, t.shape)
        for tier, (rel, k_max) in fitted.items():
            on = (widest == tier) & (kb <= k_max)
            fit = t * (1.0 - min(Z80 * rel, 1.0)) if end == "lo" else t * (1.0 + Z80 * rel)
            new = np.where(on, (np.maximum if end == "lo" else np.minimum)(new, fit), new)
    out = copy.copy(cost)
    object.__setattr__(out, "time", np.array(new, dtype=np.float64))
    return out


def leave_one_out(corpus: Corpus) -> np.ndarray:
    """For each point, whether its ratio lies inside the band read without its own curve's points."""
    return RB.leave_one_out(corpus, ratio_band)
