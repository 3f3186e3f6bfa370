"""The collectives and NCCL's protocols: one row each, read by the costs, the CLI's choices and the docs' tables.

A :class:`CollectiveSpec` is what nccl-tests' ``struct testColl`` (``src/common.h``) and calculon's network ops
say about one collective: its name, the bytes each rank moves (``busbw/algbw``, nccl-tests
``doc/PERFORMANCE.md``), the ring's step count in NCCL's tuner (``src/graph/tuning.cc``), which of NCCL's
algorithms run it, and the NVLS kernel's pipeline stages (``src/device/*.h``). A :class:`ProtocolSpec` is one of
NCCL's protocols with the thread counts ``getAlgoInfo`` (``src/enqueue.cc``) sizes its channels by.
Adding a collective or a protocol is one row here plus its cost (docs/ARCHITECTURE.md).
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


_PERF = "nccl-tests doc/PERFORMANCE.md; NVIDIA/nccl src/graph/tuning.cc"
COLLECTIVE_SPECS: tuple[CollectiveSpec, ...] = (
    CollectiveSpec(
        "all_reduce",
        "all-reduce",
        "2(k-1)/k",
        lambda k: 2.0 * _part(k),
        lambda k: 2.0 * (np.asarray(k, dtype=np.float64) - 1.0),
        2,
        _part,
        ("tree", "ring", "nvls", "nvls-tree"),
        2.0,
        _PERF + "; src/device/all_reduce.h",
    ),
    CollectiveSpec(
        "reduce_scatter",
        "reduce-scatter",
        "(k-1)/k",
        _part,
        lambda k: np.asarray(k, dtype=np.float64) - 1.0,
        1,
        _part,
        ("ring", "nvls"),
        1.0,
        _PERF + "; src/device/reduce_scatter.h",
    ),
    CollectiveSpec(
        "all_gather",
        "all-gather",
        "(k-1)/k",
        _part,
        lambda k: np.asarray(k, dtype=np.float64) - 1.0,
        1,
        _zero,
        ("ring", "nvls"),
        1.0,
        _PERF + "; src/device/all_gather.h",
    ),
    CollectiveSpec(
        "broadcast",
        "broadcast",
        "1",
        lambda k: np.ones_like(np.asarray(k, dtype=np.float64)),
        lambda k: np.asarray(k, dtype=np.float64),
        1,
        _zero,
        ("ring",),
        0.0,
        _PERF,
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
PROTOCOL_SPECS: tuple[ProtocolSpec, ...] = (
    ProtocolSpec("ll", "LL", 512, 8, "8-byte stores with a flag each: the lowest latency, half the bandwidth", _ENQ),
    ProtocolSpec("ll128", "LL128", 640, 8, "128-byte lines with one flag: near Simple's bandwidth, low latency", _ENQ),
    ProtocolSpec("simple", "Simple", 512, 64, "plain stores with a fence per step: full bandwidth, most latency", _ENQ),
)
#: what --protocol accepts, in NCCL's order (NCCL_PROTO_LL, LL128, SIMPLE)
PROTOCOLS: tuple[str, ...] = tuple(p.name for p in PROTOCOL_SPECS)


def check_collective(collective: str, option: str = "--collective") -> CollectiveSpec:
    """The collective's row, or an InputError that lists the choices."""
    spec = COLLECTIVES.get(collective)
    if spec is None:
        raise InputError(f"{option}: unknown collective {collective!r}; choose one of {', '.join(COLLECTIVES)}")
    return spec


def busbw_factor(k: np.ndarray, collective: str = "all_reduce") -> np.ndarray:
    """nccl-tests' bus-bandwidth factor busbw/algbw (doc/PERFORMANCE.md): all-reduce 2(k-1)/k; reduce-scatter and
    all-gather (k-1)/k; broadcast 1."""
    return check_collective(collective).busbw_of(np.asarray(k, dtype=np.float64))
