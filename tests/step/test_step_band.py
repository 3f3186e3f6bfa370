"""How sure a step is (simcli.step.band): the band of T_step, S(k), E(k), samples/s; the decisions that read it."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcli.comm.bands import fitted_tiers
from simcli.decisions.band_decisions import best_band, max_devices_band, solve_band
from simcli.decisions.plan import max_devices
from simcli.io.profiles import list_profiles, resolve_profile
from simcli.io.workloads import get_model, presets
from simcli.step.band import BAND_KEYS, banded, dominant, spread_range
from simcli.step.engine import Scenario, simulate

BUILT_IN = [e.name for e in list_profiles() if e.origin == "built-in"]
MODELS = list(presets())
#: a few of each, on a loaded machine
SMALL = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _scenario(profile: str, model: str, strategy: str = "ddp", **kw) -> Scenario:
    return Scenario(profile=resolve_profile(profile), workload=get_model(model).workload(), strategy=strategy, **kw)


def _fits(sc: Scenario, ks: list[int]) -> np.ndarray:
    cap = sc.profile.max_devices
    return np.array(sorted({k for k in ks if cap is None or k <= cap}) or [1])


@SMALL
@given(
    profile=st.sampled_from(BUILT_IN),
    model=st.sampled_from(MODELS),
    strategy=st.sampled_from(["ddp", "fsdp", "zero2"]),
    ks=st.lists(st.sampled_from([1, 2, 8, 16, 64, 256, 1024, 4096]), min_size=1, max_size=4),
)
def test_every_speedup_record_has_lo_le_value_le_hi(profile, model, strategy, ks):
    sc = _scenario(profile, model, strategy)
    for rec in banded(simulate(sc, _fits(sc, ks))).records():
        for key in ("t_step_s", "speedup", "efficiency", "samples_per_s"):
            base = key.removesuffix("_s")
            lo_key, hi_key = (f"{base}_lo_s", f"{base}_hi_s") if key == "t_step_s" else (f"{key}_lo", f"{key}_hi")
            assert rec[lo_key] <= rec[key] * (1 + 1e-12) and rec[key] <= rec[hi_key] * (1 + 1e-12), (key, rec)
        # the training runs' band never takes a step past linear scaling
        assert rec["efficiency_hi"] <= max(1.0, rec["efficiency"]) * (1 + 1e-12)


def test_the_band_at_1024_gpus_is_wider_than_at_8_for_llama2_7b_fsdp_on_dgx_h100():
    # at 8 the collectives stay in one NVLink node and FSDP hides them; at 1,024 they cross InfiniBand, where the
    # published curves spread wider (simcli.comm.bands), and the exposed share of the step is larger
    res = banded(simulate(_scenario("dgx-h100", "llama2-7b", "fsdp"), [8, 1024]))
    width = res.band.efficiency_hi - res.band.efficiency_lo
    assert width[1] > 2 * width[0] > 0
    top, w = dominant(res, 1)
    assert top == "comm" and w["comm"] > w["spread"] > 0


def test_explain_names_the_training_runs_where_the_collectives_hide_and_the_calibration_where_tiers_were_fitted():
    # FSDP inside one node hides its collectives: of the propagated sources σ's range (which also moves what is taken
    # out of an MFU measured at 16,384 GPUs) is the wider, and the training runs' band (no FSDP row inside one node:
    # the widest of its neighbours, DDP's) wider still; on cpu-loopback, whose tiers were fitted, the fits' band is
    # the comm part and the training runs' band gives way to it
    top, w = dominant(simulate(_scenario("dgx-h100", "llama2-7b", "fsdp"), [8]), 0)
    assert top == "training" and w["training"] > w["spread"] > w["comm"] > 0
    top, w = dominant(simulate(_scenario("cpu-loopback", "resnet50"), [2]), 0)
    assert top == "calibration" and w["comm"] == 0 == w["training"] and w["calibration"] > 0


def test_one_device_has_no_comm_band_and_sigma_taken_as_given_has_no_spread_band():
    sc = _scenario("dgx-h100", "llama2-7b", "fsdp", spread=0.02)
    assert spread_range(sc)[:2] == (0.02, 0.02)
    res = banded(simulate(sc, [1]))
    assert res.band.t_step_lo_s[0] == pytest.approx(res.t_step_s[0]) == pytest.approx(res.band.t_step_hi_s[0])


@SMALL
@given(
    sigma=st.floats(0.001, 0.05),
    inner=st.tuples(st.floats(0.0, 1.0), st.floats(1.0, 3.0)),
    outer=st.tuples(st.floats(0.0, 1.0), st.floats(1.0, 3.0)),
    strategy=st.sampled_from(["ddp", "fsdp"]),
)
def test_widening_sigma_never_narrows_the_step_band(sigma, inner, outer, strategy):
    sc = _scenario("dgx-h100", "llama2-7b", strategy, spread=sigma)
    res = simulate(sc, [8, 64, 1024])
    a = (sigma * inner[0], sigma * inner[1])
    b = (min(a[0], sigma * outer[0]), max(a[1], sigma * outer[1]))  # b holds a
    narrow, wide = banded(res, spread_bounds=a).band, banded(res, spread_bounds=b).band
    for key in BAND_KEYS:
        lo = key.endswith(("_lo", "_lo_s"))
        n, w = getattr(narrow, key), getattr(wide, key)
        assert np.all(w <= n * (1 + 1e-9)) if lo else np.all(w >= n * (1 - 1e-9)), key


def _calibrated(base, *, spread_se: float, lat_rel: float, bw_rel: float, world_sizes: list[int]):
    """``base`` as simcli calibrate would leave it having fitted its inter-node tier and its σ: the same values,
    with the fits' standard errors in the calibration block (no built-in GPU profile carries one yet)."""
    tier = base.network[1]
    sigma = 0.0148
    return dataclasses.replace(
        base,
        device=dataclasses.replace(base.device, spread=sigma),
        calibration={
            "spread": {"spread": sigma, "standard_error": spread_se},
            "network": [
                {
                    "tier": tier.name,
                    "world_sizes": world_sizes,
                    "latency": {
                        "after": f"{tier.latency_s * 1e6:g} us",
                        "standard_error": f"{tier.latency_s * lat_rel * 1e6:g} us",
                        "identified": True,
                    },
                    "effective_bandwidth": {
                        "after": f"{tier.bandwidth_Bps / 1e9:g} GB/s",
                        "standard_error": f"{tier.bandwidth_Bps * bw_rel / 1e9:g} GB/s",
                        "identified": True,
                    },
                }
            ],
        },
    )


