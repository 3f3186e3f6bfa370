"""NCCL's CollNet algorithms (in-network reduction: SHARP in InfiniBand switches), priced as NCCL's tuner prices them.

Where a profile's network tiers say the fabric reduces (``collnet: sharp`` on every tier the collective crosses
between nodes), NCCL may run two more all-reduce algorithms, both Simple only:

* **CollNetChain**: in each node a chain through the node's GPUs up to one head, the switches reduce across nodes,
  the chain carries the result back down. Latency ``baseLat + 2·(ppn-1)·intraLat + interLat``; bandwidth
  ``nChannels·bwIntra``, and the algorithm bandwidth half of it (``ratio = .5``).
* **CollNetDirect**: every GPU of the node talks to the node's heads at once (one head per NIC; NVSwitch nodes
  only). Latency ``baseLat + 2·(min(1, ppn-1)·intraLat + (ppn-1)·arity) + interLat`` (arity: the "arity
  serialization latency", 0.4 us; 0.5 us to 2.18.x); bandwidth ``nChannels·bwIntra / factor`` with
  ``factor = ppn/nChannels - (ppn/nChannels - 1)/2`` (the GPU/NIC ratio: "Collnet+Direct requires all GPUs to have
  a local NIC to work at full speed"), x0.85 on Hopper and later (``minCompCap >= 90``), ratio .5.

``intraLat`` is hwLat[NVLink or PCI][algorithm][Simple] of the node's links, ``interLat`` hwLat[NET][...] plus the
network plugin's latency (twice for Simple: "Also add the flush extra latency"). Source: NVIDIA/nccl
``src/graph/tuning.cc`` (``ncclTopoTuneModel``): v2.20.3-1 lines 56-77 (baseLat, hwLat), 174-216 (bandwidth),
254-258 (latency), 288-304 (enabling); the CollNet all-reduce terms are the same text from v2.19.1-1 to
v2.30.7-1 (only line numbers and the all-gather/reduce-scatter branch, which simcli does not price, move); 2.18.x
has its own constants (:data:`COLLNET_RELEASES`).

When NCCL runs them (``src/init.cc`` v2.20.3-1): only with a CollNet network plugin and ``NCCL_COLLNET_ENABLE=1``
(lines 996-1004; the default is off, so ``collnet: sharp`` says both), on at least ``NCCL_COLLNET_NODE_THRESHOLD``
= 2 nodes (583, 1151-1156), at most ``NCCL_MAX_DIRECT_ARITY + 1`` = 8 GPUs per node (1157-1163;
src/include/device.h:146), CollNetDirect only where the node has an NVSwitch (tuning.cc 300-303).

Their graph (``init.cc`` 1027-1035): a tree pattern with ``collNet = 1`` and exactly the ring graph's channels; its
search (``src/graph/search.cc`` ``ncclTopoCompute``) finds the fastest speed of the inter-node table a NIC carries
for those channels, then raises ``bwIntra`` towards twice ``bwInter`` ("increase bwIntra for trees (2 nodes or
collnet)") while the GPU's NVLink carries every channel (:func:`collnet_graph`).

What the pair costs is what the tuner says (no separate model of the switches' reduction): the curve of
``validation/published/nccl-allreduce-64xH100-8node-collnetchain-sharp.csv`` (algbw 180-195 GB/s) sits on the
tuner's 8 x 45 GB/s x .5 = 180 GB/s. The channels a call launches shrink for small sizes as getAlgoInfo
(``src/enqueue.cc`` v2.20.3-1 1529-1560) says: CollNet runs 640 threads a channel with a threshold of 512 bytes
a thread (tuning.cc 385-386), CollNetDirect times its heads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..base.types import NcclSpec, Tier
from . import ctas, releases
from .nccl import Pair, domains, tier_hw
from .nccl_graph import NVLINK_SEARCH_FRACTION, SPEEDS_INTER, graph_channels, quantise, tier_kind
from .specs import link_kind

__all__ = [
    "ALGOS",
    "CollNetRelease",
    "COLLNET_RELEASES",
    "collnet_release",
    "collnet_graph",
    "collnet_pairs",
    "enabled",
]

#: simcli's names of NCCL's CollNet algorithms, in NCCL's order (NCCL_ALGO_COLLNET_DIRECT, NCCL_ALGO_COLLNET_CHAIN)
ALGOS = ("collnet-direct", "collnet-chain")
#: NCCL_ALGO's spellings (src/init.cc ncclAlgoStr)
NCCL_NAMES = {"collnet-direct": "CollNetDirect", "collnet-chain": "CollNetChain"}
#: the values a tier's ``collnet`` field takes; "sharp": the switches reduce and NCCL's CollNet is on
VALUES = ("sharp", "none")
#: NCCL_COLLNET_NODE_THRESHOLD's default (src/init.cc v2.20.3-1 line 583): CollNet needs at least this many nodes
NODE_THRESHOLD = 2
#: NCCL_MAX_DIRECT_ARITY + 1 (src/include/device.h v2.20.3-1 line 146: 7): the most GPUs per node CollNet runs on
MAX_PPN = 8
#: NCCL_MAX_NTHREADS (device.h line 55): CollNet's threads per channel (tuning.cc: maxThreads[COLLNET_*][SIMPLE])
THREADS = 640
#: threadThresholds[COLLNET_*][SIMPLE] (tuning.cc v2.20.3-1 lines 385-386), bytes per thread
THREAD_THRESHOLD = 512
#: the Hopper-and-later factor on CollNetDirect's bandwidth ("if (minCompCap >= 90) busBw *= .85")
DIRECT_SM90 = 0.85


#: search.cc v2.20.3-1 line 840 (``speedArrayInter``): the inter-node speeds (GB/s) a graph takes before SM90
SPEEDS_INTER_SM80 = (
    48.0,
    30.0,
    28.0,
    24.0,
    20.0,
    18.0,
    15.0,
    12.0,
    10.0,
    9.0,
    7.0,
    6.0,
    5.0,
    4.0,
    3.0,
    2.4,
    1.2,
    0.24,
    0.12,
)


@dataclass(frozen=True)
class CollNetRelease:
    """The CollNet terms of ``tuning.cc`` from release ``since`` on (units as NCCL's: us)."""

    since: str
    source: str
    #: baseLat[CollNetDirect|CollNetChain][Simple]
    base_us: tuple[float, float]
    #: hwLat[nvlink|pcie|net][CollNetDirect|CollNetChain][Simple]
    hw_us: dict[str, tuple[float, float]]
    #: CollNetDirect's arity serialization latency per GPU past the first, us
    arity_us: float


#: every CollNet row, oldest first; a release takes the newest row at or before it: 2.18.x's (the carried 2.18.1,
#: 2.18.3 and 2.18.5), and one for every carried release from 2.19.1 on
COLLNET_RELEASES: tuple[CollNetRelease, ...] = (
    CollNetRelease(
        "2.18.1",
        "NVIDIA/nccl v2.18.1-1 src/graph/tuning.cc lines 56-59 (baseLat: Simple 0), 67-80 (hwLat: NVLink 8.0/4.75, "
        "PCI 8.0/8.0, NET 10.7/14), 222 ('Add 0.5 arity serialization latency'); the same in v2.18.3-1 to v2.18.6-1",
        (0.0, 0.0),
        {"nvlink": (8.0, 4.75), "pcie": (8.0, 8.0), "net": (10.7, 14.0)},
        0.5,
    ),
    CollNetRelease(
        "2.19.1",
        "NVIDIA/nccl v2.20.3-1 src/graph/tuning.cc lines 56-59 (baseLat 0), 66-77 (hwLat: NVLink 3.7/2.8, PCI "
        "3.7/2.8, NET 31/30), 256 ('Add 0.4 us arity serialization latency'); the same from v2.19.1-1 to "
        "v2.30.7-1 (v2.28.3-1 moves the tables into ncclTunerConstantsDefaults, same values)",
        (0.0, 0.0),
        {"nvlink": (3.7, 2.8), "pcie": (3.7, 2.8), "net": (31.0, 30.0)},
        0.4,
    ),
)


def collnet_release(version: str) -> CollNetRelease:
    """The CollNet row that prices NCCL release ``version`` (a carried release's name)."""
    key = releases.parse_version(version)
    rows = [r for r in COLLNET_RELEASES if releases.parse_version(r.since) <= key]
    return rows[-1] if rows else COLLNET_RELEASES[0]


def enabled(network: Sequence[Tier], k: np.ndarray) -> np.ndarray:
    """Where the fabric reduces for a collective over k: every network tier the k devices cross says
    ``collnet: sharp`` (False on one node: CollNet needs NODE_THRESHOLD nodes)."""
    k = np.asarray(k, dtype=np.int64)
    dom = domains(network, k)
    ok = np.zeros(k.shape, dtype=bool)
    if len(network) < 2:
        return ok
    ok = dom[1] >= NODE_THRESHOLD
    for i in range(1, len(network)):
        has = network[i].collnet == "sharp"
        ok = ok & (has | (dom[i] <= 1))
    return ok


def collnet_graph(network: Sequence[Tier], spec: NcclSpec, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(nChannels, bwIntra GB/s) of NCCL's CollNet graph over k.

    nChannels is the ring graph's (init.cc: ``collNetGraph.minChannels = collNetGraph.maxChannels =
    ringGraph.nChannels``). bwInter is the fastest speed of the inter-node table (search.cc
    ``sm90SpeedArrayInter``) at which the NICs carry those channels (a NIC per channel while there are as many NICs)
    and the GPU's NVLink carries them all; pass 2 then raises bwIntra to the fastest speed up to 2 x bwInter that
    the NVLink still carries for every channel. Where simcli's inter-node search does not apply (before Hopper, a
    NIC per node) the channels are ``channels/2`` and the speed the ring's per-channel bandwidth."""
    k = np.asarray(k, dtype=np.int64)
    nodes = domains(network, k)[1] if len(network) > 1 else np.ones_like(k)
    G, _ = graph_channels(network, spec, k, nodes=nodes)
    G = np.maximum(np.asarray(G, dtype=np.float64), 1.0)
    ppn = np.minimum(k, network[0].size or k).astype(np.float64)
    if len(network) < 2:
        return G, np.zeros(k.shape)
    frac = NVLINK_SEARCH_FRACTION.get(spec.generation, 1.0)
    if spec.generation in ("hopper", "blackwell") and network[1].per == "device":
        nvl = network[0].bandwidth_Bps * frac / 1e9 if tier_hw(network[0], 0) == "nvlink" else None
        nvl = network[0].effective_Bps / 1e9 if nvl is None else nvl
        nic = network[1].effective_Bps / 1e9
        per_nic = np.ceil(G / np.maximum(ppn, 1.0))  # channels each NIC carries
        # a tree's search allows totalBw x ngpus/(ngpus-1) (search.cc: "if (ngpus == 1 || graph->pattern !=
        # NCCL_TOPO_PATTERN_RING) totalBw *= ngpus*1.0/(ngpus-1)")
        inter = quantise(np.minimum(nic / per_nic, nvl * ppn / np.maximum(ppn - 1.0, 1.0) / G), SPEEDS_INTER)
        intra = quantise(np.minimum(2.0 * inter, nvl / G), SPEEDS_INTER)
        return G, np.maximum(intra, inter)
    table = SPEEDS_INTER if spec.generation in ("hopper", "blackwell") else SPEEDS_INTER_SM80
    node_net = network[1].effective_Bps * (ppn if network[1].per == "device" else 1.0) / 1e9
    inter = quantise(node_net / G, table)
    intra = quantise(np.minimum(2.0 * inter, network[0].effective_Bps / 1e9 / G), table)
    return G, np.maximum(intra, inter)


