"""The collectives and NCCL's protocols: one row each, read by the costs, the CLI's choices and the docs' tables.

A :class:`CollectiveSpec` is what nccl-tests' ``struct testColl`` (``src/common.h``) and calculon's network ops
say about one collective: its name, the bytes each rank moves (``busbw/algbw``, nccl-tests
``doc/PERFORMANCE.md``), the ring's step count in NCCL's tuner (``src/graph/tuning.cc``), which of NCCL's
algorithms run it, and the NVLS kernel's pipeline stages (``src/device/*.h``). A :class:`ProtocolSpec` is one of
NCCL's protocols with the thread counts ``getAlgoInfo`` (``src/enqueue.cc``) sizes its channels by. A
:class:`LinkKind` is what a tier's ``kind`` carries: NCCL's hardware class, the transport's own constants and the
defaults a datasheet profile leaves out (issue 21; docs/nccl.md, docs/profiles.md).
Adding a collective, a protocol or a link kind is one row here plus its cost (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..base.types import InputError

__all__ = [
    "CollectiveSpec",
    "ProtocolSpec",
    "COLLECTIVE_SPECS",
    "COLLECTIVES",
    "PROTOCOL_SPECS",
    "PROTOCOLS",
    "LinkKind",
    "LINK_KIND_SPECS",
    "LINK_KINDS",
    "KIND_ALIASES",
    "GpuGeneration",
    "GENERATION_SPECS",
    "GENERATIONS",
    "generation_of",
    "link_kind",
    "busbw_factor",
    "check_collective",
]


@dataclass(frozen=True)
class CollectiveSpec:
    """One collective, named as nccl-tests names it; ``n`` is its size as nccl-tests counts it (all-gather: the
    gathered output, reduce-scatter: the input)."""

    name: str
    label: str
    #: busbw/algbw as text and as a function of k: the bytes each rank sends per byte of n on a ring
    busbw: str
    busbw_of: Callable[[np.ndarray], np.ndarray]
    #: NCCL's ring step count (tuning.cc ``nsteps``) and passes round the ring (all-reduce: reduce-scatter, then
    #: all-gather)
    ring_steps: Callable[[np.ndarray], np.ndarray]
    ring_passes: int
    #: fraction of n one rank reduces (the gamma term of a textbook cost), as a function of k
    reduced: Callable[[np.ndarray], np.ndarray]
    #: NCCL's algorithms that run it (tuning.cc skips the others), in simcli's names
    nccl_algorithms: tuple[str, ...]
    #: NVLS kernels' pipeline fill in chunk times (stages - 1; docs/nccl.md); 0 where NVLS does not run it
    nvls_fill: float
    source: str


def _zero(k: np.ndarray) -> np.ndarray:
    return np.zeros_like(np.asarray(k, dtype=np.float64))


def _part(k: np.ndarray) -> np.ndarray:
    k = np.asarray(k, dtype=np.float64)
    return (k - 1.0) / k


def _steps(k: np.ndarray) -> np.ndarray:
    return np.asarray(k, dtype=np.float64) - 1.0


_PERF = "nccl-tests doc/PERFORMANCE.md; NVIDIA/nccl src/graph/tuning.cc"
COLLECTIVE_SPECS: tuple[CollectiveSpec, ...] = (
    CollectiveSpec(
        name="all_reduce",
        label="all-reduce",
        busbw="2(k-1)/k",
        busbw_of=lambda k: 2.0 * _part(k),
        ring_steps=lambda k: 2.0 * _steps(k),
        ring_passes=2,
        reduced=_part,
        nccl_algorithms=("tree", "ring", "nvls", "nvls-tree"),
        nvls_fill=2.0,
        source=_PERF + "; src/device/all_reduce.h",
    ),
    CollectiveSpec(
        name="reduce_scatter",
        label="reduce-scatter",
        busbw="(k-1)/k",
        busbw_of=_part,
        ring_steps=_steps,
        ring_passes=1,
        reduced=_part,
        nccl_algorithms=("ring", "nvls", "pat"),
        nvls_fill=1.0,
        source=_PERF + "; src/device/reduce_scatter.h",
    ),
    CollectiveSpec(
        name="all_gather",
        label="all-gather",
        busbw="(k-1)/k",
        busbw_of=_part,
        ring_steps=_steps,
        ring_passes=1,
        reduced=_zero,
        nccl_algorithms=("ring", "nvls", "pat"),
        nvls_fill=1.0,
        source=_PERF + "; src/device/all_gather.h",
    ),
    CollectiveSpec(
        name="broadcast",
        label="broadcast",
        busbw="1",
        busbw_of=lambda k: np.ones_like(np.asarray(k, dtype=np.float64)),
        ring_steps=lambda k: np.asarray(k, dtype=np.float64),
        ring_passes=1,
        reduced=_zero,
        nccl_algorithms=("ring",),
        nvls_fill=0.0,
        source=_PERF,
    ),
)
#: the collectives by name, in nccl-tests' order
COLLECTIVES: dict[str, CollectiveSpec] = {c.name: c for c in COLLECTIVE_SPECS}


@dataclass(frozen=True)
class ProtocolSpec:
    """One of NCCL's protocols: the name ``--protocol`` takes, NCCL_PROTO's spelling, and getAlgoInfo's channel
    sizing (``NCCL_{LL,LL128,SIMPLE}_MAX_NTHREADS`` threads per channel; a channel is dropped while the bytes per
    channel are below threads x ``NCCL_*_THREAD_THRESHOLD``)."""

    name: str
    nccl: str
    max_threads: int
    thread_threshold: int
    summary: str
    source: str


_ENQ = "NVIDIA/nccl v2.20.3 src/enqueue.cc (getAlgoInfo), src/include/device.h"
# fmt: off
PROTOCOL_SPECS: tuple[ProtocolSpec, ...] = tuple(
    ProtocolSpec(name=n, nccl=nccl, max_threads=threads, thread_threshold=threshold, summary=summary, source=_ENQ)
    for n, nccl, threads, threshold, summary in (
        # name, NCCL_PROTO's spelling, NCCL_*_MAX_NTHREADS, NCCL_*_THREAD_THRESHOLD, in a few words
        ("ll",     "LL",     512, 8,  "8-byte stores with a flag each: the lowest latency, half the bandwidth"),
        ("ll128",  "LL128",  640, 8,  "128-byte lines with one flag: near Simple's bandwidth, low latency"),
        ("simple", "Simple", 512, 64, "plain stores with a fence per step: full bandwidth, most latency"),
    )
)
# fmt: on
#: what --protocol accepts, in NCCL's order (NCCL_PROTO_LL, LL128, SIMPLE)
PROTOCOLS: tuple[str, ...] = tuple(p.name for p in PROTOCOL_SPECS)


@dataclass(frozen=True)
class LinkKind:
    """One link kind a tier may name: NCCL's hardware class and the defaults a datasheet profile leaves out.

    ``hw`` is the row of NCCL's ``hwLat`` table the kind takes (nvlink, pcie, net). ``latency_us`` (a Ring/Simple
    hop) and ``efficiency`` are used when the tier gives none. ``plugin_latency_us`` is the network plugin's
    ``props->latency``, which NCCL's tuner adds to every inter-node hop (twice for Simple:
    ``interLat = hwLat[NET][a][p] + graph->latencyInter; if (p == SIMPLE) interLat += latencyInter``,
    tuning.cc 2.20.3-2.26): a term of NCCL's *choice* only. ``hop_us`` (LL, LL128, Simple) replaces NCCL's row
    in what a hop *costs* where the transport has its own published per-hop latency. ``protocols`` are those the
    transport lets NCCL run (a plugin that cannot deliver 128-byte lines in order sets NCCL_PROTO=simple for the
    whole process). ``multinode``: a domain of this tier is an NVLink domain that spans hosts (MNNVL), which NCCL
    fuses into one node and on which NCCL 2.20.3 runs no NVLS.
    """

    name: str
    hw: str
    latency_us: float
    efficiency: float
    summary: str
    source: str
    plugin_latency_us: float = 0.0
    hop_us: tuple[float, float, float] | None = None
    protocols: tuple[str, ...] = PROTOCOLS
    multinode: bool = False

    def tuner_note(self) -> str:
        """What the kind changes in NCCL's choice beyond its hwLat row ("" if nothing): for tables."""
        parts = []
        if self.plugin_latency_us:
            parts.append(f"tuner adds {self.plugin_latency_us:g} us per inter-node hop (x2 Simple)")
        if self.hop_us:
            parts.append("hop costs " + "/".join(f"{x:g}" for x in self.hop_us) + " us (LL/LL128/Simple)")
        if self.protocols != PROTOCOLS:
            parts.append("protocols " + "/".join(self.protocols))
        if self.multinode:
            parts.append("one NCCL node, no NVLS")
        return ", ".join(parts)