@SMALL
@given(
    spread_se=st.floats(0.0, 0.05),
    lat_rel=st.floats(0.0, 1.0),
    bw_rel=st.floats(0.0, 1.0),
    strategy=st.sampled_from(["ddp", "fsdp"]),
    world=st.lists(st.sampled_from([16, 32, 64, 256, 1024]), min_size=1, max_size=3, unique=True),
    model=st.sampled_from(["llama2-7b", "bert-large", "resnet50"]),
)
def test_a_calibrated_profile_band_is_never_wider_on_what_it_was_calibrated_on(
    spread_se, lat_rel, bw_rel, strategy, world, model
):
    # the same values with the fits' standard errors: the band on the sizes the fit covers (its world sizes and the
    # ones below that cross the same tier) is never wider, at either end, whatever the standard errors
    base = resolve_profile("dgx-h100")
    cal = _calibrated(base, spread_se=spread_se, lat_rel=lat_rel, bw_rel=bw_rel, world_sizes=sorted(world))
    assert set(fitted_tiers(cal)) == {1}
    k = sorted(set(world) | {16})
    w = get_model(model).workload()
    plain = banded(simulate(Scenario(profile=base, workload=w, strategy=strategy), k)).band
    fitted = banded(simulate(Scenario(profile=cal, workload=w, strategy=strategy), k)).band
    assert np.all(fitted.efficiency_hi - fitted.efficiency_lo <= plain.efficiency_hi - plain.efficiency_lo + 1e-12)
    assert np.all(fitted.t_step_lo_s >= plain.t_step_lo_s * (1 - 1e-12))
    assert np.all(fitted.t_step_hi_s <= plain.t_step_hi_s * (1 + 1e-12))


def test_a_calibrated_tier_band_holds_only_where_it_was_fitted():
    base = resolve_profile("dgx-h100")
    cal = _calibrated(base, spread_se=0.0, lat_rel=0.001, bw_rel=0.001, world_sizes=[16, 32])
    w = get_model("llama2-7b").workload()
    # σ taken as given on both: only the communication band differs
    plain = banded(simulate(Scenario(profile=base, workload=w, spread=0.0148), [16, 512])).band
    fitted = banded(simulate(Scenario(profile=cal, workload=w, spread=0.0148), [16, 512])).band
    assert fitted.t_step_hi_s[0] - fitted.t_step_lo_s[0] < 0.1 * (plain.t_step_hi_s[0] - plain.t_step_lo_s[0])
    assert fitted.t_step_hi_s[1] == pytest.approx(plain.t_step_hi_s[1])  # 512 is past the fit's world sizes
    assert fitted.t_step_lo_s[1] == pytest.approx(plain.t_step_lo_s[1])


