"""Issue 12 part 3: adaptive repetition of bench allreduce (repeat until each size's statistic has settled).

Deterministic and fast: synthetic times only, no timing assertions. The loop itself runs against a fake
torch.distributed (one rank, MAX = identity) and a synthetic clock that each all_reduce advances.
"""

from __future__ import annotations

import math
import random
import types

import numpy as np
import pytest

from simcli.io.measured.stats import STATS, relative_se, summarize, unsettled

# --------------------------------------------------------------------------- relative_se, unsettled


def test_relative_se_of_constant_times_is_zero_and_of_one_sample_unknown():
    for stat in STATS:
        assert relative_se([2.0] * 10, stat) == 0.0
        assert relative_se([2.0], stat) == math.inf
    assert relative_se([], "p10") == math.inf
    assert relative_se([0.0, 0.0, 0.0], "p10") == math.inf  # a statistic of 0: nothing to be relative to
    with pytest.raises(ValueError):
        relative_se([1.0, 2.0], "p99")


def test_relative_se_of_the_mean_is_sd_over_sqrt_n():
    t = [1.0, 2.0, 3.0, 4.0]
    assert relative_se(t, "mean") == pytest.approx(np.std(t, ddof=1) / 2 / 2.5)


def test_relative_se_of_a_quantile_is_half_its_order_statistic_bracket():
    # n = 100, p10: Binomial(100, 0.1) has mean 10 and sd 3, so the bracket is the sorted samples 7 and 13
    t = np.arange(1, 101, dtype=float)  # sorted sample i is i + 1
    p10 = summarize(t).p10
    assert relative_se(t[::-1], "p10") == pytest.approx((14.0 - 8.0) / 2 / p10)  # order of input irrelevant
    # the median: 50 +- 5 -> samples 45 and 55
    assert relative_se(t, "median") == pytest.approx((56.0 - 46.0) / 2 / 50.5)
    # the minimum: the 1st to the 3rd smallest
    assert relative_se(t, "min") == pytest.approx((3.0 - 1.0) / 2 / 1.0)


def test_relative_se_shrinks_with_more_samples_of_a_busy_machine():
    # a busy machine: 15% of the iterations uncontended near 1 ms, the rest preempted (2-6 ms)
    rng = np.random.default_rng(0)
    busy = np.where(rng.random(4000) < 0.15, rng.normal(1.0, 0.02, 4000), rng.uniform(2.0, 6.0, 4000))
    se = [relative_se(busy[:n], "p10") for n in (10, 100, 1000, 4000)]
    assert se[0] > 0.03 > se[-1]  # ten samples are not settled at 3%; a few thousand are
    assert se == sorted(se, reverse=True)


def test_a_quantile_between_two_modes_stays_unsettled():
    # 10% fast iterations: p10 sits between the modes, and the bracket spans both
    t = [1.0] * 10 + [5.0] * 90
    assert relative_se(t, "p10") > 0.4
    assert relative_se([1.0] * 50 + [5.0] * 50, "p10") == 0.0  # half fast: p10 is well inside the fast mode


def test_unsettled_names_the_sizes_above_target_below_the_cap():
    settled, noisy, capped = [1.0] * 10, [1.0] + [3.0] * 9, [1.0, 1.0] + [3.0] * 18
    assert unsettled([settled, noisy, capped], "p10", 0.03, max_iters=20) == [1]
    assert unsettled([settled, noisy, capped], "p10", 0.0, max_iters=20) == [1]  # 0: until the cap (or time)
    assert unsettled([settled, noisy], "p10", 10.0, max_iters=20) == []


def test_extension_order_is_a_seeded_shuffle_the_same_on_every_rank():
    from simcli.bench.allreduce import extension_order

    todo = list(range(8))
    a = extension_order(todo, 10, seed=0)
    assert sorted(a) == todo and a == extension_order(todo, 10, seed=0)
    assert len({tuple(extension_order(todo, r, seed=0)) for r in range(10, 20)}) > 1
    assert extension_order([], 3) == []