_TUNING = "NVIDIA/nccl v2.20.3 src/graph/tuning.cc (hwLat)"
LINK_KIND_SPECS: tuple[LinkKind, ...] = (
    LinkKind(
        name="nvlink",
        hw="nvlink",
        latency_us=3.4,
        efficiency=0.8,
        summary="NVLink between GPUs of one node (point to point or through NVSwitch)",
        source=f"{_TUNING}: hwLat[NVLINK][Ring][Simple] 3.4 us; 20 of 25 GB/s per NVLink (SM80_NVLINK_BW 20.0, "
        "src/graph/topo.h; NCCL maintainer, NVIDIA/nccl-tests#149)",
    ),
    LinkKind(
        name="nvswitch",
        hw="nvlink",
        latency_us=3.4,
        efficiency=0.8,
        summary="NVLink through NVSwitch inside one node (NVLS may run)",
        source=f"as nvlink: the same hwLat row ({_TUNING})",
    ),
    LinkKind(
        name="mnnvl",
        hw="nvlink",
        latency_us=3.4,
        efficiency=0.9,
        summary="a multi-node NVLink domain (GB200 NVL72, NVL36x2): one NCCL node",
        source="NCCL fuses the topology over the NVLink clique, so the domain is one NCCL node; tuning.cc 2.20.3: "
        "'MNNVL: NVLS not yet supported' (NVLS and NVLSTree off); hwLat NVLINK row; NVLink5 measured at 811 of "
        "900 GB/s busbw over 8 GB200 GPUs (lixueduan.com, 'GB200 MNNVL nccl-test'), above NCCL's search constant "
        "SM100_NVLINK_BW 40.1 of 50 GB/s (src/graph/topo.h), which its graph search keeps",
        multinode=True,
    ),
    LinkKind(
        name="pcie",
        hw="pcie",
        latency_us=5.7,
        efficiency=0.76,
        summary="PCIe between GPUs of one host",
        source=f"{_TUNING}: hwLat[PCI][Ring][Simple] 5.7 us; PCI_BW 12 GB/s of a Gen3 x16's 15.75 "
        f"(src/graph/topo.h), the "
        "same fraction for later generations (estimate)",
    ),
    LinkKind(
        name="infiniband",
        hw="net",
        latency_us=14.0,
        efficiency=0.92,
        summary="InfiniBand NICs (NCCL's IB verbs transport)",
        source=f"{_TUNING}: hwLat[NET][Ring][Simple] 14 us; 46-48 of 50 GB/s per NDR NIC "
        "(NVIDIA, NVIDIA/nccl-tests#290)",
    ),
    LinkKind(
        name="roce",
        hw="net",
        latency_us=14.55,
        efficiency=0.91,
        summary="RoCE v2 NICs (NCCL's IB verbs transport over Ethernet)",
        source="NVIDIA/nccl v2.20.3 src/transport/net_ib.cc: the IB verbs transport over an Ethernet link layer "
        "(line 238 "
        "keeps IBV_LINK_LAYER_ETHERNET ports; 710, 837, 935: RoCE addresses by GID, NCCL_IB_GID_INDEX line 80, "
        "traffic class NCCL_IB_TC line 86); adaptive routing on by default on InfiniBand only (lines 89, 260); "
        "props->latency = 0 (line 409): NCCL's tuner prices RoCE exactly as InfiniBand (the hwLat NET row). What a hop "
        "costs: NCCL's NET row scaled by 14.55/14 (InfiniBand's Ring/Simple hop + 0.55 us one way, half the round-trip "
        "difference of RoCE v2 (1571.5 ns) and NDR "
        "InfiniBand (460.9 ns) over 3 switch hops (Spectrum-4 ~500 ns per hop against NDR ~130 ns; pingdo.net, "
        "'RoCE v2 vs InfiniBand' RDMA latency modeler; estimate); efficiency 0.91: InfiniBand's 0.92 less RoCE v2's "
        "UDP/IP/Ethernet framing (54-70 bytes against ~20 per 4 KiB MTU, same page; estimate)",
    ),
    LinkKind(
        name="efa",
        hw="net",
        latency_us=23.0,
        efficiency=0.92,
        summary="AWS Elastic Fabric Adapter through aws-ofi-nccl",
        source="aws/aws-ofi-nccl src/tuner/nccl_ofi_model.c, include/tuner/nccl_ofi_tuner.h: net_lat 20 us '2 nodes, "
        "8B "
        "RDMA w/imm lat' for every protocol, + TUNER_NET_COMP_OVERHEAD 3 us for Simple ('~2 us in the device and "
        "~1 us to write that completion up to the host stack'); src/platform-aws.cpp: .latency = 75.0 us on "
        "p4d/p4de/p5 ('NCCL's internal tuner choices work better with this value'), NCCL_PROTO=simple forced "
        "('the LL/LL128 protocols can lead to data corruption without data delivery ordering'); efficiency as "
        "infiniband (estimate)",
        plugin_latency_us=75.0,
        hop_us=(20.0, 20.0, 23.0),
        protocols=("simple",),
    ),
    LinkKind(
        name="ethernet",
        hw="net",
        latency_us=14.0,
        efficiency=0.9,
        summary="plain Ethernet (NCCL's socket transport)",
        source=f"{_TUNING}: NCCL prices its socket transport with the NET row (14 us Ring/Simple); 0.9 of line rate "
        "(estimate)",
    ),
    LinkKind(
        name="socket",
        hw="net",
        latency_us=30.0,
        efficiency=0.9,
        summary="TCP sockets (NCCL's socket transport, no GPUDirect)",
        source="NVIDIA/nccl v2.20.3 src/transport/net_socket.cc: ptrSupport NCCL_PTR_HOST only (line 98: data is "
        "staged in "
        "host memory), props->latency = 0 (line 101: the tuner sees the hwLat NET row), NCCL_SOCKET_NTHREADS x "
        "NCCL_NSOCKS_PERTHREAD sockets per connection (lines 117-118; auto: 2 x 8 on AWS ENA, 4 x 1 on GCP gVNIC, "
        "else the main thread and 1 socket, lines 246-272; at most 64 sockets, 16 threads), each message cut into "
        "tasks of at least MIN_CHUNKSIZE 64 KiB per socket (line 115, 498). What a hop costs: 30 us, the top of "
        "kernel TCP/IP's 10-30 us one way (kentino.com, 'Latency Dissection: Where Every Microsecond Goes in an AI "
        "Cluster Network'; estimate). The throughput a few sockets reach is far below line rate (2 A3 Mega over "
        "one eth0 measured 3.5 GB/s busbw all-reduce, MG-Cafe/TCPXO-Enabled-A3-Mega-H100-Benchmarks "
        "docs/benchmark-report.md): give the tier the bandwidth the sockets reach; efficiency 0.9 (estimate)",
        hop_us=(30.0, 30.0, 30.0),
    ),
    LinkKind(
        name="tcpx",
        hw="net",
        latency_us=50.0,
        efficiency=0.9,
        summary="Google GPUDirect-TCPX NICs (A3 High: TCP into GPU memory, unpacked on the GPU)",
        source="google/nccl-plugin-gpudirecttcpx src/net_tcpx.cc @ 4b8ea7f2 lines 730-740: props->latency = 0 "
        "(NCCL's tuner "
        "sees the hwLat NET row), netDeviceType DEV_UNPACK: received pages are scattered in a bounce buffer and a "
        "GPU kernel unpacks them, which NCCL implements in its Simple primitives only (NVIDIA/nccl v2.20.3 "
        "src/device/prims_simple.h line 421): Simple only. Hop 50 us: TCPXO's (estimate; no published TCPX curve "
        "was found); efficiency 0.9 (estimate)",
        hop_us=(50.0, 50.0, 50.0),
        protocols=("simple",),
    ),
    LinkKind(
        name="tcpxo",
        hw="net",
        latency_us=50.0,
        efficiency=0.94,
        summary="Google GPUDirect-TCPXO NICs (A3 Mega: TCP offloaded to the NIC, one 200 Gb/s NIC per GPU)",
        source="google/nccl-plugin-gpudirect-tcpxo @ 04815d1b (v1.0.17): tcpdirect_plugin/fastrak_offload/nccl_shim.cc "
        "lines 959-966: props.latency = 0 (NCCL's tuner sees the hwLat NET row), ptrSupport HOST|CUDA; "
        "tcpxo_scripts/nccl-env-profile.sh line 51: NCCL_PROTO=Simple,LL128 (no LL), and "
        "nccl-env-profile-simple.sh Simple alone. Hop 50 us: 2 A3 Mega (16 H100, 8x 200 Gb/s TCPXO each) all-gather "
        "64 KiB in 110 us, 4 MiB in 156 us (MG-Cafe/TCPXO-Enabled-A3-Mega-H100-Benchmarks docs/benchmark-report.md, "
        "NCCL 2.28.7, FasTrak v1.0.8): 110 us less Ring/Simple's base 8.4 and 14 NVLink hops of 3.4 us leaves ~54 us "
        "for the network hop (estimate); efficiency 0.94: the same run's 188.8 GB/s all-gather busbw of 200 GB/s "
        "(8 x 25 GB/s) per node",
        hop_us=(50.0, 50.0, 50.0),
        protocols=("ll128", "simple"),
    ),
)
#: the link kinds by name
LINK_KINDS: dict[str, LinkKind] = {lk.name: lk for lk in LINK_KIND_SPECS}
#: kind names of earlier versions, read as their successors ("net" was every network before issue 21)
KIND_ALIASES: dict[str, str] = {"net": "infiniband"}


