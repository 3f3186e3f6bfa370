"""AMD's RCCL, priced from its own source: its tuner tables, its protocol rules and MSCCL's all-pairs kernels.

RCCL is NCCL's ``src/graph/tuning.cc`` with AMD's constants in place of NVIDIA's (the same heritage: a pair costs
``latency + bytes / bandwidth`` and the tuner runs the cheapest), so this module prices RCCL with the same pieces
as :mod:`simcli.comm.nccl` (the ring's hop counts, the tree's groups, :class:`simcli.comm.nccl.Pair`) and RCCL's
own numbers, one :class:`RcclRelease` row per carried release. What RCCL's source does differently:

* **Tuning models** (``rcclTuningModel[comm->topo->tuning]``): per-platform tables of hop latencies (``hwLat``),
  bandwidth ratios (``bwRatio``, by 1-2 nodes and more) and *size* correction factors for Tree and, across
  nodes, Ring (``treeCorrectionFactor``/``ringCorrectionFactor``, 27 sizes, 64 B to 4 GiB). The MI300X
  platforms' topology models (src/graph/rome_models.cc ``rome_model_79`` (8 GPUs, no NIC), ``_81`` (8 NICs),
  ``_84`` (16 NICs)) all say ``tuning=5``. ``baseLat`` is 12/12/17 us (LL/LL128/Simple) for Tree and Ring.
* **No NVIDIA caps**: RCCL's branch of tuning.cc skips llMaxBw, the per-channel LL128/Tree caps and the ring's
  plateau factor; the bus bandwidth is ``nChannels x bw x bwRatio`` (``#if defined(__HIP_PLATFORM_AMD__)``).
* **Tree/Simple off inside one node on gfx94x/gfx950** (``if (a == NCCL_ALGO_TREE && p == NCCL_PROTO_SIMPLE &&
  IsArchMatch(..., "gfx94") && count == nRanks) continue``).
* **LL128 off** on gfx942/gfx950 by default (2.21.5: "Enable LL128 by default only on gfx90a"; later only with
  the topology hint ``ll128Enabled``, which simcli cannot see).
* **MSCCL in one node**: on a single-node communicator NCCL's ncclTopoTrimSystem drops the NICs, the topology
  then matches ``rome_model_79``, whose options set ``mscclEnabled=1``; RCCL_MSCCL_ENABLE defaults to 1
  (src/misc/msccl/msccl_lifecycle.cc), so an all-reduce over the 8 GPUs runs the all-pairs XML algorithms
  shipped in tools/msccl-algorithms (``allreduce-allpairs-8n-ll-32tb-op``: LL, 4 channels, 0-64 KiB;
  ``-ll-64tb-op``: LL, 8 channels, 64 KiB-512 KiB; ``-simple-op``: Simple, 8 channels, 512 KiB-16 MiB, out of
  place) whenever the element count divides into the algorithm's chunks per loop (msccl_lifecycle.cc:
  ``(count * sizeMultiplier) % nChunksPerLoop == 0 && nBytes >= minBytes && nBytes <= maxBytes``: 256 or 512
  chunks, so from 1 KiB of fp32 on). MSCCL++ runs only under graph capture (``captureStatus != mscclNoCapture``),
  which nccl-tests and eager PyTorch do not use: not modelled.

What the pairs *cost* against what RCCL's tuner *believes*: the tuner's tables include tuning devices (a Ring/
Simple network hop of 320 us, correction factors of 0.1) that steer the choice and are not times; so, as for
NCCL, the choice is made on the tuner's view and the cost is priced physically: intra-node hops at RCCL's table
(which holds: Ring/LL 12 + 14 x 0.8 = 23.2 us against 23 us measured at 128-512 B on 8 MI300X), network hops at
RCCL's network row scaled as the tier's latency stands to InfiniBand's 14 us (Ring/Simple at Tree/Simple's hop: its
320 us is a tuning device), or at the link kind's own per-hop latency where the transport has one (EFA, TCPX/TCPXO,
sockets: :mod:`simcli.comm.specs`), bytes at the tiers' bandwidth with the protocol's
payload fraction (LL: 8-byte lines with a 4-byte flag, 1/2; LL128: 120/128; Simple: 1). An all-pairs MSCCL
algorithm has two hops on its critical path (the scatter of every chunk to its owner, the gather of the reduced
chunk back: one send to every peer at once in each) and moves the ring's bytes per rank, 2(k-1)/k x n, over all
its links at once: ``baseLat_p + 2 x hwLat[NVLINK][Ring][p] + n / B_alg,p`` (docs/nccl.md, "RCCL").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..base.types import InputError, NcclSpec, Tier
from .cost import CommCost, lazy, per_tier
from .nccl import HW_LATENCY_US, NET_OVERHEAD_US, Pair, hops, tier_kind, tree_groups
from .nccl_choice import candidates, chooser, nccl_spec
from .specs import COLLECTIVES, PROTOCOLS, link_kind
from .topology import ring_params

__all__ = [
    "TuningModel",
    "MscclAlgo",
    "RcclRelease",
    "RCCL_RELEASES",
    "DEFAULT_RCCL",
    "ARCH",
    "select",
    "release",
    "arch",
    "pairs",
    "msccl_algo",
    "rccl_collective",
]

#: algorithm -> (LL, LL128, Simple)
Table = Mapping[str, tuple[float, float, float]]


@dataclass(frozen=True)
class TuningModel:
    """One of RCCL's ``tuningModel`` structs (src/graph/tuning.cc), the parts simcli prices (Tree and Ring)."""

    index: int
    #: hwLat[nvlink|pcie|net][tree|ring] (us per hop)
    hw_latency_us: Mapping[str, Table]
    #: bwRatio[0: 1-2 nodes, 1: more][tree|ring]
    bw_ratio: tuple[Table, Table]
    #: treeCorrectionFactor / ringCorrectionFactor [protocol][log2(n/64)], 27 sizes (64 B .. 4 GiB and beyond)
    tree_correction: tuple[tuple[float, ...], ...]
    ring_correction: tuple[tuple[float, ...], ...]
    #: llProtoRanges of all-reduce across nodes (rcclUpdateCollectiveProtocol): bytes per rank (LL min, LL max);
    #: None where the model sets none
    allreduce_ll_range: tuple[float, float] | None = None