# --------------------------------------------------------------------------- the loop, on a fake world


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def _fake_world(monkeypatch, durations):
    """A one-rank world whose all_reduce of a tensor of n elements takes durations[n]() seconds."""
    import torch
    import torch.distributed as dist

    import simcli.bench.allreduce as ar

    clock = _Clock()
    monkeypatch.setattr(ar, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))

    def all_reduce(t, op=None):
        if t.dtype == torch.float64:  # the untimed reduction of the times: one rank, MAX is the identity
            return
        clock.now += durations[t.numel()]()

    monkeypatch.setattr(dist, "all_reduce", all_reduce)
    monkeypatch.setattr(dist, "barrier", lambda: None)
    records: list[dict] = []
    d = types.SimpleNamespace(
        rank=0,
        world_size=1,
        backend="gloo",
        device=torch.device("cpu"),
        emit=records.append,
        checkpoint=lambda i: None,
        sync=lambda: None,
    )
    return d, records, clock


@pytest.mark.parametrize("rounds", [None, 1])
def test_a_quiet_size_keeps_the_minimum_and_a_busy_one_gets_more(monkeypatch, rounds):
    pytest.importorskip("torch")
    from simcli.bench.allreduce import measure_allreduce

    rng = random.Random(0)
    quiet = lambda: 1e-3  # noqa: E731
    busy = lambda: 1e-3 if rng.random() < 0.3 else rng.uniform(2e-3, 6e-3)  # noqa: E731
    d, recs, _ = _fake_world(monkeypatch, {256: quiet, 1024: busy})
    measure_allreduce(d, [1024, 4096], "fp32", iters=10, rounds=rounds, warmup=0, max_iters=300, max_time=1e9)
    by = {r["bytes"]: r for r in recs}
    # settled in the minimum: no extra rounds
    assert by[1024]["iters"] == 10 and by[1024]["rse"] == pytest.approx(0.0, abs=1e-9)
    assert 10 < by[4096]["iters"] <= 300
    assert by[4096]["iters"] == 300 or by[4096]["rse"] <= 0.03
    for r in recs:
        assert r["iters"] == len(r["times_s"]) and r["target_se"] == 0.03
        assert r["time_s"] == pytest.approx(float(np.percentile(r["times_s"], 10)))
    if rounds is None:  # interleaved: the rounds column counts the added rounds too
        assert by[4096]["rounds"] == by[4096]["iters"]


def test_the_time_budget_stops_the_added_rounds(monkeypatch):
    pytest.importorskip("torch")
    from simcli.bench.allreduce import measure_allreduce

    flip = iter(range(10**6))
    bimodal = lambda: 1e-3 if next(flip) % 10 == 0 else 5e-3  # noqa: E731  (p10 between the modes: never settles)
    d, recs, clock = _fake_world(monkeypatch, {256: bimodal})
    measure_allreduce(d, [1024], "fp32", iters=10, warmup=0, max_iters=10**6, max_time=1.0)
    (r,) = recs
    assert r["iters"] > 10 and r["rse"] > 0.03
    # it stops at the first round that ends past the budget: at most one iteration (<= 5 ms) beyond it
    assert 1.0 <= clock.now <= 1.0 + 5e-3 + 1e-12


def test_max_iters_equal_to_iters_is_the_fixed_count(monkeypatch):
    pytest.importorskip("torch")
    from simcli.bench.allreduce import measure_allreduce

    rng = random.Random(1)
    d, recs, _ = _fake_world(monkeypatch, {256: lambda: rng.uniform(1e-3, 9e-3)})
    measure_allreduce(d, [1024], "fp32", iters=7, warmup=0, max_iters=7)
    assert recs[0]["iters"] == 7 and recs[0]["rounds"] == 7


# --------------------------------------------------------------------------- bad input, before any rank starts


@pytest.mark.parametrize(
    "args, message",
    [
        (["--target-se", "abc"], "--target-se: 'abc' is not a fraction or a percentage"),
        (["--target-se", "-1%"], "--target-se: '-1%' must be 0 or more"),
        (["--target-se", "nan"], "--target-se: 'nan' must be 0 or more"),
        (["--iters", "20", "--max-iters", "10"], "--max-iters: 10 is below --iters 20"),
    ],
)
def test_bad_adaptive_options_are_one_line_and_exit_2(runner, args, message):
    from simcli.cli.app import app

    r = runner.invoke(app, ["bench", "allreduce", "-k", "2", *args])
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and message in lines[0], r.output
