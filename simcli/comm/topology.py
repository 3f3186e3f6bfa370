"""Where a collective's bytes go: which tiers k devices span and what bandwidth each tier offers.

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
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..base.types import InputError, Tier

__all__ = [
    "check_devices",
    "tier_spanned",
    "tier_bandwidth",
    "ring_params",
    "tier_link_bandwidth",
    "latency_params",
    "bottleneck_of",
]


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
                sub = network[i - 1].inner_size
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


def latency_params(network: Sequence[Tier], k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(largest spanned latency, index of that tier or -1 where k == 1)."""
    spanned = tier_spanned(network, k)
    lat = np.array([t.latency_s for t in network]).reshape((-1,) + (1,) * k.ndim)
    lat = np.where(spanned, lat, -1.0)
    return np.maximum(np.max(lat, axis=0), 0.0), np.where(k >= 2, np.argmax(lat, axis=0), -1)


def bottleneck_of(bw: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(smallest bandwidth over the tiers, its tier index or -1 where k == 1)."""
    return np.min(bw, axis=0), np.where(k >= 2, np.argmin(bw, axis=0), -1)
