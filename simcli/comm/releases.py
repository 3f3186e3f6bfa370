"""NCCL releases as data: the tuner's constants and formula switches of every release whose ``src/graph/tuning.cc``
(or the choice in ``src/enqueue.cc``) changed, 2.18.1 through 2.30.7, one :class:`Release` row each.

:mod:`simcli.comm.nccl` reads the selected row (a profile's ``nccl.version``, or ``--nccl-version``) instead of
constants of its own. Each row is the row before it with the fields its tag changed (:func:`_after`, by keyword),
cited to that tag's file and function; ``changes`` says what changed, and says so where nothing simcli prices did
(the row is carried so that the release is priced as itself, without a note).

Selection (:func:`select`): a carried release is priced as itself; a release between two carried ones takes the
earlier (and :func:`note` says so); one after the newest takes the newest; one before the oldest is refused.
The default is :data:`simcli.base.types.NCCL_TABLES_VERSION`.

What the rows leave out (docs/nccl.md, "Carried releases"): CollNet (its own rows: simcli.comm.collnet), the
per-collective NCCL_ALGO/NCCL_PROTO lists (2.24.3), the getAlgoInfo/calcCollChunking changes (channels and NVLS chunks
stay 2.20.3's) and the search graphs' speed tables (src/graph/search.cc: 2.20.3's in every release; 2.19.3 added 22.0
to sm90SpeedArrayInter).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..base.types import NCCL_TABLES_VERSION, InputError

__all__ = ["Release", "RELEASES", "DEFAULT_RELEASE", "select", "note", "problem", "parse_version", "carried"]

#: algorithm -> (LL, LL128, Simple)
Table = Mapping[str, tuple[float, float, float]]


@dataclass(frozen=True)
class Release:
    """One NCCL release's tuner, as simcli prices it (units as NCCL's: us and GB/s)."""

    version: str
    #: where the numbers come from: the tag and the functions read
    source: str
    #: what this release changes against the row before it
    changes: str
    #: baseLat[algorithm][protocol] (ncclTunerConstants.baseLatencies from 2.28.3)
    base_latency_us: Table
    #: hwLat[nvlink|pcie|net][algorithm][protocol]
    hw_latency_us: Mapping[str, Table]
    #: per compute-capability table: ll_max (llMaxBws, one node by GPU; across nodes simcli.comm.nccl's CPU rows),
    #: ring_ll128, tree_ll128, tree (perChMax*Bws) and nvls_tree (perChMaxNVLSTreeBws, read from 2.28.3 on; zeros
    #: before it), [N1, N2, N4]
    generations: Mapping[str, Mapping[str, tuple[float, float, float]]]
    #: simcli's generation -> the table NCCL indexes (compCapIndex): Blackwell has its own from 2.25.1
    generation_table: Mapping[str, str]
    #: Ring/LL bandwidth factor; None: 2.20.3's rule (1/4 across nodes or for all-reduce, else 1/3)
    ring_ll_factor: float | None
    #: Ring/LL128 bandwidth factor at less than 2 GPUs per node (0.92 above)
    ring_ll128_one_ppn: float
    #: all-reduce rings cross the network 2(N-1) times (2.23.4 on), not 2N
    ring_inter_minus_one: bool
    #: at one GPU per node every algorithm takes Tree's network latency (2.23.4 on)
    one_ppn_tree_latency: bool
    #: a multi-node NVLink domain is one node and runs no NVLS (2.20.3; "MNNVL: NVLS not yet supported")
    mnnvl_no_nvls: bool
    #: NVLS/NVLSTree bandwidth: None, NCCL's 5/6 of the channels' speed (to 2.27.x); else nvlsEfficiency by
    #: table (2.28.3 on): per channel speed x efficiency x (nch-1)/nch, x2 for all-reduce, the ring's ratio k/nsteps
    nvls_efficiency: Mapping[str, float] | None
    #: NVLS all-gather/reduce-scatter: bus-to-algorithm ratio (5/6 to 2.22.3; none from 2.23.4)
    nvls_ag_rs_ratio: float
    #: NVLS all-gather/reduce-scatter bandwidth x (ppn-1)/ppn (2.27.3 on)
    nvls_ag_rs_ppn: bool
    #: treeCorrectionFactor entries (23 to 2.28.x, 24 from 2.29.2: 512 MiB-1 GiB get one)
    tree_correction_sizes: int
    #: NVLSTree all-reduce takes treeCorrectionFactor on Blackwell x86 hosts (2.29.2 on)
    nvls_tree_correction: bool
    #: fp8 collectives on more than 8 ranks price Ring x1024 in the choice (src/enqueue.cc topoGetAlgoInfo,
    #: "Relegate fp8 reduction trees of sufficient depth that they incur precision loss", 2.24.3 on)
    fp8_ring_penalty: bool = False
    #: PAT (all-gather and reduce-scatter at one GPU per node, Simple): its busBw factor (0.85 in 2.23.4, 0.75
    #: from 2.24.3); None before 2.23.4. Latency 8 + log2i(nNodes) x interLat/3.5 + nRanks x 2.8 us
    pat_factor: float | None = None
    #: src/graph/search.cc sm100SpeedArrayIntra: the per-channel speeds (GB/s) a Blackwell graph inside a node may
    #: take (2.25.1 on; None before: Blackwell searched on Hopper's table). The NVLS graph of 2.28.3's formula is
    #: searched on it (simcli.comm.nccl.nvls_graph)
    sm100_speeds_intra: tuple[float, ...] | None = None
    #: src/transport/nvls.cc ncclNvlsInit: Blackwell's NVLS channels (one node or one MNNVL domain, across nodes):
    #: NVLS_NCHANNELS_SM100 32 from 2.25.1, NVLS_NCHANNELS_SM100_NVL 24 in one domain from 2.27.3; None: the
    #: profile's nvls_channels
    sm100_nvls_channels: tuple[int, int] | None = None
    #: Tree's busBw x .85 for a tree-pattern graph (one GPU per node; tuning.cc 2.18.3 on: "if (a ==
    #: NCCL_ALGO_TREE && graphs[a]->pattern == NCCL_TOPO_PATTERN_TREE) busBw *= .85"; absent in 2.18.1)
    tree_pattern_factor: bool = True
    #: NVLS all-reduce's bus-to-algorithm ratio in the tuner (to 2.27.x): .75 in 2.18.1, 5/6 from 2.18.3
    nvls_ratio: float = 5.0 / 6.0
    #: 2.18.x's NVLSTree (v2.18.5-1 tuning.cc lines 174, 198, 238): per channel bwIntra up to 2 nodes and bwInter
    #: beyond (no min, no halving), algBw = busBw x .70·N/(2(N-1)), latency baseLat + 2(N-1)·hwLat[NET] (no plugin
    #: latency); 2.19.1 on: min(bwIntra, bwInter or bwInter/2), 5/6, intraLat + 2·log2i(N)·interLat
    nvls_tree_2_18: bool = False
    #: NVLS runs all-gather and reduce-scatter (tuning.cc 2.19.1 on: "a != NCCL_ALGO_RING && a != NCCL_ALGO_NVLS");
    #: Ring only before
    nvls_ag_rs: bool = True

    @property
    def key(self) -> tuple[int, ...]:
        return parse_version(self.version)


#: where a two-part release ('2.27') sorts: after every patch release of its series
_SERIES_END = 10**9


def parse_version(text: str) -> tuple[int, ...]:
    """'2.27.5' -> (2, 27, 5); a two-part release names its series and sorts after its every patch release
    ('2.27' -> (2, 27, 10**9): the newest carried 2.27.x prices it); ValueError where it is not a release."""
    if not re.fullmatch(r"\d+(\.\d+){1,3}", text.strip()):
        raise ValueError(text)
    parts = tuple(int(x) for x in text.strip().split("."))
    return parts + (_SERIES_END,) if len(parts) == 2 else parts


def _after(prev: Release, version: str, source: str, *, changes: str, **fields: Any) -> Release:
    """The row of ``version``: ``prev`` with the fields its tag changed."""
    return dataclasses.replace(prev, version=version, source=source, changes=changes, **fields)


def _hw(nvlink: Table, pcie: Table, net: Table) -> Mapping[str, Table]:
    return {"nvlink": nvlink, "pcie": pcie, "net": net}


_TUNING = "NVIDIA/nccl v{}-1 src/graph/tuning.cc"
_GEN_TABLE_2_20 = {
    "volta": "volta",
    "ampere": "ampere",
    "ada": "ampere",
    "hopper": "hopper",
    "blackwell": "hopper",
    "cdna3": "hopper",
}

# ---------------------------------------------------------------------------------------------------- 2.18.1
V2_18_1 = Release(
    version="2.18.1",
    source=_TUNING.format("2.18.1") + " (baseLat, hwLat lines 56-80, ll128MaxBwPerCh, llMaxBws, perChMaxTreeBws "
    "lines 88-99, ncclTopoTuneModel lines 166-229)",
    changes="the oldest carried release (CoreWeave's CollNetChain run)",
    base_latency_us={
        "tree": (6.8, 14.0, 0.0),
        "ring": (6.6, 14.0, 8.4),
        "nvls": (0.0, 0.0, 23.0),
        "nvls-tree": (0.0, 0.0, 23.0),
    },
    hw_latency_us=_hw(
        {"tree": (0.6, 1.25, 28.0), "ring": (0.6, 1.9, 3.4), "nvls": (0.0, 0.0, 0.0), "nvls-tree": (0.0, 0.0, 0.0)},
        {"tree": (1.0, 1.9, 28.0), "ring": (1.0, 2.5, 5.7), "nvls": (0.0, 0.0, 0.0), "nvls-tree": (0.0, 0.0, 0.0)},
        {"tree": (5.0, 8.5, 28.0), "ring": (2.7, 4.0, 14.0), "nvls": (0.0, 0.0, 18.0), "nvls-tree": (0.0, 0.0, 19.0)},
    ),
    # ll128MaxBwPerCh[compCapIndex] (20, 20, 36.7) caps Ring/LL128 and Tree/LL128 alike at every node count
    generations={
        "volta": {
            "ll_max": (39.0, 39.0, 20.4),
            "ring_ll128": (20.0, 20.0, 20.0),
            "tree_ll128": (20.0, 20.0, 20.0),
            "tree": (26.5, 18.5, 10.0),
            "nvls_tree": (0.0, 0.0, 0.0),
        },
        "ampere": {
            "ll_max": (87.7, 22.5, 19.0),
            "ring_ll128": (20.0, 20.0, 20.0),
            "tree_ll128": (20.0, 20.0, 20.0),
            "tree": (24.0, 23.6, 17.8),
            "nvls_tree": (0.0, 0.0, 0.0),
        },
        "hopper": {
            "ll_max": (87.7, 22.5, 19.0),
            "ring_ll128": (36.7, 36.7, 36.7),
            "tree_ll128": (36.7, 36.7, 36.7),
            "tree": (38.7, 41.4, 33.0),
            "nvls_tree": (0.0, 0.0, 0.0),
        },
    },
    generation_table=_GEN_TABLE_2_20,
    ring_ll_factor=None,
    ring_ll128_one_ppn=0.7,
    ring_inter_minus_one=False,
    one_ppn_tree_latency=False,
    # NCCL has no MNNVL before 2.20.3: an mnnvl domain is priced as 2.20.3 prices it (one node, no NVLS)
    mnnvl_no_nvls=True,
    nvls_efficiency=None,
    nvls_ag_rs_ratio=5.0 / 6.0,
    nvls_ag_rs_ppn=False,
    tree_correction_sizes=23,
    nvls_tree_correction=False,
    tree_pattern_factor=False,
    nvls_ratio=0.75,
    nvls_tree_2_18=True,
    nvls_ag_rs=False,
)


def _with_hw(base: Table, **algos: tuple[float, float, float]) -> Table:
    out = dict(base)
    out.update({k.replace("_", "-"): v for k, v in algos.items()})
    return out


def _with_gen(gens: Mapping[str, Mapping[str, tuple]], gen: str, **tables: tuple) -> dict:
    out = {g: dict(t) for g, t in gens.items()}
    out.setdefault(gen, {}).update(tables)
    return out


V2_18_3 = _after(
    V2_18_1,
    "2.18.3",
    _TUNING.format("2.18.3") + " (hwLat lines 65-78, perChMaxRingLL128Bws, perChMaxTreeLL128Bws, perChMaxTreeBws "
    "lines 92-106, ncclTopoTuneModel lines 183 (Tree x.85) and 197 (NVLS 5/6))",
    changes="Tree/Simple hops 28/28/28 -> 4/6/14 us (NVLink/PCI/network); per-channel LL128 caps per node count "
    "(Hopper Tree/LL128 beyond 2 nodes 36.7 -> 29 GB/s) and Hopper's Tree cap beyond 2 nodes 33 -> 36 GB/s; Tree x0.85 "
    "for a tree-pattern graph (one GPU per node); NVLS all-reduce ratio .75 -> 5/6",
    hw_latency_us=_hw(
        _with_hw(V2_18_1.hw_latency_us["nvlink"], tree=(0.6, 1.25, 4.0)),
        _with_hw(V2_18_1.hw_latency_us["pcie"], tree=(1.0, 1.9, 6.0)),
        _with_hw(V2_18_1.hw_latency_us["net"], tree=(5.0, 8.5, 14.0)),
    ),
    generations=_with_gen(V2_18_1.generations, "hopper", tree_ll128=(36.7, 36.7, 29.0), tree=(38.7, 41.4, 36.0)),
    tree_pattern_factor=True,
    nvls_ratio=5.0 / 6.0,
)
V2_18_5 = _after(
    V2_18_3,
    "2.18.5",
    "NVIDIA/nccl v2.18.5-1 src/graph/search.cc (ncclTopoSelectNets, ncclTopoSearchRecNet); tuning.cc and enqueue.cc "
    "as v2.18.3-1; the release of Azure's ND H100 v5 run and AWS's older p5 run",
    changes="search.cc takes each GPU's own NICs first and balances NVLS heads over the NICs (simcli's NVLSTree "
    "already has one head per NIC); nothing simcli prices changed",
)
V2_19_1 = _after(
    V2_18_5,
    "2.19.1",
    _TUNING.format("2.19.1") + " (baseLat, hwLat lines 56-78, ncclTopoTuneModel lines 168-169 (NVLS all-gather/"
    "reduce-scatter), 175-176 (NVLS/NVLSTree bw), 199 (5/6), 241-243 (NVLS/NVLSTree latency))",
    changes="NVLS/NVLSTree latency 23 us of base -> 23 us of NVLink hop; NVLSTree intraLat + 2·log2i(N)·interLat "
    "with a 14 us network hop (was 23 + 2(N-1)·19 us), per channel min(bwIntra, bwInter, bwInter/2 beyond 2 nodes) "
    "and ratio 5/6 (was bwIntra or bwInter, .70·N/(2(N-1))); Tree/Simple hops 4/6/14 -> 28/28/28 us; NVLS for "
    "all-gather and reduce-scatter; CollNet's constants (simcli.comm.collnet)",
    base_latency_us={**V2_18_5.base_latency_us, "nvls": (0.0, 0.0, 0.0), "nvls-tree": (0.0, 0.0, 0.0)},
    hw_latency_us=_hw(
        _with_hw(
            V2_18_5.hw_latency_us["nvlink"], tree=(0.6, 1.25, 28.0), nvls=(0.0, 0.0, 23.0), nvls_tree=(0.0, 0.0, 23.0)
        ),
        _with_hw(V2_18_5.hw_latency_us["pcie"], tree=(1.0, 1.9, 28.0)),
        _with_hw(V2_18_5.hw_latency_us["net"], tree=(5.0, 8.5, 28.0), nvls_tree=(0.0, 0.0, 14.0)),
    ),
    nvls_tree_2_18=False,
    nvls_ag_rs=True,
)
V2_19_3 = _after(
    V2_19_1,
    "2.19.3",
    "NVIDIA/nccl v2.19.3-1 src/enqueue.cc (computeColl: NVLS/NVLSTree chunks) and src/graph/search.cc "
    "(sm90SpeedArrayInter, ncclTopoDupChannels); tuning.cc as v2.19.1-1; the release of AWS's 8-node p5 point",
    changes="NVLSTree's chunk 64 KiB from 4 nodes and multi-node NVLS's 32 KiB (calcCollChunking), 22 GB/s in "
    "the inter-node speed table: what simcli prices in every release (2.20.3's); nothing simcli prices changed",
)
V2_19_4 = _after(
    V2_19_3,
    "2.19.4",
    "NVIDIA/nccl v2.19.4-1 src/enqueue.cc (p2p scheduling, plan reclaim); tuning.cc as v2.19.1-1",
    changes="enqueue.cc's p2p scheduling and plan reclaim; nothing simcli prices changed",
)
# ---------------------------------------------------------------------------------------------------- 2.20.3
V2_20_3 = _after(
    V2_19_4,
    "2.20.3",
    _TUNING.format("2.20.3") + " (baseLat, hwLat, llMaxBws, perChMax*Bws, ncclTopoTuneModel, "
    "treeCorrectionFactor, ncclTopoGetAlgoTime); 2.20.5 has the same file",
    changes="MNNVL (a multi-node NVLink domain is one node, without NVLS or NVLSTree: what simcli prices an mnnvl "
    "tier as in every release before 2.21.5); CollNetDirect all-gather/reduce-scatter (not carried); simcli's model "
    "was built on this release",
)


V2_21_5 = _after(
    V2_20_3,
    "2.21.5",
    _TUNING.format("2.21.5") + " (hwLat, llMaxBws, ncclTopoTuneModel)",
    changes="NVLS/NVLSTree NVLink latency 23 -> 25 us; Ring/LL bandwidth x0.5 (was 1/4, or 1/3 in one node for "
    "all-gather "
    "and reduce-scatter); Hopper's one-node llMaxBw 87.7 -> 141 GB/s; a multi-node NVLink domain (MNNVL) may "
    "run NVLS ('MNNVL: NVLS not yet supported' gone)",
    hw_latency_us=_hw(
        _with_hw(V2_20_3.hw_latency_us["nvlink"], nvls=(0.0, 0.0, 25.0), nvls_tree=(0.0, 0.0, 25.0)),
        V2_20_3.hw_latency_us["pcie"],
        V2_20_3.hw_latency_us["net"],
    ),
    generations=_with_gen(V2_20_3.generations, "hopper", ll_max=(141.0, 45.0, 35.0)),
    ring_ll_factor=0.5,
    mnnvl_no_nvls=False,
)
V2_22_3 = _after(
    V2_21_5,
    "2.22.3",
    _TUNING.format("2.22.3") + " (ncclTopoGetAlgoTime) and src/enqueue.cc (topoGetAlgoInfo)",
    changes="the choice goes through a cost table of every (algorithm, protocol) at the communicator's channels, and "
    "the "
    "channels are decided after the pick: what simcli already prices (its tuner's view charges all channels); "
    "no constant changed",
)
V2_23_4 = _after(
    V2_22_3,
    "2.23.4",
    _TUNING.format("2.23.4") + " (baseLat, hwLat, ncclTopoTuneModel)",
    changes="Tree/Simple base latency 0 -> 8.4 us and hops 28/28/28 -> 4.0/4.0/14 us (NVLink/PCI/network); all-reduce "
    "rings cross the network 2(N-1) times, not 2N; at one GPU per node every algorithm takes Tree's network "
    "latency and Ring/LL128 runs at 0.92 (was 0.7); NVLS all-gather/reduce-scatter keep their bus bandwidth (no "
    "5/6); PAT for all-gather/reduce-scatter at one GPU per node (ncclPatEnable: Simple, 8 + log2i(nNodes) x "
    "interLat/3.5 + 2.8 us x nRanks, busBw x 0.85)",
    base_latency_us={**V2_22_3.base_latency_us, "tree": (6.8, 14.0, 8.4)},
    hw_latency_us=_hw(
        _with_hw(V2_22_3.hw_latency_us["nvlink"], tree=(0.6, 1.25, 4.0)),
        _with_hw(V2_22_3.hw_latency_us["pcie"], tree=(1.0, 1.9, 4.0)),
        _with_hw(V2_22_3.hw_latency_us["net"], tree=(5.0, 8.5, 14.0)),
    ),
    ring_ll128_one_ppn=0.92,
    ring_inter_minus_one=True,
    one_ppn_tree_latency=True,
    nvls_ag_rs_ratio=1.0,
    pat_factor=0.85,
)
V2_24_3 = _after(
    V2_23_4,
    "2.24.3",
    _TUNING.format("2.24.3") + " (parseList) and src/enqueue.cc (topoGetAlgoInfo: the fp8 Ring factor)",
    changes="NCCL_ALGO/NCCL_PROTO take per-collective lists; fp8 collectives on more than 8 ranks price Ring x1024 in "
    "the choice (src/enqueue.cc, topoGetAlgoInfo); PAT's bandwidth factor 0.85 -> 0.75",
    fp8_ring_penalty=True,
    pat_factor=0.75,
)
_BLACKWELL_2_25 = {
    "ll_max": (2 * 141.0, 2 * 45.0, 2 * 35.0),
    "ring_ll128": (2 * 36.7, 2 * 36.7, 2 * 36.7),
    "tree_ll128": (2 * 36.7, 2 * 36.7, 2 * 29.0),
    "tree": (2 * 38.7, 2 * 41.4, 2 * 36.0),
    "nvls_tree": (0.0, 0.0, 0.0),
}
V2_25_1 = _after(
    V2_24_3,
    "2.25.1",
    _TUNING.format("2.25.1") + " (llMaxBws, perChMax*Bws: the BLACKWELL_COMPCAP_IDX rows)",
    changes="Blackwell gets its own tables (twice Hopper's)",
    generations={**V2_24_3.generations, "blackwell": _BLACKWELL_2_25},
    generation_table={**_GEN_TABLE_2_20, "blackwell": "blackwell"},
    # NVIDIA/nccl v2.25.1-1 src/graph/search.cc, and src/transport/nvls.cc (NVLS_NCHANNELS_SM100 32 on Blackwell)
    sm100_speeds_intra=(90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0),
    sm100_nvls_channels=(32, 32),
)
V2_26_2 = _after(
    V2_25_1,
    "2.26.2",
    _TUNING.format("2.26.2") + " (ncclTopoTuneModel)",
    changes="Tree's 0.85 for a tree pattern reads the communicator's largest pattern; nothing simcli prices changed",
)
V2_27_3 = _after(
    V2_26_2,
    "2.27.3",
    _TUNING.format("2.27.3") + " (ncclTopoTuneModel, NVLS branch)",
    changes="NVLS all-gather/reduce-scatter bandwidth x (ppn-1)/ppn (and 0.9 of the inter-node graph's); LL128 on C2C "
    "paths (NCCL_LL128_C2C); Blackwell NVLS on 24 channels in one node or NVLink domain, 32 across (nvls.cc)",
    nvls_ag_rs_ppn=True,
    # NVIDIA/nccl v2.27.3-1 src/graph/search.cc (18.0 added) and src/transport/nvls.cc (NVLS_NCHANNELS_SM100_NVL 24,
    # NVLS_NCHANNELS_SM100 32: "Use a reduced number of channels for single node/MNNVL domain on Blackwell")
    sm100_speeds_intra=(90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
    sm100_nvls_channels=(24, 32),
)
V2_27_5 = _after(
    V2_27_3,
    "2.27.5",
    _TUNING.format("2.27.5") + " (ncclTopoTuneModel, LL128 enable); the release torch 2.9 pins",
    changes="LL128 enabling over PXN/C2C paths reworded; nothing simcli prices changed",
)
V2_28_3 = _after(
    V2_27_5,
    "2.28.3",
    _TUNING.format("2.28.3") + " (nvlsEfficiency, ncclTunerConstantsDefaults, ncclTopoTuneModel)",
    changes="NVLS/NVLSTree bandwidth: per channel the graph's speed x nvlsEfficiency (0.85 Hopper, 0.74 Blackwell) x "
    "(nch-1)/nch, x2 for all-reduce (x(ppn-1)/ppn for all-gather/reduce-scatter), NVLSTree capped per channel "
    "(perChMaxNVLSTreeBws) and by twice the network's speed on two nodes, the ring's k/nsteps in place of 5/6; "
    "Blackwell tree and tree/LL128 caps 70/42.8/24 and 55.6/31.67/20 GB/s",
    generations={
        **V2_27_5.generations,
        "volta": {**V2_27_5.generations["volta"], "nvls_tree": (26.5, 18.5, 10.0)},
        "ampere": {**V2_27_5.generations["ampere"], "nvls_tree": (24.0, 23.6, 17.8)},
        "hopper": {**V2_27_5.generations["hopper"], "nvls_tree": (0.0, 57.7, 45.5)},
        "blackwell": {
            **_BLACKWELL_2_25,
            "tree_ll128": (55.6, 31.67, 20.0),
            "tree": (70.0, 42.8, 24.0),
            "nvls_tree": (0.0, 96.0, 43.1),
        },
    },
    nvls_efficiency={"hopper": 0.85, "blackwell": 0.74},
)
V2_28_7 = _after(
    V2_28_3,
    "2.28.7",
    _TUNING.format("2.28.7") + " (perChMaxRingLL128Bws)",
    changes="Blackwell Ring/LL128 cap on two nodes 73.4 -> 34.6 GB/s per channel",
    generations=_with_gen(V2_28_3.generations, "blackwell", ring_ll128=(2 * 36.7, 34.6, 2 * 36.7)),
)
V2_28_9 = _after(
    V2_28_7,
    "2.28.9",
    _TUNING.format("2.28.9") + " (hwLatencies, perChMaxNVLSTreeBws)",
    changes="NVLSTree network hop 14 -> 20.9 us; Blackwell NVLSTree cap beyond two nodes 43.1 -> 43.8 GB/s",
    hw_latency_us=_hw(
        V2_28_7.hw_latency_us["nvlink"],
        V2_28_7.hw_latency_us["pcie"],
        _with_hw(V2_28_7.hw_latency_us["net"], nvls_tree=(0.0, 0.0, 20.9)),
    ),
    generations=_with_gen(V2_28_7.generations, "blackwell", nvls_tree=(0.0, 96.0, 43.8)),
)
V2_29_2 = _after(
    V2_28_9,
    "2.29.2",
    _TUNING.format("2.29.2") + " (perChMaxRingLL128Bws, treeCorrectionFactor, ncclTopoGetAlgoTime)",
    changes="Blackwell Ring/LL128 caps 34.5/34.6/34.5 GB/s; treeCorrectionFactor gets a 24th entry (512 MiB-1 GiB); "
    "NVLSTree all-reduce takes it too on Blackwell x86 hosts",
    generations=_with_gen(V2_28_9.generations, "blackwell", ring_ll128=(34.5, 34.6, 34.5)),
    tree_correction_sizes=24,
    nvls_tree_correction=True,
    # NVIDIA/nccl v2.29.2-1 src/graph/search.cc: 45.0 added
    sm100_speeds_intra=(90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
)
V2_29_7 = _after(
    V2_29_2,
    "2.29.7",
    _TUNING.format("2.29.7") + " (perChMaxRingLL128Bws); the release torch 2.13's CUDA wheels install (PyPI "
    "torch 2.13.0: Requires-Dist nvidia-nccl-cu13==2.29.7): the default",
    changes="Blackwell Ring/LL128 caps 40 GB/s per channel",
    generations=_with_gen(V2_29_2.generations, "blackwell", ring_ll128=(40.0, 40.0, 40.0)),
)
V2_30_3 = _after(
    V2_29_7,
    "2.30.3",
    _TUNING.format("2.30.3") + " (perChMaxNVLSTreeBws, LL128 enable)",
    changes="Blackwell NVLSTree cap beyond two nodes 43.8 -> 80 GB/s; LL128 between GPUs of different compute "
    "capability",
    generations=_with_gen(V2_29_7.generations, "blackwell", nvls_tree=(0.0, 96.0, 80.0)),
)
V2_30_7 = _after(
    V2_30_3,
    "2.30.7",
    _TUNING.format("2.30.7") + " (the newest tag read)",
    changes="reformatted, and the algorithm-disable rules gathered in one loop; nothing simcli prices changed",
)

#: every carried release, oldest first
RELEASES: tuple[Release, ...] = (
    V2_18_1,
    V2_18_3,
    V2_18_5,
    V2_19_1,
    V2_19_3,
    V2_19_4,
    V2_20_3,
    V2_21_5,
    V2_22_3,
    V2_23_4,
    V2_24_3,
    V2_25_1,
    V2_26_2,
    V2_27_3,
    V2_27_5,
    V2_28_3,
    V2_28_7,
    V2_28_9,
    V2_29_2,
    V2_29_7,
    V2_30_3,
    V2_30_7,
)
_BY_VERSION = {r.version: r for r in RELEASES}
#: the release a profile that names none is priced as
DEFAULT_RELEASE = _BY_VERSION[NCCL_TABLES_VERSION]


def carried() -> tuple[str, ...]:
    """The carried releases' names, oldest first."""
    return tuple(r.version for r in RELEASES)


