"""The all_reduce timing loop, run by every rank (imports torch).

Timing as nccl-tests and torch.utils.benchmark do it: untimed warm-up calls,
then for each timed iteration a barrier, a device synchronisation, the timed
``all_reduce`` and another synchronisation. The per-iteration times of all
ranks are reduced with MAX (a collective ends when its last rank ends).

On a busy machine (issue 12: one iteration's time swings 5x on a shared
2-core VM) three things keep a slow phase of the machine from landing on one
size:

* **rounds**: the ``iters`` iterations of each size are split over ``rounds``
  rounds (default ``iters``: one iteration of each size per round); in every
  round the sizes run in a shuffled order (the same order on
  every rank: a seeded generator), so a noisy minute is spread over all sizes;
* **warm-up per size**: the first visit of each size starts with ``warmup``
  untimed calls of that size, so the first size of a world no longer pays the
  world's start-up alone (a re-warm at later visits made no measurable
  difference, so there is none);
* **the statistic** (``stat``, :data:`~simcli.bench.stats.STATS`) reported as
  ``time_s``: a low quantile (p10, the default) estimates the uncontended cost,
  since preemption only ever adds time; min, median and mean (nccl-tests'
  choice) are kept in their own columns.

With one round the sizes run in order and each record is emitted as soon as
its size is measured; with several, every record is emitted after the last
round (a run that dies then keeps the worlds it finished).
"""

from __future__ import annotations

import random
import time
from typing import Sequence

from .stats import DEFAULT_STAT, STATS, algbw_GBps, allreduce_busbw_factor, summarize

__all__ = ["TORCH_DTYPES", "measure_allreduce", "auto_rounds", "round_plan"]

#: simcli dtype name -> (torch dtype attribute, bytes per element)
TORCH_DTYPES = {
    "fp32": ("float32", 4),
    "fp64": ("float64", 8),
    "fp16": ("float16", 2),
    "bf16": ("bfloat16", 2),
    "int32": ("int32", 4),
    "int64": ("int64", 8),
    "int8": ("int8", 1),
    "uint8": ("uint8", 1),
}


def auto_rounds(iters: int) -> int:
    """The default number of rounds: ``iters``, one timed iteration of every size per round.

    Measured (validation/cpu-loopback/README.md, busy machine): calibrate-on-one-run, validate-on-another
    reached a median error of 38% with one round (sizes in order, the median), 19-24% with 2 rounds and
    15% with ``iters`` rounds and p10 or min, over 156 pairs of 14 runs.
    """
    return max(1, iters)


def round_plan(n_sizes: int, iters: int, rounds: int, seed: int = 0) -> list[list[tuple[int, int]]]:
    """Per round, the (size index, timed iterations) visits in their order: shuffled unless one round.

    Every size gets ``iters`` iterations in all (the first ``iters % rounds`` rounds get one more each);
    a round whose share is 0 is skipped. Pure: the same on every rank.
    """
    rounds = max(1, min(rounds, iters))
    base, extra = divmod(iters, rounds)
    plan = []
    rng = random.Random(seed)
    for r in range(rounds):
        order = list(range(n_sizes))
        if rounds > 1:
            rng.shuffle(order)
        plan.append([(i, base + (1 if r < extra else 0)) for i in order])
    return plan


def measure_allreduce(
    d,
    sizes: Sequence[int],
    dtype: str = "fp32",
    warmup: int = 5,
    iters: int = 20,
    rounds: int | None = None,
    stat: str = DEFAULT_STAT,
    seed: int = 0,
) -> None:
    import torch
    import torch.distributed as dist

    if stat not in STATS:
        raise ValueError(f"unknown statistic {stat!r}")
    name, esize = TORCH_DTYPES[dtype]
    tdtype = getattr(torch, name)
    counts = [max(1, int(n) // esize) for n in sizes]
    # zeros: a sum of zeros stays finite however many times it is reduced
    buf = torch.zeros(max(counts), dtype=tdtype, device=d.device)
    k = d.world_size
    rounds = auto_rounds(iters) if rounds is None else rounds
    plan = round_plan(len(counts), iters, rounds, seed)
    times: list[list[float]] = [[] for _ in counts]
    visited = [False] * len(counts)

    def finish(i: int) -> None:
        tt = torch.tensor(times[i], dtype=torch.float64, device=d.device)
        dist.all_reduce(tt, op=dist.ReduceOp.MAX)
        if d.rank == 0:
            per_iter = tt.cpu().tolist()
            s = summarize(per_iter)
            nbytes = counts[i] * esize
            t = s.stat(stat)
            alg = algbw_GBps(nbytes, t)
            d.emit(
                {
                    "collective": "all_reduce",
                    "backend": d.backend,
                    "world_size": k,
                    "bytes": nbytes,
                    "count": counts[i],
                    "dtype": dtype,
                    "iters": iters,
                    "warmup": warmup,
                    "time_s": t,
                    "time_p10_s": s.p10,
                    "time_p90_s": s.p90,
                    "time_min_s": s.min,
                    "time_max_s": s.max,
                    "algbw_GBps": alg,
                    "busbw_GBps": alg * allreduce_busbw_factor(k),
                    "spread": s.spread,
                    "source": "simcli bench allreduce",
                    "stat": stat,
                    "rounds": len(plan),
                    "time_median_s": s.median,
                    "time_mean_s": s.mean,
                    "noise": s.noise,
                    "times_s": per_iter,
                }
            )

    for r, visits in enumerate(plan):
        for i, n_iter in visits:
            if n_iter == 0:
                continue
            if not visited[i]:
                d.checkpoint(i)
            t = buf[: counts[i]]
            if not visited[i]:  # warm up per size, at its first visit
                for _ in range(warmup):
                    dist.all_reduce(t)
                visited[i] = True
            d.sync()
            for _ in range(n_iter):
                dist.barrier()
                d.sync()
                t0 = time.perf_counter()
                dist.all_reduce(t)
                d.sync()
                times[i].append(time.perf_counter() - t0)
            if len(plan) == 1:
                finish(i)
    if len(plan) > 1:
        for i in range(len(counts)):
            finish(i)
