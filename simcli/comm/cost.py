"""What one collective costs, as arrays over (k, n): :class:`CommCost`, its terms, and the helpers every
cost function uses to pack them (the textbook formulas of :mod:`simcli.comm.textbook`, NCCL's pairs of
:mod:`simcli.comm.nccl`).

Per-tier terms: every :class:`CommCost` carries ``tier_latency`` and ``tier_bandwidth_s`` of shape
(tiers, ...) that add up to ``latency`` and ``bandwidth``; a flat algorithm puts its latency on the tier with
the largest spanned alpha and its bandwidth term on the bottleneck tier.

nccl-tests' vocabulary (nccl-tests doc/PERFORMANCE.md): ``algbw = n / T``; all-reduce
``busbw = algbw · 2(k-1)/k`` (:func:`simcli.comm.specs.busbw_factor`); GB/s = 1e9 B/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence, cast

import numpy as np

from ..base.types import Tier

__all__ = ["CommCost", "COMM_TERMS", "Lazy", "lazy", "pack", "per_tier", "reduction_term", "fastest"]


class Lazy:
    """A field of :class:`CommCost` computed on first access (NCCL's per-tier terms over a big grid)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn


def lazy(fn: Callable[[], np.ndarray]) -> np.ndarray:
    """A :class:`Lazy` field for :class:`CommCost`, typed as the array it stands for: a CommCost computes it on
    first read, so its readers only ever see the array."""
    return cast(np.ndarray, Lazy(fn))


@dataclass(frozen=True)
class CommCost:
    """Cost of one all-reduce, arrays broadcast over (k, n). All times in seconds.

    A field may be given as a :class:`Lazy`; it is computed (and kept) when it is first read.
    """

    def __getattribute__(self, name: str) -> Any:
        v = object.__getattribute__(self, name)
        if type(v) is Lazy:
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
    #: the algorithm's name per element (``auto`` picks one per element)
    algorithm: np.ndarray
    #: per-tier latency terms, shape (tiers, ...); they add up to ``latency``
    tier_latency: np.ndarray | None = None
    #: per-tier bandwidth terms (s), shape (tiers, ...); they add up to ``bandwidth``
    tier_bandwidth_s: np.ndarray | None = None
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


def per_tier(ntiers: int, values: np.ndarray, tier: np.ndarray) -> np.ndarray:
    """Spread ``values`` onto the tier that ``tier`` names: shape (tiers, ...), zeros elsewhere."""
    out = np.empty((ntiers,) + values.shape)
    for i in range(ntiers):  # a loop over the (few) tiers, vectorised over the grid
        np.multiply(values, tier == i, out=out[i])
    return out


def reduction_term(bytes_reduced: np.ndarray, reduce_Bps: float | None) -> np.ndarray:
    """The gamma term: bytes one device reduces / its reduction rate (0 when the profile gives none)."""
    if not reduce_Bps:
        return np.zeros_like(bytes_reduced)
    return bytes_reduced / reduce_Bps


def pack(
    network: Sequence[Tier],
    k: np.ndarray,
    n: np.ndarray,
    *,
    name: str,
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

    The per-tier terms are computed when first read (:class:`Lazy`): a big grid that only wants times
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
                np.where(one, 0.0, reduction_term(reduced, reduce_Bps))
                if anyone
                else reduction_term(reduced, reduce_Bps)
            )
            time = time + reduction
        else:
            reduction = None
    time = np.broadcast_to(time, shape)
    latency, bandwidth = np.broadcast_to(latency, shape), np.broadcast_to(bandwidth, shape)
    nt = len(network)

    def tiers(values: np.ndarray, given: np.ndarray | None, which: np.ndarray) -> Callable[[], np.ndarray]:
        def build() -> np.ndarray:
            out = given if given is not None else per_tier(nt, values, np.broadcast_to(which, shape))
            return np.broadcast_to(out, (nt,) + shape)

        return build

    return CommCost(
        time=time,
        latency=latency,
        bandwidth=bandwidth,
        reduction=(np.broadcast_to(reduction, shape) if reduction is not None else lazy(lambda: np.zeros(shape))),
        alpha=np.broadcast_to(alpha, shape),
        bus_Bps=np.broadcast_to(bus, shape),
        bottleneck=np.broadcast_to(bottleneck, shape),
        tier_latency=lazy(tiers(latency, tier_latency, lat_tier)),
        tier_bandwidth_s=lazy(tiers(bandwidth, tier_bw, bottleneck)),
        algorithm=np.broadcast_to(np.array(name, dtype=object), shape),
    )  # a view, not a copy


def fastest(costs: list[CommCost]) -> CommCost:
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

    def pick_all(field: str) -> np.ndarray:
        """A field every CommCost has."""
        arr = pick(field)
        assert arr is not None, field  # the fields without a default
        return arr

    protos = [
        c.protocol if c.protocol is not None else np.broadcast_to(np.array("-", dtype=object), c.time.shape)
        for c in costs
    ]
    protocol = np.take_along_axis(
        np.stack([np.broadcast_to(p, costs[0].time.shape) for p in protos]), best[None], axis=0
    )[0]
    return CommCost(
        time=pick_all("time"),
        latency=pick_all("latency"),
        bandwidth=pick_all("bandwidth"),
        reduction=pick_all("reduction"),
        alpha=pick_all("alpha"),
        bus_Bps=pick_all("bus_Bps"),
        bottleneck=pick_all("bottleneck"),
        tier_latency=pick("tier_latency", True),
        tier_bandwidth_s=pick("tier_bandwidth_s", True),
        algorithm=pick_all("algorithm"),
        protocol=protocol,
        tier_hops=pick("tier_hops", True),
        fill=pick("fill", zero=True),
    )
