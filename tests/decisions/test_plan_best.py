"""`simcli plan best` (simcli.decisions.plan_best): held against a brute force over `simcli speedup`, the frontier,
the drop reasons, the global batch's syntax, and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from simcli.base.types import InputError
from simcli.cli.app import app
from simcli.decisions import plan_best as PB
from simcli.decisions.plan import Infeasible
from simcli.io.profiles import resolve_profile
from simcli.io.workloads import build_workload
from simcli.step.engine import Scenario, accumulated, simulate

STRATEGIES = ("ddp", "zero1", "zero2", "fsdp", "hsdp")
BASE = ["-m", "llama2-7b", "-p", "dgx-h100"]


@pytest.fixture(scope="module")
def runner():
    return CliRunner()


def invoke(runner, *args):
    r = runner.invoke(app, [str(a) for a in args])
    return r


def _speedup(runner, k, b, accum):
    """Every strategy at one (k, micro-batch, accumulation), through `simcli speedup`'s JSON."""
    r = invoke(
        runner, "speedup", *BASE, "-k", k, "-b", b, "--accum", accum, "--strategy", ",".join(STRATEGIES), "-f", "json"
    )
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def brute(runner):
    """Every (strategy, k, micro-batch) of the issue's grid that keeps the global batch 512, from speedup."""
    rows = []
    for k in (64, 256, 1024):
        for b in (1, 2, 4, 8):
            if 512 % (k * b):
                continue
            for rec in _speedup(runner, k, b, 512 // (k * b)):
                rows.append({**rec, "b": b, "fits": rec["memory_bytes"] <= 80e9})
    return rows


@pytest.mark.parametrize("objective", ["time", "cost"])
def test_plan_best_beats_a_brute_force_over_speedup(runner, brute, objective):
    """Nothing that fits is faster (time) or cheaper (cost) than the answer; speedup reproduces its samples/s."""
    r = invoke(
        runner, "plan", "best", *BASE, "--global-batch", 512, "--devices", "64,256,1024", "-b", "1,2,4,8",
        "--strategy", ",".join(STRATEGIES), "--objective", objective, "-f", "json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    a = out["answer"]
    fitting = [x for x in brute if x["fits"]]
    assert fitting and len(brute) > len(fitting)  # ddp does not fit: the memory check matters here
    if objective == "time":
        assert max(x["samples_per_s"] for x in fitting) <= a["samples_per_s"] * (1 + 1e-9)
    else:
        cheapest = min(x["devices"] / x["samples_per_s"] for x in fitting)
        assert a["devices"] / a["samples_per_s"] <= cheapest * (1 + 1e-9)
    # the answer's own configuration, run by speedup
    recs = _speedup(runner, a["devices"], a["batch_per_device"], a["accum"])
    rec = next(x for x in recs if x["strategy"] == a["strategy"])
    assert rec["samples_per_s"] == pytest.approx(a["samples_per_s"], rel=5e-3)
    assert rec["memory_bytes"] == pytest.approx(a["memory_bytes"], rel=1e-9)
    assert a["accum"] * a["devices"] * a["batch_per_device"] == 512
    assert out["dropped"]["global_batch"] > 0 and out["dropped"]["memory"] > 0
    assert out["scanned"] == 5 * 3 * 4 and out["kept"] == len(fitting)
    assert out["runner_up"] is not None and out["why"] and out["limited_by"]


def _scenario(**kw):
    return Scenario(profile=resolve_profile("dgx-h100"), workload=build_workload(model="llama2-7b"), **kw)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_accumulated_is_the_engine_s_rule(strategy):
    """engine.accumulated re-times an accum-1 result for m micro-steps exactly as simulate(accum=m) does."""
    k = np.array([8, 64, 512])
    one = simulate(_scenario(strategy=strategy, batch_per_device=2), k)
    for m in (1, 3, 8):
        t, e = accumulated(one, np.full(k.shape, m))
        ref = simulate(_scenario(strategy=strategy, batch_per_device=2, accum=m), k)
        assert np.allclose(t, ref.t_step_s, rtol=1e-12) and np.allclose(e, ref.efficiency, rtol=1e-12)


def test_simulate_prices_a_micro_batch_grid_in_one_call():
    k = np.array([8, 8, 64, 64])
    b = np.array([1, 4, 1, 4])
    grid = simulate(_scenario(strategy="fsdp"), k, micro_batch=b)
    for i in range(4):
        one = simulate(_scenario(strategy="fsdp", batch_per_device=int(b[i])), [int(k[i])])
        assert grid.t_step_s[i] == pytest.approx(one.t_step_s[0], rel=1e-12)
        assert grid.memory.total[i] == pytest.approx(one.memory.total[0], rel=1e-12)
        assert grid.efficiency[i] == pytest.approx(one.efficiency[0], rel=1e-12)


def test_frontier_is_the_pareto_set():
    grid = PB.Grid(strategies=STRATEGIES, devices=np.array([8, 16, 32, 64, 128, 256]), micro_batches=(1, 2, 4))
    ans = PB.best(_scenario(), grid, global_batch=256, objective="time")
    t = ans.table
    ok = t["reason"] == ""
    time, cost = t["t_step_s"][ok], (t["devices"] * t["t_step_s"])[ok]
    for r in ans.frontier:
        rt, rc = r["t_step_s"], r["devices"] * r["t_step_s"]
        assert not np.any((time < rt * (1 - 1e-12)) & (cost < rc * (1 - 1e-12)))  # nothing dominates it
    ts = [r["t_step_s"] for r in ans.frontier]
    assert ts == sorted(ts)  # fastest first, and each one cheaper than the last
    cs = [r["devices"] * r["t_step_s"] for r in ans.frontier]
    assert cs == sorted(cs, reverse=True)
    assert ans.answer["t_step_s"] == pytest.approx(min(time))


def test_constraints_drop_and_are_counted():
    grid = PB.Grid(strategies=("fsdp",), devices=np.array([64, 128, 256, 512]), micro_batches=(1, 2))
    free = PB.best(_scenario(), grid, global_batch=512, tokens=2e11, price=2.5)
    days = free.answer["days"]
    capped = PB.best(_scenario(), grid, global_batch=512, tokens=2e11, price=2.5, max_days=days * 1.5)
    assert capped.answer["days"] <= days * 1.5
    cheap = PB.best(_scenario(), grid, global_batch=512, tokens=2e11, price=2.5, objective="cost")
    over = PB.best(
        _scenario(),
        grid,
        global_batch=512,
        tokens=2e11,
        price=2.5,
        objective="cost",
        max_days=cheap.answer["days"] * 0.99,
    )
    assert over.answer["cost"] > cheap.answer["cost"]
    assert over.dropped["max_days"] >= 1 and over.limited_by == "constraint" and "--max-days" in over.why
    with pytest.raises(Infeasible, match="no configuration"):
        PB.best(_scenario(), grid, global_batch=512, tokens=2e11, price=2.5, budget=1.0)
    e = PB.best(_scenario(), grid, global_batch=512, min_efficiency=0.95)
    assert all(r["efficiency"] >= 0.95 for r in e.frontier)


@pytest.mark.parametrize(
    "text, samples, unit",
    [("512", 512, "samples"), ("4Mi-tokens", 1024, "tokens"), ("4M tokens", None, None), ("8192 tokens", 2, "tokens")],
)
def test_global_batch_syntax(text, samples, unit):
    if samples is None:  # 4e6 tokens is not a whole number of 4096-token sequences
        with pytest.raises(InputError, match="not a whole number of 4096-token sequences"):
            PB.parse_global_batch(text, 4096)
        return
    assert PB.parse_global_batch(text, 4096) == (samples, unit)


@pytest.mark.parametrize(
    "kw,message",
    [
        ({"objective": "speed"}, "--objective: 'speed'; choose one of"),
        ({"samples": -1.0}, "--samples: -1.0 must be a positive number"),
        ({"tokens": float("inf")}, "--tokens: inf must be a positive number"),
        ({"price": 0}, "--price-per-device-hour: 0 must be a positive number"),
        ({"samples": 1e6, "tokens": 4e9}, "--samples and --tokens exclude each other"),
        ({"min_efficiency": 1.5}, "--min-efficiency: 1.5 is not in (0, 1]"),
        ({"max_days": 3.0}, "--max-days needs the run's length: give --tokens or --samples"),
        ({"budget": 10.0, "samples": 1e6}, "--budget needs --price-per-device-hour and the run's length"),
        ({"global_batch": 0}, "--global-batch: 0 must be at least 1 and at most 2**53"),
        # the objective first, then the positive numbers, then how the options go together
        ({"objective": "speed", "samples": -1.0}, "--objective"),
        ({"budget": -1.0, "max_days": 3.0}, "--budget: -1.0 must be a positive number"),
        ({"min_efficiency": 0.0, "max_days": 3.0}, "--min-efficiency"),
    ],
)
def test_best_names_the_bad_option(kw, message):
    grid = PB.Grid(strategies=("ddp",), devices=np.array([8]), micro_batches=(1,))
    kw = {"global_batch": 64, **kw}
    with pytest.raises(InputError) as e:
        PB.best(_scenario(), grid, **kw)
    assert str(e.value).startswith(message)


def test_best_reads_the_run_s_length_from_tokens():
    grid = PB.Grid(strategies=("fsdp",), devices=np.array([64]), micro_batches=(1,))
    seq = _scenario().workload.seq_len
    by_tokens = PB.best(_scenario(), grid, global_batch=64, tokens=seq * 64 * 100, price=2.0)
    by_samples = PB.best(_scenario(), grid, global_batch=64, samples=64 * 100, price=2.0)
    assert by_tokens.answer["days"] == pytest.approx(by_samples.answer["days"], rel=1e-12)
    assert by_tokens.answer["days"] == pytest.approx(100 * by_tokens.answer["t_step_s"] / 86400, rel=1e-12)


def test_bad_input_is_one_line_exit_2(runner):
    r = invoke(runner, "plan", "best", *BASE, "--global-batch", "lots")
    assert r.exit_code == 2 and "--global-batch" in r.stderr and "Traceback" not in r.output
    r = invoke(runner, "plan", "best", *BASE, "--global-batch", 512, "--budget", 10)
    assert r.exit_code == 2 and "--budget needs --price-per-device-hour" in r.stderr
    r = invoke(runner, "plan", "best", *BASE, "--global-batch", 512, "--strategy", "fsdq")
    assert r.exit_code == 2 and "did you mean fsdp" in r.stderr
    r = invoke(runner, "plan", "best", *BASE, "--global-batch", 4, "--devices", "64", "--strategy", "fsdp")
    assert r.exit_code == 1 and "cannot keep the global batch" in r.stderr


def test_table_csv_and_picture(runner, tmp_path):
    args = ["plan", "best", *BASE, "--global-batch", "4Mi-tokens", "--tokens", "2e12", "--devices", "64..512:x2"]
    r = invoke(runner, *args, "--price-per-device-hour", 2.5, "--objective", "cost", "--plot", tmp_path / "f.png")
    assert r.exit_code == 0, r.output
    assert "answer    " in r.stdout and "why       limited by" in r.stdout and "runner-up" in r.stdout
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = invoke(runner, *args, "-f", "csv")
    head, *rows = r.stdout.strip().splitlines()
    assert "answer" in head.split(",") and sum(x.endswith("True") for x in rows) == 1


def test_whole_nodes_by_default(runner):
    """Past one node plan best scans whole nodes; --partial-nodes scans every count."""
    args = ["plan", "best", *BASE, "--global-batch", 720, "--devices", "8..12", "-b", 1, "--strategy", "fsdp"]
    out = json.loads(invoke(runner, *args, "-f", "json").stdout)
    assert out["scanned"] == 1 and out["answer"]["devices"] == 8
    part = json.loads(invoke(runner, *args, "--partial-nodes", "-f", "json").stdout)
    assert part["scanned"] == 5


def test_max_devices_in_whole_nodes_equals_a_brute_force(runner):
    """The issue's question: whole nodes past the first, and the answer a brute force over 1..8 and 8·n gives."""
    args = ["plan", "max-devices", "--min-efficiency", 0.9, *BASE, "--strategy", "fsdp", "--devices", "1..2048"]
    r = invoke(runner, *args, "-f", "json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    k = np.concatenate([np.arange(1, 9), np.arange(16, 2049, 8)])
    e = simulate(_scenario(strategy="fsdp"), k).efficiency
    first_below = int(np.flatnonzero(e < 0.9)[0])
    assert out["answer"] == int(k[first_below - 1]) and out["answer"] % 8 == 0 and out["answer"] > 8
    assert out["scanned"]["count"] == k.size
    part = json.loads(invoke(runner, *args, "--partial-nodes", "-f", "json").stdout)
    assert part["answer"] == 8  # a 9th device alone on a second node falls below 0.9
