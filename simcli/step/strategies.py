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
    ``shards_weights``, ``shards_master``, ``shards_grads``, ``shards_state``: whether the weights, the fp32
    master, the gradients and the optimizer state are divided by that group.
    ``replicas``: the gradient shard is all-reduced across the k/G replicas (hsdp).
    ``summary``: what it communicates, in a few words (``--strategy``'s help); ``marker``: its matplotlib marker
    in pictures that draw one point per configuration (``plan best --plot``).
    """

    name: str
    label: str
    timeline: str
    group: str
    shards_weights: bool
    shards_master: bool
    shards_grads: bool
    shards_state: bool
    replicas: bool
    buffers: str  #: how its communication buffers are named in memory tables
    summary: str
    marker: str
    source: str

    @property
    def shards(self) -> tuple[bool, bool, bool, bool]:
        """(weights, fp32 master, gradients, optimizer state): which the group divides."""
        return (self.shards_weights, self.shards_master, self.shards_grads, self.shards_state)

    @property
    def shards_update(self) -> bool:
        """Does a device step only its shard of the optimizer state (ZeRO's P_os, FSDP's sharded FlatParameter)?
        The per-update cost (simcli.step.update) is then the shard's: divided as the optimizer state is."""
        return self.shards_state


STRATEGY_SPECS: tuple[StrategySpec, ...] = (  # from the least to the most sharded memory
    StrategySpec(
        name="ddp",
        label="DDP",
        timeline="buckets",
        group="none",
        shards_weights=False,
        shards_master=False,
        shards_grads=False,
        shards_state=False,
        replicas=False,
        buffers="DDP buckets",
        summary="all-reduce in buckets during backward",
        marker="s",
        source="PyTorch DistributedDataParallel (torch/nn/parallel/distributed.py, reducer.cpp)",
    ),
    StrategySpec(
        name="zero1",
        label="ZeRO-1",
        timeline="zero",
        group="world",
        shards_weights=False,
        shards_master=True,
        shards_grads=False,
        shards_state=True,
        replicas=False,
        buffers="ZeRO buckets",
        summary="reduce-scatter + all-gather after the step; optimizer state sharded",
        marker="o",
        source="Rajbhandari et al. 2020 (ZeRO, P_os); DeepSpeed stage 1",
    ),
    StrategySpec(
        name="zero2",
        label="ZeRO-2",
        timeline="zero",
        group="world",
        shards_weights=False,
        shards_master=True,
        shards_grads=True,
        shards_state=True,
        replicas=False,
        buffers="ZeRO buckets",
        summary="as zero1, gradients sharded too",
        # zero1 and zero2 run the same collectives (they differ in memory only): distinct markers keep both visible
        marker="x",
        source="Rajbhandari et al. 2020 (ZeRO, P_os+g); DeepSpeed stage 2",
    ),
    StrategySpec(
        name="hsdp",
        label="HSDP",
        timeline="units",
        group="shard_group",
        shards_weights=True,
        shards_master=True,
        shards_grads=True,
        shards_state=True,
        replicas=True,
        buffers="FSDP buffers",
        summary="fsdp in a shard group, all-reduce across",
        marker="^",
        source="PyTorch FSDP HYBRID_SHARD (Zhao et al. 2023)",
    ),
    StrategySpec(
        name="fsdp",
        label="FSDP",
        timeline="units",
        group="world",
        shards_weights=True,
        shards_master=True,
        shards_grads=True,
        shards_state=True,
        replicas=False,
        buffers="FSDP buffers",
        summary="ZeRO-3: all-gathers per unit",
        marker="v",
        source="PyTorch FSDP FULL_SHARD (Zhao et al. 2023); ZeRO-3",
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


def shard_divisor(strategy: str, k: object, group: int | None, *, node_size: int | None) -> np.ndarray:
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


def update_divisor(strategy: str, k: object, group: int | None, *, node_size: int | None) -> np.ndarray:
    """Devices the optimizer step is divided over, per k (simcli.step.update): the optimizer state's divisor
    (:func:`shard_divisor`) where the row shards it (:attr:`StrategySpec.shards_update`), else 1 (ddp)."""
    if not SPECS[strategy].shards_update:
        return np.ones_like(np.asarray(k, dtype=np.int64))
    return shard_divisor(strategy, k, group, node_size=node_size)
