"""Speed of `simcli plan best`: 10^5 configurations priced jointly, as timings and ratios. Prints; asserts nothing.

1. plan_best.best over a grid of 5 strategies x 2,500 device counts x 8 micro-batches = 100,000 configurations
   (llama2-7b on dgx-h100, every count 1..2,500 with --partial-nodes' meaning; the global batch 2^20 samples, so
   that most (k, micro-batch) pairs do not divide it: every configuration is still priced, then dropped), against
   the issue's goal of 2 s.
2. The same grid against one simulate of every strategy over the 20,000 (k, micro-batch) points (the floor: the
   engine's own cost for the same points, with nothing of the search around it).
3. Per configuration, one `simulate` call for each (strategy, k, micro-batch), on a sample of 200, scaled to the
   grid: what a loop over configurations (a brute force over `simcli speedup`) would cost.

Usage: python benchmarks/bench_plan.py [--repeat N]
"""

from __future__ import annotations

import argparse

import numpy as np
from bench_engine import best_of as median_time  # the median of `repeat` runs, in s (run from benchmarks/)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from simcli.decisions import plan_best as PB
    from simcli.io.profiles import resolve_profile
    from simcli.io.workloads import build_workload
    from simcli.step.engine import Scenario, simulate

    sc = Scenario(profile=resolve_profile("dgx-h100"), workload=build_workload(model="llama2-7b"))
    strategies = ("ddp", "zero1", "zero2", "fsdp", "hsdp")
    k = np.arange(1, 2501)
    micro = tuple(range(1, 9))
    grid = PB.Grid(strategies=strategies, devices=k, micro_batches=micro, shard_groups=(1,))
    print(f"grid: {len(strategies)} strategies x {k.size} device counts x {len(micro)} micro-batches = {grid.size:,}")

    def search():
        return PB.best(sc, grid, global_batch=2**20, objective="time")

    ans = search()
    t_best = median_time(search, args.repeat)
    print(f"plan best: {grid.size:,} configurations in {t_best:.3f} s ({grid.size / t_best:,.0f} per s); goal < 2 s")
    print(
        f"  answer {ans.answer['strategy']} k={ans.answer['devices']} b={ans.answer['batch_per_device']}, "
        f"kept {ans.scanned - sum(ans.dropped.values()):,}, dropped {ans.dropped}"
    )

    kk = np.repeat(k, len(micro))
    bb = np.tile(np.asarray(micro), k.size)

    def floor():
        for s in strategies:
            simulate(sc.replace(strategy=s, shard_group=1), kk, micro_batch=bb)

    t_floor = median_time(floor, args.repeat)
    print(
        f"floor (simulate each strategy over the same {kk.size:,} points): {t_floor:.3f} s; "
        f"plan best / floor = {t_best / t_floor:.2f}"
    )

    rng = np.random.default_rng(0)
    sample = rng.integers(0, kk.size, 200)

    def loop():
        for i in sample:
            for s in strategies[:1]:
                simulate(sc.replace(strategy=s, batch_per_device=int(bb[i])), [int(kk[i])])

    t_loop = median_time(loop, 1) / sample.size * grid.size
    print(
        f"a loop of one simulate per configuration (200 sampled, ddp): ~{t_loop:.1f} s for the grid; "
        f"loop / plan best = {t_loop / t_best:.0f}x"
    )


if __name__ == "__main__":
    main()