@dataclass(frozen=True)
class MscclAlgo:
    """One MSCCL XML algorithm RCCL ships (tools/msccl-algorithms): all-reduce over ``ngpus`` GPUs of one node."""

    name: str
    protocol: str
    channels: int
    chunks_per_loop: int
    min_bytes: float
    max_bytes: float
    ngpus: int = 8


@dataclass(frozen=True)
class RcclRelease:
    """One RCCL release as simcli prices it (units as RCCL's: us)."""

    version: str
    source: str
    changes: str
    #: baseLat[tree|ring][protocol]
    base_latency_us: Table
    #: the tuning models this release carries, by index
    models: Mapping[int, TuningModel]
    #: GPU architecture (gfx name) -> the tuning model its platforms select
    arch_model: Mapping[str, int]
    #: architectures whose single-node communicators skip Tree/Simple
    tree_simple_one_node_off: tuple[str, ...]
    #: architectures with LL128 on by default
    ll128_archs: tuple[str, ...]
    #: MSCCL all-reduce algorithms for one node of 8 (out of place)
    msccl: tuple[MscclAlgo, ...]
    #: architectures whose 8-GPU platform model sets mscclEnabled
    msccl_archs: tuple[str, ...]
    #: all-reduce rings cross the network 2(N-1) times (the develop row), not 2N
    ring_inter_minus_one: bool = False
    #: at one GPU per node Ring takes Tree's network latency ("ppn == 1 ? hwLat[NET][TREE]")
    one_ppn_tree_latency: bool = False
    #: the network plugin's latency adds to the table's (develop) instead of replacing it (2.20.5, 2.21.5)
    plugin_adds: bool = False
    notes: tuple[str, ...] = field(default=())


def _t(tree: tuple[float, float, float], ring: tuple[float, float, float]) -> dict[str, tuple[float, float, float]]:
    return {"tree": tree, "ring": ring}


_PCI = _t((2.2, 2.2, 5.7), (2.2, 2.2, 5.7))
_BASE = _t((12.0, 12.0, 17.0), (12.0, 12.0, 17.0))

