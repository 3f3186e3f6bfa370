"""The algorithm registry: every all-reduce (and collective) algorithm simcli can price, one row each.

``--algorithm`` and its help, ``auto``, ``simcli algorithms``' labels, ``explain``'s formula and the docs' table
all read :data:`REGISTRY`. The textbook cost functions live in :mod:`simcli.comm.textbook`, NCCL's pairs in
:mod:`simcli.comm.nccl`; the collectives and protocols have their own rows in :mod:`simcli.comm.specs`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .cost import CommCost
from .specs import COLLECTIVES
from .textbook import (
    hierarchical_allreduce,
    ps_allreduce,
    ps_sharded_allreduce,
    rabenseifner_allreduce,
    recursive_doubling_allreduce,
    ring_allreduce,
    ring_coefficients,
    tree_allreduce,
)

__all__ = ["AlgorithmSpec", "REGISTRY", "SPECS", "ALGORITHMS", "CHOICES", "TEXTBOOK_CHOICES"]


@dataclass(frozen=True)
class AlgorithmSpec:
    """One algorithm simcli can price: everything the CLI help, explain, the map and the docs say about it.

    ``textbook``: its alpha-beta all-reduce cost ``f(network, k, n, *, reduce_Bps) -> CommCost`` (None: NCCL only);
    ``nccl``: the NCCL algorithm the name forces on a profile that models NCCL (``"*"``: NCCL's own choice);
    ``collectives``: the collectives it prices; ``coefficients``: ``k -> (c_lat, c_bw)`` where its cost is
    ``c_lat·alpha + c_bw·n/B`` at one link, which calibration fits alpha and B with (None: not fitted).
    """

    name: str
    label: str
    formula: str
    source: str
    collectives: tuple[str, ...]
    textbook: Callable[..., "CommCost"] | None = None
    nccl: str | None = None
    coefficients: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None


_ALL = tuple(COLLECTIVES)
_NCCL_SRC = "NVIDIA/nccl v2.20.3 src/graph/tuning.cc, src/enqueue.cc (simcli.comm.nccl)"
_NCCL_FORMULA = "base_p + Σ_tiers hops_i·α_i,p + n/B_alg,p"

#: every algorithm, one row each; ``auto`` (the fastest of everything) is not a row
REGISTRY: tuple[AlgorithmSpec, ...] = (
    AlgorithmSpec(
        name="nccl",
        label="nccl",
        formula=f"NCCL's choice: the (algorithm, protocol) pair its tuner prices cheapest, each {_NCCL_FORMULA}",
        source=_NCCL_SRC,
        collectives=_ALL,
        nccl="*",
    ),
    AlgorithmSpec(
        name="ring",
        label="ring",
        formula="2(k-1)·α + 2(k-1)/k·n/B [+ (k-1)/k·n/γ]  (Patarasuk & Yuan 2009); on an NCCL "
        f"profile NCCL's Ring with its best protocol: {_NCCL_FORMULA}, B_alg = B_p·k/nsteps",
        source="Patarasuk & Yuan 2009; " + _NCCL_SRC,
        collectives=_ALL,
        textbook=ring_allreduce,
        nccl="ring",
        coefficients=ring_coefficients,
    ),
    AlgorithmSpec(
        name="tree",
        label="tree",
        formula="2·ceil(lg k)·α + f_k·n/B, f_k = 2 (f_2 = 1, f_3 = 1.5) [+ n/γ]  (double binary "
        "tree, Sanders, Speck & Träff 2009); on an NCCL profile NCCL's Tree: base_p + 2((ppn-1)·α_0,p + "
        "floor(lg N)·α_net,p) + 2n/B_p",
        source="Sanders, Speck & Träff 2009; " + _NCCL_SRC,
        collectives=("all_reduce",),
        textbook=tree_allreduce,
        nccl="tree",
    ),
    AlgorithmSpec(
        name="nvls",
        label="nvls",
        formula="NVLink SHARP in one NVSwitch domain: α_nvls + n/(5/6·channels·s)",
        source=_NCCL_SRC + "; src/transport/nvls.cc (16 channels on SM90)",
        collectives=("all_reduce", "reduce_scatter", "all_gather"),
        nccl="nvls",
    ),
    AlgorithmSpec(
        name="nvls-tree",
        label="nvlst",
        formula="NVLS in each node, a tree across: α_nvls + 2·floor(lg N)·α_net + n/(5/6·channels·s)",
        source=_NCCL_SRC,
        collectives=("all_reduce",),
        nccl="nvls-tree",
    ),
    AlgorithmSpec(
        name="pat",
        label="pat",
        formula="NCCL's PAT (all-gather and reduce-scatter at one GPU per node, NCCL 2.23.4 on): 8 us + "
        "floor(lg N)·α_net/3.5 + 2.8 us·k + n/(0.75·B) (0.85 in 2.23.4)",
        source="NVIDIA/nccl v2.23.4-v2.30.7 src/graph/tuning.cc (ncclPatEnable, ncclTopoTuneModel; "
        "simcli.comm.releases)",
        collectives=("reduce_scatter", "all_gather"),
        nccl="pat",
    ),
    AlgorithmSpec(
        "collnet-direct",
        "cnd",
        "NCCL's CollNetDirect (SHARP in the switches; tiers with collnet: sharp, NVSwitch nodes, <= 8 GPUs a node): "
        "2·(min(1,ppn-1)·α_0 + (ppn-1)·0.4 us) + α_net + n/(0.5·G·bwIntra/f·0.85), f = ppn/G - (ppn/G-1)/2",
        "NVIDIA/nccl v2.18.1-v2.30.7 src/graph/tuning.cc (ncclTopoTuneModel; simcli.comm.collnet)",
        ("all_reduce",),
        None,
        "collnet-direct",
    ),
    AlgorithmSpec(
        "collnet-chain",
        "cnc",
        "NCCL's CollNetChain (SHARP in the switches; tiers with collnet: sharp, <= 8 GPUs a node): "
        "2·(ppn-1)·α_0 + α_net + n/(0.5·G·bwIntra), G channels of the CollNet graph",
        "NVIDIA/nccl v2.18.1-v2.30.7 src/graph/tuning.cc (ncclTopoTuneModel; simcli.comm.collnet)",
        ("all_reduce",),
        None,
        "collnet-chain",
    ),
    AlgorithmSpec(
        "recursive-doubling",
        "rd",
        "lg k·(α + n/B) [+ lg k·n/γ], k not a power of two: floor(lg k)+2 steps (Thakur, Rabenseifner & Gropp 2005)",
        "Thakur, Rabenseifner & Gropp 2005, §4",
        ("all_reduce",),
        recursive_doubling_allreduce,
    ),
    AlgorithmSpec(
        name="rabenseifner",
        label="rab",
        formula="2·lg k·α + 2(k-1)/k·n/B [+ (k-1)/k·n/γ], k not a power of two: +2α + 2n/B "
        "(Thakur, Rabenseifner & Gropp 2005)",
        source="Thakur, Rabenseifner & Gropp 2005, §4.1",
        collectives=("all_reduce",),
        textbook=rabenseifner_allreduce,
    ),
    AlgorithmSpec(
        name="hierarchical",
        label="hier",
        formula="Σ_tiers 2(g_i-1)·α_i + 2(g_i-1)/g_i·n/B_i [+ (k-1)/k·n/γ]  (reduce-"
        "scatter in the node, all-reduce across, all-gather; Horovod)",
        source="Horovod hierarchical all-reduce",
        collectives=("all_reduce",),
        textbook=hierarchical_allreduce,
    ),
    AlgorithmSpec(
        name="ps",
        label="ps",
        formula="2(k-1)·α + 2(k-1)·n/B_server [+ (k-1)·n/γ]  (one parameter server)",
        source="Li et al. 2014",
        collectives=("all_reduce",),
        textbook=ps_allreduce,
    ),
    AlgorithmSpec(
        name="ps-sharded",
        label="ps-sh",
        formula="2(k-1)·α + 2(k-1)/k·n/B [+ (k-1)/k·n/γ]  (pairwise exchange, Thakur et al. 2005)",
        source="Thakur, Rabenseifner & Gropp 2005, §3",
        collectives=("all_reduce",),
        textbook=ps_sharded_allreduce,
    ),
)
SPECS: dict[str, AlgorithmSpec] = {a.name: a for a in REGISTRY}

#: the textbook all-reduce costs by name: f(network, k, nbytes, *, reduce_Bps) -> CommCost
ALGORITHMS: dict[str, Callable[..., CommCost]] = {a.name: a.textbook for a in REGISTRY if a.textbook is not None}

#: what --algorithm accepts
CHOICES = tuple(SPECS) + ("auto",)
#: what :func:`allreduce` (the textbook costs over a bare network) accepts
TEXTBOOK_CHOICES = tuple(ALGORITHMS) + ("auto",)
