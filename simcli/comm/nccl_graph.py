"""NCCL's search graphs and NVLS chunks, as simcli reads them: the link kind of a tier, the per-channel speed
tables of ``src/graph/search.cc``, the inter-node graph's channels (:func:`graph_channels`, :func:`graph_tie`), the NVLS
graph's heads and speed (:func:`nvls_graph`) and the NVLS chunk and pipeline fill (:func:`nvls_chunk`,
:func:`nvls_fill`). :mod:`simcli.comm.nccl` prices NCCL's pairs on them."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..base.types import NcclSpec, Tier
from .specs import KIND_ALIASES

__all__ = [
    "tier_kind",
    "quantise",
    "graph_channels",
    "graph_search",
    "graph_tie",
    "nvls_graph",
    "nvls_chunk",
    "nvls_fill",
    "NVLINK_SEARCH_FRACTION",
    "SPEEDS_INTRA",
    "SPEEDS_INTER",
    "MAX_CHANNELS",
    "NVLS_CHUNK",
]

#: NCCL's speed of one NVLink in its topology search, as a fraction of the link's line rate, by GPU generation
#: (src/graph/topo.h: SM70/SM80_NVLINK_BW 20.0, SM90_NVLINK_BW 20.6 of a 25 GB/s link, SM100_NVLINK_BW 40.1 of
#: 50). It sizes NCCL's search graph (the GPU's totalBw that stops the inter-node search), not what the kernels
#: move: Blackwell measures 0.9 of its links, which the profiles' efficiency carries (docs/nccl.md, "NVLink5").
NVLINK_SEARCH_FRACTION = {"volta": 20.0 / 25.0, "ampere": 20.0 / 25.0, "hopper": 20.6 / 25.0, "blackwell": 40.1 / 50.0}

#: search.cc: per-channel speeds (GB/s) an SM90 graph may take, inside a node and across nodes
SPEEDS_INTRA = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)
SPEEDS_INTER = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12)

#: ``comm->nvlsChunkSize`` (NCCL_NVLS_CHUNKSIZE, 128 KiB), the largest NVLS chunk
NVLS_CHUNK = 128 * 1024


def tier_kind(tier: Tier, index: int) -> str:
    """The link kind of a tier: its ``kind``, else guessed from the name and place."""
    if tier.kind:
        return KIND_ALIASES.get(tier.kind, tier.kind)
    name = tier.name.lower()
    if "pci" in name:
        return "pcie"
    if index == 0 and any(w in name for w in ("mnnvl", "nvl72", "nvl36")):
        return "mnnvl"
    if index == 0 and "nvswitch" in name:
        return "nvswitch"
    if index == 0 and any(w in name for w in ("nvlink", "xgmi", "infinity", "fabric", "nvl")):
        return "nvlink"
    if index == 0:
        return "nvlink" if tier.per == "device" else "pcie"
    for w, k in (
        ("efa", "efa"),
        ("roce", "roce"),
        ("tcpxo", "tcpxo"),  # rccl hook (issue 37): Google's GPUDirect-TCPX/TCPXO before plain TCP
        ("tcpx", "tcpx"),
        ("ether", "ethernet"),
        ("gbe", "ethernet"),
        ("tcp", "ethernet"),
    ):
        if w in name:
            return k
    return "infiniband"


def quantise(bw_GBps: np.ndarray, speeds: Sequence[float]) -> np.ndarray:
    """The largest per-channel speed of NCCL's search table that does not exceed ``bw_GBps``."""
    s = np.asarray(speeds)
    ok = s[None, :] <= np.asarray(bw_GBps, dtype=np.float64).reshape(-1, 1)
    pick = np.where(ok.any(axis=1), s[np.argmax(ok, axis=1)], s[-1])
    return pick.reshape(np.shape(bw_GBps))


#: MAXCHANNELS (src/include/device.h, 2.20.3): the most channels a communicator keeps after ncclTopoPostset
MAX_CHANNELS = 32