# ---- tuning_model_5 as each tag carries it (ROCm/rccl src/graph/tuning.cc), and _6
# fmt: off
_M5_620 = TuningModel(
    5,
    {"nvlink": _t((0.8, 0.0, 2.5), (0.8, 0.0, 3.6)), "pcie": _PCI, "net": _t((12.5, 0.0, 22.4), (9.5, 0.0, 19.8))},
    (_t((0.41, 0.0, 1.00), (0.41, 0.0, 1.00)), _t((0.41, 0.0, 0.86), (0.41, 0.0, 1.00))),
    ((.1, .1, .1, .1, .1, 1., 1., .8, .1, .4, .5, 1., .6, .4, .6, .1, .3, .4, .4, .3, .2, .2, .2, .2, .2, .2, .2),
     (0.0,) * 27,
     (.1, .1, .1, .1, .1, .1, .1, .1, 1., 1., 1., .4, 1., 1., 1., .2, .7, 1., 1., 1., .8, .7, .7, .8, .8, .8, .9)),
    ((.1, .1, .1, .1, .1, .1, .1, 1., .1, .2, .2, .1, .5, .8, 1., .2, .4, .5, .4, .4, .3, .2, .2, .2, .2, .2, .2),
     (0.0,) * 27,
     (.1, .1, .1, .1, .1, .1, .1, .1, .1, .7, .1, .1, .1, .1, .1, 1., 1., 1., .9, 1., 1., 1., 1., 1., 1., 1., 1.)),
)
_M5_TREE = (
    (.1, .1, .1, .1, .1, .1, 1., 1., 1., 1., 1., .6, 1., .9, 1., 1., .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1),
    (0.0,) * 27,
    (.1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .7, 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., .8),
)
_M5_RING = (
    (.1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, 1., .2, 1., .4, .4, .1, .2, .2, .1, .1, .1, .1, .1, .1, .1, .1),
    (0.0,) * 27,
    (.1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, 1., .8, 1., 1., 1.),
)
_M5_621 = TuningModel(
    5,
    {"nvlink": _t((0.9, 0.0, 2.3), (0.8, 0.0, 2.1)), "pcie": _PCI, "net": _t((10.5, 0.0, 25.0), (9.5, 0.0, 320.0))},
    (_t((0.06, 0.0, 0.11), (0.08, 0.0, 1.00)), _t((0.06, 0.0, 0.59), (0.08, 0.0, 1.00))),
    _M5_TREE,
    _M5_RING,
)
# the develop row: LL128 columns filled (0.9/0.8 us, ratios as LL), the tree Simple column's last entries changed,
# and llProtoRanges (all-reduce across nodes: LL up to 1 MiB per rank, then LL128 on ll128Enabled topologies)
_DEV_HW = {"nvlink": _t((0.9, 0.9, 2.3), (0.8, 0.8, 2.1)), "pcie": _PCI,
           "net": _t((10.5, 10.5, 25.0), (9.5, 9.5, 320.0))}
