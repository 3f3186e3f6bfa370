"""The textbook (alpha-beta) all-reduce algorithms, vectorised over device counts and message sizes.

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
spread over all k devices). Tiers, their bandwidths and latencies: :mod:`simcli.comm.topology`.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np

from ..base.types import Tier
from .cost import CommCost, pack
from .specs import busbw_factor
from .topology import bottleneck_of, latency_params, ring_params, tier_bandwidth, tier_link_bandwidth, tier_spanned

__all__ = [
    "Link",
    "ring_coefficients",
    "ring_pass",
    "ring_allreduce",
    "tree_allreduce",
    "recursive_doubling_allreduce",
    "rabenseifner_allreduce",
    "hierarchical_allreduce",
    "ps_allreduce",
    "ps_sharded_allreduce",
]


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


def ring_allreduce(
    network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray, *, reduce_Bps: float | None = None
) -> CommCost:
    """Ring all-reduce: T = 2(k-1)·alpha + 2(k-1)/k · n/B [+ (k-1)/k · n/gamma].

    Patarasuk & Yuan 2009 (bandwidth-optimal all-reduce); the gamma term, when
    the device gives a reduce rate, is Thakur, Rabenseifner & Gropp 2005's
    (k-1)/k · n · gamma for the reduce-scatter half. alpha and B: the largest
    latency and the smallest ring bandwidth (``tier_bandwidth``) of the spanned tiers.
    """
    k = np.asarray(k, dtype=np.int64)
    return _two_passes(network, k, nbytes, name="ring", reduce_Bps=reduce_Bps, link=_ring_link(network, k))


class Link(NamedTuple):
    """The link an algorithm is priced at, per k: its alpha, its B, the bottleneck tier and the latency tier."""

    alpha: np.ndarray
    bus: np.ndarray
    bottleneck: np.ndarray
    lat_tier: np.ndarray


def _ring_link(network: Sequence[Tier], k: np.ndarray) -> Link:
    """The ring's link: the largest latency and the smallest ring bandwidth (``tier_bandwidth``) of the spanned
    tiers (NCCL builds its trees on the same channels)."""
    alpha, bus, bottleneck = ring_params(network, k)
    _, lat_tier = latency_params(network, k)
    return Link(alpha, bus, bottleneck, lat_tier)


def ring_coefficients(k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ring all-reduce: ``c_lat = 2(k-1)`` steps of alpha, ``c_bw = 2(k-1)/k`` of n/B (Patarasuk & Yuan 2009): the
    coefficients of T = c_lat·alpha + c_bw·n/B that a calibration fits (simcli.fits.fitting)."""
    kf = np.maximum(np.asarray(k, dtype=np.float64), 1.0)
    return 2.0 * (kf - 1.0), busbw_factor(kf)


def _two_passes(
    network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray, *, name: str, reduce_Bps: float | None, link: Link
) -> CommCost:
    """A reduce-scatter then an all-gather of k-1 steps each, n/k bytes a step, at the link's alpha and B:
    T = 2(k-1)·alpha + 2(k-1)/k · n/B [+ (k-1)/k · n/gamma] (the ring's and the sharded server's one formula)."""
    kf = np.maximum(np.asarray(k, dtype=np.float64), 1.0)
    steps, sent = ring_coefficients(kf)
    return ring_pass(
        network, k, nbytes, name=name, reduce_Bps=reduce_Bps, link=link, steps=steps, sent=sent, reduced=(kf - 1) / kf
    )