def test_calibrated_cpu_loopback_tiers_narrow_its_band():
    # cpu-loopback is calibrated (its tiers' latency and bandwidth with standard errors, world sizes 2..4)
    prof = resolve_profile("cpu-loopback")
    assert set(fitted_tiers(prof)) == {0, 1}
    plain = dataclasses.replace(prof, calibration=None)
    w = get_model("resnet50").workload()
    a = banded(simulate(Scenario(profile=prof, workload=w), [2, 3, 4])).band
    b = banded(simulate(Scenario(profile=plain, workload=w), [2, 3, 4])).band
    assert np.all(a.t_step_hi_s - a.t_step_lo_s < b.t_step_hi_s - b.t_step_lo_s)


def test_a_calibrated_sigma_takes_its_standard_error_within_the_judgement():
    cal = _calibrated(resolve_profile("dgx-h100"), spread_se=0.001, lat_rel=0.0, bw_rel=0.0, world_sizes=[16])
    lo, hi, why = spread_range(_scenario("dgx-h100", "llama2-7b").replace(profile=cal))
    assert (lo, hi) == pytest.approx((0.0148 - 1.2816e-3, 0.0148 + 1.2816e-3))
    assert "standard error" in why
    lo, hi, why = spread_range(_scenario("dgx-h100", "llama2-7b"))
    assert (lo, hi) == pytest.approx((0.0074, 0.0296)) and "half to twice" in why


# --------------------------------------------------------------------------- decisions


def test_max_devices_says_when_the_band_straddles_the_target():
    sc = _scenario("dgx-h100", "llama2-7b", "fsdp")
    k = np.arange(8, 2049, 8)
    ans = max_devices(sc, np.concatenate([[1], k]), target=0.9)
    b = max_devices_band(ans)
    assert b["straddles"]
    assert b["answer_lower_edge"] < ans.answer < b["answer_upper_edge"]
    assert f"k = {b['answer_lower_edge']} meets E >= 0.9 at the band's lower edge" in b["line"]
    assert f"{b['answer_upper_edge']} only at its upper edge" in b["line"]


def test_max_devices_says_when_the_band_does_not_move_the_answer():
    ans = max_devices(_scenario("dgx-h100", "llama2-7b", "fsdp"), np.array([1, 8, 16, 32, 64]), target=0.5)
    b = max_devices_band(ans)
    assert not b["straddles"] and b["answer_lower_edge"] == b["answer_upper_edge"] == ans.answer == 64
    assert "does not move it" in b["line"]


