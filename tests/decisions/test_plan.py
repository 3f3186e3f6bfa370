"""`simcli plan`: max devices against a brute-force scan, solved fields put back into the profile, time to train,
the memory check, and infeasible questions that exit 1 with a reason."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcli.base.types import InputError, Tier, Workload
from simcli.decisions import plan as P
from simcli.decisions import solve as S
from simcli.step.engine import Scenario, simulate

from conftest import make_profile, run

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def wl(params: float = 1e9, flops: float = 6e9 * 1024, batch: int = 8, seq_len: int | None = 1024) -> Workload:
    return Workload(name="w", params=params, flops_per_sample=flops, batch_per_device=batch, seq_len=seq_len)


def scenario(profile, **kw) -> Scenario:
    return Scenario(profile=profile, workload=kw.pop("workload", wl()), **kw)


@pytest.fixture
def prof(h100_prof):
    return h100_prof


profiles = st.builds(
    lambda node, bw0, bw1, lat0, lat1, per: make_profile(
        Tier("nvlink", bw0, lat0, size=node), Tier("net", bw1, lat1, per=per)
    ),
    st.sampled_from([2, 4, 8]),
    st.floats(50e9, 900e9),
    st.floats(1e9, 100e9),
    st.floats(1e-6, 1e-5),
    st.floats(2e-6, 1e-4),
    st.sampled_from(["device", "node"]),
)


# --------------------------------------------------------------------------- --max-devices


@FAST
@given(p=profiles, target=st.floats(0.3, 0.99), batch=st.integers(1, 64), strong=st.booleans())
def test_max_devices_agrees_with_brute_force_scan(p, target, batch, strong):
    sc = scenario(p, global_batch=batch * 64) if strong else scenario(p, batch_per_device=batch)
    k = np.arange(1, 513)
    ans = P.max_devices(sc, k, target=target)
    eff = simulate(sc, k).efficiency
    meets = eff >= target
    first = int(np.flatnonzero(meets)[0])
    # the largest k before E first falls below the target (issue 12), not the last k that meets it
    last = first + (int(np.flatnonzero(~meets[first:])[0]) - 1 if (~meets[first:]).any() else len(k) - 1 - first)
    assert ans.answer == int(k[last])
    later = [int(x) for x in k[last + 1 :][meets[last + 1 :]]]
    assert sorted({x for a, z in ans.recoveries for x in range(a, z + 1)}) == later
    # every crossing is a change of side in the brute-force scan, and every change is reported
    changes = [int(k[i]) for i in range(1, len(k)) if (eff[i] >= target) != (eff[i - 1] >= target)]
    assert [c.devices for c in ans.crossings] == changes
    assert ans.limited_by == ("range" if ans.answer == 512 else "target")


def test_max_devices_reports_every_crossing_when_efficiency_is_not_monotonic(two_tier):
    # k = 9 reaches the inter-node tier through one 25 GB/s link, k = 16 through eight: E dips and recovers
    sc = scenario(two_tier, batch_per_device=1, workload=wl(params=2e9))
    k = np.arange(1, 65)
    eff = simulate(sc, k).efficiency
    target = float((eff[8] + eff[15]) / 2)  # between E(9) and E(16)
    ans = P.max_devices(sc, k, target=target)
    assert len(ans.crossings) > 2
    assert ans.crossings[0].direction == "falls below" and ans.crossings[1].direction == "rises to"
    # the answer is the k before the first dip; the recovery after it is listed, not taken as the answer
    assert ans.answer == ans.crossings[0].previous
    assert ans.recoveries and ans.recoveries[0][0] == ans.crossings[1].devices
    assert "back at or above it later" in ans.reason()


def test_max_devices_infeasible_and_bad_target(two_tier):
    sc = scenario(two_tier, batch_per_device=1)
    with pytest.raises(P.Infeasible, match="no k from 9 to 64 reaches efficiency 0.999.*include it"):
        P.max_devices(sc, np.arange(9, 65), target=0.999)
    for bad in (0, 1.5, float("nan"), None):
        with pytest.raises(InputError, match="--min-efficiency"):
            P.max_devices(sc, np.arange(1, 9), target=bad)


# --------------------------------------------------------------------------- --solve


def eff_at(sc: Scenario, ref: S.FieldRef, value: float, k: int) -> float:
    return float(simulate(ref.apply(sc, value), [k]).efficiency[0])


@FAST
@given(
    p=profiles,
    target=st.floats(0.5, 0.97),
    k=st.sampled_from([16, 24, 64, 256]),
    path=st.sampled_from(
        ["network[1].bandwidth", "inter_node.bandwidth", "net.bandwidth", "network[1].efficiency", "inter_node.latency"]
    ),
)
def test_solved_value_put_back_gives_the_target(p, target, k, path):
    sc = scenario(p, batch_per_device=4)
    try:
        s = S.solve_field(sc, devices=k, target=target, path=path)
    except P.Infeasible:
        # then not even the best end of the interval reaches it
        ref = S.field_ref(sc, path)
        best = 1.0 if ref.kind == "fraction" else (ref.get(sc) * (1e12 if ref.kind == "bandwidth" else 1e-12))
        assert eff_at(sc, ref, best, k) < target
        return
    assert s.field.path.startswith("network[1].")
    e = eff_at(sc, s.field, s.answer, k)
    assert e >= target and e == pytest.approx(target, abs=1e-4)
    if not s.at_limit:
        # one tolerance step towards the infeasible side misses the target
        step = 1 - 2 * s.rtol if s.bound == "minimum" else 1 + 2 * s.rtol
        assert eff_at(sc, s.field, s.answer * step, k) < target
    assert s.bound == ("maximum" if path.endswith("latency") else "minimum")


def test_solve_mfu_overrides_the_mfu_option(two_tier):
    sc = scenario(two_tier, batch_per_device=4, mfu=0.3)
    s = S.solve_field(sc, devices=64, target=0.9, path="device.mfu")
    assert s.current == 0.3 and s.bound == "maximum"
    assert eff_at(sc, s.field, s.answer, 64) == pytest.approx(0.9, abs=1e-5)
    peak = S.solve_field(sc, devices=64, target=0.9, path="device.peak_flops")  # the compute dtype's peak
    assert peak.field.path == "device.peak_flops.bf16" and peak.bound == "maximum"


def test_solve_infeasible_questions_say_why(two_tier):
    sc = scenario(two_tier, batch_per_device=4)
    with pytest.raises(P.Infeasible, match=r"does not depend on it \(a ring over 8 devices stays inside"):
        S.solve_field(sc, devices=8, target=0.9999, path="inter_node.bandwidth")
    slow = make_profile(Tier("nvlink", 100e9, 5e-6, size=8), Tier("ib", 25e9, 5e-3))  # 5 ms per step
    with pytest.raises(P.Infeasible, match="latency terms"):
        S.solve_field(scenario(slow, batch_per_device=4), devices=256, target=0.9, path="inter_node.bandwidth")
    s = S.solve_field(sc, devices=8, target=0.5, path="inter_node.bandwidth")  # no effect, target already met
    assert s.bound == "any" and s.answer is None


@pytest.mark.parametrize(
    "path, fragment",
    [
        ("network[5].bandwidth", "has 2 tier(s)"),
        ("network[0].size", "not a quantity to solve for"),
        ("network[1].speed", "numeric fields are bandwidth, latency, efficiency"),
        ("device.reduce_bandwidth", "gives no device.reduce_bandwidth"),
        ("device.peak_flops.fp8", "gives no peak for 'fp8'"),
        ("warp.bandwidth", "no such tier or field"),
        ("", "not a numeric profile field"),
    ],
)
def test_field_paths_refused(two_tier, path, fragment):
    with pytest.raises(InputError, match=None) as e:
        S.field_ref(scenario(two_tier), path)
    assert fragment in str(e.value) and str(e.value).startswith("FIELD:")


def test_field_aliases_resolve(two_tier, one_tier):
    sc = scenario(two_tier)
    assert S.field_ref(sc, "inter_node.bandwidth").path == "network[1].bandwidth"
    assert S.field_ref(sc, "intra_node.latency").path == "network[0].latency"
    assert S.field_ref(sc, "ib.efficiency").path == "network[1].efficiency"
    assert S.field_ref(sc, "network[-1].latency").path == "network[1].latency"
    with pytest.raises(InputError, match="no inter-node tier"):
        S.field_ref(scenario(one_tier), "inter_node.bandwidth")


# --------------------------------------------------------------------------- --time-to-train


def test_time_to_train_by_hand_and_picks(two_tier):
    sc = scenario(two_tier, batch_per_device=8)
    k = np.array([1, 8, 64, 512])
    samples = 1e6
    tp = P.time_to_train(sc, k, samples=samples, price=2.0)
    res = simulate(sc, k)
    for row, kk, t in zip(tp.rows, k, res.t_step_s):
        steps = math.ceil(samples / (kk * 8))
        assert row["time_s"] == pytest.approx(steps * t)
        assert row["cost"] == pytest.approx(kk * steps * t / 3600 * 2.0)
    costs = [r["cost"] for r in tp.rows]
    times = [r["time_s"] for r in tp.rows]
    assert tp.cheapest["devices"] == int(k[int(np.argmin(costs))])
    assert tp.fastest["devices"] == int(k[int(np.argmin(times))])
    # budgets: the fastest within a cost cap
    cap = sorted(costs)[1]
    tp2 = P.time_to_train(sc, k, samples=samples, price=2.0, max_cost=cap)
    ok = [r for r in tp.rows if r["cost"] <= cap]
    assert tp2.fastest["devices"] == min(ok, key=lambda r: r["time_s"])["devices"]


def test_time_to_train_infeasible_and_bad_input(two_tier):
    sc = scenario(two_tier, batch_per_device=8)
    with pytest.raises(P.Infeasible, match="the fastest, k=64, takes .* > --max-hours"):
        P.time_to_train(sc, np.array([8, 64]), samples=1e12, max_hours=1)
    with pytest.raises(InputError, match="--max-cost needs --price-per-device-hour"):
        P.time_to_train(sc, np.array([8]), samples=1e6, max_cost=5)
    with pytest.raises(InputError, match="must be a positive number"):
        P.time_to_train(sc, np.array([8]), samples=-1.0)
    assert P.samples_from_tokens(wl(seq_len=2048), 2048e3) == 1000
    with pytest.raises(InputError, match="--tokens: w has no sequence length"):
        P.samples_from_tokens(wl(seq_len=None), 1e9)


# --------------------------------------------------------------------------- memory


@pytest.mark.parametrize("param_dtype, per_param", [("bf16", 22), ("fp32", 20)])
def test_memory_check_reads_the_one_memory_model(two_tier, param_dtype, per_param):
    """ddp with the scenario's optimizer (adamw: 8 B of state): weights + fp32 master (16-bit weights only) + fp32
    gradients + 8 + DDP's bucket copy; the state follows the scenario's --optimizer (sgd: none)."""
    sc = scenario(two_tier, param_dtype=param_dtype, workload=wl(params=7e9))
    m = P.training_memory(sc, [8])
    assert m.to_dict()["bytes_per_param"] == pytest.approx(per_param) and m.fits is False
    sgd = P.training_memory(sc.replace(optimizer="sgd"), [8]).to_dict()
    assert sgd["bytes_per_param"] == pytest.approx(per_param - 8) and sgd["optimizer"] == "sgd"
    assert P.training_memory(scenario(two_tier, workload=wl(params=1e9)), [8]).fits is True
    nomem = make_profile(Tier("net", 10e9, 1e-5), memory=None)
    assert P.training_memory(scenario(nomem), [8]).fits is None
    with pytest.raises(InputError, match="--optimizer"):
        P.training_memory(sc.replace(optimizer="lion"), [8])


# --------------------------------------------------------------------------- the command line


@pytest.mark.parametrize("partial", [True, False])
@pytest.mark.parametrize("extra", [[], ["--overlap", "none", "--accum", "2", "--algorithm", "auto"]])
def test_cli_max_devices_json_matches_speedup_scan(runner, prof, extra, partial):
    """--partial-nodes: every k of the range; by default 1..node size and the multiples of the node size."""
    base = ["--profile", prof, "--model", "bert-large", "--devices", "1..300", *extra]
    r = run(runner, "plan", "max-devices", "-e", "0.9", *base, "-f", "json", *(["--partial-nodes"] * partial))
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    recs = json.loads(run(runner, "speedup", *base, "-f", "json").stdout)
    if not partial:
        recs = [x for x in recs if x["devices"] <= 8 or x["devices"] % 8 == 0]
    first_drop = next((x["devices"] for x in recs if x["efficiency"] < 0.9), None)
    meets = [x["devices"] for x in recs if x["efficiency"] >= 0.9 and (first_drop is None or x["devices"] < first_drop)]
    assert out["answer"] == max(meets) and out["question"] == "max-devices"
    assert out["command"].startswith("simcli speedup --devices") and out["memory"]["fits"] is True
    assert out["reason"] and (not out["crossings"] or out["crossings"][0]["direction"] == "falls below")
    assert out["limited_by"] == ("target" if out["crossings"] else "range")
    assert all(a in out["command"].split() for a in extra)  # the curve's command repeats the options given


def test_cli_solve_json_and_table(runner, prof):
    args = [
        *"plan solve inter_node.bandwidth --devices 16 -e 0.9 --profile".split(),
        prof,
        *"--model bert-large --grad-dtype bf16".split(),
    ]
    r = run(runner, *args, "-f", "json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["field"] == "network[1].bandwidth" and out["bound"] == "minimum" and out["answer"] > 0
    assert out["efficiency_at_answer"] >= 0.9 and out["rtol"] == 1e-6
    r = run(runner, *args)
    assert r.exit_code == 0 and "must be at least" in r.stdout and "relative tolerance" in r.stdout


def test_cli_time_to_train_tokens_and_memory_flag(runner, prof):
    cmd = "plan time-to-train --tokens 2e12 --devices 256,1024 --model llama2-70b --price-per-device-hour 2.5 -f json"
    r = run(runner, *cmd.split(), "--profile", prof)
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert set(out["answer"]) == {"cheapest", "fastest"} and len(out["rows"]) == 2
    assert out["samples"] == pytest.approx(2e12 / 4096)
    assert out["memory"]["fits"] is False and out["warnings"]  # flagged, not silently returned
    assert "DOES NOT FIT" in r.stderr
    r = run(
        runner, "plan", "time-to-train", "--samples", "1e6", "--devices", "8..64:x2", "--profile", prof, "-f", "csv"
    )
    assert r.exit_code == 0 and r.stdout.splitlines()[0].startswith("devices,")


@pytest.mark.parametrize(
    "args, code, fragment",
    [
        (["max-devices"], 2, "--min-efficiency: required"),
        (["solve", "device.mfu", "-e", "0.9"], 2, "plan solve needs the device count"),
        (["solve", "device.mfu", "-e", "0.9", "-k", "8,16"], 2, "answers for one"),
        (["time-to-train", "--devices", "8"], 2, "--samples N or --tokens N"),
        (["time-to-train", "--devices", "8", "--tokens", "1e9", "--model", "resnet50"], 2, "no sequence length"),
        (["max-devices", "-e", "0.9", "--samples", "5"], 2, "--samples"),
        (["max-devices", "-e", "0.999", "-k", "2..64"], 1, "no k from 2 to 64 reaches"),
        (["solve", "inter_node.bandwidth", "-k", "8", "-e", "0.999", "--model", "gpt2"], 1, "does not depend on it"),
        (["time-to-train", "-k", "8", "--samples", "1e12", "--max-hours", "1"], 1, "within budget"),
    ],
)
def test_cli_errors_are_one_line(runner, prof, args, code, fragment):
    r = run(runner, "plan", *args[:1], "--profile", prof, *args[1:])
    assert r.exit_code == code, r.output
    assert fragment in r.stderr and "Traceback" not in r.output
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("old", ["--max-devices", "--solve", "--time-to-train"])
def test_the_older_flag_spellings_are_retired_with_one_line(runner, prof, old):
    """`plan --max-devices` was rewritten to `plan max-devices` by an argv rewriter (issue 25 retired it): a
    question is a sub-command, and the flag is a usage error of one line."""
    r = run(runner, "plan", old, "--profile", prof)
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert len(r.stderr.strip().splitlines()) == 1 and old in r.stderr


def test_max_devices_and_plan_best_say_they_scanned_whole_nodes(runner):
    """Past one node both scan whole nodes by default and say so (table and JSON); --partial-nodes scans every
    count and says nothing."""
    args = ["-e", "0.9", "-p", "dgx-h100", "-m", "llama2-7b", "--strategy", "fsdp", "--devices", "1..256"]
    r = run(runner, "plan", "max-devices", *args)
    assert r.exit_code == 0 and "whole nodes past the first" in r.stdout, r.output
    assert json.loads(run(runner, "plan", "max-devices", *args, "-f", "json").stdout)["scan"] == (
        "whole nodes past the first"
    )
    r = run(runner, "plan", "max-devices", *args, "--partial-nodes")
    assert r.exit_code == 0 and "whole nodes" not in r.stdout
    best = ["best", "-m", "llama2-7b", "-p", "dgx-h100", "--global-batch", "512", "--devices", "1..128"]
    r = run(runner, "plan", *best)
    assert r.exit_code == 0 and "device counts: whole nodes past the first" in r.stdout, r.output
    assert json.loads(run(runner, "plan", *best, "-f", "json").stdout)["scan"] == "whole nodes past the first"