def collnet_pairs(
    network: Sequence[Tier],
    spec: NcclSpec,
    k: np.ndarray,
    *,
    collective: str = "all_reduce",
    algorithms: Sequence[str] | None = None,
    protocols: Sequence[str] | None = None,
    runtime_channels: np.ndarray | None = None,
) -> list[Pair]:
    """CollNetDirect and CollNetChain as :class:`simcli.comm.nccl.Pair` rows over k (all-reduce, Simple), enabled
    where :func:`enabled` and NCCL's rules allow; [] for other collectives, protocols or algorithms.
    ``runtime_channels``: the channels the kernels run on (default: :func:`simcli.comm.nccl.graph_channels`'
    within NCCL_MIN_CTAS/NCCL_MAX_CTAS, :mod:`simcli.comm.ctas`)."""
    algos = [a for a in ALGOS if algorithms is None or a in algorithms]
    if collective != "all_reduce" or not algos or "simple" not in spec.protocols:
        return []
    if protocols is not None and "simple" not in protocols:
        return []
    k = np.asarray(k, dtype=np.int64)
    kf = k.astype(np.float64)
    nt = len(network)
    row = collnet_release(spec.version)
    dom = domains(network, k)
    nodes = dom[1] if nt > 1 else np.ones_like(k)
    multi = nodes > 1
    ppn = np.floor(kf / np.maximum(nodes, 1))  # nRanks/nNodes, integer division in NCCL
    on = (k >= 2) & enabled(network, k) & (ppn <= MAX_PPN)
    G, bw_intra = collnet_graph(network, spec, k)
    if runtime_channels is None:
        runtime_channels = ctas.runtime_channels(graph_channels(network, spec, k, nodes=nodes)[1], spec)
    ch = np.asarray(runtime_channels, dtype=np.float64) * np.ones(k.shape)
    intra_hw = "nvlink" if tier_hw(network[0], 0) == "nvlink" else "pcie"
    nvswitch = tier_kind(network[0], 0) in ("nvswitch", "mnnvl")
    top = np.zeros(k.shape, dtype=np.int64)  # the outermost tier k spans: where the switches reduce
    for i in range(1, nt):
        top = np.where(dom[i] > 1, i, top)
    tiers_i = np.arange(nt).reshape((-1,) + (1,) * k.ndim)
    at_top = (tiers_i == top) & (tiers_i > 0)
    plugin = np.zeros(k.shape)
    for i in range(1, nt):
        plugin = np.where(top == i, link_kind(tier_kind(network[i], i)).plugin_latency_us, plugin)
    out = []
    for a in algos:
        j = ALGOS.index(a)
        intra = row.hw_us[intra_hw][j] * 1e-6
        inter = row.hw_us["net"][j] * 1e-6
        hops = np.zeros((nt,) + k.shape)
        hw = np.zeros((nt,) + k.shape)
        if a == "collnet-chain":
            hops[0] = 2.0 * (ppn - 1.0)
            hw[0] = intra
            bus = G * bw_intra * 1e9
            ok = on
        else:
            # 2·(min(1, ppn-1)·intraLat + (ppn-1)·arity): the arity term as tier 0's, spread over its hops
            hops[0] = 2.0 * np.minimum(1.0, ppn - 1.0)
            hw[0] = np.where(hops[0] > 0, intra + (ppn - 1.0) * row.arity_us * 1e-6, 0.0)
            factor = ppn / G
            factor = factor - (factor - 1.0) / 2.0
            bus = G * bw_intra * 1e9 / factor * (DIRECT_SM90 if spec.generation in ("hopper", "blackwell") else 1.0)
            ok = on & nvswitch
        hops = np.where(at_top, 1.0, hops)
        hw = np.where(at_top, inter, hw)
        base = row.base_us[j] * 1e-6
        hop_lat = hops * hw
        lat = base + hop_lat.sum(axis=0)
        tlat = lat + 2.0 * plugin * 1e-6  # interLat + graph->latencyInter, twice for Simple (tuning.cc)
        ok = ok & (bus > 0)
        alg = np.where(bus > 0, 0.5 * bus, 1.0)  # "else ratio *= .5"
        heads = ppn if a == "collnet-direct" else np.ones(k.shape)  # channels[0].collnetDirect.nHeads: a NIC a GPU
        out.append(
            Pair(
                algorithm=a,
                protocol="simple",
                enabled=np.asarray(ok),
                latency=lat,
                alg_Bps=alg,
                bus_Bps=np.where(bus > 0, bus, 1.0),
                base=base,
                hop_latency=hop_lat,
                hops=hops,
                plateau=False,
                multi=multi,
                channels=ch,
                ranks=kf,
                threshold=THREADS * THREAD_THRESHOLD * heads,
                tuner_lat=tlat,
                tuner_alg_Bps=alg,
            )
        )
    return out