def test_plan_max_devices_prints_and_records_the_band(runner):
    from simcli.cli import app

    args = ["plan", "max-devices", "-e", "0.9", "-p", "dgx-h100", "-m", "llama2-7b", "--strategy", "fsdp"]
    r = runner.invoke(app, args + ["-k", "1..2048", "-f", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["band"]["straddles"] and d["band"]["answer_lower_edge"] < d["answer"]
    r = runner.invoke(app, args + ["-k", "1..2048"])
    assert r.exit_code == 0 and "band      k = " in r.stdout


def test_solve_band_reads_the_current_value_against_the_target():
    from simcli.decisions.solve import solve_field

    sc = _scenario("dgx-h100", "bert-large")
    ans = solve_field(sc, devices=512, target=0.85, path="inter_node.bandwidth", rtol=1e-3)
    b = solve_band(sc, ans)
    assert b["current_hi"] < 0.85 and not b["current_straddles"] and "misses E >= 0.85 across its band" in b["line"]
    assert b["answer_lo"] < ans.efficiency <= b["answer_hi"]
    easy = solve_field(sc, devices=512, target=0.4, path="inter_node.bandwidth", rtol=1e-3)
    assert "meets E >= 0.4 across its band" in solve_band(sc, easy)["line"]


def _edges(sc, field, x, k):
    from simcli.decisions.band_decisions import _edges_at

    return _edges_at(field.apply(sc, float(x)), k)


@pytest.mark.parametrize("path", ["inter_node.bandwidth", "inter_node.latency"])
def test_plan_solve_re_solves_on_the_band_edges(path):
    # bert-large on 512 H100s: the lower edge needs a better value than the value does, the upper edge a worse one;
    # each edge answer meets the target at that edge, and one tolerance step towards the worse end does not
    from simcli.decisions.solve import solve_field

    sc = _scenario("dgx-h100", "bert-large")
    ans = solve_field(sc, devices=512, target=0.4, path=path, rtol=1e-3)
    b = solve_band(sc, ans)
    lower, upper, f = b["answer_lower_edge"], b["answer_upper_edge"], ans.field
    assert lower is not None and upper is not None and b["straddles"]
    worse = (lambda x: x / 1.002) if ans.bound == "minimum" else (lambda x: x * 1.002)
    assert (upper < ans.answer < lower) if ans.bound == "minimum" else (lower < ans.answer < upper)
    assert _edges(sc, f, lower, 512)[0] >= 0.4 > _edges(sc, f, worse(lower), 512)[0]
    assert _edges(sc, f, upper, 512)[1] >= 0.4 > _edges(sc, f, worse(upper), 512)[1]
    assert f"{f.fmt(lower)} meets E(512) >= 0.4 at the band's lower edge" in b["line"]
    assert f"{f.fmt(upper)} only at its upper edge (the band straddles the target)" in b["line"]
    if path != "inter_node.bandwidth":
        return
    # a target no bandwidth lifts the lower edge to (latency and the training runs' band keep it below): said so
    hard = solve_field(sc, devices=512, target=0.7, path=path, rtol=1e-3)
    hb = solve_band(sc, hard)
    assert hb["answer_lower_edge"] is None and "no value of" in hb["line"] and "at the band's lower edge" in hb["line"]


def test_best_band_says_whether_the_runner_up_is_inside_the_answer_band():
    from simcli.decisions.plan_best import Grid, answer_scenario, best

    sc = _scenario("dgx-h100", "llama2-7b")
    grid = Grid(strategies=("fsdp",), devices=np.array([256, 512]), micro_batches=(1, 2))
    ans = best(sc, grid, global_batch=1024, objective="time")
    b = best_band(sc, ans, answer_scenario)
    assert b["answer_lo"] <= ans.answer["samples_per_s"] <= b["answer_hi"]
    assert b["runner_up_inside"] == (ans.runner_up["samples_per_s"] >= b["answer_lo"])
    assert ("inside" if b["runner_up_inside"] else "outside") in b["line"]


# --------------------------------------------------------------------------- output


def test_the_table_shows_the_band_when_wide_and_leaves_it_out_first():
    from simcli.cli.views import speedup_table
    from simcli.io.render import render_text

    res = banded(simulate(_scenario("dgx-h100", "llama2-7b", "fsdp"), [8, 512]))
    wide = render_text(speedup_table(res), width=240)
    lo, hi = np.floor(res.band.efficiency_lo[0] * 100) / 100, np.ceil(res.band.efficiency_hi[0] * 100) / 100
    shown = f"({lo:.2f}–{hi:.2f})"  # rounded outward, so that the band shown holds the value shown
    assert "E(k) band" in wide and shown in wide
    narrow = render_text(speedup_table(res), width=80)
    assert "E(k)" in narrow and "left out to fit 80 columns: E(k) band, samples/s band" in narrow
    assert all(len(line) <= 80 for line in narrow.splitlines())


def test_speedup_json_carries_the_band_and_explain_names_the_dominant_source(runner):
    from simcli.cli import app

    r = runner.invoke(app, ["speedup", "-k", "8,1024", "-p", "dgx-h100", "-m", "llama2-7b", "-f", "json"])
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout)[1]
    assert all(key in rec for key in BAND_KEYS) and rec["efficiency_lo"] <= rec["efficiency"] <= rec["efficiency_hi"]
    r = runner.invoke(app, ["explain", "-k", "1024", "-p", "dgx-h100", "-m", "llama2-7b", "--strategy", "fsdp"])
    assert r.exit_code == 0 and "how sure" in r.stdout and "the widest part from the communication band" in r.stdout


# --------------------------------------------------------------------------- the corners and the training runs


def _brute_force(res, s_lo: float, s_hi: float) -> dict[str, np.ndarray]:
    """Every corner of the (σ, comm) box, each priced alone (the rule before monotonicity let fewer suffice)."""
    sc = res.scenario
    micro = None if sc.strong else res.batch_per_device
    runs = [simulate(sc.replace(spread=s), res.devices, micro, comm_end=e) for s in (s_lo, s_hi) for e in ("lo", "hi")]
    out = {}
    for key in ("t_step_s", "speedup", "efficiency", "samples_per_s"):
        stack = np.stack([getattr(res, key)] + [getattr(r, key) for r in runs])
        lo, hi = ("t_step_lo_s", "t_step_hi_s") if key == "t_step_s" else (f"{key}_lo", f"{key}_hi")
        out[lo], out[hi] = stack.min(axis=0), stack.max(axis=0)
    return out


@SMALL
@given(
    profile=st.sampled_from(["dgx-h100", "dgx-a100", "aws-p5", "mi300x"]),
    strategy=st.sampled_from(["ddp", "fsdp", "zero2"]),
    at_k=st.sampled_from([None, 1, 8, 64]),
    strong=st.booleans(),
)
def test_the_corners_monotonicity_keeps_give_the_band_every_corner_gives(profile, strategy, at_k, strong):
    from simcli.step.band import propagated

    kw = {"compute_time_s": 0.3, "compute_time_at_k": at_k} if at_k else {}
    if strong:
        kw["global_batch"] = 4096
    sc = _scenario(profile, "llama2-7b", strategy, **kw)
    res = simulate(sc, _fits(sc, [1, 2, 8, 16, 64, 256, 1024]))
    s_lo, s_hi, _ = spread_range(sc)
    got, want = propagated(res, s_lo, s_hi), _brute_force(res, s_lo, s_hi)
    for key in BAND_KEYS:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-9, err_msg=key)