_DEV_RATIO = (_t((0.06, 0.06, 0.11), (0.08, 0.08, 1.00)), _t((0.06, 0.06, 0.59), (0.08, 0.08, 1.00)))
_M5_DEV = TuningModel(
    5, _DEV_HW, _DEV_RATIO,
    (_M5_TREE[0], _M5_TREE[0], _M5_TREE[2][:21] + (.7, .7, .5, .6, .6, .6)),
    (_M5_RING[0], _M5_RING[0], _M5_RING[2]),
    allreduce_ll_range=(0.0, 1048576.0),
)
_M6_DEV = TuningModel(
    6, _DEV_HW, _DEV_RATIO,
    (_M5_TREE[0], _M5_TREE[0][:16] + (1., 1., 1., 2.) + (.1,) * 7,
     (.1,) * 15 + (.7, 1., .1, .1, .1, .9, .9, .7, .8, .6, .6, .6)),
    (_M5_RING[0], _M5_RING[0][:18] + (.1,) * 9, _M5_RING[2][:22] + (1., .8, .8, 1., 1.)),
    allreduce_ll_range=(0.0, 131071.0),
)
# fmt: on
_MSCCL = (
    MscclAlgo("allreduce-allpairs-8n-ll-32tb-op", "ll", 4, 256, 0.0, 65536.0),
    MscclAlgo("allreduce-allpairs-8n-ll-64tb-op", "ll", 8, 512, 65537.0, 524287.0),
    MscclAlgo("allreduce-allpairs-8n-simple-op", "simple", 8, 512, 524288.0, 16777216.0),
)
_R = "ROCm/rccl"
RCCL_RELEASES: tuple[RcclRelease, ...] = (
    RcclRelease(
        "2.20.5",
        f"{_R} tag rocm-6.2.2 (d3806937, makefiles/version.mk 2.20.5): src/graph/tuning.cc (baseLat, tuning_model_5, "
        "ncclTopoTuneModel, ncclTopoGetAlgoTime), src/graph/rome_models.cc (rome_model_79/81/84: tuning=5, _79: "
        "mscclEnabled=1), tools/msccl-algorithms/allreduce-allpairs-8n-*-op.xml",
        "the oldest carried: model 5's Ring/Simple hops 3.6 us (xGMI) and 19.8 us (network), bwRatio 0.41 for LL",
        _BASE,
        {5: _M5_620},
        {"gfx942": 5},
        ("gfx942",),
        (),
        _MSCCL,
        ("gfx942",),
    ),
    RcclRelease(
        "2.21.5",
        f"{_R} develop @ 0cbce2a7 (2024-10-24, makefiles/version.mk 2.21.5, the ROCm 6.3 line): src/graph/tuning.cc "
        "lines 56-60 (baseLat), 226-252 (tuning_model_5), 365 (Tree/Simple off on gfx94 in one node), 378-383 "
        "(bwRatio), 424-428 (hwLat, latencyInter), 541-548 (LL128 only on gfx90a), 643-650 (correction factors)",
        "model 5 retuned: xGMI Ring/Simple 2.1 us, network Ring/Simple 320 us (a tuning device: Ring/Simple across "
        "nodes only at the largest sizes), bwRatio LL 0.08 (Ring) and 0.06 (Tree)",
        _BASE,
        {5: _M5_621},
        {"gfx942": 5},
        ("gfx942",),
        (),
        _MSCCL,
        ("gfx942",),
    ),
    RcclRelease(
        "develop-9e22c79d",
        f"{_R} src/graph/tuning.cc @ 9e22c79d (a develop commit after 2.21.5 with NCCL 2.23's PAT; its version.mk is "
        "not stored): tuning_model_5 and _6 with llProtoRanges, gfx942/gfx950 arms (Tree/Simple off in one node, "
        "LL128 with ll128Enabled), ring inter steps 2(nNodes-1), ppn 1 takes Tree's network latency; rccl_wrap.cc "
        "rcclUpdateCollectiveProtocol (LL ranges across nodes)",
        "gfx950 (MI355X) and tuning model 6; across nodes the protocol is chosen by size (LL up to the model's "
        "llProtoRanges), not by the tuner; which rome model selects model 6 was not found in the stored files "
        "(simcli takes it for gfx950: estimate)",
        _BASE,
        {5: _M5_DEV, 6: _M6_DEV},
        {"gfx942": 5, "gfx950": 6},
        ("gfx942", "gfx950"),
        (),
        _MSCCL,
        ("gfx942",),
        ring_inter_minus_one=True,
        one_ppn_tree_latency=True,
        plugin_adds=True,
    ),
)
#: the release a profile gets when it names none: the newest numbered release carried
DEFAULT_RCCL = RCCL_RELEASES[1]
_BY_VERSION = {r.version: r for r in RCCL_RELEASES}
#: simcli's GPU generation -> the gfx architecture RCCL matches
ARCH = {"cdna3": "gfx942", "cdna4": "gfx950"}


def _key(v: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(x) for x in v.split("."))
    except ValueError:
        return None


def select(version: str | None, option: str = "nccl.version") -> RcclRelease:
    """The carried row of an RCCL release: itself if carried; else the newest carried numbered release at or
    before it; a release before the oldest is refused."""
    if not version or version not in _BY_VERSION and _key(version) is None:
        if not version:
            return DEFAULT_RCCL
        raise InputError(
            f"{option}: {version!r} is not an RCCL release simcli reads; use one of {', '.join(_BY_VERSION)}"
        )
    if version in _BY_VERSION:
        return _BY_VERSION[version]
    want = _key(version)
    keyed = [(key, r) for r in RCCL_RELEASES if (key := _key(r.version)) is not None]
    numbered = [r for _, r in keyed]
    older = [r for key, r in keyed if want is not None and key <= want]
    if not older:
        raise InputError(
            f"{option}: RCCL {version} is older than the oldest release simcli carries ({numbered[0].version}); "
            f"use one of {', '.join(_BY_VERSION)}"
        )
    return older[-1]


