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


def ring_allreduce(network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray,
                   reduce_Bps: float | None = None) -> CommCost:
    """Ring all-reduce: T = 2(k-1)·alpha + 2(k-1)/k · n/B [+ (k-1)/k · n/gamma].

    Patarasuk & Yuan 2009 (bandwidth-optimal all-reduce); the gamma term, when
    the device gives a reduce rate, is Thakur, Rabenseifner & Gropp 2005's
    (k-1)/k · n · gamma for the reduce-scatter half.
    """
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(nbytes, dtype=np.float64)
    alpha, bus, bottleneck = ring_params(network, k)
    kf = k.astype(np.float64)
    steps = 2.0 * (kf - 1.0)
    latency = steps * alpha
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = np.where(k >= 2, busbw_factor(kf) * n / bus, 0.0)
    if reduce_Bps:
        reduction = (kf - 1.0) / kf * n / reduce_Bps
    else:
        reduction = np.zeros(np.broadcast(latency, n).shape)
    latency, bandwidth, reduction = np.broadcast_arrays(latency, bandwidth, reduction)
    time = latency + bandwidth + reduction
    shape = time.shape
    return CommCost(time=time, latency=latency, bandwidth=bandwidth, reduction=reduction,
                    alpha=np.broadcast_to(alpha, shape), bus_Bps=np.broadcast_to(bus, shape),
                    bottleneck=np.broadcast_to(bottleneck, shape))


#: all-reduce algorithms by name: f(network, k, nbytes, reduce_Bps) -> CommCost
ALGORITHMS: dict[str, Callable[..., CommCost]] = {"ring": ring_allreduce}


def allreduce(algorithm: str, network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray,
              reduce_Bps: float | None = None) -> CommCost:
    """Cost of one all-reduce of ``nbytes`` over ``k`` devices with the named algorithm.

    ``k`` and ``nbytes`` broadcast against each other (pass ``k[:, None]`` and
    ``n[None, :]`` for a grid).
    """
    try:
        f = ALGORITHMS[algorithm]
    except KeyError:
        raise InputError(f"--algorithm: unknown algorithm {algorithm!r}; choose one of "
                         f"{', '.join(ALGORITHMS)}") from None
    return f(network, k, nbytes, reduce_Bps)