def test_the_training_runs_band_holds_the_step_where_it_is_the_wider():
    from simcli.step.band import training_ratio

    res = banded(simulate(_scenario("dgx-h100", "llama2-7b", "fsdp"), [1, 8, 1024]))
    r_lo, r_hi, words = training_ratio(res)
    assert r_lo[0] == r_hi[0] == 1.0  # S(1) = 1: nothing to be wrong about
    assert np.all(r_lo[1:] <= 1.0) and np.all(r_hi[1:] > 1.0)
    # at 8 the collectives hide: the training runs' band is the wider, and the band is theirs exactly
    assert res.band.efficiency_lo[1] == pytest.approx(res.efficiency[1] / r_hi[1])
    assert res.band.t_step_hi_s[1] == pytest.approx(res.t_step_s[1] * r_hi[1])
    # no published FSDP row from an MFU: the widest band of its neighbours, said so
    assert "no published training row of this kind" in words and "widest band" in words
    # a calibrated profile's fits cover its world sizes: the training runs (other clusters) give way there
    cal = _calibrated(resolve_profile("dgx-h100"), spread_se=0.001, lat_rel=0.01, bw_rel=0.01, world_sizes=[16, 32])
    res = simulate(Scenario(profile=cal, workload=get_model("llama2-7b").workload(), strategy="fsdp"), [16, 512])
    r_lo, r_hi, _ = training_ratio(res)
    assert (r_lo[0], r_hi[0]) == (1.0, 1.0) and r_hi[1] > 1.0


# --------------------------------------------------------------------------- calibrate narrows it, on a recorded run


def test_calibrating_on_a_recorded_run_narrows_the_band_on_its_sizes_and_says_why(runner, tmp_path):
    # the published 16-GPU nccl-tests curve of two DGX H100s on InfiniBand (validation/published): calibrate fits both
    # tiers on it (world size 16); the band at 8 and 16 narrows, past the fit's world sizes it does not
    import yaml

    from simcli.cli import app

    out = tmp_path / "h100-ib.yaml"
    r = runner.invoke(
        app,
        [
            "calibrate",
            "validation/published/nccl-allreduce-16xH100-2node-ib400x8.csv",
            "-p",
            "dgx-h100",
            "-o",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    cal = resolve_profile(str(out))
    assert set(fitted_tiers(cal)) == {0, 1}
    w = get_model("llama2-7b").workload()
    k = [8, 16, 64]
    before = banded(simulate(Scenario(profile=resolve_profile("dgx-h100"), workload=w, strategy="fsdp"), k)).band
    after = banded(simulate(Scenario(profile=cal, workload=w, strategy="fsdp"), k)).band
    wb, wa = before.efficiency_hi - before.efficiency_lo, after.efficiency_hi - after.efficiency_lo
    assert np.all(wa[:2] < 0.5 * wb[:2])  # on the calibrated sizes: the fits' band, narrower
    assert wa[2] == pytest.approx(wb[2], rel=0.05)  # 64 is past the fit's world sizes
    band = yaml.safe_load(out.read_text())["calibration"]["band"]
    assert "standard errors" in band["why"] and [t["tier"] for t in band["tiers"]] == ["nvlink", "infiniband"]
    assert all(t["up_to_devices"] == 16 and 0 < t["relative_standard_error"] < 1 for t in band["tiers"])
    assert "gives way" in band["training_runs"]