def problem(version: str) -> str | None:
    """Why simcli cannot price ``version`` (None where it can): not a release, or older than the oldest carried."""
    if version.strip() in _BY_VERSION:
        return None
    try:
        key = parse_version(version)
    except ValueError:
        return f"{version!r} is not an NCCL release; give one such as {NCCL_TABLES_VERSION}"
    if key < RELEASES[0].key:
        return (
            f"NCCL {version} is older than the oldest release simcli carries ({RELEASES[0].version}); give "
            f"{RELEASES[0].version} or newer (carried: {', '.join(carried())})"
        )
    return None


def select(version: str | None, where: str = "--nccl-version") -> Release:
    """The row that prices ``version``: itself where carried, else the newest carried release before it.

    InputError (exit 2, naming ``where``) for text that is no release, or a release before the oldest carried."""
    if version is None:
        return DEFAULT_RELEASE
    hit = _BY_VERSION.get(version.strip())
    if hit is not None:
        return hit
    why = problem(version)
    if why:
        raise InputError(f"{where}: {why}")
    key = parse_version(version)
    return [r for r in RELEASES if r.key <= key][-1]


def against_previous(version: str | None) -> tuple[Release, Release | None]:
    """(the row that prices ``version``, the carried row before it: None for the oldest) and so what the row's
    ``changes`` are measured against (simcli explain says it)."""
    row = select(version)
    i = RELEASES.index(row)
    return row, (RELEASES[i - 1] if i else None)


def note(version: str | None, where: str = "--nccl-version") -> str:
    """'' where ``version`` is carried (or None); else one line: which carried release prices it."""
    if version is None or version.strip() in _BY_VERSION:
        return ""
    row = select(version, where)
    if row is RELEASES[-1]:
        return f"NCCL {version} is newer than the newest release simcli carries; priced as {row.version}"
    return f"NCCL {version} is not a carried release; priced as {row.version}, the newest carried one before it"
