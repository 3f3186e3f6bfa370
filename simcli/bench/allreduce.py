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
* **the statistic** (``stat``, :data:`~simcli.io.measured.stats.STATS`) reported as
  ``time_s``: a low quantile (p10, the default) estimates the uncontended cost,
  since preemption only ever adds time; min, median and mean (nccl-tests'
  choice) are kept in their own columns.

A fourth makes the statistic reproducible from one run to the next:

* **adaptive repetition** (as ``torch.utils.benchmark``'s ``adaptive_autorange``
  repeats until the spread is small): ``iters`` is the minimum; after it, rounds
  of one iteration of every size whose statistic is not yet settled (its
  relative standard error, :func:`~simcli.io.measured.stats.relative_se`, above
  ``target_se``) are added, in a shuffled order, until every size has settled,
  has ``max_iters`` samples, or the world has measured for ``max_time``
  seconds. On the busy 2-core VM ten samples leave p10 ~15% apart between runs
  (one fast iteration more or less); a few hundred bring it to ~8%, and a
  quiet machine settles in the minimum. After every round the round's times
  (and the elapsed time) are reduced with MAX in one untimed all-reduce, so
  every rank holds the same times and takes the same decision.

With one round the sizes run in order (each settles in place before the next)
and each record is emitted as soon as its size is measured; with several,
every record is emitted after the last round (a run that dies then keeps the
worlds it finished).
"""

from __future__ import annotations

import random
import time
from typing import Sequence

from ..io.measured.stats import (
    DEFAULT_MAX_ITERS,
    DEFAULT_MAX_TIME,
    DEFAULT_STAT,
    DEFAULT_TARGET_SE,
    STATS,
    algbw_GBps,
    allreduce_busbw_factor,
    relative_se,
    summarize,
    unsettled,
)

__all__ = ["TORCH_DTYPES", "measure_allreduce", "auto_rounds", "round_plan", "extension_order"]

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


def round_plan(n_sizes: int, iters: int, rounds: int, *, seed: int = 0) -> list[list[tuple[int, int]]]:
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


def extension_order(todo: Sequence[int], round_index: int, seed: int = 0) -> list[int]:
    """The sizes of an added round (``todo``, from :func:`~simcli.io.measured.stats.unsettled`) in a shuffled order,
    seeded by ``seed`` and the round's index: pure, the same on every rank."""
    order = list(todo)
    random.Random(f"{seed}:{round_index}").shuffle(order)
    return order


def measure_allreduce(
    d,
    sizes: Sequence[int],
    dtype: str,
    *,
    warmup: int = 5,
    iters: int = 20,
    rounds: int | None = None,
    stat: str = DEFAULT_STAT,
    seed: int = 0,
    target_se: float = DEFAULT_TARGET_SE,
    max_iters: int | None = None,
    max_time: float = DEFAULT_MAX_TIME,
) -> None:
    import torch  # heavy
    import torch.distributed as dist  # heavy

    if stat not in STATS:
        raise ValueError(f"unknown statistic {stat!r}")
    name, esize = TORCH_DTYPES[dtype]
    tdtype = getattr(torch, name)
    counts = [max(1, int(n) // esize) for n in sizes]
    # zeros: a sum of zeros stays finite however many times it is reduced
    buf = torch.zeros(max(counts), dtype=tdtype, device=d.device)
    k = d.world_size
    rounds = auto_rounds(iters) if rounds is None else rounds
    cap = max(iters, DEFAULT_MAX_ITERS if max_iters is None else max_iters)
    plan = round_plan(len(counts), iters, rounds, seed=seed)
    # per size, every iteration's time, already the MAX over ranks (the same list on every rank)
    times: list[list[float]] = [[] for _ in counts]
    visited = [False] * len(counts)
    start = time.perf_counter()

    def visit(i: int, n_iter: int) -> list[float]:
        """``n_iter`` timed all-reduces of size ``i`` (warmed up at its first visit): this rank's times."""
        t = buf[: counts[i]]
        if not visited[i]:  # warm up per size, at its first visit
            d.checkpoint(i)
            for _ in range(warmup):
                dist.all_reduce(t)
            visited[i] = True
        d.sync()
        out = []
        for _ in range(n_iter):
            dist.barrier()
            d.sync()
            t0 = time.perf_counter()
            dist.all_reduce(t)
            d.sync()
            out.append(time.perf_counter() - t0)
        return out

    def gather(visits: Sequence[tuple[int, list[float]]]) -> float:
        """MAX over ranks of the visits' times (appended to ``times``) and of the elapsed seconds (returned):
        one untimed all-reduce, after which every rank holds the same numbers and so takes the same decisions."""
        flat = [x for _, ts in visits for x in ts] + [time.perf_counter() - start]
        tt = torch.tensor(flat, dtype=torch.float64, device=d.device)
        dist.all_reduce(tt, op=dist.ReduceOp.MAX)
        vals = tt.cpu().tolist()
        j = 0
        for i, ts in visits:
            times[i].extend(vals[j : j + len(ts)])
            j += len(ts)
        return float(vals[-1])

    def finish(i: int, n_rounds: int) -> None:
        if d.rank != 0:
            return
        per_iter = times[i]
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
                "iters": len(per_iter),
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
                "rounds": n_rounds,
                "time_median_s": s.median,
                "time_mean_s": s.mean,
                "noise": s.noise,
                "rse": relative_se(per_iter, stat),
                "target_se": target_se,
                "gpus_per_process": 1,  # torch.distributed: one process per device
                "times_s": per_iter,
            }
        )

    if len(plan) == 1:  # sizes in order: each size settles in place and is written as soon as it is done
        for i in range(len(counts)):
            elapsed = gather([(i, visit(i, iters))])
            while elapsed < max_time and unsettled([times[i]], stat, target_se, max_iters=cap):
                elapsed = gather([(i, visit(i, 1))])
            finish(i, 1)
        return
    elapsed = 0.0
    for visits in plan:
        elapsed = gather([(i, visit(i, n)) for i, n in visits if n > 0])
    n_rounds = len(plan)
    # adaptive repetition: rounds of one iteration of every unsettled size, shuffled, within the time budget
    while elapsed < max_time:
        todo = unsettled(times, stat, target_se, max_iters=cap)
        if not todo:
            break
        elapsed = gather([(i, visit(i, 1)) for i in extension_order(todo, n_rounds, seed)])
        n_rounds += 1
    for i in range(len(counts)):
        finish(i, n_rounds)
