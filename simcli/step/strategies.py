"""The data-parallel strategies, one row each: what a step communicates, what memory it shards, which timeline
hides its communication.

Every module that branches on a strategy reads its row: the memory model (:mod:`simcli.step.memory`: what is
divided by the shard group, the buffers' name), the sharded step (:mod:`simcli.step.sharding`: the timeline
and the collectives), the engine (DDP's buckets or the sharded step), the CLI's ``--strategy`` choices and the
headers that say what was simulated. Adding a strategy is one row here plus its step's cost
(docs/ARCHITECTURE.md); ``tests/step/test_sharding.py`` checks that every row is complete.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import numpy as np

from ..base.types import InputError

__all__ = [
    "StrategySpec",
    "STRATEGY_SPECS",
    "SPECS",
    "STRATEGIES",
    "SHARDED",
    "check_strategy",
    "shard_divisor",
    "update_divisor",
]


@dataclass(frozen=True)
class StrategySpec:
    """One strategy.

    ``timeline``: ``buckets`` (DDP: the gradient all-reduced in buckets during backward, simcli.step.buckets),
    ``zero`` (reduce-scatter in DeepSpeed's buckets during backward, one all-gather of the parameters after the
    optimizer step) or ``units`` (FSDP: per unit an all-gather before forward and backward and a reduce-scatter
    after backward, prefetched one unit ahead). ``group``: what one copy of the sharded state is divided over,
    ``none`` (replicated), ``world`` (all k devices) or ``shard_group`` (hsdp's G, one node by default).
    ``shards``: whether (weights, fp32 master, gradients, optimizer state) are divided by that group.
    ``replicas``: the gradient shard is all-reduced across the k/G replicas (hsdp).
    """

    name: str
    label: str
    timeline: str
    group: str
    shards: tuple[bool, bool, bool, bool]
    replicas: bool
    buffers: str  #: how its communication buffers are named in memory tables
    source: str

    @property
    def shards_update(self) -> bool:
        """Does a device step only its shard of the optimizer state (ZeRO's P_os, FSDP's sharded FlatParameter)?
        The per-update cost (simcli.step.update) is then the shard's: divided as the optimizer state is."""
        return self.shards[3]


STRATEGY_SPECS: tuple[StrategySpec, ...] = (  # from the least to the most sharded memory
    StrategySpec(
        "ddp",
        "DDP",
        "buckets",
        "none",
        (False, False, False, False),
        False,
        "DDP buckets",
        "PyTorch DistributedDataParallel (torch/nn/parallel/distributed.py, reducer.cpp)",
    ),
    StrategySpec(
        "zero1",
        "ZeRO-1",
        "zero",
        "world",
        (False, True, False, True),
        False,
        "ZeRO buckets",
        "Rajbhandari et al. 2020 (ZeRO, P_os); DeepSpeed stage 1",
    ),
    StrategySpec(
        "zero2",
        "ZeRO-2",
        "zero",
        "world",
        (False, True, True, True),
        False,
        "ZeRO buckets",
        "Rajbhandari et al. 2020 (ZeRO, P_os+g); DeepSpeed stage 2",
    ),
    StrategySpec(
        "hsdp",
        "HSDP",
        "units",
        "shard_group",
        (True, True, True, True),
        True,
        "FSDP buffers",
        "PyTorch FSDP HYBRID_SHARD (Zhao et al. 2023)",
    ),
    StrategySpec(
        "fsdp",
        "FSDP",
        "units",
        "world",
        (True, True, True, True),
        False,
        "FSDP buffers",
        "PyTorch FSDP FULL_SHARD (Zhao et al. 2023); ZeRO-3",
    ),
)
SPECS: dict[str, StrategySpec] = {s.name: s for s in STRATEGY_SPECS}
#: values of Scenario.strategy, from the least to the most sharded memory (hsdp shards within a group only)
STRATEGIES: tuple[str, ...] = tuple(SPECS)
#: the strategies whose step simcli.step.sharding prices (DDP's bucketed all-reduce stays in the engine)
SHARDED: tuple[str, ...] = tuple(s.name for s in STRATEGY_SPECS if s.timeline != "buckets")


def check_strategy(strategy: str) -> StrategySpec:
    """The strategy's row, or an InputError that names the closest and lists the choices."""
    spec = SPECS.get(strategy)
    if spec is None:
        close = difflib.get_close_matches(strategy, STRATEGIES, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise InputError(f"--strategy: unknown strategy {strategy!r}{hint}; choose one of {', '.join(STRATEGIES)}")
    return spec


def shard_divisor(strategy: str, k: object, group: int | None, node_size: int | None) -> np.ndarray:
    """Devices one copy of the sharded state is split over, per k: k (``world``), min(G, k) (``shard_group``;
    G defaults to one node, ``node_size``, and to all of k on a one-tier profile), 1 (``none``)."""
    k = np.asarray(k, dtype=np.int64)
    over = SPECS[strategy].group
    if over == "none":
        return np.ones_like(k)
    if over == "world":
        return k
    g = group if group is not None else node_size
    if g is None:
        return k
    return np.minimum(k, int(g))


def update_divisor(strategy: str, k: object, group: int | None, node_size: int | None) -> np.ndarray:
    """Devices the optimizer step is divided over, per k (simcli.step.update): the optimizer state's divisor
    (:func:`shard_divisor`) where the row shards it (:attr:`StrategySpec.shards_update`), else 1 (ddp)."""
    if not SPECS[strategy].shards_update:
        return np.ones_like(np.asarray(k, dtype=np.int64))
    return shard_divisor(strategy, k, group, node_size)