def arch(spec: NcclSpec) -> str:
    """The gfx architecture of a profile's GPU generation (gfx942 for anything RCCL simcli does not know)."""
    return ARCH.get(spec.generation, "gfx942")


def release(spec: NcclSpec) -> RcclRelease:
    """The row that prices a profile: the release its ``nccl.version`` selects, or, where that release does not
    know the GPU's architecture (gfx950 before the develop row), the oldest later row that does."""
    rel = select(spec.version)
    gfx = arch(spec)
    if gfx in rel.arch_model:
        return rel
    later = RCCL_RELEASES[RCCL_RELEASES.index(rel) + 1 :]
    return next((r for r in later if gfx in r.arch_model), rel)


def _model(rel: RcclRelease, spec: NcclSpec) -> TuningModel:
    idx = rel.arch_model.get(arch(spec), next(iter(rel.arch_model.values())))
    return rel.models[idx]


def _corr(table: Sequence[float], n: np.ndarray) -> np.ndarray:
    """A 27-entry correction table at sizes n: entry log2(n/64), the last beyond (ncclTopoGetAlgoTime)."""
    n = np.asarray(n, dtype=np.float64)
    idx = np.clip(np.floor(np.log2(np.maximum(n / 64.0, 1.0))).astype(np.int64), 0, 26)
    return np.asarray(table)[idx]


#: the payload fraction of each protocol's lines (LL: 4-byte flag per 8 bytes; LL128: 8 of 128 bytes a flag)
PAYLOAD = {"ll": 0.5, "ll128": 120.0 / 128.0, "simple": 1.0}


