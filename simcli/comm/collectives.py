"""Alpha-beta cost of all-reduce, vectorised over device counts and message sizes.

The network is a list of tiers, innermost first (see :class:`simcli.base.types.Tier`).
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

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..base.types import InputError, Tier

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
    "AlgorithmSpec",
    "REGISTRY",
    "SPECS",
    "PROTOCOLS",
    "collective",
    "default_algorithm",
]


class _Lazy:
    """A field of :class:`CommCost` computed on first access (NCCL's per-tier terms over a big grid)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn


@dataclass(frozen=True)
class CommCost:
    """Cost of one all-reduce, arrays broadcast over (k, n). All times in seconds.

    A field may be given as a :class:`_Lazy`; it is computed (and kept) when it is first read.
    """

    def __getattribute__(self, name: str) -> Any:
        v = object.__getattribute__(self, name)
        if type(v) is _Lazy:
            v = v.fn()
            object.__setattr__(self, name, v)
        return v

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
    #: NCCL's protocol per element ("ll", "ll128", "simple"; None for a textbook algorithm)
    protocol: np.ndarray | None = None
    #: hops per tier on the chunk's critical path (NCCL model), shape (tiers, ...); None for textbook costs
    tier_hops: np.ndarray | None = None
    #: the part of ``bandwidth`` that is pipeline fill (NVLS, NCCL model); None for textbook costs
    fill: np.ndarray | None = None
    #: what the host's issue rate adds to ``time`` when one thread drives several GPUs (nccl-tests ``-g G``,
    #: :func:`simcli.comm.nccl.host_floor`): ``max(0, G·launch - t_gpu)``; None at one GPU per process
    host: np.ndarray | None = None


#: the CommCost fields that add up when costs are summed or scaled (the others describe the choice)
COMM_TERMS = (
    "time",
    "latency",
    "bandwidth",
    "reduction",
    "tier_latency",
    "tier_bandwidth_s",
    "tier_hops",
    "fill",
    "host",
)


def check_devices(network: Sequence[Tier], k: np.ndarray) -> None:
    """Refuse device counts beyond what the profile describes (the outermost tier's size)."""
    cap = network[-1].size
    if cap is not None and np.any(k > cap):
        raise InputError(
            f"--devices: {int(np.max(k))} devices exceed this profile's {cap} "
            f"(network[{len(network) - 1}].size); ask for at most {cap}"
        )


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


def busbw_factor(k: np.ndarray, collective: str = "all_reduce") -> np.ndarray:
    """nccl-tests' bus-bandwidth factor busbw/algbw (doc/PERFORMANCE.md): all-reduce 2(k-1)/k; reduce-scatter and
    all-gather (k-1)/k; broadcast 1."""
    k = np.asarray(k, dtype=np.float64)
    if collective == "all_reduce":
        return 2.0 * (k - 1.0) / k
    if collective in ("reduce_scatter", "all_gather"):
        return (k - 1.0) / k
    if collective == "broadcast":
        return np.ones_like(k)
    raise InputError(
        f"--collective: unknown collective {collective!r}; choose one of all_reduce, reduce_scatter, "
        "all_gather, broadcast"
    )


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


def _cost(
    network: Sequence[Tier],
    k: np.ndarray,
    n: np.ndarray,
    name: str,
    *,
    latency: np.ndarray,
    bandwidth: np.ndarray,
    reduced: np.ndarray,
    reduce_Bps: float | None,
    alpha: np.ndarray,
    bus: np.ndarray,
    bottleneck: np.ndarray,
    lat_tier: np.ndarray,
    tier_latency: np.ndarray | None = None,
    tier_bw: np.ndarray | None = None,
    zero_at_one: bool = False,
) -> CommCost:
    """Broadcast the terms of one algorithm over (k, n) and pack them (k == 1 costs nothing).

    The per-tier terms are computed when first read (:class:`_Lazy`): a big grid that only wants times
    does not pay for them. ``zero_at_one``: the caller's terms are already 0 where k == 1 (no masking pass).
    """
    one = k < 2
    anyone = bool(np.any(one)) and not zero_at_one
    shape = np.broadcast(latency, bandwidth, n, k).shape
    with np.errstate(invalid="ignore"):
        if anyone:
            latency = np.where(one, 0.0, latency)
            bandwidth = np.where(one, 0.0, bandwidth)
        time = latency + bandwidth
        if reduce_Bps:
            reduction = (
                np.where(one, 0.0, _reduction(reduced, reduce_Bps)) if anyone else _reduction(reduced, reduce_Bps)
            )
            time = time + reduction
        else:
            reduction = None
    time = np.broadcast_to(time, shape)
    latency, bandwidth = np.broadcast_to(latency, shape), np.broadcast_to(bandwidth, shape)
    nt = len(network)

    def tiers(values: np.ndarray, given: np.ndarray | None, which: np.ndarray) -> Callable[[], np.ndarray]:
        def build() -> np.ndarray:
            out = given if given is not None else _per_tier(nt, values, np.broadcast_to(which, shape))
            return np.broadcast_to(out, (nt,) + shape)

        return build

    return CommCost(
        time=time,
        latency=latency,
        bandwidth=bandwidth,
        reduction=(np.broadcast_to(reduction, shape) if reduction is not None else _Lazy(lambda: np.zeros(shape))),
        alpha=np.broadcast_to(alpha, shape),
        bus_Bps=np.broadcast_to(bus, shape),
        bottleneck=np.broadcast_to(bottleneck, shape),
        tier_latency=_Lazy(tiers(latency, tier_latency, lat_tier)),
        tier_bandwidth_s=_Lazy(tiers(bandwidth, tier_bw, bottleneck)),
        algorithm=np.broadcast_to(np.array(name, dtype=object), shape),
    )  # a view, not a copy


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
    network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray, reduce_Bps: float | None = None
) -> CommCost:
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
        # 2(k-1)/k / B per byte, over k only (0 at k = 1, where B is inf), then one product over the grid
        bandwidth = n * (busbw_factor(np.maximum(kf, 1.0)) / bus)
    return _cost(
        network,
        k,
        n,
        "ring",
        latency=2.0 * (kf - 1.0) * alpha,
        bandwidth=bandwidth,
        reduced=(kf - 1.0) / np.maximum(kf, 1.0) * n,
        reduce_Bps=reduce_Bps,
        alpha=alpha,
        bus=bus,
        bottleneck=bottleneck,
        lat_tier=lat_tier,
        zero_at_one=True,
    )