def ring_pass(
    network: Sequence[Tier],
    k: np.ndarray,
    nbytes: np.ndarray,
    *,
    name: str,
    reduce_Bps: float | None,
    link: Sequence[np.ndarray],
    steps: np.ndarray,
    sent: np.ndarray,
    reduced: np.ndarray,
) -> CommCost:
    """Ring-shaped passes priced at one link: ``steps`` hops of alpha, ``sent``·n bytes per device at B, and
    ``reduced``·n bytes reduced at gamma (``steps``, ``sent``, ``reduced`` over k, 0 at k = 1). The link is
    (alpha, B, bottleneck tier, latency tier)."""
    n = np.asarray(nbytes, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = n * (sent / link[1])  # per byte over k only (0 at k = 1, where B is inf), then one product
    terms = dict(latency=steps * link[0], bandwidth=bandwidth, reduced=reduced * n)
    return _priced(network, k, n, name=name, link=Link(*link), reduce_Bps=reduce_Bps, zero_at_one=True, **terms)


def _priced(network: Sequence[Tier], k: np.ndarray, n: np.ndarray, *, name: str, link: Link, **terms: Any) -> CommCost:
    """One algorithm's terms (latency, bandwidth, reduced, reduce_Bps and pack's options) packed at its link."""
    return pack(
        network,
        k,
        n,
        name=name,
        alpha=link.alpha,
        bus=link.bus,
        bottleneck=link.bottleneck,
        lat_tier=link.lat_tier,
        **terms,
    )


def tree_allreduce(
    network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray, *, reduce_Bps: float | None = None
) -> CommCost:
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
    link = _ring_link(network, k)
    lg, p2 = _pow2_floor(k)
    depth = np.where(p2 == k, lg, lg + 1).astype(np.float64)  # ceil(log2 k)
    f = np.select([k <= 1, k == 2, k == 3], [0.0, 1.0, 1.5], 2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = f * n / link.bus
    reduced = np.where(k == 2, 0.5, 1.0) * n
    terms = dict(latency=2.0 * depth * link.alpha, bandwidth=bandwidth, reduced=reduced)
    return _priced(network, k, n, name="tree", link=link, reduce_Bps=reduce_Bps, **terms)


def _doubling(k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(floor(lg k), k' = 2^floor(lg k), 1.0 where k is not a power of two else 0.0): the recursive algorithms'
    steps and the surplus devices' extra steps (Thakur, Rabenseifner & Gropp 2005, §4)."""
    lg, p2 = _pow2_floor(k)
    return lg, p2, (p2 != k).astype(np.float64)


def _flat_inputs(network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray) -> tuple[np.ndarray, np.ndarray, Link]:
    """k and n as arrays and the hierarchy-blind link (:func:`_flat`)."""
    k = np.asarray(k, dtype=np.int64)
    return k, np.asarray(nbytes, dtype=np.float64), _flat(network, k)


def _flat(network: Sequence[Tier], k: np.ndarray) -> Link:
    """(alpha, B, bottleneck tier, latency tier) of a hierarchy-blind algorithm: slowest spanned tier."""
    alpha, lat_tier = latency_params(network, k)
    bus, bottleneck = bottleneck_of(tier_link_bandwidth(network, k), k)
    return Link(alpha, bus, bottleneck, lat_tier)


def recursive_doubling_allreduce(
    network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray, *, reduce_Bps: float | None = None
) -> CommCost:
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
    k, n, link = _flat_inputs(network, k, nbytes)
    lg, p2, extra = _doubling(k)
    alpha, bus = link.alpha, link.bus
    steps = lg + 2.0 * extra
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = steps * n / bus
    terms = dict(latency=steps * alpha, bandwidth=bandwidth, reduced=(lg + extra) * n)
    return _priced(network, k, n, name="recursive-doubling", link=link, reduce_Bps=reduce_Bps, **terms)


def rabenseifner_allreduce(
    network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray, *, reduce_Bps: float | None = None
) -> CommCost:
    """Rabenseifner: reduce-scatter by recursive halving, all-gather by recursive doubling.

    Thakur, Rabenseifner & Gropp 2005, §4.1. k a power of two::

        T = 2·lg k · alpha + 2(k-1)/k · n/B [+ (k-1)/k · n/gamma]

    Otherwise, with k' = 2^floor(lg k), the surplus devices fold their whole
    vector into a partner first (alpha + n/B, and n/gamma to reduce it) and get
    the result back at the end (alpha + n/B)::

        T = (2·floor(lg k) + 2)·alpha + (2(k'-1)/k' + 2) · n/B [+ ((k'-1)/k' + 1) · n/gamma]

    alpha, B: the slowest spanned tier when every device sends at once.
    """
    k, n, link = _flat_inputs(network, k, nbytes)
    lg, p2, extra = _doubling(k)
    alpha, bus = link.alpha, link.bus
    pf = p2.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = (2.0 * (pf - 1.0) / pf + 2.0 * extra) * n / bus
    terms = dict(latency=(2.0 * lg + 2.0 * extra) * alpha, bandwidth=bandwidth, reduced=((pf - 1.0) / pf + extra) * n)
    return _priced(network, k, n, name="rabenseifner", link=link, reduce_Bps=reduce_Bps, **terms)


def hierarchical_allreduce(
    network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray, *, reduce_Bps: float | None = None
) -> CommCost:
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
    alpha, lat_tier = latency_params(network, k)
    bus, _ = bottleneck_of(bw, k)
    shape = np.broadcast(k, n).shape
    tl = np.zeros((len(network),) + shape)
    tb = np.zeros((len(network),) + shape)
    for i, t in enumerate(network):
        if i == 0:
            g = np.minimum(k, t.size) if t.size is not None else k
        else:
            below = network[i - 1].inner_size
            units = -(-k // below)  # ceil(k / size_{i-1}): domains of tier i-1 in use
            g = np.minimum(units, max(1, t.size // below)) if t.size is not None else units
        g = np.where(spanned[i], g, 1).astype(np.float64)
        tl[i] = 2.0 * (g - 1.0) * t.latency_s
        with np.errstate(divide="ignore", invalid="ignore"):
            tb[i] = np.where(g > 1, 2.0 * (g - 1.0) / g * n / bw[i], 0.0)
    bottleneck = np.where(k >= 2, np.argmax(tb, axis=0), -1)
    link = Link(alpha, bus, bottleneck, lat_tier)
    terms = dict(
        latency=tl.sum(axis=0),
        bandwidth=tb.sum(axis=0),
        reduced=(kf - 1.0) / np.maximum(kf, 1.0) * n,
        tier_latency=tl,
        tier_bw=tb,
    )
    return _priced(network, k, n, name="hierarchical", link=link, reduce_Bps=reduce_Bps, **terms)


def ps_allreduce(
    network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray, *, reduce_Bps: float | None = None
) -> CommCost:
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
    alpha, lat_tier = latency_params(network, k)
    spanned = tier_spanned(network, k)
    raw = np.array([t.effective_Bps for t in network]).reshape((-1,) + (1,) * k.ndim)
    bus, bottleneck = bottleneck_of(np.where(spanned, raw, np.inf), k)
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = 2.0 * (kf - 1.0) * n / bus
    link = Link(alpha, bus, bottleneck, lat_tier)
    terms = dict(latency=2.0 * (kf - 1.0) * alpha, bandwidth=bandwidth, reduced=(kf - 1.0) * n)
    return _priced(network, k, n, name="ps", link=link, reduce_Bps=reduce_Bps, **terms)


def ps_sharded_allreduce(
    network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray, *, reduce_Bps: float | None = None
) -> CommCost:
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
    return _two_passes(network, k, nbytes, name="ps-sharded", reduce_Bps=reduce_Bps, link=_flat(network, k))