def graph_channels(
    network: Sequence[Tier], spec: NcclSpec, k: np.ndarray, *, nodes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(G, runtime): the channels of NCCL's search graph, which its tuner multiplies every per-channel figure by
    (tuning.cc: ``busBw = graphs[a]->nChannels * bw`` and the caps ``graphs[a]->nChannels*perChMax...``), and
    the channels the kernels then run on (``comm->nChannels``), over k.

    ncclTopoPostset (connect.cc) always doubles the graph: "Duplication should be complete now: nChannels =
    comm->nChannels = std::min(MAXCHANNELS,nChannels*2)", so a profile's ``channels`` (what NCCL logs, runtime)
    is 2G on one node. Across nodes the graph is searched on NCCL's inter-node speed table (search.cc
    ``sm90SpeedArrayInter``: 48, 45, 42, 40, ...): one channel per NIC while a NIC carries only one channel of
    that speed, at most as many as one GPU's NVLink carries; and on compute capability > 8.0
    ncclTopoDupChannels does not duplicate it ("if (ccMin > 80 && graph->bwIntra < 50.0 && graph->nChannels >
    4) return ncclSuccess;"). So a DGX/HGX H100 with 8 NDR NICs runs G = 8 graph channels of 45 GB/s, and
    2G = 16 kernels (the "default number of SMs is 16" of NVIDIA/nccl#1649), not the 24 of one node.
    Applied where the NIC tier is per device on Hopper and later (the rule's compute-capability branch);
    elsewhere G = channels/2 and runtime = channels.
    """
    k = np.asarray(k)
    ch = float(spec.channels)
    G = np.full(k.shape, ch / 2.0)
    rt = np.full(k.shape, ch)
    if len(network) < 2 or spec.generation not in ("hopper", "blackwell") or network[1].per != "device":
        return G, rt
    best_g, best_s = graph_search(network, spec, k)
    best_g = np.maximum(best_g, 1.0)
    s_pick = best_s
    dup = (s_pick >= 50.0) | (best_g <= 4)
    gm = np.where(dup, np.minimum(2 * best_g, MAX_CHANNELS), best_g)
    multi = nodes > 1
    G = np.where(multi, gm, G)
    rt = np.where(multi, np.minimum(2 * gm, MAX_CHANNELS), rt)
    return G, rt


def graph_search(
    network: Sequence[Tier], spec: NcclSpec, k: np.ndarray, *, nic: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(channels, speed GB/s) of NCCL's inter-node search graph over k: ncclTopoCompute walks the speeds down from
    the highest the system allows, keeps the graph with the most nChannels x bw (ncclTopoCompareGraphs keeps the
    first of equal ones), stops once that reaches the GPU's total bandwidth ("if (graph->nChannels*graph->bwInter
    >= system->totalBw) goto done") and never tries a speed at or below 0.49x the best solution's
    ("speedArray[speedIndex+1]/graph->bwInter > .49"). ``nic``: the NIC's effective GB/s over k (default the
    tier's). The GPU's NVLink is NCCL's own figure for the generation (:data:`NVLINK_SEARCH_FRACTION` of the line
    rate), not the tier's measured efficiency: the search is NCCL's."""
    nvlink = tier_kind(network[0], 0) != "pcie" and network[0].per == "device"
    frac = NVLINK_SEARCH_FRACTION.get(spec.generation) if nvlink else None
    nvl = network[0].bandwidth_Bps * frac / 1e9 if frac else network[0].effective_Bps / 1e9
    nic = np.full(k.shape, network[1].effective_Bps / 1e9) if nic is None else np.broadcast_to(nic, k.shape)
    ppn = np.minimum(k, network[0].size or k)
    best_g, best, best_s = np.zeros(k.shape), np.zeros(k.shape), np.zeros(k.shape)
    for s in SPEEDS_INTER:
        if s > nvl:
            continue
        live = (s <= nic) & ((best_s == 0) | ((s / np.maximum(best_s, 1e-9) > 0.49) & (best < nvl)))
        g = np.minimum(np.floor(nvl / s), ppn * np.floor(nic / s))
        take = live & (g * s > best)
        best_g = np.where(take, g, best_g)
        best_s = np.where(take, s, best_s)
        best = np.where(take, g * s, best)
    return best_g, best_s


def graph_tie(network: Sequence[Tier], spec: NcclSpec, k: np.ndarray) -> dict[str, np.ndarray] | None:
    """Where a NIC just under the speed of NCCL's inter-node search graph would give the graph more channels
    (``alt_channels`` of ``alt_speed_GBps`` against ``channels`` of ``speed_GBps``): the search walks down from the
    fastest speed the NIC allows and keeps the first of equal nChannels x bw, so a faster NIC can stop it at fewer,
    faster channels. The tuner's per-channel caps count the channels, so there a faster NIC can price some pairs
    slower: with :func:`simcli.comm.nccl_choice.nccl_faster_pair`, the way a better tier makes NCCL's own pick
    slower. None where the rule does not apply (one tier, before Hopper, NICs per node); else arrays over k
    (``tie`` True where the slower NIC's graph has more channels, past one node)."""
    if len(network) < 2 or spec.generation not in ("hopper", "blackwell") or network[1].per != "device":
        return None
    k = np.asarray(k)
    g, s = graph_search(network, spec, k)
    g2, s2 = graph_search(network, spec, k, nic=s * (1 - 1e-6))
    tie = (k > (network[0].size or k)) & (s > 0) & (g2 > g)
    return {"tie": tie, "channels": g, "speed_GBps": s, "alt_channels": g2, "alt_speed_GBps": s2}


def nvls_chunk(algorithm: str, n: np.ndarray, ops: np.ndarray, *, nodes: np.ndarray | None) -> np.ndarray:
    """The chunk (bytes) NCCL's calcCollChunking gives an NVLS or NVLSTree collective of n bytes."""
    n = np.asarray(n, dtype=np.float64)
    c = np.full(np.broadcast(n, ops).shape, float(NVLS_CHUNK))
    steps: tuple[tuple[int, int], ...]
    if algorithm == "nvls":
        steps = ((64, 65536), (8, 32768), (2, 16384))
    else:
        if nodes is not None:
            c = np.where(np.asarray(nodes) >= 4, np.minimum(c, 65536.0), c)
        steps = ((4, 65536), (1, 32768))
    for times, smaller in steps:
        c = np.where((n < times * ops * c) & (c > smaller), float(smaller), c)
    return c


def nvls_fill(
    algorithm: str, n: np.ndarray, ops: np.ndarray, *, nodes: np.ndarray | None, alg_Bps: np.ndarray, stages: float
) -> np.ndarray:
    """``stages`` chunk times (s): ops x min(chunk, n / ops) bytes at the pair's bandwidth, per fill stage."""
    n = np.asarray(n, dtype=np.float64)
    c = np.minimum(nvls_chunk(algorithm, n, ops, nodes=nodes), n / ops)
    with np.errstate(divide="ignore", invalid="ignore"):
        return stages * c * ops / alg_Bps


def nvls_graph(
    nvlink_GBps: float, speeds: Sequence[float], G: np.ndarray, *, nic_GBps: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(channels, bwIntra GB/s) of NCCL's NVLS search graph (src/graph/search.cc, pattern NVLS) over k.

    Each channel has one head GPU and reserves its speed s on every GPU's NVSwitch link, twice on its head's
    (ncclTopoSearchTryNvls: ``ncclTopoFollowPath(..., d0 == g ? 2 : 1, ...)``), so a GPU that heads one of G channels
    carries (G + 1)·s of its NVLink bandwidth T. In one node the search must find all G heads ("Force intra-node
    NVLS algorithm to pull evenly from all GPUs": minChannels = maxChannels = min(NCCL_MAX_NVLS_ARITY, GPUs)), so s
    is the largest speed of the table with (G + 1)·s <= T. Across nodes (``nic_GBps`` given: NVLSTree, one head per
    NIC and at most one channel per NIC) it walks the speeds down from the fastest the NIC carries, keeps the graph
    with more channels (or more channels x speed; ncclTopoCompareGraphs for NVLS), stops once that reaches T and
    never goes to a speed at or below 0.49x the kept one's."""
    G = np.asarray(G, dtype=np.float64)
    T = float(nvlink_GBps)
    s = np.asarray(speeds, dtype=np.float64)
    if nic_GBps is None:
        fits = (G[..., None] + 1.0) * s <= T  # (..., speeds)
        pick = np.where(fits.any(axis=-1), s[np.argmax(fits, axis=-1)], s[-1])
        return G, pick
    nic = np.broadcast_to(np.asarray(nic_GBps, dtype=np.float64), G.shape)
    best_g, best_s = np.zeros(G.shape), np.zeros(G.shape)
    for sp in s:
        g = np.minimum(G, np.floor(T / sp) - 1.0)
        above = (sp / np.maximum(best_s, 1e-9) > 0.49) & (best_g * best_s < T)
        live = (sp <= nic) & (g >= 1) & ((best_s == 0) | above)
        take = live & ((g > best_g) | (g * sp > best_g * best_s))
        best_g = np.where(take, g, best_g)
        best_s = np.where(take, sp, best_s)
    return np.maximum(best_g, 1.0), np.where(best_s > 0, best_s, s[-1])
