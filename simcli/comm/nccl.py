"""NCCL's cost model, generalised to simcli's tiers: every (algorithm, protocol) pair, and NCCL's choice.

The tuner's constants and formula switches are the selected release's (:mod:`simcli.comm.releases`, 2.18.1 to
2.30.7: ``NcclSpec.version``; the default 2.29.7, what torch 2.13's CUDA wheels install). Source: NVIDIA/nccl
``src/graph/tuning.cc`` (``ncclTopoTuneModel``, ``ncclTopoGetAlgoTime``), ``src/enqueue.cc`` (``getAlgoInfo``:
channels shrink for small messages) and ``src/graph/search.cc`` (the search graphs: :mod:`simcli.comm.nccl_graph`).
NCCL prices each pair as ``latency + bytes / bandwidth`` and runs the cheapest; this module does the same,
vectorised over (k, n), with the hop counts read off simcli's tiers, one helper per case of tuning.cc:

* **Ring** (all-reduce: 2 passes of k-1 steps; reduce-scatter and all-gather: 1 pass; broadcast: k steps).
  The edges that leave a domain of tier i-1 pay tier i's hop latency, the others tier 0's: for two tiers NCCL's
  ``base + (nsteps - nInterSteps)·lat_intra + nInterSteps·lat_inter``; multi-node rings pay at least NCCL's
  network post overhead per NVLink hop. Bandwidth: the ring's bus bandwidth B times the release's LL factor
  (capped at ``llMaxBw``), 0.92 for LL128 (capped per channel), 1 for Simple; the bytes take ``nsteps/k · n / B_p``.
* **Tree** (all-reduce only): ``base + 2·((ppn-1)·lat_0 + sum_i floor(lg g_i)·lat_i)``; bandwidth
  ``min(0.92·B, channels·perChMaxTreeBw)`` (LL /3.8, LL128 7/9 or 120/128, per-channel caps; x0.85 at ppn 1) x
  ``treeCorrectionFactor``, the bytes ``n / (0.5·B_p)``.
* **NVLS** and **NVLSTree**: Simple only, latency ``lat_nvls`` (+ ``2·floor(lg N)·lat_net``), bandwidth on NCCL's
  NVLS graph (:func:`simcli.comm.nccl_graph.nvls_graph`: one head per GPU or NIC) with 2.28.3's nvlsEfficiency;
  the bytes also pay a pipeline fill of ``NVLS_FILL`` chunk times (:func:`nvls_chunk`), which NCCL's tuner leaves
  out. **PAT** (2.23.4 on, one GPU per node): ``8 + log2 N·lat_net/3.5 + 2.8·k`` us.

Two ways to read the model (``simcli.comm.nccl_choice.nccl_collective(by="tuner")`` chooses on NCCL's own estimate,
as NCCL does; ``by="time"`` takes the fastest pair): NCCL's tuner multiplies a multi-node Simple ring's latency by
1.4 ("plateau effect") and charges every message all channels; what the chosen pair *costs* drops the plateau (the
published 16-GPU forced-ring curve's 1-2 MiB floor, 155 us, sits on Simple's plain latency) and uses the channels
``getAlgoInfo`` launches for that size (``nc`` shrinks while ``n < nc·nthreads·threshold``).

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
from typing import Mapping, Sequence

import numpy as np

from ..base.types import NcclSpec, Tier
from . import ctas, releases, specs
from .nccl_graph import (
    MAX_CHANNELS,
    NVLINK_SEARCH_FRACTION,
    NVLS_CHUNK,
    SPEEDS_INTER,
    SPEEDS_INTRA,
    graph_channels,
    graph_tie,
    nvls_chunk,
    nvls_fill,
    nvls_graph,
    quantise,
    tier_kind,
)
from .specs import COLLECTIVES, PROTOCOL_SPECS, PROTOCOLS, link_kind

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
    # the search graphs and NVLS chunks (simcli.comm.nccl_graph), read here as before
    "graph_tie",
    "graph_channels",
    "nvls_chunk",
    "NVLINK_SEARCH_FRACTION",
    "MAX_CHANNELS",
    "NVLS_CHUNK",
]

#: NCCL's algorithms that simcli models and its protocols, in NCCL's order
ALGOS = ("tree", "ring", "nvls", "nvls-tree", "pat")
#: PAT's base latency, us (tuning.cc 2.23.4: "8 // Base time"; baseLat[PAT] 8.0 from 2.28.3) and its linear part
#: per rank ("nRanks * 2.8; // Still a linear part"), in every release that has PAT
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
#: per-generation tables, indexed [one node, two nodes, more]; llMaxBws by the GPU generation in one node and by
#: the host CPU (Intel/Arm: the first row, AMD: the second) across nodes (the default release's)
GENERATIONS = _DEFAULT.generations
#: generations without a table of their own take the nearest older one (the default release's)
GENERATION_TABLE = _DEFAULT.generation_table
#: llMaxBws rows for multi-node rings, by host CPU vendor
_LL_MAX_MULTINODE = {"intel": (39.0, 39.0, 20.4), "arm": (39.0, 39.0, 20.4), "amd": (87.7, 22.5, 19.0)}
#: getNetOverhead (us): the network post overhead every multi-node ring hop pays at least (x3 for Simple)
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0, "arm": 1.0}
#: treeCorrectionFactor[protocol][log2(n / 64)], n from 64 B to 256 MB (tuning.cc, ncclTopoGetAlgoTime), and the 24th
#: entry (512 MiB-1 GiB) 2.29.2 added (releases.Release.tree_correction_sizes: how many a release has)
# fmt: off
TREE_CORRECTION = np.array([
    [1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0],
    [1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0],
    [.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9]])
# fmt: on
#: getAlgoInfo (enqueue.cc): threads per channel (NCCL_{LL,LL128,SIMPLE}_MAX_NTHREADS) and the bytes per thread below
#: which a channel is dropped (NCCL_*_THREAD_THRESHOLD; ring LL's x the ranks): simcli.comm.specs.PROTOCOL_SPECS
MAX_THREADS = tuple(p.max_threads for p in PROTOCOL_SPECS)
THREAD_THRESHOLD = tuple(p.thread_threshold for p in PROTOCOL_SPECS)
#: the tuner's "plateau effect of ring" factor on a multi-node Simple ring's latency (compute capability >= 8.0)
RING_PLATEAU = 1.4
#: Tree's busBw x .85 for NCCL_TOPO_PATTERN_TREE (tuning.cc 2.20.3 l.186, 2.29.7 l.310), which search.cc gives every
#: tree graph of a one-GPU node ("if (ngpus == 1) ...", 2.26.2 l.978): applied at one GPU per node; and NVLS's 5/6
TREE_PATTERN_FACTOR, NVLS_RATIO = 0.85, 5.0 / 6.0
#: nvlsEfficiency (tuning.cc 2.28.3 on, by compute capability): what NCCL's NVLS kernels move of the NVLS graph's
#: speed, 0 where NVLS does not run. simcli prices NVLS's cost with it in every release (the releases before 2.28.3
#: choose on their own 5/6 formula: simcli.comm.nccl._nvls_bw)
NVLS_EFFICIENCY = {"volta": 0.0, "ampere": 0.0, "hopper": 0.85, "blackwell": 0.74}
#: NVLS pipeline fill, in chunk times, by collective (simcli.comm.specs: CollectiveSpec.nvls_fill): a chunk passes
#: the kernel's warp groups one after the other, so the bytes take m + stages - 1 chunk times for m chunks per
#: concurrent operation (channels x heads), not m. All-reduce (src/device/all_reduce.h): scatter into the NVLS
#: buffer, multimem reduce + broadcast, gather out of it (3 stages); reduce-scatter (reduce_scatter.h): scatter,
#: multimem reduce (2); all-gather: multimem broadcast, gather (2)
NVLS_FILL = {c.name: c.nvls_fill for c in COLLECTIVES.values() if c.nvls_fill}
#: Host time to issue one collective to one GPU (us), measured by a third party: DGX-A100, nccl-tests
#: ``all_reduce_perf -b 8 -e 128 -g N`` in one process, NCCL_ALGO=Ring, NCCL_MAX_NCHANNELS=1 (NVIDIA/nccl-tests#123,
#: 2022-12-14): 10, 13.76, 16.88, 20.8, 25.2, 29.5, 33.7 us for N = 2..8, i.e. N x 4.2 us from N = 4 on (4.2,
#: 4.16, 4.2, 4.2, 4.2 us per GPU), where NCCL's tuner gives the GPU 6.6 + 2(N-1)·0.6 us (15 us at N = 8)
LAUNCH_US = 4.2


def host_floor(gpus_per_process: "int | np.ndarray") -> "float | np.ndarray":
    """The least time (s) one collective takes when one host thread launches it on ``gpus_per_process`` GPUs
    (a number, or an array that broadcasts against the collective's grid)."""
    return np.asarray(gpus_per_process, dtype=np.float64) * (LAUNCH_US * 1e-6)


#: NCCL_MAX_NVLS_ARITY (src/include/device.h): NVLS heads per node, 32 from NCCL 2.20.1 on (8 before)
NVLS_MAX_HEADS = 32


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
        defaulted=("generation", "channels", "nvls", "nvls_channels", "ll128", "cpu", "ll128_net", "tuner"),
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
    ``hop_latency`` and ``hops`` are (tiers, ...k). ``enabled`` is False where NCCL does not run the pair."""

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
    channels: np.ndarray | float  #: the runtime channels, over k (RCCL: one number)
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


def domains(network: Sequence[Tier], k: np.ndarray) -> list[np.ndarray]:
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
    dom = domains(network, k)
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


@dataclass(frozen=True)
class _Ctx:
    """What every pair of one (network, spec, k, collective) shares: the release's tables, the counts over k, the
    per-tier hop scales and the tree's and NVLSTree's network terms (built once by :func:`_context`)."""

    network: Sequence[Tier]
    spec: NcclSpec
    rel: releases.Release
    collective: str
    k: np.ndarray
    kf: np.ndarray
    tier_Bps: np.ndarray
    ring_Bps: np.ndarray
    gen: str
    tab: Mapping[str, tuple[float, float, float]]
    dom: list
    nodes: np.ndarray
    multi: np.ndarray
    idx2: np.ndarray
    ppn: np.ndarray
    ll_max: np.ndarray
    gch: np.ndarray
    ch: np.ndarray
    lks: list
    scale: list
    net_over: float
    ring_hops: np.ndarray
    ring_hops_tuner: np.ndarray
    tree_hops: np.ndarray
    nvls_ok: bool
    tree_corrected_nvls: bool
    one_ppn: np.ndarray
    top: np.ndarray
    tree_net_bus: np.ndarray
    heads: np.ndarray
    net_heads: np.ndarray

    @property
    def nt(self) -> int:
        return len(self.network)


def _context(network: Sequence[Tier], spec: NcclSpec, k: np.ndarray, *, tier_Bps: np.ndarray, collective: str) -> _Ctx:
    kf = k.astype(np.float64)
    nt = len(network)
    rel = releases.select(spec.version, "nccl.version")  # the release's tables and switches
    gen = rel.generation_table.get(spec.generation, "ampere")
    tab = rel.generations[gen]
    dom = domains(network, k)
    nodes = dom[1] if nt > 1 else np.ones_like(k)
    multi = nodes > 1
    idx2 = np.where(nodes <= 1, 0, np.where(nodes == 2, 1, 2))
    ll_row = np.asarray(_LL_MAX_MULTINODE.get(spec.cpu, _LL_MAX_MULTINODE["intel"]))
    ll_max = np.where(multi, ll_row[idx2], np.asarray(tab["ll_max"])[idx2]) * 1e9
    gch, ch = graph_channels(network, spec, k, nodes=nodes)  # graph channels (tuner caps) and runtime channels
    ch = ctas.runtime_channels(ch, spec)  # NCCL_MIN_CTAS / NCCL_MAX_CTAS (simcli.comm.ctas)
    lks = [link_kind(tier_kind(t, i)) for i, t in enumerate(network)]
    # per-tier scale: the tier's stated latency over the Ring/Simple hop latency of its kind (NCCL's table, or the
    # transport's own published per-hop latency where it has one: EFA)
    scale = []
    for t, lk in zip(network, lks):
        ref = lk.hop_us[2] if lk.hop_us else rel.hw_latency_us[lk.hw]["ring"][2]
        scale.append(t.latency_s / (ref * 1e-6) if ref else 1.0)
    ring_hops = hops(network, k, collective, inter_minus_one=rel.ring_inter_minus_one)
    # NCCL's own count of a ring's intra-node steps, nsteps - nInterSteps, unclipped: 2.20.3 counts 2N inter-node
    # steps of an all-reduce, so at one GPU per node its tuner takes 2 intra-node steps off (its view only)
    ring_hops_tuner = ring_hops.copy()
    if nt > 1 and collective in ("all_reduce", "reduce_scatter", "all_gather"):
        ring_hops_tuner[0] = np.where(k >= 2, COLLECTIVES[collective].ring_steps(kf) - ring_hops[1:].sum(axis=0), 0.0)
    # NCCL 2.20.3 (tuning.cc, ncclTopoTuneModel): "MNNVL: NVLS not yet supported" -- NVLSTree is disabled when
    # comm->MNNVL, and NVLS too (without CollNet); a multi-node NVLink domain runs Ring and Tree only. 2.21.5 on
    # lets it run NVLS (releases.Release.mnnvl_no_nvls)
    nvls_ok = lks[0].hw == "nvlink" and not (lks[0].multinode and rel.mnnvl_no_nvls)
    # 2.29.2 on: NVLSTree all-reduce takes treeCorrectionFactor on Blackwell (minCompCap >= 100) x86 hosts
    tree_corrected_nvls = (
        rel.nvls_tree_correction and collective == "all_reduce" and gen == "blackwell" and spec.cpu in ("intel", "amd")
    )
    shp = (1,) * k.ndim
    tiers_i = np.arange(nt).reshape((-1,) + shp)
    outer = np.zeros(k.shape, dtype=np.int64)  # the outermost tier k spans (PAT's network hops)
    for i in range(1, nt):
        outer = np.where(dom[i] > 1, i, outer)
    heads, net_heads = _nvls_heads(network, kf, tier_Bps)
    return _Ctx(
        network=network,
        spec=spec,
        rel=rel,
        collective=collective,
        k=k,
        kf=kf,
        tier_Bps=tier_Bps,
        ring_Bps=np.min(tier_Bps, axis=0),
        gen=gen,
        tab=tab,
        dom=dom,
        nodes=nodes,
        multi=multi,
        idx2=idx2,
        ppn=kf / np.maximum(nodes, 1),
        ll_max=ll_max,
        gch=gch,
        ch=ch,
        lks=lks,
        scale=scale,
        net_over=NET_OVERHEAD_US.get(spec.cpu, 1.0) * 1e-6,
        ring_hops=ring_hops,
        ring_hops_tuner=ring_hops_tuner,
        tree_hops=_tree_hops(network, k),
        nvls_ok=nvls_ok,
        tree_corrected_nvls=tree_corrected_nvls,
        one_ppn=(kf / np.maximum(nodes, 1)) < 2,  # NCCL's ppn == 1, where 2.23.4 on prices with Tree's hops
        top=(outer == tiers_i) & (tiers_i > 0),  # (tiers, ...k)
        tree_net_bus=_tree_net_bus(network, k, tier_Bps),
        heads=heads,
        net_heads=net_heads,
    )


def _tree_net_bus(network: Sequence[Tier], k: np.ndarray, tier_Bps: np.ndarray) -> np.ndarray:
    """What a tree (and NVLSTree) sends over tier i >= 1, as a bus-bandwidth equivalent of the network tiers: a
    double binary tree over g domains has every domain send and receive n per direction when g = 2 (one edge, each
    tree carries n/2 up and n/2 down) and up to 2n when g > 2 (an inner node of one tree: n/2 up, 2 x n/2 down,
    plus n/2 up as a leaf of the other): NCCL's tuner says the same with "bwIntra for nNodes <= 2, bwInter beyond"
    (Tree) and "bwInter/2 beyond 2 nodes" (NVLSTree), tuning.cc 2.20.3-2.26."""
    groups = tree_groups(network, k)
    out = np.full(k.shape, np.inf)
    for i in range(1, len(network)):
        load = np.where(groups[i] <= 2, 1.0, 2.0)  # L_i
        out = np.minimum(out, np.where(groups[i] >= 2, 2.0 * tier_Bps[i] / load, np.inf))
    return out


def _nvls_heads(network: Sequence[Tier], kf: np.ndarray, tier_Bps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """NVLSTree: the node's heads (one per NIC, at most NCCL_MAX_NVLS_ARITY) and the network bandwidth they carry."""
    if len(network) < 2:
        return np.ones(kf.shape), np.full(kf.shape, np.inf)
    sub = network[0].size or 1
    r = kf - (np.ceil(kf / sub) - 1) * sub  # devices in the smallest node
    per_device = network[1].per == "device"
    heads = np.minimum(r, NVLS_MAX_HEADS) if per_device else np.ones(kf.shape)
    net_heads = tier_Bps[1] * heads / np.maximum(r, 1) if per_device else tier_Bps[1]
    return heads, np.asarray(net_heads) * np.ones(kf.shape)


def _enabled(c: _Ctx, a: str, p: str) -> np.ndarray:
    """Where NCCL runs (a, p) over k (before a zero bandwidth turns it off)."""
    spec, multi = c.spec, c.multi
    enabled = c.k >= 2
    if p == "ll128" and not spec.ll128_net:
        enabled = enabled & ~multi
    if a == "nvls":
        ag_rs = c.collective == "all_reduce" or c.rel.nvls_ag_rs  # all-gather/reduce-scatter: Ring only to 2.18.x
        enabled = enabled & (~multi) & (c.k > 2) & spec.nvls & c.nvls_ok & ag_rs
    elif a == "nvls-tree":
        enabled = enabled & multi & spec.nvls & c.nvls_ok & (c.ppn > 2)
    elif a == "pat":  # ncclPatEnable: one GPU per node (nNodes == nRanks), 2.23.4 on
        enabled = enabled & multi & c.one_ppn & (c.rel.pat_factor is not None)
    return enabled


def _hop_tables(c: _Ctx, a: str, p: str) -> tuple[np.ndarray, np.ndarray]:
    """(what a hop of each tier costs, what NCCL's tuner believes it costs), (tiers, ...k): the tuner adds the
    network plugin's latency to every inter-node hop (twice for Simple) and reads NCCL's table, not the transport's
    own per-hop figure."""
    pidx = PROTOCOLS.index(p)
    rel, k = c.rel, c.k
    cost_hw, tuner_hw = [], []
    for i, lk in enumerate(c.lks):
        table: np.ndarray | float = rel.hw_latency_us[lk.hw]["tree" if a == "pat" else a][pidx] * 1e-6  # PAT: Tree's
        if i and rel.one_ppn_tree_latency:  # "With ppn=1 latencies are fully exposed" (2.23.4 on)
            table = np.where(c.one_ppn, rel.hw_latency_us[lk.hw]["tree"][pidx] * 1e-6, table)
        real = (np.where(table, lk.hop_us[pidx] * 1e-6, 0.0) if lk.hop_us else table) * np.ones(k.shape)
        cost_hw.append(real * c.scale[i])
        plug = lk.plugin_latency_us * 1e-6 * (2.0 if p == "simple" else 1.0) if i else 0.0
        if a == "nvls-tree" and rel.nvls_tree_2_18:  # 2.18.x: 2*(nNodes-1)*hwLat[NET], no graph latencyInter
            plug = 0.0
        plug = np.where(table, plug, 0.0)
        tuner_hw.append((table * (c.scale[i] if not lk.hop_us else 1.0)) + plug + np.zeros(k.shape))
    return np.stack(cost_hw), np.stack(tuner_hw)


def _ring_hops(c: _Ctx, p: str, hw: np.ndarray, *, thw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ring: (cost's hop counts, tuner's); multi-node rings pay at least the network post overhead per NVLink hop
    (``hw``, ``thw`` raised in place); Reduce/Broadcast rings pay nsteps x one hop latency (tuning.cc)."""
    if c.collective in ("all_reduce", "reduce_scatter", "all_gather"):
        floor = c.net_over * (3.0 if p == "simple" else 1.0)
        hw[0] = np.where(c.multi, np.maximum(hw[0], floor), hw[0])
        thw[0] = np.where(c.multi, np.maximum(thw[0], floor), thw[0])
    if c.collective != "broadcast":
        return c.ring_hops, c.ring_hops_tuner
    hc = np.zeros_like(c.ring_hops)
    top = np.zeros(c.k.shape, dtype=np.int64)
    for i in range(1, c.nt):
        top = np.where(c.dom[i] > 1, i, top)
    for i in range(c.nt):
        hc[i] = np.where(top == i, c.kf, 0.0)
    hc = np.where(c.k >= 2, hc, 0.0)
    return hc, hc


def _latency(c: _Ctx, a: str, p: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """(latency, tuner's latency, hops (tiers, ...k), hop latency (tiers, ...k), base) of one pair, as tuning.cc's
    cases price it: Ring base + steps x hop, Tree base + 2((ppn-1) intra + log2 N inter), NVLS one NVLink hop,
    NVLSTree that + 2 log2 N network hops, PAT 8 + log2 N x inter/3.5 + 2.8 x nRanks."""
    hw, thw = _hop_tables(c, a, p)
    thc = None  # the tuner's hop counts where they differ from the cost's
    if a == "ring":
        hc, thc = _ring_hops(c, p, hw, thw=thw)
    elif a == "tree":
        hc = c.tree_hops
    elif a == "nvls":
        hc = np.zeros((c.nt,) + c.k.shape)
        hc[0] = 1.0
    elif a == "pat":
        # latency 8 + log2i(nNodes)·interLat/3.5 + 2.8·nRanks us: the log part as log2i(N)/3.5 hops of the outermost
        # spanned tier (interLat is Tree's network hop at one GPU per node), the linear part as k "hops" of 2.8 us
        # charged to the first tier
        hc = np.zeros((c.nt,) + c.k.shape)
        hc[0] = c.kf
        hc = hc + np.where(c.top, np.floor(np.log2(np.maximum(c.nodes, 1))) / 3.5, 0.0)
        hw[0] = PAT_PER_RANK_US * 1e-6
        thw[0] = PAT_PER_RANK_US * 1e-6
    else:  # nvls-tree: NVLS in the node, then the tree's network hops
        shp = (1,) * c.k.ndim
        net_hops = c.tree_hops
        if c.rel.nvls_tree_2_18:  # v2.18.5-1 tuning.cc line 238: 2*(nNodes-1)*hwLat[NET], tier i 2(D_i - D_i+1) of them
            d = np.stack(list(c.dom) + [np.ones_like(c.k)])
            net_hops = np.where(c.k >= 2, 2.0 * np.maximum(d[:-1] - d[1:], 0), 0.0)
        hc = np.where(np.arange(c.nt).reshape((-1,) + shp) == 0, 1.0, net_hops)
    base = (PAT_BASE_US if a == "pat" else c.rel.base_latency_us[a][PROTOCOLS.index(p)]) * 1e-6
    hop_lat = hc * hw
    lat = base + hop_lat.sum(axis=0)
    tlat = base + ((hc if thc is None else thc) * thw).sum(axis=0)
    return lat, tlat, hc, hop_lat, base


def _ring_bw(c: _Ctx, p: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ring: (bus bandwidth, the tuner's, bus-to-algorithm ratio k/nsteps), B/s."""
    rel = c.rel
    bus = np.asarray(c.ring_Bps, dtype=np.float64) * np.ones(c.k.shape)
    if p == "ll":
        if rel.ring_ll_factor is None:  # 2.20.3: 1/4, or 1/3 in one node for all but all-reduce/reduce
            frac = 0.25 if (c.collective == "all_reduce" or np.any(c.multi)) else 1.0 / 3.0
            bus = np.minimum(c.ll_max, bus * np.where(c.multi, 0.25, frac))
        else:
            bus = np.minimum(c.ll_max, bus * rel.ring_ll_factor)
    elif p == "ll128":
        bus = np.minimum(
            bus * np.where(c.ppn < 2, rel.ring_ll128_one_ppn, 0.92),
            c.gch * np.asarray(c.tab["ring_ll128"])[c.idx2] * 1e9,
        )
    steps = COLLECTIVES[c.collective].ring_steps(c.kf)
    return bus, bus, c.kf / np.maximum(steps, 1.0)


def _tree_bw(c: _Ctx, p: str) -> tuple[np.ndarray, np.ndarray, float]:
    """Tree (all-reduce): (bus bandwidth over the tree's own per-tier traffic, the tuner's: bwIntra up to 2 nodes,
    the ring's bwInter beyond; ratio 0.5), B/s, min(0.92 B, caps), LL /3.8, LL128 7/9 or 120/128, x0.85 at ppn 1."""
    intra = np.asarray(c.tier_Bps[0], dtype=np.float64) * np.ones(c.k.shape)
    phys = np.minimum(intra, c.tree_net_bus)
    tuner = np.where(c.nodes <= 2, intra, np.asarray(c.ring_Bps, dtype=np.float64) * np.ones(c.k.shape))
    both = []
    for b in (phys, tuner):
        b = np.minimum(b * 0.92, c.gch * np.asarray(c.tab["tree"])[c.idx2] * 1e9)
        if p == "ll":
            b = np.minimum(b / 3.8, c.ll_max)
        elif p == "ll128":
            b = np.minimum(
                b * np.where(c.multi, 120.0 / 128.0, 7.0 / 9.0), c.gch * np.asarray(c.tab["tree_ll128"])[c.idx2] * 1e9
            )
        both.append(np.where(c.one_ppn & c.multi & c.rel.tree_pattern_factor, b * TREE_PATTERN_FACTOR, b))  # 2.18.3 on
    return both[0], both[1], 0.5


def _pat_bw(c: _Ctx) -> tuple[np.ndarray, np.ndarray, float]:
    """PAT: busBw = nChannels x bw x 0.85 (2.23.4) / 0.75, kept as the algorithm bandwidth."""
    bus = np.asarray(c.ring_Bps, dtype=np.float64) * (c.rel.pat_factor or 1.0) * np.ones(c.k.shape)
    return bus, bus, 1.0


def nvls_channels(c: _Ctx) -> np.ndarray | float:
    """NVLS's channels over k: the profile's, or Blackwell's 24 in one node or NVLink domain and 32 across (the
    release's ``sm100_nvls_channels``, nvls.cc 2.27.3 on), within NCCL_MIN_CTAS/NCCL_MAX_CTAS (simcli.comm.ctas)."""
    two = c.rel.sm100_nvls_channels
    if two is None or c.spec.generation != "blackwell":
        return ctas.nvls_channels(c.spec)
    return ctas.nvls_channels(c.spec, np.where(c.multi, float(two[1]), float(two[0])))


def _nvls_bw_5_6(c: _Ctx, a: str, G: np.ndarray, *, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NVLS/NVLSTree to 2.27.x: busBw = the graph's nChannels (G) x its speed s, algBw 5/6 of it (all-reduce; .75
    in 2.18.1: the release's ``nvls_ratio``); NVLSTree's tuner per channel min(bwIntra, bwInter), bwInter halved
    beyond 2 nodes (the graph's quantised speed, then halved; 2.18.x: ``nvls_tree_2_18``); its cost: the heads'
    NICs carry n (2 nodes) or 2n."""
    rel = c.rel
    reduce_all = c.collective == "all_reduce"
    split = (c.ppn - 1.0) / np.maximum(c.ppn, 1.0)  # all-gather/reduce-scatter: (ppn-1)/ppn (2.27.3 on)
    per = s * (split if (not reduce_all and rel.nvls_ag_rs_ppn) else 1.0)
    ratio = np.asarray(rel.nvls_ratio if reduce_all else rel.nvls_ag_rs_ratio)
    bus = G * per * 1e9
    tbus = bus
    if a == "nvls-tree" and c.nt > 1:
        if rel.nvls_tree_2_18:  # v2.18.5-1 tuning.cc lines 174, 198: bwIntra to 2 nodes, bwInter beyond; .70 N/(2(N-1))
            tbus = G * np.where(c.nodes <= 2, per, quantise(c.net_heads / 1e9 / G, SPEEDS_INTER)) * 1e9
            return bus, tbus, 0.70 * c.nodes / (2.0 * np.maximum(c.nodes - 1.0, 1.0))
        s_inter = quantise(c.net_heads / 1e9 / G, SPEEDS_INTER) * np.where(c.nodes > 2, 0.5, 1.0)
        tbus = G * np.minimum(per, s_inter) * 1e9
        bus = np.minimum(bus, c.net_heads / np.where(c.nodes > 2, 2.0, 1.0) / ratio)
    return bus, tbus, ratio


def _nvls_search_speed(c: _Ctx, a: str, G: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(channels, bwIntra GB/s) of NCCL's NVLS graph for the 2.28.3 formula (:func:`nvls_graph`): searched on NCCL's
    own NVLink speed for the generation (the figure its nvlsEfficiency was measured against), the generation's
    intra-node speed table (Blackwell's own from 2.25.1); NVLSTree's heads limited by one channel per NIC."""
    net0 = c.network[0]
    frac = NVLINK_SEARCH_FRACTION.get(c.spec.generation)
    nvl = net0.bandwidth_Bps * frac / 1e9 if (frac and net0.per == "device") else net0.effective_Bps / 1e9
    speeds = c.rel.sm100_speeds_intra if (c.gen == "blackwell" and c.rel.sm100_speeds_intra) else SPEEDS_INTRA
    if a == "nvls-tree" and c.nt > 1:  # searched on the inter-node table (Hopper's: simcli carries no SM100 one)
        nic = quantise(c.net_heads / 1e9 / np.maximum(c.heads, 1.0), SPEEDS_INTER)
        return nvls_graph(nvl, SPEEDS_INTER, G, nic_GBps=nic)
    return nvls_graph(nvl, speeds, G)


def _nvls_bw(c: _Ctx, a: str, enabled: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """NVLS and NVLSTree: (bus bandwidth, the tuner's, ratio, enabled), B/s.

    In the NVLS graph's own channels (:func:`nvls_graph`): G heads (GPUs of the node, or NICs for NVLSTree; at most
    NCCL_MAX_NVLS_ARITY) at bwIntra S each. What it costs is 2.28.3's formula in every release (the kernels do not
    change with the tuner's table; nvlsEfficiency is NVIDIA's measured correction of the graph's speed): per
    channel S x nvlsEfficiency x (G-1)/G, x2 for all-reduce (x(ppn-1)/ppn for all-gather/reduce-scatter), its
    bwInter taken as no tighter (the search raises an NVLS graph's bwInter to 2 x bwIntra); NVLSTree: min(that,
    the NIC's speed x2 on two nodes, perChMaxNVLSTreeBws where the release has them); algBw = busBw x k/nsteps
    (all-reduce). What NCCL's tuner believes is the release's own formula (:func:`_nvls_bw_5_6` to 2.27.x).
    G < 2, or a generation without an efficiency (Volta, Ampere): not run."""
    rel = c.rel
    G0 = c.heads if a == "nvls-tree" else np.minimum(c.ppn, NVLS_MAX_HEADS)
    effs = rel.nvls_efficiency if rel.nvls_efficiency is not None else NVLS_EFFICIENCY
    eff = effs.get(c.gen, 0.0)
    if rel.nvls_efficiency is not None:
        enabled = enabled & (G0 >= 2) & (eff > 0)  # nvlsEfficiency 0 (Volta, Ampere): busBw 0
    G, S = _nvls_search_speed(c, a, np.maximum(G0, 2.0))
    G = np.maximum(G, 2.0)
    reduce_all = c.collective == "all_reduce"
    split = (c.ppn - 1.0) / np.maximum(c.ppn, 1.0)
    per = S * (eff or 1.0) * (G - 1.0) / G * (2.0 if reduce_all else split)
    ratio = c.kf / np.maximum(COLLECTIVES[c.collective].ring_steps(c.kf), 1.0) if reduce_all else np.ones(c.k.shape)
    bus = G * per * 1e9
    tbus = bus
    if a == "nvls-tree" and c.nt > 1:
        s_inter = quantise(c.net_heads / 1e9 / G, SPEEDS_INTER) * np.where(c.nodes <= 2, 2.0, 1.0)
        caps = np.asarray(c.tab["nvls_tree"])
        cap = np.where(c.multi, caps[c.idx2], np.inf) if caps.any() else np.full(c.k.shape, np.inf)
        tbus = G * np.minimum(np.minimum(per, s_inter), cap) * 1e9
        heads_Bps = c.net_heads / np.where(c.nodes > 2, 2.0, 1.0) / ratio
        bus = np.minimum(np.minimum(bus, G * cap * 1e9), heads_Bps)
    if rel.nvls_efficiency is None:  # the tuner's own view to 2.27.x, as an algorithm bandwidth over the cost's ratio
        _, tbus_old, ratio_old = _nvls_bw_5_6(c, a, G, s=S)
        tbus = tbus_old * ratio_old / ratio
    return bus, tbus, ratio, enabled


def _pair(c: _Ctx, a: str, p: str) -> Pair:
    """One (algorithm, protocol) pair over k: its latency (:func:`_latency`) and bandwidth (one helper per
    algorithm, as tuning.cc's cases), what it costs and what NCCL's tuner believes."""
    pidx = PROTOCOLS.index(p)
    enabled = _enabled(c, a, p)
    lat, tlat, hc, hop_lat, base = _latency(c, a, p)
    ratio: np.ndarray | float
    if a == "ring":
        bus, tbus, ratio = _ring_bw(c, p)
    elif a == "tree":
        bus, tbus, ratio = _tree_bw(c, p)
    elif a == "pat":
        bus, tbus, ratio = _pat_bw(c)
    else:
        bus, tbus, ratio, enabled = _nvls_bw(c, a, enabled)
    alg_Bps = bus * ratio  # NCCL's "bandwidth": bytes of the collective's size per second
    tuner_alg = tbus * ratio
    dead = ~((alg_Bps > 0) & (tuner_alg > 0))
    if np.any(dead):  # NCCL skips a pair of bandwidth 0 ("if (bw == 0) { *time = -1.0; ...}")
        enabled = enabled & ~dead
        alg_Bps = np.where(dead, 1.0, alg_Bps)
        tuner_alg = np.where(dead, 1.0, tuner_alg)
    nvls = a.startswith("nvls")
    if nvls:
        thr = np.zeros(c.k.shape)  # getAlgoInfo: NVLS always launches all of its channels
    else:
        thr = MAX_THREADS[pidx] * THREAD_THRESHOLD[pidx] * (c.kf if (a == "ring" and p == "ll") else np.ones(c.k.shape))
    # NCCL's NVLS graph has one head per GPU of the node (search.cc: NVLS channels = GPUs)
    heads = c.heads if a == "nvls-tree" else np.minimum(c.ppn, NVLS_MAX_HEADS)
    return Pair(
        algorithm=a,
        protocol=p,
        enabled=np.asarray(enabled),
        latency=lat,
        alg_Bps=alg_Bps,
        bus_Bps=bus,
        base=base,
        hop_latency=hop_lat,
        hops=hc,
        plateau=(a == "ring" and p == "simple" and c.collective == "all_reduce"),
        multi=c.multi,
        channels=c.ch,
        ranks=c.kf,
        threshold=thr,
        ops=nvls_channels(c) * heads if nvls else None,
        nodes=c.nodes if nvls else None,
        stages=NVLS_FILL.get(c.collective, 0.0) if nvls else 0.0,
        tuner_lat=tlat,
        tuner_alg_Bps=tuner_alg,
        corrected=a == "tree" or (a == "nvls-tree" and c.tree_corrected_nvls),
        correction_sizes=c.rel.tree_correction_sizes,
    )


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
    the ring's bus bandwidth). Sizes enter through :meth:`Pair.cost`; ``n`` is the collective's size as nccl-tests
    counts it (all-gather: the gathered output, reduce-scatter: the input).
    """
    k = np.asarray(k, dtype=np.int64)
    c = _context(network, spec, k, tier_Bps=tier_Bps, collective=collective)
    algos = [
        a for a in ALGOS if a in COLLECTIVES[collective].nccl_algorithms and (algorithms is None or a in algorithms)
    ]
    protos = [p for p in PROTOCOLS if p in spec.protocols and (protocols is None or p in protocols)]
    out: list[Pair] = []
    for a in algos:
        for p in protos:
            if (a.startswith("nvls") or a == "pat") and p != "simple":
                continue
            if p == "ll128" and not spec.ll128:
                continue
            out.append(_pair(c, a, p))
    return out


def tree_groups(network: Sequence[Tier], k: np.ndarray) -> list[np.ndarray]:
    """g_i: domains of tier i-1 that one domain of tier i joins (index 0: devices in the node), over k."""
    k = np.asarray(k, dtype=np.int64)
    dom = domains(network, k)
    nt = len(network)
    out = [np.minimum(k, network[0].size if network[0].size else k)]
    for i in range(1, nt):
        out.append(
            dom[i]
            if i == nt - 1 or network[i].size is None
            else np.minimum(dom[i], network[i].inner_size // network[i - 1].inner_size)
        )
    return out