@dataclass(frozen=True)
class GpuGeneration:
    """One GPU generation a profile's ``nccl.generation`` may name: the words of device names that name it
    (lower case, matched as substrings) and the vendor's architecture it stands for. NCCL's per-generation
    tables (simcli.comm.releases), RCCL's architectures (simcli.comm.rccl), the straggler constants and the
    MFU families (simcli/io/data/families.yaml) are keyed by its name."""

    name: str
    words: tuple[str, ...]
    source: str


GENERATION_SPECS: tuple[GpuGeneration, ...] = (  # oldest first, NVIDIA then AMD
    GpuGeneration(name="volta", words=("v100", "volta"), source="NVIDIA Volta (SM70)"),
    GpuGeneration(name="ampere", words=("a100", "a800", "a30", "ampere"), source="NVIDIA Ampere (SM80)"),
    GpuGeneration(name="ada", words=("l40", "l4", "4090", "ada"), source="NVIDIA Ada Lovelace (SM89)"),
    GpuGeneration(name="hopper", words=("h100", "h200", "h800", "gh200", "hopper"), source="NVIDIA Hopper (SM90)"),
    GpuGeneration(
        name="blackwell",
        words=("b200", "gb200", "b100", "blackwell", "gb300", "b300"),
        source="NVIDIA Blackwell (SM100)",
    ),
    GpuGeneration(name="cdna3", words=("mi300", "mi325", "mi250"), source="AMD CDNA 3 (gfx942)"),
    # rccl hook (issue 37): CDNA 4, gfx950 (simcli.comm.rccl.ARCH)
    GpuGeneration(name="cdna4", words=("mi355", "mi350"), source="AMD CDNA 4 (gfx950)"),
)
#: the generation names, oldest first (the schema's choices for nccl.generation)
GENERATIONS: tuple[str, ...] = tuple(g.name for g in GENERATION_SPECS)


def generation_of(device_name: str) -> str | None:
    """The generation whose words a device's name contains (case-insensitive), else None."""
    n = device_name.lower()
    for g in GENERATION_SPECS:
        if any(w in n for w in g.words):
            return g.name
    return None


def link_kind(name: str) -> LinkKind:
    """The LinkKind of a kind name (an alias is read as its successor)."""
    return LINK_KINDS[KIND_ALIASES.get(name, name)]


def check_collective(collective: str, option: str = "--collective") -> CollectiveSpec:
    """The collective's row, or an InputError that lists the choices."""
    spec = COLLECTIVES.get(collective)
    if spec is None:
        raise InputError(f"{option}: unknown collective {collective!r}; choose one of {', '.join(COLLECTIVES)}")
    return spec


def busbw_factor(k: np.ndarray | float, collective: str = "all_reduce") -> np.ndarray:
    """nccl-tests' bus-bandwidth factor busbw/algbw (doc/PERFORMANCE.md): all-reduce 2(k-1)/k; reduce-scatter and
    all-gather (k-1)/k; broadcast 1."""
    return check_collective(collective).busbw_of(np.asarray(k, dtype=np.float64))