def pairs(
    network: Sequence[Tier],
    spec: NcclSpec,
    k: np.ndarray,
    *,
    tier_Bps: np.ndarray,
    collective: str = "all_reduce",
    algorithms: Sequence[str] | None = None,
    protocols: Sequence[str] | None = None,
) -> list[tuple[Pair, np.ndarray, Callable[[np.ndarray], np.ndarray]]]:
    """RCCL's Tree and Ring pairs over k: (pair, tuner bandwidth in collective bytes/s, the tuner's size correction
    as a function of n). The pair's ``latency``/``alg_Bps`` are what it costs, ``tuner_lat`` RCCL's estimate."""
    rel = release(spec)
    model = _model(rel, spec)
    gfx = arch(spec)
    k = np.asarray(k, dtype=np.int64)
    kf = k.astype(np.float64)
    nt = len(network)
    ring_Bps = np.min(tier_Bps, axis=0) * np.ones(k.shape)
    nodes = -(-k // network[0].size) if nt > 1 and network[0].size else np.ones_like(k)
    multi = nodes > 1
    ppn = kf / np.maximum(nodes, 1)
    lks = [link_kind(tier_kind(t, i)) for i, t in enumerate(network)]
    net_over = NET_OVERHEAD_US.get(spec.cpu, 1.0)
    nsteps = COLLECTIVES[collective].ring_steps(kf)
    groups = tree_groups(network, k)
    ratio_row = np.where(nodes <= 2, 0, 1)
    protos = [p for p in PROTOCOLS if p in spec.protocols and (protocols is None or p in protocols)]
    algos = [a for a in ("tree", "ring") if a in COLLECTIVES[collective].nccl_algorithms]
    algos = [a for a in algos if algorithms is None or a in algorithms]
    out: list[tuple[Pair, np.ndarray, Callable[[np.ndarray], np.ndarray]]] = []
    for a in algos:
        for p in protos:
            pi = PROTOCOLS.index(p)
            if p == "ll128" and gfx not in rel.ll128_archs:
                continue
            enabled = k >= 2
            if a == "tree" and p == "simple" and gfx in rel.tree_simple_one_node_off:
                enabled = enabled & multi
            # ---- latency: what it costs per tier (RCCL's tables scaled to the tier's stated latency, or the
            # transport's own hop) and the tuner's (RCCL's tables and the plugin's latency)
            cost_hw, tuner_hw = [], []
            for i, (t, lk) in enumerate(zip(network, lks)):
                row = model.hw_latency_us["net" if lk.hw == "net" else lk.hw]
                if lk.hw == "net":
                    plug = lk.plugin_latency_us
                    table = np.where(rel.one_ppn_tree_latency & (ppn < 2), row["tree"][pi], row[a][pi])
                    # 2.20.5/2.21.5: "interLat = latencyInter ? latencyInter : hwLat[NET]", + latencyInter for
                    # Simple; the develop row adds the plugin's latency to the table's
                    tun = (table + plug if rel.plugin_adds else (plug if plug else table)) + (
                        plug if p == "simple" else 0.0
                    )
                    tun = tun * np.ones(k.shape)
                    if lk.hop_us:  # a transport with its own published hop (EFA, TCPX/O, sockets)
                        phys = lk.hop_us[pi] * t.latency_s / (lk.hop_us[2] * 1e-6)
                    else:  # RCCL's own network row, scaled as the tier's latency stands to InfiniBand's 14 us;
                        # Ring/Simple's 320 us steers the choice: its hop costs Tree/Simple's
                        own = row["tree"][2] if (a == "ring" and p == "simple") else row[a][pi]
                        phys = own * t.latency_s / (HW_LATENCY_US["net"]["ring"][2] * 1e-6)
                else:
                    ref = row["ring"][2] or 1.0
                    phys = row[a][pi] * t.latency_s / (ref * 1e-6)
                    tun = row[a][pi] * np.ones(k.shape)
                cost_hw.append(np.full(k.shape, phys * 1e-6))
                tuner_hw.append(tun * 1e-6)
            hw = np.stack(cost_hw)
            thw = np.stack(tuner_hw)
            if a == "ring":
                hc = hops(network, k, collective)
                if rel.ring_inter_minus_one and collective == "all_reduce" and nt > 1:
                    top = np.zeros(k.shape, dtype=np.int64)
                    for i in range(1, nt):
                        top = np.where(hc[i] > 0, i, top)
                    for i in range(1, nt):
                        hc[i] = np.where((top == i) & multi, hc[i] - 2, hc[i])
                    hc[0] = np.where(k >= 2, nsteps - hc[1:].sum(axis=0), 0.0)
                if nt > 1:  # inter-node rings launch nsteps x the network post overhead (x3 Simple)
                    floor = net_over * (3.0 if p == "simple" else 1.0) * 1e-6
                    hw[0] = np.where(multi, np.maximum(hw[0], floor), hw[0])
                    thw[0] = np.where(multi, np.maximum(thw[0], floor), thw[0])
            else:
                hc = np.zeros((nt,) + k.shape)
                hc[0] = 2.0 * (groups[0] - 1)
                for i in range(1, nt):
                    hc[i] = 2.0 * np.floor(np.log2(np.maximum(groups[i], 1)))
                hc = np.where(k >= 2, hc, 0.0)
            base = rel.base_latency_us[a][pi] * 1e-6
            hop_lat = hc * hw
            lat = base + hop_lat.sum(axis=0)
            tlat = base + (hc * thw).sum(axis=0)
            # ---- bandwidth: the tuner's nChannels x bw x bwRatio (the ring's bus bandwidth stands for the graph's),
            # and what the bytes cost at the protocol's payload fraction
            bw_ratio = np.where(ratio_row == 0, model.bw_ratio[0][a][pi], model.bw_ratio[1][a][pi])
            if a == "ring":
                alg_ratio = kf / np.maximum(nsteps, 1.0)
                bus = ring_Bps
            else:
                alg_ratio = np.full(k.shape, 0.5)
                bus = ring_Bps  # RCCL builds its trees on the ring's channels
            tbus = bus * bw_ratio
            cbus = bus * PAYLOAD[p]
            corr_tab = model.tree_correction[pi] if a == "tree" else model.ring_correction[pi]
            on_net = a == "tree"

            def correction(n: np.ndarray, _tab=corr_tab, _tree=on_net, *, _multi=multi) -> np.ndarray:
                """RCCL's size correction: Tree always, Ring only across nodes (ncclTopoGetAlgoTime)."""
                c = _corr(_tab, n)
                return c if _tree else np.where(_multi, c, 1.0)

            pair = Pair(
                algorithm=a,
                protocol=p,
                enabled=np.asarray(enabled),
                latency=lat,
                alg_Bps=cbus * alg_ratio,
                bus_Bps=cbus,
                base=base,
                hop_latency=hop_lat,
                hops=hc,
                plateau=False,
                multi=multi,
                channels=float(spec.channels),
                ranks=kf,
                threshold=np.zeros(k.shape),
                tuner_lat=tlat,
                tuner_alg_Bps=tbus * alg_ratio,
            )
            out.append((pair, tbus * alg_ratio, correction))
    return out


def msccl_algo(rel: RcclRelease, spec: NcclSpec, network: Sequence[Tier], *, k: np.ndarray, n: np.ndarray):
    """Index into ``rel.msccl`` of the MSCCL algorithm RCCL runs for (k, n), -1 where none: one node of exactly
    the algorithm's GPUs, an architecture whose platform model enables MSCCL, n in its range, the element count
    (fp32) a multiple of its chunks per loop."""
    k = np.asarray(k)
    n = np.asarray(n, dtype=np.float64)
    shape = np.broadcast(k, n).shape
    out = np.full(shape, -1, dtype=np.int64)
    if arch(spec) not in rel.msccl_archs:
        return out
    node = network[0].size if len(network) > 1 else None
    for j, m in enumerate(rel.msccl):
        one_node = (k == m.ngpus) & ((node is None) | (k <= (node or k)))
        count = n / 4.0
        fits = (np.mod(count, m.chunks_per_loop) == 0) & (n >= m.min_bytes) & (n <= m.max_bytes)
        out = np.where(one_node & fits & (out < 0), j, out)
    return out


def rccl_collective(
    profile: Any,
    k: np.ndarray,
    n: np.ndarray,
    *,
    collective: str = "all_reduce",
    algorithms: Sequence[str] | None = None,
    protocol: str | None,
    by: str = "tuner",
) -> CommCost:
    """RCCL's pick for each (k, n) and what it costs: MSCCL's all-pairs algorithm where RCCL runs it, else the
    (algorithm, protocol) pair its tuner prices cheapest (``by="time"``: the cheapest by cost), with RCCL's
    protocol override by size across nodes where the release has one."""

    net = profile.network
    spec = nccl_spec(profile)
    by = chooser(spec, by)
    rel = release(spec)
    model = _model(rel, spec)
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(n, dtype=np.float64)
    shape = np.broadcast(k, n).shape
    _, cands = candidates(
        pairs, profile, k, spec=spec, collective=collective, algorithms=algorithms, protocol=protocol, library=" (RCCL)"
    )
    nn = np.broadcast_to(n, shape)
    kk = np.broadcast_to(k, shape)
    times, keys = [], []
    for pr, tbw, corr in cands:
        en = np.broadcast_to(pr.enabled, pr.latency.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(en, pr.latency, np.inf) + nn / pr.alg_Bps
            c = corr(nn)
            tlat = pr.tuner_lat if pr.tuner_lat is not None else pr.latency  # None: the cost's own
            key = np.where(en, tlat, np.inf) + nn / (tbw * np.where(c > 0, c, np.nan))
        key = np.where(np.isnan(key), np.inf, key)
        times.append(np.broadcast_to(t, shape))
        keys.append(np.broadcast_to(key, shape) if by == "tuner" else np.broadcast_to(t, shape))
    T = np.stack(times)
    K = np.stack(keys)
    idx = np.argmin(K, axis=0)
    # across nodes the develop row chooses the protocol by bytes per rank (rcclUpdateCollectiveProtocol)
    nodes = -(-kk // net[0].size) if len(net) > 1 and net[0].size else np.ones(shape, dtype=np.int64)
    if by == "tuner" and protocol is None and model.allreduce_ll_range and collective == "all_reduce":
        lo, hi = model.allreduce_ll_range
        per_rank = nn / np.maximum(kk, 1)
        want = np.where((per_rank > lo) & (per_rank <= hi), "ll", "simple")
        for want_p in ("ll", "simple"):
            for j, (pr, _, _) in enumerate(cands):
                if pr.protocol != want_p:
                    continue
                same_alg = np.array([c[0].algorithm for c in cands])[idx] == pr.algorithm
                live = np.isfinite(T[j])
                idx = np.where((nodes >= 2) & (want == want_p) & same_alg & live, j, idx)
    # MSCCL in one node (its own choice, before RCCL's tuner; not when an algorithm or protocol is forced)
    ms = (
        msccl_algo(rel, spec, net, k=kk, n=nn)
        if (algorithms is None and protocol is None and collective == "all_reduce")
        else np.full(shape, -1)
    )
    ring_bus = np.broadcast_to(ring_params(net, k)[1], k.shape)
    ms_lat, ms_bw = np.zeros(shape), np.zeros(shape)
    kf = np.maximum(kk.astype(np.float64), 1.0)
    nv = model.hw_latency_us["nvlink"]["ring"]
    scale0 = net[0].latency_s / ((nv[2] or 1.0) * 1e-6)
    for j, m in enumerate(rel.msccl):
        pi = PROTOCOLS.index(m.protocol)
        lat = (rel.base_latency_us["ring"][pi] + 2.0 * nv[pi] * scale0) * 1e-6
        alg = np.broadcast_to(ring_bus, shape) * PAYLOAD[m.protocol] * kf / (2.0 * (kf - 1.0))
        here = ms == j
        ms_lat = np.where(here, lat, ms_lat)
        ms_bw = np.where(here, nn / alg, ms_bw)
    use_ms = ms >= 0
    ms_t = ms_lat + ms_bw
    # the chosen RCCL pair's terms
    flat = idx * int(np.prod(shape)) + np.arange(int(np.prod(shape))).reshape(shape)
    lat_t = np.stack([np.broadcast_to(np.where(pr.enabled, pr.latency, np.inf), k.shape) for pr, _, _ in cands])
    lat_pick = np.stack([np.broadcast_to(lt, shape) for lt in lat_t]).reshape(-1).take(flat)
    time = np.where(use_ms, ms_t, T.reshape(-1).take(flat))
    lat = np.where(use_ms, ms_lat, lat_pick)
    one = kk < 2
    time = np.where(one, 0.0, time)
    lat = np.where(one, 0.0, lat)
    bandwidth = time - lat
    alg_names = np.array([pr.algorithm for pr, _, _ in cands], dtype=object)
    proto_names = np.array([pr.protocol for pr, _, _ in cands], dtype=object)
    ms_proto = np.array([m.protocol for m in rel.msccl] + [None], dtype=object)
    algorithm = np.where(one, "none", np.where(use_ms, "msccl", alg_names[idx]))
    prot = np.where(one, np.array(None, dtype=object), np.where(use_ms, ms_proto[ms], proto_names[idx]))
    nt = len(net)

    def hops_of() -> np.ndarray:
        hc = np.stack([np.broadcast_to(pr.hops, (nt,) + k.shape) for pr, _, _ in cands])  # (P, tiers, ...k)
        out = np.stack([np.stack([np.broadcast_to(h[i], shape) for h in hc]).reshape(-1).take(flat) for i in range(nt)])
        out[0] = np.where(use_ms, 2.0, out[0])
        out[1:] = np.where(use_ms, 0.0, out[1:])
        return np.where(one, 0.0, out)

    def tier_lat() -> np.ndarray:
        hl = np.stack([np.broadcast_to(pr.hop_latency, (nt,) + k.shape) for pr, _, _ in cands])
        out = np.stack([np.stack([np.broadcast_to(h[i], shape) for h in hl]).reshape(-1).take(flat) for i in range(nt)])
        out[0] += np.array([pr.base for pr, _, _ in cands])[idx]
        out[0] = np.where(use_ms, ms_lat, out[0])
        out[1:] = np.where(use_ms, 0.0, out[1:])
        return np.where(one, 0.0, out)

    def bottleneck() -> np.ndarray:
        b = np.broadcast_to(ring_params(net, k)[2], shape)
        return np.where(one, -1, b)

    bus = np.stack([np.broadcast_to(pr.bus_Bps, k.shape) for pr, _, _ in cands])
    bus_pick = np.stack([np.broadcast_to(b, shape) for b in bus]).reshape(-1).take(flat)
    payload = np.array([PAYLOAD[m.protocol] for m in rel.msccl] + [1.0])
    ms_bus = np.broadcast_to(ring_bus, shape) * payload[ms]
    return CommCost(
        time=time,
        latency=lat,
        bandwidth=bandwidth,
        reduction=lazy(lambda: np.zeros(shape)),
        alpha=lazy(lambda: np.where(one, 0.0, lat / np.maximum(hops_of().sum(axis=0), 1.0))),
        bus_Bps=np.where(one, np.inf, np.where(use_ms, ms_bus, bus_pick)),
        bottleneck=lazy(bottleneck),
        tier_latency=lazy(tier_lat),
        tier_bandwidth_s=lazy(lambda: per_tier(nt, bandwidth, bottleneck())),
        algorithm=algorithm,
        protocol=prot,
        tier_hops=lazy(hops_of),
        fill=np.zeros(shape),
    )