def tree_allreduce(
    network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray, reduce_Bps: float | None = None
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
    alpha, bus, bottleneck = ring_params(network, k)
    _, lat_tier = _latency_params(network, k)
    lg, p2 = _pow2_floor(k)
    depth = np.where(p2 == k, lg, lg + 1).astype(np.float64)  # ceil(log2 k)
    f = np.select([k <= 1, k == 2, k == 3], [0.0, 1.0, 1.5], 2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = f * n / bus
    reduced = np.where(k == 2, 0.5, 1.0) * n
    return _cost(
        network,
        k,
        n,
        "tree",
        latency=2.0 * depth * alpha,
        bandwidth=bandwidth,
        reduced=reduced,
        reduce_Bps=reduce_Bps,
        alpha=alpha,
        bus=bus,
        bottleneck=bottleneck,
        lat_tier=lat_tier,
    )


def _flat(network: Sequence[Tier], k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(alpha, B, bottleneck tier, latency tier) of a hierarchy-blind algorithm: slowest spanned tier."""
    alpha, lat_tier = _latency_params(network, k)
    bus, bottleneck = _bottleneck(tier_link_bandwidth(network, k), k)
    return alpha, bus, bottleneck, lat_tier


def recursive_doubling_allreduce(
    network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray, reduce_Bps: float | None = None
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
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(nbytes, dtype=np.float64)
    alpha, bus, bottleneck, lat_tier = _flat(network, k)
    lg, p2 = _pow2_floor(k)
    extra = (p2 != k).astype(np.float64)
    steps = lg + 2.0 * extra
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = steps * n / bus
    return _cost(
        network,
        k,
        n,
        "recursive-doubling",
        latency=steps * alpha,
        bandwidth=bandwidth,
        reduced=(lg + extra) * n,
        reduce_Bps=reduce_Bps,
        alpha=alpha,
        bus=bus,
        bottleneck=bottleneck,
        lat_tier=lat_tier,
    )


def rabenseifner_allreduce(
    network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray, reduce_Bps: float | None = None
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
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(nbytes, dtype=np.float64)
    alpha, bus, bottleneck, lat_tier = _flat(network, k)
    lg, p2 = _pow2_floor(k)
    extra = (p2 != k).astype(np.float64)
    pf = p2.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = (2.0 * (pf - 1.0) / pf + 2.0 * extra) * n / bus
    return _cost(
        network,
        k,
        n,
        "rabenseifner",
        latency=(2.0 * lg + 2.0 * extra) * alpha,
        bandwidth=bandwidth,
        reduced=((pf - 1.0) / pf + extra) * n,
        reduce_Bps=reduce_Bps,
        alpha=alpha,
        bus=bus,
        bottleneck=bottleneck,
        lat_tier=lat_tier,
    )


def hierarchical_allreduce(
    network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray, reduce_Bps: float | None = None
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
    return _cost(
        network,
        k,
        n,
        "hierarchical",
        latency=tl.sum(axis=0),
        bandwidth=tb.sum(axis=0),
        reduced=(kf - 1.0) / np.maximum(kf, 1.0) * n,
        reduce_Bps=reduce_Bps,
        alpha=alpha,
        bus=bus,
        bottleneck=bottleneck,
        lat_tier=lat_tier,
        tier_latency=tl,
        tier_bw=tb,
    )


def ps_allreduce(
    network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray, reduce_Bps: float | None = None
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
    alpha, lat_tier = _latency_params(network, k)
    spanned = tier_spanned(network, k)
    raw = np.array([t.effective_Bps for t in network]).reshape((-1,) + (1,) * k.ndim)
    bus, bottleneck = _bottleneck(np.where(spanned, raw, np.inf), k)
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = 2.0 * (kf - 1.0) * n / bus
    return _cost(
        network,
        k,
        n,
        "ps",
        latency=2.0 * (kf - 1.0) * alpha,
        bandwidth=bandwidth,
        reduced=(kf - 1.0) * n,
        reduce_Bps=reduce_Bps,
        alpha=alpha,
        bus=bus,
        bottleneck=bottleneck,
        lat_tier=lat_tier,
    )


def ps_sharded_allreduce(
    network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray, reduce_Bps: float | None = None
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
    n = np.asarray(nbytes, dtype=np.float64)
    kf = k.astype(np.float64)
    alpha, bus, bottleneck, lat_tier = _flat(network, k)
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = busbw_factor(np.maximum(kf, 1.0)) * n / bus
    return _cost(
        network,
        k,
        n,
        "ps-sharded",
        latency=2.0 * (kf - 1.0) * alpha,
        bandwidth=bandwidth,
        reduced=(kf - 1.0) / np.maximum(kf, 1.0) * n,
        reduce_Bps=reduce_Bps,
        alpha=alpha,
        bus=bus,
        bottleneck=bottleneck,
        lat_tier=lat_tier,
    )


# --------------------------------------------------------------------------- the registry


@dataclass(frozen=True)
class AlgorithmSpec:
    """One algorithm simcli can price: everything the CLI help, explain, the map and the docs say about it.

    ``textbook``: its alpha-beta all-reduce cost ``f(network, k, n, reduce_Bps) -> CommCost`` (None: NCCL only);
    ``nccl``: the NCCL algorithm the name forces on a profile that models NCCL (``"*"``: NCCL's own choice);
    ``collectives``: the collectives it prices.
    """

    name: str
    label: str
    formula: str
    source: str
    collectives: tuple[str, ...]
    textbook: Callable[..., "CommCost"] | None = None
    nccl: str | None = None


_ALL = ("all_reduce", "reduce_scatter", "all_gather", "broadcast")
_NCCL_SRC = "NVIDIA/nccl v2.20.3 src/graph/tuning.cc, src/enqueue.cc (simcli.comm.nccl)"
_NCCL_FORMULA = "base_p + Σ_tiers hops_i·α_i,p + n/B_alg,p"

#: every algorithm, one row each; ``auto`` (the fastest of everything) is not a row
REGISTRY: tuple[AlgorithmSpec, ...] = (
    AlgorithmSpec(
        "nccl",
        "nccl",
        f"NCCL's choice: the (algorithm, protocol) pair its tuner prices cheapest, each {_NCCL_FORMULA}",
        _NCCL_SRC,
        _ALL,
        None,
        "*",
    ),
    AlgorithmSpec(
        "ring",
        "ring",
        "2(k-1)·α + 2(k-1)/k·n/B [+ (k-1)/k·n/γ]  (Patarasuk & Yuan 2009); on an NCCL "
        f"profile NCCL's Ring with its best protocol: {_NCCL_FORMULA}, B_alg = B_p·k/nsteps",
        "Patarasuk & Yuan 2009; " + _NCCL_SRC,
        _ALL,
        ring_allreduce,
        "ring",
    ),
    AlgorithmSpec(
        "tree",
        "tree",
        "2·ceil(lg k)·α + f_k·n/B, f_k = 2 (f_2 = 1, f_3 = 1.5) [+ n/γ]  (double binary "
        "tree, Sanders, Speck & Träff 2009); on an NCCL profile NCCL's Tree: base_p + 2((ppn-1)·α_0,p + "
        "floor(lg N)·α_net,p) + 2n/B_p",
        "Sanders, Speck & Träff 2009; " + _NCCL_SRC,
        ("all_reduce",),
        tree_allreduce,
        "tree",
    ),
    AlgorithmSpec(
        "nvls",
        "nvls",
        "NVLink SHARP in one NVSwitch domain: α_nvls + n/(5/6·channels·s)",
        _NCCL_SRC + "; src/transport/nvls.cc (16 channels on SM90)",
        ("all_reduce", "reduce_scatter", "all_gather"),
        None,
        "nvls",
    ),
    AlgorithmSpec(
        "nvls-tree",
        "nvlst",
        "NVLS in each node, a tree across: α_nvls + 2·floor(lg N)·α_net + n/(5/6·channels·s)",
        _NCCL_SRC,
        ("all_reduce",),
        None,
        "nvls-tree",
    ),
    AlgorithmSpec(
        "recursive-doubling",
        "rd",
        "lg k·(α + n/B) [+ lg k·n/γ], k not a power of two: floor(lg k)+2 steps (Thakur, Rabenseifner & Gropp 2005)",
        "Thakur, Rabenseifner & Gropp 2005, §4",
        ("all_reduce",),
        recursive_doubling_allreduce,
    ),
    AlgorithmSpec(
        "rabenseifner",
        "rab",
        "2·lg k·α + 2(k-1)/k·n/B [+ (k-1)/k·n/γ], k not a power of two: +2α + 2n/B (Thakur, Rabenseifner & Gropp 2005)",
        "Thakur, Rabenseifner & Gropp 2005, §4.1",
        ("all_reduce",),
        rabenseifner_allreduce,
    ),
    AlgorithmSpec(
        "hierarchical",
        "hier",
        "Σ_tiers 2(g_i-1)·α_i + 2(g_i-1)/g_i·n/B_i [+ (k-1)/k·n/γ]  (reduce-"
        "scatter in the node, all-reduce across, all-gather; Horovod)",
        "Horovod hierarchical all-reduce",
        ("all_reduce",),
        hierarchical_allreduce,
    ),
    AlgorithmSpec(
        "ps",
        "ps",
        "2(k-1)·α + 2(k-1)·n/B_server [+ (k-1)·n/γ]  (one parameter server)",
        "Li et al. 2014",
        ("all_reduce",),
        ps_allreduce,
    ),
    AlgorithmSpec(
        "ps-sharded",
        "ps-sh",
        "2(k-1)·α + 2(k-1)/k·n/B [+ (k-1)/k·n/γ]  (pairwise exchange, Thakur et al. 2005)",
        "Thakur, Rabenseifner & Gropp 2005, §3",
        ("all_reduce",),
        ps_sharded_allreduce,
    ),
)
SPECS: dict[str, AlgorithmSpec] = {a.name: a for a in REGISTRY}

#: the textbook all-reduce costs by name: f(network, k, nbytes, reduce_Bps) -> CommCost
ALGORITHMS: dict[str, Callable[..., CommCost]] = {a.name: a.textbook for a in REGISTRY if a.textbook is not None}

#: what --algorithm accepts
CHOICES = tuple(SPECS) + ("auto",)
#: what :func:`allreduce` (the textbook costs over a bare network) accepts
TEXTBOOK_CHOICES = tuple(ALGORITHMS) + ("auto",)
#: what --protocol accepts (NCCL's protocols)
PROTOCOLS = ("ll", "ll128", "simple")


def auto_allreduce(
    network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray, reduce_Bps: float | None = None
) -> CommCost:
    """The fastest textbook algorithm of :data:`ALGORITHMS` for each element; ties go to the earlier one."""
    return _fastest([f(network, k, nbytes, reduce_Bps) for f in ALGORITHMS.values()])


def _fastest(costs: list[CommCost]) -> CommCost:
    """Element by element, the cheapest of ``costs`` (ties to the earlier)."""
    times = np.stack([c.time for c in costs])
    best = np.argmin(times, axis=0)

    def pick(field: str, axis0: bool = False, zero: bool = False) -> np.ndarray | None:
        vals = [getattr(c, field) for c in costs]
        if zero and not all(v is None for v in vals):  # a term some costs do not have (fill): 0 for those
            vals = [np.zeros(times.shape[1:]) if v is None else v for v in vals]
        if any(v is None for v in vals):
            return None
        arr = np.stack(
            [np.broadcast_to(np.asarray(v), np.shape(vals[0])) if not axis0 else np.asarray(v) for v in vals]
        )
        if axis0:  # per-tier arrays: (alg, tiers, ...)
            return np.take_along_axis(arr, best[None, None], axis=0)[0]
        return np.take_along_axis(arr, best[None], axis=0)[0]

    protos = [
        c.protocol if c.protocol is not None else np.broadcast_to(np.array("-", dtype=object), c.time.shape)
        for c in costs
    ]
    protocol = np.take_along_axis(
        np.stack([np.broadcast_to(p, costs[0].time.shape) for p in protos]), best[None], axis=0
    )[0]
    return CommCost(
        time=pick("time"),
        latency=pick("latency"),
        bandwidth=pick("bandwidth"),
        reduction=pick("reduction"),
        alpha=pick("alpha"),
        bus_Bps=pick("bus_Bps"),
        bottleneck=pick("bottleneck"),
        tier_latency=pick("tier_latency", True),
        tier_bandwidth_s=pick("tier_bandwidth_s", True),
        algorithm=pick("algorithm"),
        protocol=protocol,
        tier_hops=pick("tier_hops", True),
        fill=pick("fill", zero=True),
    )


def check_algorithm(algorithm: str, option: str = "--algorithm") -> str:
    """The algorithm's name if simcli knows it, else an InputError that lists the choices."""
    if algorithm not in CHOICES:
        import difflib

        close = difflib.get_close_matches(algorithm, CHOICES, n=2)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        raise InputError(f"{option}: unknown algorithm {algorithm!r}{hint}; choose one of {', '.join(CHOICES)}")
    return algorithm


def allreduce(
    algorithm: str, network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray, reduce_Bps: float | None = None
) -> CommCost:
    """Cost of one all-reduce of ``nbytes`` over ``k`` devices with the named *textbook* algorithm (or ``auto``).

    ``k`` and ``nbytes`` broadcast against each other (pass ``k[:, None]`` and
    ``n[None, :]`` for a grid). For NCCL's algorithms and the other collectives see :func:`collective`.
    """
    check_algorithm(algorithm)
    if algorithm != "auto" and algorithm not in ALGORITHMS:
        raise InputError(f"--algorithm: {algorithm!r} is one of NCCL's; price it with a profile that models NCCL")
    f = auto_allreduce if algorithm == "auto" else ALGORITHMS[algorithm]
    return f(network, k, nbytes, reduce_Bps)


# --------------------------------------------------------------------------- profiles: NCCL or textbook


def default_algorithm(profile: Any) -> str:
    """What ``--algorithm`` means when not given: NCCL's choice on a profile that models NCCL, else the ring."""
    return "nccl" if profile.library == "nccl" else "ring"


def nccl_spec(profile: Any) -> Any:
    """The profile's NCCL constants, or the defaults for its GPU generation and link kinds."""
    from . import nccl

    return profile.nccl if profile.nccl is not None else nccl.default_spec(profile.device.name, profile.network)


def check_protocol(protocol: str | None, option: str = "--protocol") -> str | None:
    if protocol in (None, "auto"):
        return None
    if protocol not in PROTOCOLS:
        raise InputError(f"{option}: unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)} or auto")
    return protocol


def collective(
    profile: Any,
    algorithm: str | None,
    k: np.ndarray,
    nbytes: np.ndarray,
    collective: str = "all_reduce",
    protocol: str | None = None,
    gpus_per_process: int | np.ndarray = 1,
) -> CommCost:
    """Cost of one collective of ``nbytes`` (nccl-tests' size) over ``k`` devices on ``profile``.

    ``algorithm`` None is :func:`default_algorithm`. On a profile that models NCCL (``library: nccl``) the
    names ``nccl``, ``ring``, ``tree``, ``nvls`` and ``nvls-tree`` mean what NCCL runs (``nccl``: its tuner's
    cheapest pair; the others force that algorithm as ``NCCL_ALGO`` does, with its cheapest protocol unless
    ``protocol`` forces one); on a textbook profile ``ring`` and ``tree`` are the alpha-beta formulas.
    ``auto`` is the fastest of everything simcli models, which no single library reaches.

    ``gpus_per_process`` > 1 is a run where one host thread launches the collective on that many GPUs
    (nccl-tests ``-g G``; a number, or an array that broadcasts against the grid, one value per measured
    row): an NCCL-priced time is then at least :func:`simcli.comm.nccl.host_floor` (the ``host`` term says how much
    that adds).
    """
    cost = _collective(profile, algorithm, k, nbytes, collective, protocol)
    g = np.asarray(gpus_per_process)
    if np.all(g == 1):
        return cost
    if np.any(g < 1):
        raise InputError(f"--gpus-per-process: {int(np.min(g))} must be at least 1 (nccl-tests' -g)")
    if cost.protocol is None:  # a textbook (alpha-beta) cost: no NCCL launches to count
        return cost
    from . import nccl

    floor = nccl.host_floor(g)
    launched = np.isin(np.broadcast_to(cost.protocol, np.shape(cost.time)), nccl.PROTOS)  # auto: NCCL's elements
    time = np.where(launched, np.maximum(cost.time, floor), cost.time)
    return dataclasses.replace(cost, time=time, host=time - cost.time)


def _collective(
    profile: Any,
    algorithm: str | None,
    k: np.ndarray,
    nbytes: np.ndarray,
    collective: str,
    protocol: str | None,
) -> CommCost:
    from . import nccl

    algorithm = check_algorithm(algorithm or default_algorithm(profile))
    protocol = check_protocol(protocol)
    if collective not in nccl.COLLECTIVES:
        raise InputError(
            f"--collective: unknown collective {collective!r}; choose one of {', '.join(nccl.COLLECTIVES)}"
        )
    net = profile.network
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(nbytes, dtype=np.float64)
    gamma = profile.device.reduce_Bps
    is_nccl = profile.library == "nccl"
    if algorithm != "auto":
        spec = SPECS[algorithm]
        if collective not in spec.collectives:
            raise InputError(
                f"--algorithm: {algorithm} does not run {collective}; choose one of "
                f"{', '.join(a.name for a in REGISTRY if collective in a.collectives)}"
            )
        uses_nccl = spec.nccl is not None and (is_nccl or spec.textbook is None)
        if not uses_nccl:
            if protocol is not None:
                raise InputError(
                    f"--protocol: {protocol} is one of NCCL's protocols; {algorithm} is priced with "
                    "the textbook formula here (give a profile that models NCCL, or drop --protocol)"
                )
            return textbook_collective(algorithm, net, k, n, collective, gamma)
        algos = None if spec.nccl == "*" else [spec.nccl]
        return nccl_collective(profile, k, n, collective, algos, protocol)
    # auto: the fastest of NCCL's pairs and every textbook algorithm that runs this collective
    costs = []
    if is_nccl or protocol is not None:
        costs.append(nccl_collective(profile, k, n, collective, None, protocol, by="time"))
    if protocol is None:
        costs += [
            textbook_collective(a.name, net, k, n, collective, gamma)
            for a in REGISTRY
            if a.textbook is not None and collective in a.collectives
        ]
    return costs[0] if len(costs) == 1 else _fastest(costs)


def textbook_collective(
    algorithm: str, network: Sequence[Tier], k: np.ndarray, n: np.ndarray, collective: str, reduce_Bps: float | None
) -> CommCost:
    """The alpha-beta cost; reduce-scatter and all-gather as one ring pass, broadcast as a pipelined ring."""
    if collective == "all_reduce":
        return ALGORITHMS[algorithm](network, k, n, reduce_Bps)
    alpha, bus, bottleneck = ring_params(network, k)
    _, lat_tier = _latency_params(network, k)
    kf = k.astype(np.float64)
    steps = kf if collective == "broadcast" else kf - 1.0
    frac = np.ones_like(kf) if collective == "broadcast" else (kf - 1.0) / np.maximum(kf, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = frac * n / bus
    reduced = frac * n if collective == "reduce_scatter" else np.zeros_like(frac * n)
    return _cost(
        network,
        k,
        n,
        "ring",
        latency=steps * alpha,
        bandwidth=bandwidth,
        reduced=reduced,
        reduce_Bps=reduce_Bps,
        alpha=alpha,
        bus=bus,
        bottleneck=bottleneck,
        lat_tier=lat_tier,
    )


def nccl_collective(
    profile: Any,
    k: np.ndarray,
    n: np.ndarray,
    collective: str = "all_reduce",
    algorithms: Sequence[str] | None = None,
    protocol: str | None = None,
    by: str = "tuner",
) -> CommCost:
    """NCCL's pick among its (algorithm, protocol) pairs (``by="tuner"``, as NCCL chooses) or the fastest
    (``by="time"``), priced as :mod:`simcli.comm.nccl` says it costs; vectorised, a running minimum over the pairs."""
    from . import nccl

    net = profile.network
    spec = nccl_spec(profile)
    tb = tier_bandwidth(net, k)
    cands = nccl.pairs(net, spec, k, tb, collective, algorithms, [protocol] if protocol else None)
    if not cands:
        raise InputError(
            f"--protocol: {protocol} does not run {', '.join(algorithms or ['any algorithm'])} on "
            f"profile {profile.name}; choose another protocol or leave --protocol out"
        )
    if algorithms is not None and "ring" not in algorithms:
        # NCCL (tuning.cc, "at least set ring algo available"): where the forced algorithm cannot run, Ring does
        forced_on = np.any(np.stack([np.broadcast_to(p.enabled, k.shape) for p in cands]), axis=0)
        for r in nccl.pairs(net, spec, k, tb, collective, ["ring"], [protocol] if protocol else None):
            cands.append(dataclasses.replace(r, enabled=np.broadcast_to(r.enabled, k.shape) & ~forced_on))
    n = np.asarray(n, dtype=np.float64)
    shape = np.broadcast(k, n).shape
    P = len(cands)
    ks = k.shape
    # per-pair tables over k (disabled pairs: infinite latency, so their time is inf without a mask)
    lat_t = np.stack([np.where(p.enabled, np.broadcast_to(p.latency, ks), np.inf) for p in cands])
    inv_t = np.stack([np.where(p.enabled, 1.0 / np.broadcast_to(p.alg_Bps, ks), 0.0) for p in cands])
    # bytes per channel below which a channel is dropped; NVLS never drops one (a threshold of ~0)
    thr_t = np.stack(
        [np.where(np.broadcast_to(p.threshold, ks) > 0, np.broadcast_to(p.threshold, ks), 1e-30) for p in cands]
    )
    nn = np.broadcast_to(n, shape)
    best = np.empty(shape)
    idx = np.zeros(shape, dtype=np.intp)
    mask = np.empty(shape, dtype=bool)
    key = np.empty(shape)
    corr_by_pair = []
    fill_by_pair: dict[int, np.ndarray] = {}
    for j, pr in enumerate(cands):
        out = best if j == 0 else key  # the first pair's key is the running minimum
        corr = pr.correction(n)  # tree's size factor (1.0 for the others), shaped like n
        corr_by_pair.append(corr)
        np.multiply(nn, inv_t[j], out=out)
        if np.ndim(corr):
            out /= corr
        if by != "tuner":
            out /= pr.share(n)
        out += pr.tuner_latency(lat_t[j], n) if (by == "tuner" and pr.plateau) else lat_t[j]
        if pr.ops is not None and by != "tuner":  # NVLS's pipeline fill: what it costs (NCCL's tuner omits it)
            fill_by_pair[j] = np.where(np.broadcast_to(pr.enabled, ks), pr.fill(nn), 0.0)
            out += fill_by_pair[j]
        if j == 0:
            continue
        np.less(key, best, out=mask)
        np.copyto(best, key, where=mask)
        np.copyto(idx, j, where=mask)
    # what the chosen pair costs: its latency, and its bytes at the channels getAlgoInfo launches for the size
    nk = int(np.prod(ks))
    flat = idx * nk
    flat += np.arange(nk).reshape(ks)  # index of (chosen pair, k) in a (pairs, k) table, per element

    def pick(table: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(table).reshape(-1).take(flat)

    ch = float(cands[0].channels)
    lat = pick(lat_t)
    # nc/ch of the chosen pair: nc = clip(floor(n / threshold), 1, channels)
    nc = np.divide(nn, pick(thr_t))
    np.floor(nc, out=nc)
    np.clip(nc, 1.0, ch, out=nc)
    if any(np.ndim(c) for c in corr_by_pair):
        corr_t = np.stack([np.broadcast_to(np.asarray(c, dtype=np.float64), np.shape(n)) for c in corr_by_pair])
        nsz = int(np.prod(np.shape(n)))
        fn = idx * nsz
        fn += np.arange(nsz).reshape(np.shape(n))
        nc *= corr_t.reshape(-1).take(fn)  # nc x the tree correction: the bandwidth's size factor x ch
    one = k < 2
    anyone = bool(np.any(one))
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = pick(inv_t * ch)
        bandwidth *= nn
        bandwidth /= nc
    fill = np.zeros(shape)
    for j, pr in enumerate(cands):
        if pr.ops is None:
            continue
        if j in fill_by_pair:
            np.copyto(fill, fill_by_pair[j], where=idx == j)
            continue
        chosen = idx == j  # priced only where it was chosen: a small part of a large grid
        if chosen.any():
            fill[chosen] = nccl.nvls_fill(
                pr.algorithm,
                nn[chosen],
                np.broadcast_to(pr.ops, shape)[chosen],
                np.broadcast_to(pr.nodes, shape)[chosen],
                np.broadcast_to(pr.alg_Bps, shape)[chosen],
                pr.stages,
            )
    bandwidth += fill
    if anyone:
        one = np.broadcast_to(one, shape)
        bandwidth = np.where(one, 0.0, bandwidth)
        lat = np.where(one, 0.0, lat)
        fill = np.where(one, 0.0, fill)
    time = lat + bandwidth
    alg_names = np.array([p.algorithm for p in cands] + ["none"])
    proto_names = np.array([p.protocol for p in cands] + [None], dtype=object)
    sel = np.where(one, P, idx) if anyone else idx
    nt = len(net)

    def bottleneck() -> np.ndarray:
        """NVLS in one node: the NVLink tier; the others: the ring's bottleneck tier; -1 where k == 1."""
        _, _, ring_b = ring_params(net, k)
        is_nvls = np.array([p.algorithm == "nvls" for p in cands] + [False])[sel]
        b = np.where(is_nvls, 0, ring_b)
        return np.where(one, -1, b) if anyone else b

    def tier_table(attr: str) -> Callable[[], np.ndarray]:
        def build() -> np.ndarray:
            tab = np.stack([getattr(p, attr) for p in cands])  # (P, tiers, ...k)
            out = np.stack([pick(tab[:, i]) for i in range(nt)])
            if attr == "hop_latency":
                out[0] += np.array([p.base for p in cands])[idx]  # NCCL's base latency, charged to tier 0
            return np.where(one, 0.0, out) if anyone else out

        return build

    # the lazy terms share one cache and never name the CommCost itself: a closure over it would make a
    # reference cycle, so that every result (and its grid-sized arrays) waited for the cyclic garbage collector
    cache: dict[str, np.ndarray] = {}

    def once(name: str, build: Callable[[], np.ndarray]) -> Callable[[], np.ndarray]:
        def get() -> np.ndarray:
            if name not in cache:
                cache[name] = build()
            return cache[name]

        return get

    hops_of = once("hops", tier_table("hops"))
    bneck_of = once("bottleneck", bottleneck)
    cost = CommCost(
        time=time,
        latency=lat,
        bandwidth=bandwidth,
        reduction=_Lazy(lambda: np.zeros(shape)),
        alpha=_Lazy(lambda: np.where(one, 0.0, lat / np.maximum(hops_of().sum(axis=0), 1.0))),
        bus_Bps=_Lazy(
            lambda: np.where(one, np.inf, pick(np.stack([np.broadcast_to(p.bus_Bps, ks) for p in cands])) * nc / ch)
        ),
        bottleneck=_Lazy(bneck_of),
        tier_latency=_Lazy(tier_table("hop_latency")),
        tier_bandwidth_s=_Lazy(lambda: _per_tier(nt, bandwidth, bneck_of())),
        algorithm=_Lazy(lambda: alg_names[sel]),
        protocol=_Lazy(lambda: proto_names[sel]),
        tier_hops=_Lazy(hops_of),
        fill=fill,
    )
    return cost


def affine_terms(
    network: Sequence[Tier], k: np.ndarray, reduce_Bps: float | None = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every algorithm's cost as ``T(n) = L + s·n``: name -> (L seconds, s seconds per byte), over k.

    Exact: each cost above is affine in the message size (the step counts depend on k only).
    """
    k = np.asarray(k, dtype=np.int64)
    out = {}
    for name, f in ALGORITHMS.items():
        c = f(network, k, np.float64(1.0), reduce_Bps)
        out[name] = (np.asarray(c.latency, dtype=np.float64), np.asarray(c.bandwidth + c.reduction, dtype=np.float64))
    return out


def crossovers(
    network: Sequence[Tier], k: np.ndarray, n_lo: float, n_hi: float, reduce_Bps: float | None = None
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
            if best is None or best_x > n_hi:
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


def allreduce_times(profile: Any, names: Sequence[str], k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """All-reduce time of each named algorithm on ``profile``, stacked: (algorithms, ...broadcast(k, n))."""
    return np.stack([np.broadcast_to(collective(profile, a, k, n).time, np.broadcast(k, n).shape) for a in names])


def crossovers_numeric(
    profile: Any, names: Sequence[str], k: np.ndarray, n_lo: float, n_hi: float, points: int = 512, iters: int = 40
) -> list[dict]:
    """Where the fastest of ``names`` changes, per k, for costs that are not affine in n (NCCL's).

    A log-spaced scan of ``points`` sizes finds each change; bisection on log n then narrows it to where the winner
    changes (to 2^-40 of the step in log n): where the two costs are equal, unless one of them jumps there (NCCL
    switching protocol or channel count). Same records as :func:`crossovers`.
    """
    k = np.asarray(k, dtype=np.int64)
    grid = np.geomspace(n_lo, n_hi, points)
    t = allreduce_times(profile, names, k[:, None], grid[None, :])
    win = np.argmin(t, axis=0)
    out = []
    for j, kj in enumerate(k.tolist()):
        for i in np.flatnonzero(win[j, 1:] != win[j, :-1]):
            a, b = int(win[j, i]), int(win[j, i + 1])
            lo, hi = np.log(grid[i]), np.log(grid[i + 1])
            kk = np.array([kj])
            for _ in range(iters):
                mid = 0.5 * (lo + hi)
                ta, tb = (collective(profile, names[x], kk, np.array([np.exp(mid)])).time[0] for x in (a, b))
                lo, hi = (mid, hi) if ta <= tb else (lo, mid)
            out.append({"devices": kj, "bytes": float(np.exp(0.5 * (lo + hi))), "from": names[a], "to": names[b]})
    return out
