"""NCCL's cost model, generalised to simcli's tiers: every (algorithm, protocol) pair, and NCCL's choice.

The tuner's constants and formula switches are the selected release's (:mod:`simcli.comm.releases`, 2.20.3 to
2.30.7: ``NcclSpec.version``); the numbers below are 2.20.3's, the default.

Source: NVIDIA/nccl v2.20.3 (makefiles/version.mk), ``src/graph/tuning.cc`` (``ncclTopoTuneModel``,
``ncclTopoGetAlgoTime``), ``src/enqueue.cc`` (``getAlgoInfo``: channels shrink for small messages) and
``src/graph/search.cc`` (``sm90SpeedArrayIntra/Inter``: the per-channel speeds a graph may take). NCCL prices
each pair as ``latency + bytes / bandwidth`` and runs the cheapest; this module does the same, vectorised over
(k, n), with the hop counts read off simcli's tiers instead of "intra-node" and "inter-node":

* **Ring** (all-reduce: 2 passes of k-1 steps; reduce-scatter and all-gather: 1 pass; broadcast: k steps).
  A chunk crosses every ring edge but one per pass; the edges that leave a domain of tier i-1 pay tier i's
  hop latency, the others tier 0's. For two tiers and N nodes that is NCCL's
  ``base + (nsteps - nInterSteps)·lat_intra + nInterSteps·lat_inter`` with ``nInterSteps = 2N``
  (all-reduce) or ``N - 1`` (reduce-scatter, all-gather). On multi-node rings each intra hop costs at least
  NCCL's network post overhead (1 us on Intel/Arm hosts, 2 us on AMD; 3x for Simple).
  Bandwidth: the ring's bus bandwidth B (``collectives.tier_bandwidth``: the bottleneck tier), times
  1/4 for LL (capped at ``llMaxBw``), 0.92 for LL128 (0.7 at one device per node; capped at channels x the
  per-channel LL128 rate), 1 for Simple. Time of the bytes: ``nsteps/k · n / B_p``.
* **Tree** (all-reduce only): ``base + 2·((ppn-1)·lat_0 + sum_i floor(lg g_i)·lat_i)`` with ppn devices per
  node and g_i domains of tier i-1 in one domain of tier i; bandwidth ``min(0.92·B, channels·perChMaxTreeBw)``
  (LL: /3.8, capped at llMaxBw; LL128: 7/9 in one node, 120/128 across, capped per channel), and the bytes
  take ``n / (0.5·B_p)``; NCCL's size-dependent ``treeCorrectionFactor`` scales B_p.
* **NVLS** (NVLink SHARP, one NVSwitch domain, Hopper and later, more than 2 GPUs) and **NVLSTree** (NVLS in
  each node, a tree across nodes): Simple only, latency ``lat_nvls`` (+ ``2·floor(lg N)·lat_net`` for the
  tree), bandwidth ``5/6 · nvls_channels · s`` where s is the largest per-channel speed of NCCL's search
  table that ``nvls_channels·s`` does not exceed the GPU's NVLink bandwidth (and, for NVLSTree, its network
  bandwidth; halved beyond two nodes). Their kernels pipeline chunks through three stages (scatter, multimem
  reduce + broadcast, gather; ``src/device/all_reduce.h``), so the bytes also pay a fill of
  ``NVLS_FILL`` chunk times (2 for all-reduce, 1 for reduce-scatter and all-gather),
  ``fill·min(n, ops·chunk(n)) / bandwidth``, with ops = channels x heads and the
  chunk NCCL's ``calcCollChunking`` picks for n (:func:`nvls_chunk`); NCCL's tuner leaves the fill out.

Two ways to read the model (``simcli.comm.nccl_choice.nccl_collective(by="tuner")`` chooses on NCCL's own estimate,
as NCCL does; ``by="time"`` takes the fastest pair): NCCL's tuner multiplies a multi-node Simple ring's
latency by 1.4 ("plateau effect") and charges every message all channels; what the chosen pair then *costs* is
priced without the plateau factor (a choice made after looking at the published 16-GPU forced-ring curve,
whose 1-2 MiB floor of 155 us sits on Simple's plain latency, 153 us with the bytes, not on 1.4x it; the
tuner itself picks LL128 there, 85 us, which is the ring curves' open error) and with the channels that
``getAlgoInfo`` really launches for that size (``nc`` shrinks while ``n < nc·nthreads·threshold``), whose
bandwidth scales by nc/channels.

**The host's issue rate** (:func:`host_floor`). nccl-tests times a loop of back-to-back launches with the
host's clock, so a run that drives G GPUs from one thread (``-g G``, one process) cannot go faster than the
host launches: G launches per collective, :data:`LAUNCH_US` each. The time is ``max(t_gpu, G·LAUNCH_US)``.
NCCL's maintainers name this ("higher latency ... due to using multiple GPUs per node (-g 8) instead of one
GPU per process ... due to the CUDA latency overheads of single process jobs", NVIDIA/nccl-tests#333).
One process per GPU (``-g 1``, ``mpirun``, and every torch.distributed job) is G = 1, where the floor never
binds: every pair's latency is above 4.2 us.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..base.types import NcclSpec, Tier
from . import releases, specs
from .specs import COLLECTIVES, KIND_ALIASES, PROTOCOL_SPECS, PROTOCOLS, link_kind

__all__ = [
    "ALGOS",
    "HW_LATENCY_US",
    "BASE_LATENCY_US",
    "GENERATIONS",
    "Pair",
    "pairs",
    "default_spec",
    "tier_kind",
    "tier_hw",
    "tier_defaulted",
    "tree_groups",
    "hops",
    "NVLS_MAX_HEADS",
]

#: NCCL's algorithms that simcli models and its protocols, in NCCL's order
ALGOS = ("tree", "ring", "nvls", "nvls-tree", "pat")
#: PAT's base latency, us (tuning.cc 2.23.4: "8 // Base time"; baseLat[PAT] = 8.0 from 2.28.3) and its linear
#: part per rank ("nRanks * 2.8; // Still a linear part"), both in every release that has PAT
PAT_BASE_US = 8.0
PAT_PER_RANK_US = 2.8

# ----------------------------------------------------------------------------------------- NCCL's tables
# The tuner's constants and formula switches are per release: simcli.comm.releases (one row per carried release,
# each cited to its tag). The names below are the default release's, for readers of this module.
_DEFAULT = releases.DEFAULT_RELEASE
#: baseLat[algorithm][protocol], us (the default release's; pairs() reads the selected release's)
BASE_LATENCY_US = _DEFAULT.base_latency_us
#: hwLat[link kind][algorithm][protocol], us per hop (the default release's)
HW_LATENCY_US = _DEFAULT.hw_latency_us
#: per-generation tables, indexed [one node, two nodes, more]; llMaxBws is indexed by the GPU generation in
#: one node and by the host CPU (Intel/Arm: the first row, AMD: the second) across nodes (the default release's)
GENERATIONS = _DEFAULT.generations
#: generations without a table of their own take the nearest older one (the default release's)
GENERATION_TABLE = _DEFAULT.generation_table
#: NCCL's speed of one NVLink in its topology search, as a fraction of the link's line rate, by GPU generation
#: (src/graph/topo.h: SM70/SM80_NVLINK_BW 20.0, SM90_NVLINK_BW 20.6 of a 25 GB/s link, SM100_NVLINK_BW 40.1 of
#: 50). It sizes NCCL's search graph (the GPU's totalBw that stops the inter-node search), not what the kernels
#: move: Blackwell measures 0.9 of its links, which the profiles' efficiency carries (docs/nccl.md, "NVLink5").
NVLINK_SEARCH_FRACTION = {"volta": 20.0 / 25.0, "ampere": 20.0 / 25.0, "hopper": 20.6 / 25.0, "blackwell": 40.1 / 50.0}
#: llMaxBws rows for multi-node rings, by host CPU vendor
_LL_MAX_MULTINODE = {"intel": (39.0, 39.0, 20.4), "arm": (39.0, 39.0, 20.4), "amd": (87.7, 22.5, 19.0)}
#: getNetOverhead (us): the network post overhead every multi-node ring hop pays at least (x3 for Simple)
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0, "arm": 1.0}
#: treeCorrectionFactor[protocol][log2(n / 64)], n from 64 B to 256 MB (tuning.cc, ncclTopoGetAlgoTime), and the
#: 24th entry (512 MiB to 1 GiB) 2.29.2 added (releases.Release.tree_correction_sizes says how many a release has)
# fmt: off
TREE_CORRECTION = np.array([
    [1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0],
    [1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0],
    [.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9]])
# fmt: on
#: search.cc: per-channel speeds (GB/s) an SM90 graph may take, inside a node and across nodes
SPEEDS_INTRA = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)
SPEEDS_INTER = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12)
#: getAlgoInfo (enqueue.cc): threads per channel (NCCL_{LL,LL128,SIMPLE}_MAX_NTHREADS) and the bytes per thread
#: below which a channel is dropped (NCCL_*_THREAD_THRESHOLD; ring LL's is multiplied by the ranks): the rows of
#: simcli.comm.specs.PROTOCOL_SPECS
MAX_THREADS = tuple(p.max_threads for p in PROTOCOL_SPECS)
THREAD_THRESHOLD = tuple(p.thread_threshold for p in PROTOCOL_SPECS)
#: the tuner's "plateau effect of ring" factor on a multi-node Simple ring's latency (compute capability >= 8.0)
RING_PLATEAU = 1.4
NVLS_RATIO = 5.0 / 6.0
#: NVLS pipeline fill, in chunk times, by collective (simcli.comm.specs: CollectiveSpec.nvls_fill):
#: a chunk passes the kernel's warp groups one after the
#: other, so the bytes take m + stages - 1 chunk times for m chunks per concurrent operation (channels x heads),
#: not m. All-reduce (src/device/all_reduce.h): scatter into the NVLS buffer, multimem reduce + broadcast,
#: gather out of it (3 stages); reduce-scatter (reduce_scatter.h): scatter, multimem reduce (2); all-gather:
#: multimem broadcast, gather (2)
NVLS_FILL = {c.name: c.nvls_fill for c in COLLECTIVES.values() if c.nvls_fill}
#: Host time to issue one collective to one GPU (us), measured by a third party: DGX-A100, nccl-tests
#: ``all_reduce_perf -b 8 -e 128 -g N`` in one process, NCCL_ALGO=Ring, NCCL_MAX_NCHANNELS=1 (NVIDIA/nccl-tests#123,
#: 2022-12-14): 10, 13.76, 16.88, 20.8, 25.2, 29.5, 33.7 us for N = 2..8, i.e. N x 4.2 us from N = 4 on (4.2,
#: 4.16, 4.2, 4.2, 4.2 us per GPU), where NCCL's tuner gives the GPU 6.6 + 2(N-1)·0.6 us (15 us at N = 8)
LAUNCH_US = 4.2
#: ``comm->nvlsChunkSize`` (NCCL_NVLS_CHUNKSIZE, 128 KiB), the largest NVLS chunk
NVLS_CHUNK = 128 * 1024


def host_floor(gpus_per_process: "int | np.ndarray") -> "float | np.ndarray":
    """The least time (s) one collective takes when one host thread launches it on ``gpus_per_process`` GPUs
    (a number, or an array that broadcasts against the collective's grid)."""
    return np.asarray(gpus_per_process, dtype=np.float64) * (LAUNCH_US * 1e-6)


#: NCCL_MAX_NVLS_ARITY (src/include/device.h): NVLS heads per node, 32 from NCCL 2.20.1 on (8 before)
NVLS_MAX_HEADS = 32


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


def tier_defaulted(tier: Tier) -> tuple[str, ...]:
    """The fields of ``tier`` that still hold its kind's default (``Tier.defaulted`` less any field changed since:
    a calibrated or solved latency is the tier's own)."""
    if not tier.defaulted or not tier.kind:
        return ()
    lk = link_kind(tier.kind)
    now = {"latency": (tier.latency_s, lk.latency_us * 1e-6), "efficiency": (tier.efficiency, lk.efficiency)}
    return tuple(f for f in tier.defaulted if f in now and abs(now[f][0] - now[f][1]) <= 1e-12 * abs(now[f][1]))


def tier_hw(tier: Tier, index: int) -> str:
    """NCCL's hardware class (nvlink, pcie, net) of a tier."""
    return link_kind(tier_kind(tier, index)).hw


def default_spec(device_name: str, network: Sequence[Tier]) -> NcclSpec:
    """NCCL constants for a profile that gives none: the generation from the device's name, the rest defaulted."""
    gen = _generation(device_name) or "ampere"
    nvl = tier_hw(network[0], 0) == "nvlink"
    protos = tuple(
        p for p in PROTOCOLS if all(p in link_kind(tier_kind(t, i)).protocols for i, t in enumerate(network))
    )
    return NcclSpec(
        protocols=protos,
        generation=gen,
        channels=24 if gen in ("hopper", "blackwell") else 16,
        nvls=nvl and gen in ("hopper", "blackwell") and (network[0].size or 0) > 2,
        nvls_channels=32 if gen == "blackwell" else 16,
        ll128=nvl and gen != "ada",
        cpu="intel",
        defaulted=("generation", "channels", "nvls", "nvls_channels", "ll128", "cpu", "ll128_net"),
    )


def generation(device_name: str) -> str | None:
    """The GPU generation a device's name names (volta, ampere, ada, hopper, blackwell, cdna3), else None."""
    return _generation(device_name, None)


def known_gpu(device_name: str) -> bool:
    """Does the device's name name a GPU simcli knows the generation of?"""
    return _generation(device_name, None) is not None


def _generation(device_name: str, default: str | None = "ampere") -> str | None:
    return specs.generation_of(device_name) or default


@dataclass(frozen=True)
class Pair:
    """One (algorithm, protocol) pair for one collective over k (arrays of k's shape; grid terms on demand).

    ``latency`` (s) and ``alg_Bps`` (collective bytes per second at full channels) depend on k only;
    ``hop_latency`` and ``hops`` are (tiers, ...k). ``enabled`` is False where NCCL does not run the pair.
    """

    algorithm: str
    protocol: str
    enabled: np.ndarray
    latency: np.ndarray
    alg_Bps: np.ndarray
    bus_Bps: np.ndarray
    base: float
    hop_latency: np.ndarray
    hops: np.ndarray
    plateau: bool  #: the tuner's ring plateau factor applies (multi-node Simple ring all-reduce)
    multi: np.ndarray
    channels: float
    ranks: np.ndarray
    threshold: np.ndarray  #: bytes per channel below which getAlgoInfo drops a channel (0: never)
    #: NVLS and NVLSTree: concurrent operations (channels x heads), over k; None for the others (no fill)
    ops: np.ndarray | None = None
    stages: float = 0.0  #: NVLS: the pipeline fill in chunk times (NVLS_FILL of the collective)
    nodes: np.ndarray | None = None  #: nodes the collective spans (NVLSTree's chunk rule reads it)
    #: what NCCL's tuner believes the latency and bandwidth are (None: the same as the cost's): its own hwLat
    #: table plus the network plugin's latency, and its graph's per-channel bandwidths
    tuner_lat: np.ndarray | None = None
    tuner_alg_Bps: np.ndarray | None = None
    #: NCCL's treeCorrectionFactor applies (Tree; NVLSTree on Blackwell x86 hosts from 2.29.2), over how many sizes
    corrected: bool = False
    correction_sizes: int = 23

    def correction(self, n: np.ndarray) -> np.ndarray | float:
        """NCCL's treeCorrectionFactor for sizes n (where ``corrected``; 1.0 for the others), shaped like n."""
        if not self.corrected:
            return 1.0
        n = np.asarray(n, dtype=np.float64)
        last = self.correction_sizes - 1
        logsize = np.clip(np.floor(np.log2(np.maximum(n / 64.0, 1.0))).astype(np.int64), 0, last)
        return np.where(
            n / 64.0 < 2.0**self.correction_sizes, TREE_CORRECTION[PROTOCOLS.index(self.protocol)][logsize], 1.0
        )

    def share(self, n: np.ndarray) -> np.ndarray | float:
        """The fraction of the channels getAlgoInfo launches for sizes n (NVLS: all of its own)."""
        if not np.any(self.threshold):
            return 1.0
        return np.clip(np.floor(np.asarray(n, dtype=np.float64) / self.threshold), 1.0, self.channels) / self.channels

    def tuner_latency(self, latency: np.ndarray, n: np.ndarray) -> np.ndarray:
        """The tuner's latency: x1.4 on a multi-node Simple ring all-reduce once n/(channels·k) >= 64."""
        if not self.plateau:
            return latency
        return np.where(
            self.multi & (np.asarray(n) / (self.channels * self.ranks) >= 64), latency * RING_PLATEAU, latency
        )

    def fill(self, n: np.ndarray) -> np.ndarray | float:
        """The pipeline fill for sizes n (s): ``stages`` chunk times at the pair's bandwidth; 0 but for NVLS.

        The chunk is what ``calcCollChunking`` (src/enqueue.cc, NCCL 2.2x) picks for n: NVLS starts from
        nvlsChunkSize and halves to 64, 32, 16 KiB while n < 64, 8, 2 x ops x chunk; NVLSTree starts from
        nvlsChunkSize (64 KiB from 4 nodes on) and drops to 64, 32 KiB while n < 4, 1 x ops x chunk. A size
        below ops x chunk gives each operation one partial chunk of n / ops bytes.
        """
        if self.ops is None:
            return 0.0
        return nvls_fill(self.algorithm, n, self.ops, nodes=self.nodes, alg_Bps=self.alg_Bps, stages=self.stages)

    def cost(self, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(time, tuner's estimate, bandwidth term) for sizes n, inf where the pair does not run (a reference
        evaluation of one pair; :func:`simcli.comm.nccl_choice.nccl_collective` does the same for all pairs at once)."""
        corr = self.correction(n)
        tlat = self.latency if self.tuner_lat is None else self.tuner_lat
        tbw = self.alg_Bps if self.tuner_alg_Bps is None else self.tuner_alg_Bps
        with np.errstate(divide="ignore", invalid="ignore"):
            bw = n / (self.alg_Bps * corr * self.share(n)) + self.fill(n)
            tuner = self.tuner_latency(tlat, n) + n / (tbw * corr)
            t = self.latency + bw
        off = ~self.enabled
        if np.any(off):
            return np.where(off, np.inf, t), np.where(off, np.inf, tuner), bw
        return t, tuner, bw


def _domains(network: Sequence[Tier], k: np.ndarray) -> list[np.ndarray]:
    """D_i: domains of tier i-1 in use (i >= 1), D_0 = k; the ring crosses D_i boundaries when D_i > 1."""
    out = [k]
    for i in range(1, len(network)):
        out.append(-(-k // network[i - 1].size))
    return out


def hops(
    network: Sequence[Tier], k: np.ndarray, collective: str = "all_reduce", *, inter_minus_one: bool = False
) -> np.ndarray:
    """Ring hops per collective at each tier, shape (tiers, ...k): the chunk's critical path.

    Per pass a chunk takes k-1 hops; c_i = D_i when D_i > 1 (else 0) edges leave a domain of tier i-1 and,
    of those, c_{i+1} also leave one of tier i, so c_i - c_{i+1} hops pay tier i's latency (NCCL 2.20.3
    counts all N inter-node edges in an all-reduce pass and N-1 in a reduce-scatter or all-gather pass;
    ``inter_minus_one``: N-1 in an all-reduce pass too, as NCCL counts from 2.23.4 on).
    """
    k = np.asarray(k, dtype=np.int64)
    dom = _domains(network, k)
    c = [np.where(d > 1, d, 0) for d in dom] + [np.zeros_like(k)]
    nt = len(network)
    per_pass = np.zeros((nt,) + k.shape, dtype=np.float64)
    for i in range(1, nt):
        per_pass[i] = c[i] - c[i + 1]
    if collective != "all_reduce" or inter_minus_one:  # nInterSteps = nNodes - 1: one fewer at the outermost tier
        top = np.zeros(k.shape, dtype=np.int64)
        for i in range(1, nt):
            top = np.where(c[i] > 0, i, top)
        for i in range(1, nt):
            per_pass[i] -= top == i
    spec = COLLECTIVES[collective]
    steps = spec.ring_steps(k)
    passes = float(spec.ring_passes)
    out = per_pass * passes
    out[0] = np.maximum(steps - out[1:].sum(axis=0), 0.0)
    return np.where(k >= 2, out, 0.0)


def _tree_hops(network: Sequence[Tier], k: np.ndarray) -> np.ndarray:
    """Tree hops (up and down) per tier: 2(ppn-1) in the node, 2·floor(lg g_i) at tier i."""
    k = np.asarray(k, dtype=np.int64)
    groups = tree_groups(network, k)
    out = np.zeros((len(network),) + k.shape)
    out[0] = 2.0 * (groups[0] - 1)
    for i in range(1, len(network)):
        out[i] = 2.0 * np.floor(np.log2(np.maximum(groups[i], 1)))
    return np.where(k >= 2, out, 0.0)


def _quantise(bw_GBps: np.ndarray, speeds: Sequence[float]) -> np.ndarray:
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
    best_g, best_s = _graph_search(network, spec, k)
    best_g = np.maximum(best_g, 1.0)
    s_pick = best_s
    dup = (s_pick >= 50.0) | (best_g <= 4)
    gm = np.where(dup, np.minimum(2 * best_g, MAX_CHANNELS), best_g)
    multi = nodes > 1
    G = np.where(multi, gm, G)
    rt = np.where(multi, np.minimum(2 * gm, MAX_CHANNELS), rt)
    return G, rt


def _graph_search(
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
    g, s = _graph_search(network, spec, k)
    g2, s2 = _graph_search(network, spec, k, nic=s * (1 - 1e-6))
    tie = (k > (network[0].size or k)) & (s > 0) & (g2 > g)
    return {"tie": tie, "channels": g, "speed_GBps": s, "alt_channels": g2, "alt_speed_GBps": s2}


def nvls_chunk(algorithm: str, n: np.ndarray, ops: np.ndarray, *, nodes: np.ndarray | None) -> np.ndarray:
    """The chunk (bytes) NCCL's calcCollChunking gives an NVLS or NVLSTree collective of n bytes."""
    n = np.asarray(n, dtype=np.float64)
    c = np.full(np.broadcast(n, ops).shape, float(NVLS_CHUNK))
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


def pairs(
    network: Sequence[Tier],
    spec: NcclSpec,
    k: np.ndarray,
    *,
    tier_Bps: np.ndarray,
    collective: str = "all_reduce",
    algorithms: Sequence[str] | None = None,
    protocols: Sequence[str] | None = None,
) -> list[Pair]:
    """Every (algorithm, protocol) pair NCCL could run for this collective over k; see the module docstring.

    ``tier_Bps`` is what each tier offers a ring, (tiers, ...k) (``collectives.tier_bandwidth``; its minimum is
    the ring's bus bandwidth). Sizes
    enter through :meth:`Pair.cost`; ``n`` is the collective's size as nccl-tests counts it (all-gather: the
    gathered output, reduce-scatter: the input).
    """
    k = np.asarray(k, dtype=np.int64)
    kf = k.astype(np.float64)
    nt = len(network)
    ring_Bps = np.min(tier_Bps, axis=0)
    rel = releases.select(spec.version, "nccl.version")  # the release's tables and switches
    gen = rel.generation_table.get(spec.generation, "ampere")
    tab = rel.generations[gen]
    dom = _domains(network, k)
    nodes = dom[1] if nt > 1 else np.ones_like(k)
    multi = nodes > 1
    idx2 = np.where(nodes <= 1, 0, np.where(nodes == 2, 1, 2))
    ppn = kf / np.maximum(nodes, 1)
    ll_max = (
        np.where(
            multi,
            np.asarray(_LL_MAX_MULTINODE.get(spec.cpu, _LL_MAX_MULTINODE["intel"]))[idx2],
            np.asarray(tab["ll_max"])[idx2],
        )
        * 1e9
    )
    gch, ch = graph_channels(network, spec, k, nodes=nodes)  # graph channels (tuner caps) and runtime channels
    kinds = [tier_kind(t, i) for i, t in enumerate(network)]
    lks = [link_kind(kd) for kd in kinds]
    hws = [lk.hw for lk in lks]
    shp = (1,) * k.ndim
    # per-tier scale: the tier's stated latency over the Ring/Simple hop latency of its kind (NCCL's table, or the
    # transport's own published per-hop latency where it has one: EFA)
    scale = []
    for t, lk in zip(network, lks):
        ref = lk.hop_us[2] if lk.hop_us else rel.hw_latency_us[lk.hw]["ring"][2]
        scale.append(t.latency_s / (ref * 1e-6) if ref else 1.0)
    net_over = NET_OVERHEAD_US.get(spec.cpu, 1.0) * 1e-6

    algos = [
        a for a in ALGOS if a in COLLECTIVES[collective].nccl_algorithms and (algorithms is None or a in algorithms)
    ]
    protos = [p for p in PROTOCOLS if p in spec.protocols and (protocols is None or p in protocols)]
    ring_hops = hops(network, k, collective, inter_minus_one=rel.ring_inter_minus_one)
    # NCCL's own count of a ring's intra-node steps, nsteps - nInterSteps, unclipped: 2.20.3 counts 2N inter-node
    # steps of an all-reduce, so at one GPU per node its tuner takes 2 intra-node steps off (its view only)
    ring_hops_tuner = ring_hops.copy()
    if nt > 1 and collective in ("all_reduce", "reduce_scatter", "all_gather"):
        ring_hops_tuner[0] = np.where(k >= 2, COLLECTIVES[collective].ring_steps(kf) - ring_hops[1:].sum(axis=0), 0.0)
    tree_hops = _tree_hops(network, k)
    nvl0 = hws[0] == "nvlink"
    # NCCL 2.20.3 (tuning.cc, ncclTopoTuneModel): "MNNVL: NVLS not yet supported" -- NVLSTree is disabled when
    # comm->MNNVL, and NVLS too (without CollNet); a multi-node NVLink domain runs Ring and Tree only. 2.21.5 on
    # lets it run NVLS (releases.Release.mnnvl_no_nvls)
    nvls_ok = nvl0 and not (lks[0].multinode and rel.mnnvl_no_nvls)
    # 2.29.2 on: NVLSTree all-reduce takes treeCorrectionFactor on Blackwell (minCompCap >= 100) x86 hosts
    tree_corrected_nvls = (
        rel.nvls_tree_correction and collective == "all_reduce" and gen == "blackwell" and spec.cpu in ("intel", "amd")
    )
    one_ppn = ppn < 2  # NCCL's ppn == 1 (ranks / nodes), where 2.23.4 on prices every algorithm with Tree's hops
    B0 = network[0].effective_Bps / 1e9 * np.ones(k.shape)  # one GPU's NVLink, GB/s
    tiers_i = np.arange(nt).reshape((-1,) + shp)
    outer = np.zeros(k.shape, dtype=np.int64)  # the outermost tier k spans (PAT's network hops)
    for i in range(1, nt):
        outer = np.where(dom[i] > 1, i, outer)
    top = (outer == tiers_i) & (tiers_i > 0)  # (tiers, ...k)
    # ---- what a tree (and NVLSTree) sends over tier i >= 1, per byte of the message, per domain below it: a
    # double binary tree over g domains has every domain send and receive n per direction when g = 2 (one
    # edge, each tree carries n/2 up and n/2 down) and up to 2n when g > 2 (an inner node of one tree: n/2 up,
    # 2 x n/2 down, plus n/2 up as a leaf of the other): NCCL's tuner says the same with "bwIntra for nNodes
    # <= 2, bwInter beyond" (Tree) and "bwInter/2 beyond 2 nodes" (NVLSTree), tuning.cc 2.20.3-2.26
    groups = tree_groups(network, k)
    tree_net_bus = np.full(k.shape, np.inf)  # bus-bandwidth equivalent of the network tiers for a tree
    for i in range(1, nt):
        load = np.where(groups[i] <= 2, 1.0, 2.0)  # L_i
        tree_net_bus = np.minimum(tree_net_bus, np.where(groups[i] >= 2, 2.0 * tier_Bps[i] / load, np.inf))
    # NVLSTree: the node's heads (one per NIC, at most NCCL_MAX_NVLS_ARITY) carry the network part
    if nt > 1:
        sub = network[0].size or 1
        r = kf - (np.ceil(kf / sub) - 1) * sub  # devices in the smallest node
        heads = np.minimum(r, NVLS_MAX_HEADS) if network[1].per == "device" else np.ones(k.shape)
        net_heads = np.where(network[1].per == "device", tier_Bps[1] * heads / np.maximum(r, 1), tier_Bps[1])
    else:
        heads = np.ones(k.shape)
        net_heads = np.full(k.shape, np.inf)
    out: list[Pair] = []
    for a in algos:
        for p in protos:
            pidx = PROTOCOLS.index(p)
            if (a.startswith("nvls") or a == "pat") and p != "simple":
                continue
            if p == "ll128" and not spec.ll128:
                continue
            enabled = k >= 2
            if p == "ll128" and not spec.ll128_net:
                enabled = enabled & ~multi
            if a == "nvls":
                enabled = enabled & (~multi) & (k > 2) & spec.nvls & nvls_ok
            if a == "nvls-tree":
                enabled = enabled & multi & spec.nvls & nvls_ok & (ppn > 2)
            if a == "pat":  # ncclPatEnable: one GPU per node (nNodes == nRanks), 2.23.4 on
                enabled = enabled & multi & one_ppn & (rel.pat_factor is not None)
            # ---- latency: base + hops x per-hop latency of each tier; the tuner's view adds the network
            # plugin's latency to every inter-node hop (twice for Simple) and reads NCCL's table, not the
            # transport's own per-hop figure
            cost_hw, tuner_hw = [], []
            for i, lk in enumerate(lks):
                table = rel.hw_latency_us[lk.hw]["tree" if a == "pat" else a][pidx] * 1e-6  # PAT: ppn 1, Tree's
                if i and rel.one_ppn_tree_latency:  # "With ppn=1 latencies are fully exposed" (2.23.4 on)
                    table = np.where(one_ppn, rel.hw_latency_us[lk.hw]["tree"][pidx] * 1e-6, table)
                real = (np.where(table, lk.hop_us[pidx] * 1e-6, 0.0) if lk.hop_us else table) * np.ones(k.shape)
                cost_hw.append(real * scale[i])
                plug = lk.plugin_latency_us * 1e-6 * (2.0 if p == "simple" else 1.0) if i else 0.0
                plug = np.where(table, plug, 0.0)
                tuner_hw.append((table * (scale[i] if not lk.hop_us else 1.0)) + plug + np.zeros(k.shape))
            hw = np.stack(cost_hw)
            thw = np.stack(tuner_hw)
            thc = None  # the tuner's hop counts where they differ from the cost's
            if a == "ring":
                hc = ring_hops
                thc = ring_hops_tuner
                if collective in ("all_reduce", "reduce_scatter", "all_gather"):
                    floor = net_over * (3.0 if p == "simple" else 1.0)
                    hw[0] = np.where(multi, np.maximum(hw[0], floor), hw[0])
                    thw[0] = np.where(multi, np.maximum(thw[0], floor), thw[0])
                if collective == "broadcast":  # tuning.cc: Reduce/Broadcast rings pay nsteps x one hop latency
                    hc = np.zeros_like(ring_hops)
                    top = np.zeros(k.shape, dtype=np.int64)
                    for i in range(1, nt):
                        top = np.where(dom[i] > 1, i, top)
                    for i in range(nt):
                        hc[i] = np.where(top == i, kf, 0.0)
                    hc = np.where(k >= 2, hc, 0.0)
                    thc = hc
            elif a == "tree":
                hc = tree_hops
            elif a == "nvls":
                hc = np.zeros((nt,) + k.shape)
                hc[0] = 1.0
            elif a == "pat":
                # latency 8 + log2i(nNodes)·interLat/3.5 + 2.8·nRanks us: the log part as log2i(N)/3.5 hops of
                # the outermost spanned tier (interLat is Tree's network hop at one GPU per node), the linear part
                # as k "hops" of 2.8 us charged to the first tier
                hc = np.zeros((nt,) + k.shape)
                hc[0] = kf
                hc = hc + np.where(top, np.floor(np.log2(np.maximum(nodes, 1))) / 3.5, 0.0)
                hw[0] = PAT_PER_RANK_US * 1e-6
                thw[0] = PAT_PER_RANK_US * 1e-6
            else:  # nvls-tree: NVLS in the node, then the tree's network hops
                hc = np.where(tiers_i == 0, 1.0, tree_hops)
            base = (PAT_BASE_US if a == "pat" else rel.base_latency_us[a][pidx]) * 1e-6
            hop_lat = hc * hw
            lat = base + hop_lat.sum(axis=0)
            tlat = base + ((hc if thc is None else thc) * thw).sum(axis=0)
            # ---- bus bandwidth (B/s): what it costs (bus) and what NCCL's tuner believes (tbus)
            bus = np.asarray(ring_Bps, dtype=np.float64) * np.ones(k.shape)
            if a == "ring":
                if p == "ll":
                    if rel.ring_ll_factor is None:  # 2.20.3: 1/4, or 1/3 in one node for all but all-reduce/reduce
                        frac = 0.25 if (collective == "all_reduce" or np.any(multi)) else 1.0 / 3.0
                        bus = np.minimum(ll_max, bus * np.where(multi, 0.25, frac))
                    else:
                        bus = np.minimum(ll_max, bus * rel.ring_ll_factor)
                elif p == "ll128":
                    bus = np.minimum(
                        bus * np.where(ppn < 2, rel.ring_ll128_one_ppn, 0.92),
                        gch * np.asarray(tab["ring_ll128"])[idx2] * 1e9,
                    )
                tbus = bus
                steps = COLLECTIVES[collective].ring_steps(kf)
                ratio = kf / np.maximum(steps, 1.0)
            elif a == "tree":
                intra = np.asarray(tier_Bps[0], dtype=np.float64) * np.ones(k.shape)
                phys = np.minimum(intra, tree_net_bus)  # the tree's own per-tier traffic
                tuner = np.where(nodes <= 2, intra, bus)  # NCCL: bwIntra up to 2 nodes, bwInter beyond
                both = []
                for b in (phys, tuner):
                    b = np.minimum(b * 0.92, gch * np.asarray(tab["tree"])[idx2] * 1e9)
                    if p == "ll":
                        b = np.minimum(b / 3.8, ll_max)
                    elif p == "ll128":
                        b = np.minimum(
                            b * np.where(multi, 120.0 / 128.0, 7.0 / 9.0),
                            gch * np.asarray(tab["tree_ll128"])[idx2] * 1e9,
                        )
                    both.append(b)
                bus, tbus = both
                ratio = 0.5
            elif a == "pat":  # busBw = nChannels x bw x 0.85 (2.23.4) / 0.75, kept as the algorithm bandwidth
                bus = np.asarray(ring_Bps, dtype=np.float64) * (rel.pat_factor or 1.0) * np.ones(k.shape)
                tbus = bus
                ratio = 1.0
            else:
                nch = float(spec.nvls_channels)
                s = _quantise(B0 / nch, SPEEDS_INTRA)  # the NVLS graph's per-channel speed (bwIntra)
                reduce_all = collective == "all_reduce"
                split = (ppn - 1.0) / np.maximum(ppn, 1.0)  # all-gather/reduce-scatter: (ppn-1)/ppn (2.27.3 on)
                if rel.nvls_efficiency is None:  # to 2.27.x: busBw = nch x speed, algBw 5/6 of it
                    per = s * (split if (not reduce_all and rel.nvls_ag_rs_ppn) else 1.0)
                    ratio = NVLS_RATIO if reduce_all else rel.nvls_ag_rs_ratio
                    bus = nch * per * 1e9
                    tbus = bus
                    if a == "nvls-tree" and nt > 1:
                        # NCCL's tuner: per channel min(bwIntra, bwInter), bwInter halved beyond 2 nodes (the
                        # graph's quantised speed, then halved); the cost: the heads' NICs carry n (2 nodes) or 2n
                        s_inter = _quantise(net_heads / 1e9 / nch, SPEEDS_INTER) * np.where(nodes > 2, 0.5, 1.0)
                        tbus = nch * np.minimum(per, s_inter) * 1e9
                        bus = np.minimum(bus, net_heads / np.where(nodes > 2, 2.0, 1.0) / ratio)
                else:
                    # 2.28.3 on, in the NVLS graph's own channels: G = one per head (GPUs of the node, or NICs for
                    # NVLSTree; at most NCCL_MAX_NVLS_ARITY), each at S = nch x s / G (the same G x S as the
                    # profile's nvls_channels x s); per channel S x nvlsEfficiency x (G-1)/G, x2 for all-reduce
                    # (x(ppn-1)/ppn for all-gather/reduce-scatter), its bwInter taken as no tighter (the search
                    # raises an NVLS graph's bwInter to 2 x bwIntra); NVLSTree: min(that, the NIC's speed x2 on
                    # two nodes, perChMaxNVLSTreeBws); algBw = busBw x k/nsteps (all-reduce). G < 2: not run.
                    eff = rel.nvls_efficiency.get(gen, 0.0)
                    G = heads if a == "nvls-tree" else np.minimum(ppn, NVLS_MAX_HEADS)
                    enabled = enabled & (G >= 2) & (eff > 0)  # nvlsEfficiency 0 (Volta, Ampere): busBw 0
                    G = np.maximum(G, 2.0)
                    S = nch * s / G
                    per = S * (eff or 1.0) * (G - 1.0) / G * (2.0 if reduce_all else split)
                    ratio = kf / np.maximum(COLLECTIVES[collective].ring_steps(kf), 1.0) if reduce_all else 1.0
                    bus = G * per * 1e9
                    tbus = bus
                    if a == "nvls-tree" and nt > 1:
                        s_inter = _quantise(net_heads / 1e9 / G, SPEEDS_INTER) * np.where(nodes <= 2, 2.0, 1.0)
                        cap = np.where(multi, np.asarray(tab["nvls_tree"])[idx2], np.inf)  # N1: 0, NVLSTree off
                        tbus = G * np.minimum(np.minimum(per, s_inter), cap) * 1e9
                        heads_Bps = net_heads / np.where(nodes > 2, 2.0, 1.0) / ratio
                        bus = np.minimum(np.minimum(bus, G * cap * 1e9), heads_Bps)
            alg_Bps = bus * ratio  # NCCL's "bandwidth": bytes of the collective's size per second
            tuner_alg = tbus * ratio
            dead = ~((alg_Bps > 0) & (tuner_alg > 0))
            if np.any(dead):  # NCCL skips a pair of bandwidth 0 ("if (bw == 0) { *time = -1.0; ...}")
                enabled = enabled & ~dead
                alg_Bps = np.where(dead, 1.0, alg_Bps)
                tuner_alg = np.where(dead, 1.0, tuner_alg)
            if a.startswith("nvls"):
                thr = np.zeros(k.shape)  # getAlgoInfo: NVLS always launches all of its channels
            else:
                thr = (
                    MAX_THREADS[pidx]
                    * THREAD_THRESHOLD[pidx]
                    * (kf if (a == "ring" and p == "ll") else np.ones(k.shape))
                )
            out.append(
                Pair(
                    algorithm=a,
                    protocol=p,
                    enabled=np.asarray(enabled),
                    latency=lat,
                    alg_Bps=alg_Bps,
                    bus_Bps=bus,
                    base=base,
                    hop_latency=hop_lat,
                    hops=hc,
                    plateau=(a == "ring" and p == "simple" and collective == "all_reduce"),
                    multi=multi,
                    channels=ch,
                    ranks=kf,
                    threshold=thr,
                    # NCCL's NVLS graph has one head per GPU of the node (search.cc: NVLS channels = GPUs)
                    ops=(float(spec.nvls_channels) * (heads if a == "nvls-tree" else np.minimum(ppn, NVLS_MAX_HEADS)))
                    if a.startswith("nvls")
                    else None,
                    nodes=nodes if a.startswith("nvls") else None,
                    stages=NVLS_FILL.get(collective, 0.0) if a.startswith("nvls") else 0.0,
                    tuner_lat=tlat,
                    tuner_alg_Bps=tuner_alg,
                    corrected=a == "tree" or (a == "nvls-tree" and tree_corrected_nvls),
                    correction_sizes=rel.tree_correction_sizes,
                )
            )
    return out


def tree_groups(network: Sequence[Tier], k: np.ndarray) -> list[np.ndarray]:
    """g_i: domains of tier i-1 that one domain of tier i joins (index 0: devices in the node), over k."""
    k = np.asarray(k, dtype=np.int64)
    dom = _domains(network, k)
    nt = len(network)
    out = [np.minimum(k, network[0].size if network[0].size else k)]
    for i in range(1, nt):
        out.append(
            dom[i]
            if i == nt - 1 or network[i].size is None
            else np.minimum(dom[i], network[i].size // network[i - 1].size)
        )
    return out
