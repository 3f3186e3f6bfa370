"""Alpha-beta cost of all-reduce, vectorised over device counts and message sizes.

The network is a list of tiers, innermost first (see :class:`simcli.model.Tier`).
Devices fill domains in order: devices 0..s0-1 in the first node, and so on;
the last domain may be partial (k = 12 on 8-device nodes is one node of 8 and
one of 4).

Bandwidth a tier offers a ring (``tier_bandwidth``)
----------------------------------------------------
A ring over k devices ordered domain by domain has one edge leaving each
domain it spans, in each direction; NCCL splits the data over several rings
(channels) so that every link out of a domain is used. A tier therefore limits
the ring to the *aggregate* bandwidth with which one domain below it reaches
that tier, and the smallest domain (the partial one) is the bottleneck:

* tier 0 (inside a node), ``per: device``: each device's link, ``b·e``.
* tier 0, ``per: node``: one medium shared by the ``min(k, s0)`` devices of the
  domain, ``b·e / min(k, s0)`` (a PCIe switch or host memory bus).
* tier i >= 1, ``per: device``: each of the ``r`` devices of the smallest
  sub-domain brings its own link, ``r·b·e``, where ``r = k - (ceil(k/S)-1)·S``
  and ``S`` is the sub-domain's size (``size`` of tier i-1).
* tier i >= 1, ``per: node``: the sub-domain shares one link, ``b·e``.

Tier i >= 1 is spanned when ``k > size(tier i-1)``; tier 0 when ``k >= 2``.
The ring's bandwidth ``B`` is the minimum over spanned tiers and its latency
``alpha`` the largest latency of the spanned tiers.

Ring all-reduce (Patarasuk & Yuan 2009; Thakur, Rabenseifner & Gropp 2005)
---------------------------------------------------------------------------
``T = 2(k-1)·alpha + 2(k-1)/k · n / B`` (reduce-scatter then all-gather,
k-1 steps each, n/k bytes per step). ``T(1) = 0``.

Other algorithms (see each function's docstring for its formula and source)
------------------------------------------------------------------------------
``tree`` (NCCL's pipelined double binary tree), ``recursive-doubling``,
``rabenseifner``, ``hierarchical`` (reduce-scatter in the node, all-reduce of
1/g across nodes, all-gather in the node; recursively over any number of
tiers), ``ps`` (one parameter server) and ``ps-sharded`` (the server role
spread over all k devices). ``auto`` takes the fastest of them per element.

Three bandwidths a tier can offer, shape (tiers, len(k)), inf where not spanned:

* ``tier_bandwidth``: what one domain offers a *ring* (above): a ring crosses a
  domain boundary on one edge per channel, so a domain's per-device links add up.
* ``tier_link_bandwidth``: what each device gets when *every* device of a
  domain sends across the tier at the same time (the steps of recursive
  doubling, Rabenseifner and the all-to-all of ``ps-sharded``): its own link
  ``b·e`` for ``per: device``; ``b·e / min(k, S)`` for ``per: node`` (S devices
  of the domain below share one link).
* the raw link ``b·e`` of one device (the parameter server's link).

"Flat" algorithms (recursive doubling, Rabenseifner, ps-sharded) do not know
the hierarchy: every step is priced at the slowest spanned tier's
``tier_link_bandwidth`` and the largest spanned latency. ``tree`` is priced on
the ring's bandwidth (NCCL builds its trees on the same channels as its rings,
one per NIC) and ``hierarchical`` on each tier's ring bandwidth in turn.

Per-tier terms: every :class:`CommCost` carries ``tier_latency`` and
``tier_bandwidth_s`` of shape (tiers, ...) that add up to ``latency`` and
``bandwidth``; a flat algorithm puts its latency on the tier with the largest
spanned alpha and its bandwidth term on the bottleneck tier.

nccl-tests' vocabulary (nccl-tests doc/PERFORMANCE.md)
------------------------------------------------------
``algbw = n / T``; all-reduce ``busbw = algbw · 2(k-1)/k``; GB/s = 1e9 B/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .model import InputError, Tier

__all__ = [
    "CommCost",
    "tier_bandwidth",
    "tier_spanned",
    "ring_params",
    "ring_allreduce",
    "allreduce",
    "ALGORITHMS",
    "busbw_factor",
    "check_devices",
    "tier_link_bandwidth",
    "tree_allreduce",
    "recursive_doubling_allreduce",
    "rabenseifner_allreduce",
    "hierarchical_allreduce",
    "ps_allreduce",
    "ps_sharded_allreduce",
    "auto_allreduce",
    "CHOICES",
    "check_algorithm",
]


@dataclass(frozen=True)
class CommCost:
    """Cost of one all-reduce, arrays broadcast over (k, n). All times in seconds."""

    time: np.ndarray
    latency: np.ndarray  #: the alpha terms
    bandwidth: np.ndarray  #: the n/B terms
    reduction: np.ndarray  #: the gamma terms (0 when the profile gives no reduce rate)
    alpha: np.ndarray  #: latency per step that was used (s)
    bus_Bps: np.ndarray  #: bottleneck bandwidth that was used (B/s)
    bottleneck: np.ndarray  #: index of the bottleneck tier (-1 where k == 1)
    #: per-tier latency terms, shape (tiers, ...); they add up to ``latency``
    tier_latency: np.ndarray | None = None
    #: per-tier bandwidth terms (s), shape (tiers, ...); they add up to ``bandwidth``
    tier_bandwidth_s: np.ndarray | None = None
    #: the algorithm's name per element (``auto`` picks one per element)
    algorithm: np.ndarray | None = None


def check_devices(network: Sequence[Tier], k: np.ndarray) -> None:
    """Refuse device counts beyond what the profile describes (the outermost tier's size)."""
    cap = network[-1].size
    if cap is not None and np.any(k > cap):
        raise InputError(f"--devices: {int(np.max(k))} devices exceed this profile's {cap} "
                         f"(network[{len(network) - 1}].size); ask for at most {cap}")


def tier_spanned(network: Sequence[Tier], k: np.ndarray) -> np.ndarray:
    """Boolean array (tiers, len(k)): does a ring over k devices cross tier i?"""
    k = np.asarray(k)
    out = np.zeros((len(network),) + k.shape, dtype=bool)
    out[0] = k >= 2
    for i in range(1, len(network)):
        below = network[i - 1].size
        out[i] = k > below
    return out


def tier_bandwidth(network: Sequence[Tier], k: np.ndarray) -> np.ndarray:
    """Bandwidth (B/s) each tier offers a ring over k devices, shape (tiers, len(k)); inf where not spanned."""
    k = np.asarray(k, dtype=np.int64)
    spanned = tier_spanned(network, k)
    out = np.full((len(network),) + k.shape, np.inf)
    for i, t in enumerate(network):
        b = t.effective_Bps
        if i == 0:
            if t.per == "node":
                share = np.minimum(k, t.size) if t.size is not None else k
                bw = b / np.maximum(share, 1)
            else:
                bw = np.full(k.shape, b)
        else:
            if t.per == "node":
                bw = np.full(k.shape, b)
            else:
                sub = network[i - 1].size
                r = k - (np.ceil(k / sub).astype(np.int64) - 1) * sub  # devices in the smallest sub-domain
                bw = b * r
        out[i] = np.where(spanned[i], bw, np.inf)
    return out


def ring_params(network: Sequence[Tier], k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(alpha_s, bus_Bps, bottleneck tier index) of a ring over k devices."""
    k = np.asarray(k, dtype=np.int64)
    bw = tier_bandwidth(network, k)
    spanned = tier_spanned(network, k)
    lat = np.array([t.latency_s for t in network]).reshape((-1,) + (1,) * k.ndim)
    alpha = np.max(np.where(spanned, lat, 0.0), axis=0)
    bottleneck = np.where(k >= 2, np.argmin(bw, axis=0), -1)
    bus = np.min(bw, axis=0)
    return alpha, bus, bottleneck


def busbw_factor(k: np.ndarray) -> np.ndarray:
    """All-reduce bus-bandwidth factor 2(k-1)/k (nccl-tests doc/PERFORMANCE.md#allreduce)."""
    k = np.asarray(k, dtype=np.float64)
    return 2.0 * (k - 1.0) / k


def tier_link_bandwidth(network: Sequence[Tier], k: np.ndarray) -> np.ndarray:
    """Bandwidth (B/s) each device gets across tier i when every device of its domain sends at once.

    Shape (tiers, len(k)); inf where the tier is not spanned. ``per: device``:
    the device's own link ``b·e``; ``per: node``: ``b·e / min(k, S)`` where S is
    the size of the domain below (tier 0: the node itself) whose devices share
    the link.
    """
    k = np.asarray(k, dtype=np.int64)
    spanned = tier_spanned(network, k)
    out = np.full((len(network),) + k.shape, np.inf)
    for i, t in enumerate(network):
        b = t.effective_Bps
        if t.per == "node":
            share_size = t.size if i == 0 else network[i - 1].size
            share = np.minimum(k, share_size) if share_size is not None else k
            bw = b / np.maximum(share, 1)
        else:
            bw = np.full(k.shape, b)
        out[i] = np.where(spanned[i], bw, np.inf)
    return out


def _latency_params(network: Sequence[Tier], k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(largest spanned latency, index of that tier or -1 where k == 1)."""
    spanned = tier_spanned(network, k)
    lat = np.array([t.latency_s for t in network]).reshape((-1,) + (1,) * k.ndim)
    lat = np.where(spanned, lat, -1.0)
    return np.maximum(np.max(lat, axis=0), 0.0), np.where(k >= 2, np.argmax(lat, axis=0), -1)


def _bottleneck(bw: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(smallest bandwidth over the tiers, its tier index or -1 where k == 1)."""
    return np.min(bw, axis=0), np.where(k >= 2, np.argmin(bw, axis=0), -1)


def _per_tier(ntiers: int, values: np.ndarray, tier: np.ndarray) -> np.ndarray:
    """Spread ``values`` onto the tier that ``tier`` names: shape (tiers, ...), zeros elsewhere."""
    out = np.empty((ntiers,) + values.shape)
    for i in range(ntiers):  # a loop over the (few) tiers, vectorised over the grid
        np.multiply(values, tier == i, out=out[i])
    return out


def _reduction(bytes_reduced: np.ndarray, reduce_Bps: float | None) -> np.ndarray:
    """The gamma term: bytes one device reduces / its reduction rate (0 when the profile gives none)."""
    if not reduce_Bps:
        return np.zeros_like(bytes_reduced)
    return bytes_reduced / reduce_Bps


def _cost(network: Sequence[Tier], k: np.ndarray, n: np.ndarray, name: str, *, latency: np.ndarray,
          bandwidth: np.ndarray, reduced: np.ndarray, reduce_Bps: float | None, alpha: np.ndarray,
          bus: np.ndarray, bottleneck: np.ndarray, lat_tier: np.ndarray,
          tier_latency: np.ndarray | None = None, tier_bw: np.ndarray | None = None) -> CommCost:
    """Broadcast the terms of one algorithm over (k, n) and pack them (k == 1 costs nothing)."""
    one = k < 2
    latency = np.where(one, 0.0, latency)
    with np.errstate(invalid="ignore"):
        bandwidth = np.where(one, 0.0, bandwidth)
        reduction = np.where(one, 0.0, _reduction(reduced, reduce_Bps))
    latency, bandwidth, reduction, n, kk = np.broadcast_arrays(latency, bandwidth, reduction, n, k)
    shape = latency.shape
    nt = len(network)
    if tier_latency is None:
        tier_latency = _per_tier(nt, latency, np.broadcast_to(lat_tier, shape))
    if tier_bw is None:
        tier_bw = _per_tier(nt, bandwidth, np.broadcast_to(bottleneck, shape))
    return CommCost(time=latency + bandwidth + reduction, latency=latency, bandwidth=bandwidth,
                    reduction=reduction, alpha=np.broadcast_to(alpha, shape),
                    bus_Bps=np.broadcast_to(bus, shape), bottleneck=np.broadcast_to(bottleneck, shape),
                    tier_latency=np.broadcast_to(tier_latency, (nt,) + shape),
                    tier_bandwidth_s=np.broadcast_to(tier_bw, (nt,) + shape),
                    algorithm=np.broadcast_to(np.array(name, dtype=object), shape))  # a view, not a copy


def _pow2_floor(k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lg = floor(log2 k), k' = 2**lg) for integer k >= 1 (exact: integer arithmetic)."""
    k = np.maximum(np.asarray(k, dtype=np.int64), 1)
    lg = np.zeros(k.shape, dtype=np.int64)
    x = k.copy()
    while np.any(x > 1):
        more = x > 1
        lg += more
        x = np.where(more, x >> 1, x)
    return lg, np.left_shift(np.int64(1), lg)


def ring_allreduce(network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray,
                   reduce_Bps: float | None = None) -> CommCost:
    """Ring all-reduce: T = 2(k-1)·alpha + 2(k-1)/k · n/B [+ (k-1)/k · n/gamma].

    Patarasuk & Yuan 2009 (bandwidth-optimal all-reduce); the gamma term, when
    the device gives a reduce rate, is Thakur, Rabenseifner & Gropp 2005's
    (k-1)/k · n · gamma for the reduce-scatter half. alpha and B: the largest
    latency and the smallest ring bandwidth (``tier_bandwidth``) of the spanned tiers.
    """
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(nbytes, dtype=np.float64)
    alpha, bus, bottleneck = ring_params(network, k)
    _, lat_tier = _latency_params(network, k)
    kf = k.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = busbw_factor(np.maximum(kf, 1.0)) * n / bus
    return _cost(network, k, n, "ring", latency=2.0 * (kf - 1.0) * alpha, bandwidth=bandwidth,
                 reduced=(kf - 1.0) / np.maximum(kf, 1.0) * n, reduce_Bps=reduce_Bps, alpha=alpha, bus=bus,
                 bottleneck=bottleneck, lat_tier=lat_tier)


def tree_allreduce(network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray,
                   reduce_Bps: float | None = None) -> CommCost:
    """Pipelined double binary tree (NCCL's "Tree"; Sanders, Speck & Träff 2009).

    Two binary trees, each carrying half of the data; every device is an inner
    node of one tree and a leaf of the other. Each half is reduced up its tree
    and broadcast down, pipelined in small chunks, so the first chunk pays the
    depth twice and the rest streams behind it::

        T = 2·ceil(log2 k)·alpha + f_k · n/B  [+ r_k · n/gamma]

    f_k is what the busiest device sends: as an inner node with a parent and two
    children, n/2 up and 2·n/2 down; as a leaf of the other tree, n/2 up: 2n
    in all (f_2 = 1: each device is the root of one tree and the leaf of the
    other; f_3 = 1.5: the inner node has no parent). r_k: an inner node adds its
    two children's halves (n; n/2 for k = 2). alpha, B: the ring's (NCCL builds
    the trees on the same channels as its rings, one per NIC). Since f_k >= 2(k-1)/k
    the tree never beats the ring on bandwidth; it wins on latency at large k.
    """
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(nbytes, dtype=np.float64)
    alpha, bus, bottleneck = ring_params(network, k)
    _, lat_tier = _latency_params(network, k)
    lg, p2 = _pow2_floor(k)
    depth = np.where(p2 == k, lg, lg + 1).astype(np.float64)  # ceil(log2 k)
    f = np.select([k <= 1, k == 2, k == 3], [0.0, 1.0, 1.5], 2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = f * n / bus
    reduced = np.where(k == 2, 0.5, 1.0) * n
    return _cost(network, k, n, "tree", latency=2.0 * depth * alpha, bandwidth=bandwidth, reduced=reduced,
                 reduce_Bps=reduce_Bps, alpha=alpha, bus=bus, bottleneck=bottleneck, lat_tier=lat_tier)


def _flat(network: Sequence[Tier], k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(alpha, B, bottleneck tier, latency tier) of a hierarchy-blind algorithm: slowest spanned tier."""
    alpha, lat_tier = _latency_params(network, k)
    bus, bottleneck = _bottleneck(tier_link_bandwidth(network, k), k)
    return alpha, bus, bottleneck, lat_tier


def recursive_doubling_allreduce(network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray,
                                 reduce_Bps: float | None = None) -> CommCost:
    """Recursive doubling (Thakur, Rabenseifner & Gropp 2005, §4): lg k steps, each exchanging all n bytes.

    k a power of two: ``T = lg k · (alpha + n/B) [+ lg k · n/gamma]``. Otherwise
    (the same paper's extra steps, no silent rounding) with k' = 2^floor(lg k):
    the r = k - k' surplus devices first send their vector to a partner, which
    reduces it (one step), the k' devices do recursive doubling, and the result
    goes back (one more step)::

        T = (floor(lg k) + 2) · (alpha + n/B) [+ (floor(lg k) + 1) · n/gamma]

    alpha, B: the slowest spanned tier when every device sends at once
    (``tier_link_bandwidth``).
    """
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(nbytes, dtype=np.float64)
    alpha, bus, bottleneck, lat_tier = _flat(network, k)
    lg, p2 = _pow2_floor(k)
    extra = (p2 != k).astype(np.float64)
    steps = lg + 2.0 * extra
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = steps * n / bus
    return _cost(network, k, n, "recursive-doubling", latency=steps * alpha, bandwidth=bandwidth,
                 reduced=(lg + extra) * n, reduce_Bps=reduce_Bps, alpha=alpha, bus=bus, bottleneck=bottleneck,
                 lat_tier=lat_tier)


def rabenseifner_allreduce(network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray,
                           reduce_Bps: float | None = None) -> CommCost:
    """Rabenseifner: reduce-scatter by recursive halving, all-gather by recursive doubling.

    Thakur, Rabenseifner & Gropp 2005, §4.1. k a power of two::

        T = 2·lg k · alpha + 2(k-1)/k · n/B [+ (k-1)/k · n/gamma]

    Otherwise, with k' = 2^floor(lg k), the surplus devices fold their whole
    vector into a partner first (alpha + n/B, and n/gamma to reduce it) and get
    the result back at the end (alpha + n/B)::

        T = (2·floor(lg k) + 2)·alpha + (2(k'-1)/k' + 2) · n/B [+ ((k'-1)/k' + 1) · n/gamma]

    alpha, B: the slowest spanned tier when every device sends at once.
    """
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(nbytes, dtype=np.float64)
    alpha, bus, bottleneck, lat_tier = _flat(network, k)
    lg, p2 = _pow2_floor(k)
    extra = (p2 != k).astype(np.float64)
    pf = p2.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = (2.0 * (pf - 1.0) / pf + 2.0 * extra) * n / bus
    return _cost(network, k, n, "rabenseifner", latency=(2.0 * lg + 2.0 * extra) * alpha, bandwidth=bandwidth,
                 reduced=((pf - 1.0) / pf + extra) * n, reduce_Bps=reduce_Bps, alpha=alpha, bus=bus,
                 bottleneck=bottleneck, lat_tier=lat_tier)


def hierarchical_allreduce(network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray,
                           reduce_Bps: float | None = None) -> CommCost:
    """Hierarchical (2D) all-reduce over any number of tiers (Horovod's hierarchical all-reduce).

    Level 0: the ``g_0 = min(k, size_0)`` devices of a node reduce-scatter the
    n bytes over tier 0 (a ring), leaving n/g_0 on each; level i >= 1: the
    ``g_i`` domains of tier i-1 inside one domain of tier i (all of them on the
    last tier: ``ceil(k / size_{i-1})``) all-reduce what they hold, recursively;
    then every level all-gathers back in reverse. Each level is a ring whose
    units are whole domains, so it runs at that tier's ring bandwidth B_i
    (``tier_bandwidth``: a domain's per-device links add up; the smallest,
    partial domain limits) and pays that tier's alpha_i::

        T = sum over spanned tiers i of [ 2(g_i-1)·alpha_i + 2(g_i-1)/g_i · n/B_i ]  [+ (k-1)/k · n/gamma]

    With one tier (or k inside one node) this is the ring exactly. Across nodes
    it moves 2(m-1)/m · n through each node's links (m nodes) where the ring
    moves 2(k-1)/k · n: that is why it wins when the inter-node tier is slow,
    and why it may beat the single-link bound 2(k-1)/k · n/B of Patarasuk & Yuan
    (which assumes one link per device). The partial node (k not a multiple of
    the node size) is priced like the others at level 0 and limits B_i above.
    """
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(nbytes, dtype=np.float64)
    kf = k.astype(np.float64)
    bw = tier_bandwidth(network, k)
    spanned = tier_spanned(network, k)
    alpha, lat_tier = _latency_params(network, k)
    bus, _ = _bottleneck(bw, k)
    shape = np.broadcast(k, n).shape
    tl = np.zeros((len(network),) + shape)
    tb = np.zeros((len(network),) + shape)
    for i, t in enumerate(network):
        if i == 0:
            g = np.minimum(k, t.size) if t.size is not None else k
        else:
            below = network[i - 1].size
            units = -(-k // below)  # ceil(k / size_{i-1}): domains of tier i-1 in use
            g = np.minimum(units, max(1, t.size // below)) if t.size is not None else units
        g = np.where(spanned[i], g, 1).astype(np.float64)
        tl[i] = 2.0 * (g - 1.0) * t.latency_s
        with np.errstate(divide="ignore", invalid="ignore"):
            tb[i] = np.where(g > 1, 2.0 * (g - 1.0) / g * n / bw[i], 0.0)
    bottleneck = np.where(k >= 2, np.argmax(tb, axis=0), -1)
    return _cost(network, k, n, "hierarchical", latency=tl.sum(axis=0), bandwidth=tb.sum(axis=0),
                 reduced=(kf - 1.0) / np.maximum(kf, 1.0) * n, reduce_Bps=reduce_Bps, alpha=alpha, bus=bus,
                 bottleneck=bottleneck, lat_tier=lat_tier, tier_latency=tl, tier_bw=tb)


def ps_allreduce(network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray,
                 reduce_Bps: float | None = None) -> CommCost:
    """One parameter server (Li et al. 2014's parameter server; what all-reduce replaces).

    The server is one of the k devices; the other k-1 push their n bytes to it,
    it adds them up, and they pull the n-byte result back. Every byte passes
    through the server's one link, B_s = min over spanned tiers of one device's
    raw link ``b·e`` (we assume the server's link is an ordinary device's:
    the outermost tier it spans, or a shared medium it does not have to itself
    share)::

        T = 2(k-1)·alpha + 2(k-1) · n/B_s  [+ (k-1) · n/gamma]

    (the server takes the k-1 pushes and serves the k-1 pulls one message at a
    time, each paying alpha, as LogP's per-message gap; all bytes through one link).
    """
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(nbytes, dtype=np.float64)
    kf = k.astype(np.float64)
    alpha, lat_tier = _latency_params(network, k)
    spanned = tier_spanned(network, k)
    raw = np.array([t.effective_Bps for t in network]).reshape((-1,) + (1,) * k.ndim)
    bus, bottleneck = _bottleneck(np.where(spanned, raw, np.inf), k)
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = 2.0 * (kf - 1.0) * n / bus
    return _cost(network, k, n, "ps", latency=2.0 * (kf - 1.0) * alpha, bandwidth=bandwidth, reduced=(kf - 1.0) * n,
                 reduce_Bps=reduce_Bps, alpha=alpha, bus=bus, bottleneck=bottleneck, lat_tier=lat_tier)


def ps_sharded_allreduce(network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray,
                         reduce_Bps: float | None = None) -> CommCost:
    """Sharded parameter server: every device serves 1/k of the gradient (as BytePS / PS-Lite shard keys).

    Each device pushes the k-1 shards it does not own to their owners and pulls
    them back: a reduce-scatter and an all-gather by direct (pairwise) exchange,
    k-1 rounds each, n/k bytes a round (Thakur, Rabenseifner & Gropp 2005, §3:
    pairwise-exchange reduce-scatter)::

        T = 2(k-1)·alpha + 2(k-1)/k · n/B  [+ (k-1)/k · n/gamma]

    The same bytes per device as the ring, but every device talks to every other
    at once, so B is the slowest spanned tier's per-device share
    (``tier_link_bandwidth``), not the ring's.
    """
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(nbytes, dtype=np.float64)
    kf = k.astype(np.float64)
    alpha, bus, bottleneck, lat_tier = _flat(network, k)
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = busbw_factor(np.maximum(kf, 1.0)) * n / bus
    return _cost(network, k, n, "ps-sharded", latency=2.0 * (kf - 1.0) * alpha, bandwidth=bandwidth,
                 reduced=(kf - 1.0) / np.maximum(kf, 1.0) * n, reduce_Bps=reduce_Bps, alpha=alpha, bus=bus,
                 bottleneck=bottleneck, lat_tier=lat_tier)


#: all-reduce algorithms by name: f(network, k, nbytes, reduce_Bps) -> CommCost (``auto`` is not one of them)
ALGORITHMS: dict[str, Callable[..., CommCost]] = {
    "ring": ring_allreduce,
    "tree": tree_allreduce,
    "recursive-doubling": recursive_doubling_allreduce,
    "rabenseifner": rabenseifner_allreduce,
    "hierarchical": hierarchical_allreduce,
    "ps": ps_allreduce,
    "ps-sharded": ps_sharded_allreduce,
}

#: what --algorithm accepts
CHOICES = tuple(ALGORITHMS) + ("auto",)


def auto_allreduce(network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray,
                   reduce_Bps: float | None = None) -> CommCost:
    """The fastest algorithm of :data:`ALGORITHMS` for each element; ties go to the earlier one (ring first)."""
    costs = [f(network, k, nbytes, reduce_Bps) for f in ALGORITHMS.values()]
    times = np.stack([c.time for c in costs])
    best = np.argmin(times, axis=0)

    def pick(field: str, axis0: bool = False) -> np.ndarray:
        arr = np.stack([np.asarray(getattr(c, field)) for c in costs])
        if axis0:  # per-tier arrays: (alg, tiers, ...)
            return np.take_along_axis(arr, best[None, None], axis=0)[0]
        return np.take_along_axis(arr, best[None], axis=0)[0]

    return CommCost(time=pick("time"), latency=pick("latency"), bandwidth=pick("bandwidth"),
                    reduction=pick("reduction"), alpha=pick("alpha"), bus_Bps=pick("bus_Bps"),
                    bottleneck=pick("bottleneck"), tier_latency=pick("tier_latency", True),
                    tier_bandwidth_s=pick("tier_bandwidth_s", True), algorithm=pick("algorithm"))


def check_algorithm(algorithm: str, option: str = "--algorithm") -> str:
    """The algorithm's name if simcli knows it, else an InputError that lists the choices."""
    if algorithm not in CHOICES:
        import difflib

        close = difflib.get_close_matches(algorithm, CHOICES, n=2)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        raise InputError(f"{option}: unknown algorithm {algorithm!r}{hint}; choose one of {', '.join(CHOICES)}")
    return algorithm


def allreduce(algorithm: str, network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray,
              reduce_Bps: float | None = None) -> CommCost:
    """Cost of one all-reduce of ``nbytes`` over ``k`` devices with the named algorithm (or ``auto``).

    ``k`` and ``nbytes`` broadcast against each other (pass ``k[:, None]`` and
    ``n[None, :]`` for a grid).
    """
    check_algorithm(algorithm)
    f = auto_allreduce if algorithm == "auto" else ALGORITHMS[algorithm]
    return f(network, k, nbytes, reduce_Bps)


def affine_terms(network: Sequence[Tier], k: np.ndarray,
                 reduce_Bps: float | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every algorithm's cost as ``T(n) = L + s·n``: name -> (L seconds, s seconds per byte), over k.

    Exact: each cost above is affine in the message size (the step counts depend on k only).
    """
    k = np.asarray(k, dtype=np.int64)
    out = {}
    for name, f in ALGORITHMS.items():
        c = f(network, k, np.float64(1.0), reduce_Bps)
        out[name] = (np.asarray(c.latency, dtype=np.float64),
                     np.asarray(c.bandwidth + c.reduction, dtype=np.float64))
    return out


def crossovers(network: Sequence[Tier], k: np.ndarray, n_lo: float, n_hi: float,
               reduce_Bps: float | None = None) -> list[dict]:
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
            if best is None or best_x > n_hi:
                break
            out.append({"devices": kj, "bytes": float(best_x), "from": names[cur], "to": names[best]})
            cur, x = best, best_x
    return out
