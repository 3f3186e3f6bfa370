"""Calibration: recover alpha and B from synthetic measurements; refuse degenerate inputs; the CLI round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcli.base.types import InputError, Tier
from simcli.cli.app import app
from simcli.comm import collectives, topology
from simcli.fits.fit_compute import fit_step, overlap_fraction
from simcli.fits.fitting import fit_alpha_beta, fit_link, holdout_mask, outer_tier, ring_coefficients, tier_scale

HEADER = "collective,backend,world_size,bytes,dtype,iters,time_s,time_p10_s,time_p90_s,algbw_GBps,busbw_GBps"


def ring_time(k, n, alpha, B):
    k = np.asarray(k, dtype=float)
    return 2 * (k - 1) * alpha + 2 * (k - 1) / k * np.asarray(n, dtype=float) / B


def grid(alpha, B, ks=(2, 3, 4), decades=(-2, 3), per_decade=3):
    """Sizes spanning the crossover n* = alpha·B from latency- to bandwidth-dominated."""
    n_star = alpha * B
    sizes = np.geomspace(
        n_star * 10.0 ** decades[0], n_star * 10.0 ** decades[1], (decades[1] - decades[0]) * per_decade + 1
    )
    k = np.repeat(np.array(ks), sizes.size)
    n = np.tile(sizes, len(ks))
    return k, n


def write_csv(path, k, n, t, extra_comment="synthetic"):
    lines = [f"# {extra_comment}", HEADER]
    for kk, nn, tt in zip(k, n, t):
        kk, nn, tt = int(kk), float(nn), float(tt)
        alg = nn / tt / 1e9
        lines.append(
            f"allreduce,gloo,{int(kk)},{int(nn)},fp32,10,{tt!r},{tt!r},{tt!r},{alg!r},{alg * 2 * (kk - 1) / kk!r}"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def test_ring_coefficients_by_hand():
    c_lat, c_bw = ring_coefficients(np.array([2, 8]))
    assert c_lat.tolist() == [2.0, 14.0]
    assert c_bw.tolist() == [1.0, 1.75]


@settings(max_examples=25, deadline=None)
@given(log_alpha=st.floats(-6, -3.5), log_B=st.floats(8, 11.5), seed=st.integers(0, 2**16))
def test_recovers_alpha_and_B_from_noisy_data(log_alpha, log_B, seed):
    alpha, B = 10.0**log_alpha, 10.0**log_B
    k, n = grid(alpha, B)
    rng = np.random.default_rng(seed)
    t = ring_time(k, n, alpha, B) * (1 + 0.02 * rng.standard_normal(k.size))
    fit = fit_alpha_beta(k, n, t, algorithm="ring")
    assert fit.alpha_s == pytest.approx(alpha, rel=0.1)
    assert fit.bandwidth_Bps == pytest.approx(B, rel=0.1)
    assert all(fit.identified.values())
    assert fit.fit_median_rel < 0.05
    # the reported uncertainty covers the truth (5 standard errors: a failure here means the SE is wrong)
    assert abs(fit.alpha_s - alpha) < 5 * fit.alpha_se_s + 1e-3 * alpha
    assert abs(fit.bandwidth_Bps - B) < 5 * fit.bandwidth_se_Bps + 1e-3 * B


def test_exact_data_is_fitted_exactly():
    k, n = grid(20e-6, 3e9)
    fit = fit_alpha_beta(k, n, ring_time(k, n, 20e-6, 3e9), algorithm="ring", holdout=0.25, seed=3)
    assert fit.alpha_s == pytest.approx(20e-6, rel=1e-9)
    assert fit.bandwidth_Bps == pytest.approx(3e9, rel=1e-9)
    assert fit.r2_log == pytest.approx(1.0)
    assert fit.holdout_max_rel < 1e-9
    assert fit.n_holdout == round(0.25 * k.size) and fit.n_fit == k.size - fit.n_holdout


def test_huber_resists_outliers_where_plain_least_squares_does_not():
    k, n = grid(30e-6, 2e9)
    rng = np.random.default_rng(7)
    t = ring_time(k, n, 30e-6, 2e9) * (1 + 0.01 * rng.standard_normal(k.size))
    bad = rng.choice(k.size, size=5, replace=False)
    t[bad] *= 4.0  # a noisy machine: a few iterations stalled
    robust = fit_alpha_beta(k, n, t, algorithm="ring", loss="huber")
    plain = fit_alpha_beta(k, n, t, algorithm="ring", loss="linear")
    assert robust.bandwidth_Bps == pytest.approx(2e9, rel=0.05)
    assert robust.alpha_s == pytest.approx(30e-6, rel=0.1)
    assert robust.downweighted >= 5
    err_r = abs(robust.bandwidth_Bps / 2e9 - 1) + abs(robust.alpha_s / 30e-6 - 1)
    err_p = abs(plain.bandwidth_Bps / 2e9 - 1) + abs(plain.alpha_s / 30e-6 - 1)
    assert err_r < err_p


def test_holdout_mask_is_seeded_and_sized():
    a, b = holdout_mask(40, 0.25, 1), holdout_mask(40, 0.25, 1)
    assert (a == b).all() and a.sum() == 10
    assert not (holdout_mask(40, 0.25, 2) == a).all()
    assert holdout_mask(10, 0.0, 0).sum() == 0
    with pytest.raises(InputError, match="--holdout"):
        holdout_mask(10, 1.0, 0)


@pytest.mark.parametrize(
    "k,n,t,match",
    [
        ([], [], [], "no measurements"),
        ([1, 1, 1], [1e3, 1e4, 1e5], [1e-3, 2e-3, 3e-3], "world size 1"),
        ([2, 2, 2], [1e3, 1e4, 1e5], [1e-3, -2e-3, 3e-3], "must be positive"),
        ([2, 2, 2], [1e3, 1e4, 1e5], [1e-3, float("nan"), 3e-3], "must be positive"),
        ([2, 2, 2, 2], [1e3, 1e4, 1e5, 1e6], [1e-3, 1e-3, 1e-3, 1e-3], "infinite bandwidth"),
        ([2, 2, 2], [1e4, 1e4, 1e4], [1e-3, 1.1e-3, 0.9e-3], "cannot separate latency from bandwidth"),
        ([2, 3], [1e4, 1e5], [1e-3, 2e-3], "infinite bandwidth"),  # two points, solved exactly: B = inf
    ],
)
def test_degenerate_inputs_are_refused_with_a_clear_message(k, n, t, match):
    with pytest.raises(InputError, match=match):
        fit_alpha_beta(
            np.array(k, dtype=int), np.array(n, dtype=float), np.array(t, dtype=float), algorithm="ring", what="run.csv"
        )


def test_one_size_one_world_size_keeps_a_base_value_and_warns():
    k = np.full(6, 4)
    n = np.full(6, 64e6)
    t = ring_time(k, n, 10e-6, 1e9)
    fit = fit_alpha_beta(k, n, t, algorithm="ring", base_alpha_s=10e-6, base_bandwidth_Bps=5e8)
    assert fit.identified == {"alpha": False, "bandwidth": True}  # bandwidth dominates at 64 MB
    assert fit.alpha_s == 10e-6
    assert fit.bandwidth_Bps == pytest.approx(1e9, rel=1e-6)
    assert any("one message size and one world size" in w for w in fit.warnings)


def test_one_world_size_warns_but_fits():
    k, n = grid(10e-6, 1e9, ks=(4,))
    fit = fit_alpha_beta(k, n, ring_time(k, n, 10e-6, 1e9), algorithm="ring")
    assert fit.alpha_s == pytest.approx(10e-6, rel=1e-6)
    assert any("one world size only" in w for w in fit.warnings)


def test_alpha_unresolved_by_large_sizes_is_kept_at_base():
    # only bandwidth-dominated sizes: alpha is noise; it must be flagged, not printed as a number
    k = np.repeat([2, 3, 4], 5)
    n = np.tile(np.geomspace(1e8, 1e9, 5), 3)
    rng = np.random.default_rng(0)
    t = ring_time(k, n, 1e-6, 1e9) * (1 + 0.02 * rng.standard_normal(k.size))
    fit = fit_alpha_beta(k, n, t, algorithm="ring", base_alpha_s=7e-6, base_bandwidth_Bps=2e9)
    assert not fit.identified["alpha"] and fit.alpha_s == 7e-6
    assert fit.identified["bandwidth"] and fit.bandwidth_Bps == pytest.approx(1e9, rel=0.05)
    assert any("alpha" in w for w in fit.warnings)


def test_fit_alpha_beta_refuses_an_unknown_algorithm_a_shape_mismatch_and_names_the_bad_row():
    k, n = np.array([2, 2, 2]), np.array([1e3, 1e4, 1e5])
    with pytest.raises(InputError) as e:
        fit_alpha_beta(k, n, ring_time(k, n, 1e-5, 1e9), algorithm="hypercube")
    assert str(e.value).startswith("--algorithm: cannot fit 'hypercube'; calibration knows ring")
    with pytest.raises(ValueError, match="same shape"):
        fit_alpha_beta(k, n[:2], ring_time(k, n, 1e-5, 1e9)[:2], algorithm="ring")
    with pytest.raises(InputError) as e:
        fit_alpha_beta(k, n, np.array([1e-3, -2e-3, 3e-3]), algorithm="ring", what="run.csv")
    msg = str(e.value)
    assert msg.startswith("run.csv: row 2: time ") and msg.endswith("; times and sizes must be positive numbers")
    assert "-0.002" in msg and "10000.0" in msg


def test_one_size_at_several_world_sizes_warns_but_fits():
    k, n = np.array([2, 3, 4, 8]), np.full(4, 1e4)
    fit = fit_alpha_beta(k, n, ring_time(k, n, 1e-5, 1e9), algorithm="ring")
    assert fit.identified == {"alpha": True, "bandwidth": True}
    assert fit.alpha_s == pytest.approx(1e-5, rel=1e-6) and fit.bandwidth_Bps == pytest.approx(1e9, rel=1e-6)
    assert fit.warnings == (
        "one message size only (10000 bytes): alpha and B are told apart only through the world sizes; "
        "measure several sizes",
    )


@pytest.mark.parametrize(
    "case,reason",
    [
        # times that fall faster than the bandwidth term: the latency goes to its bound 0
        ("alpha at 0", "alpha is at its bound 0 (the smallest sizes do not resolve a latency)"),
        # three sizes a part in 1e10 apart at one world size: the two columns are one
        ("singular", "alpha is not identified (the design is singular)"),
    ],
)
@pytest.mark.parametrize("with_base", [False, True])
def test_an_unidentified_alpha_is_kept_at_its_base_value_or_reported_with_care(case, reason, with_base):
    if case == "alpha at 0":
        k, n = np.repeat([2, 3, 4], 4), np.tile(np.geomspace(1e5, 1e7, 4), 3)
        t = ring_time(k, n, -1e-6, 1e9)
    else:
        k, n = np.full(3, 4), 1e4 * (1 + np.array([0.0, 1e-10, 2e-10]))
        t = ring_time(k, n, 1e-5, 1e9)
    base = {"base_alpha_s": 5e-6, "base_bandwidth_Bps": 2e9} if with_base else {}
    fit = fit_alpha_beta(k, n, t, algorithm="ring", **base)
    said = reason + ("; kept at the base value" if with_base else "; reported as fitted, treat it with care")
    assert fit.warnings[-1] == said
    assert fit.identified == {"alpha": not with_base, "bandwidth": True}
    if with_base:
        assert fit.alpha_s == 5e-6
    elif case == "alpha at 0":
        assert fit.alpha_s == 0.0 and fit.bandwidth_Bps == pytest.approx(1e9, rel=0.05)


def test_outer_tier_and_tier_scale_match_collectives(two_tier):
    net = two_tier.network
    k = np.array([2, 8, 9, 12, 16])
    assert outer_tier(net, k).tolist() == [0, 0, 1, 1, 1]
    g = tier_scale(net, 1, k)
    bw = topology.tier_bandwidth(net, k)[1]
    assert np.allclose(g[k > 8] * net[1].effective_Bps, bw[k > 8])
    shared = (Tier("bus", 8e9, 5e-6, per="node"),)
    assert np.allclose(tier_scale(shared, 0, np.array([2, 4])), [0.5, 0.25])


def test_fit_link_through_a_shared_tier_recovers_the_profile_numbers():
    net = (Tier("loop", 4e9, 40e-6, per="node"),)
    k, n = grid(40e-6, 1e9)
    t = collectives.allreduce("ring", net, k, nbytes=n).time
    fit = fit_link((Tier("loop", 1e9, 10e-6, per="node"),), 0, k, n=n, t=t, algorithm="ring")
    assert fit.bandwidth_Bps == pytest.approx(4e9, rel=1e-9)
    assert fit.alpha_s == pytest.approx(40e-6, rel=1e-9)


def test_fit_step_recovers_mfu_and_overlap():
    k = np.array([1, 2, 4, 1, 2, 4])
    b = np.full(6, 32)
    tc = np.full(6, 0.064)  # 2 ms per sample
    tm = np.where(k > 1, 0.02, 0.0)
    ts = tc + tm - 0.5 * np.minimum(tc, tm)  # half of the all-reduce hidden
    f = fit_step(k, b, tc, t_comm=tm, t_step=ts, flops_per_sample=np.full(6, 1e8), peak_flops=1e11)
    assert f.seconds_per_sample == pytest.approx(2e-3)
    assert f.mfu == pytest.approx(1e8 / (2e-3 * 1e11))
    assert f.overlap == pytest.approx(0.5)
    assert overlap_fraction(np.array([1.0]), np.array([1.0]), np.array([2.5])).tolist() == [0.0]


def test_fit_step_refuses_bad_rows():
    with pytest.raises(InputError, match="t_compute_s"):
        fit_step(np.array([1]), np.array([8]), np.array([0.0]), t_comm=np.array([0.0]), t_step=np.array([1.0]))


# --------------------------------------------------------------------------- CLI


@pytest.fixture
def synthetic_csv(tmp_path):
    net = (Tier("loopback", 3e9, 60e-6, per="node"),)
    k, n = grid(60e-6, 1e9)
    rng = np.random.default_rng(5)
    t = collectives.allreduce("ring", net, k, nbytes=n).time * (1 + 0.02 * rng.standard_normal(k.size))
    return write_csv(tmp_path / "run1.csv", k, n, t)


@pytest.fixture
def base_profile(tmp_path):
    p = tmp_path / "base.yaml"
    p.write_text(
        "name: base\nsources: [test]\ndevice: {name: cpu, peak_flops: {fp32: 50 GFLOP/s}, mfu: 0.5}\n"
        "network:\n  - {name: loopback, bandwidth: 1 GB/s, per: node, latency: 10 us}\n"
    )
    return p


def test_calibrate_cli_writes_a_profile_that_validates_and_predicts(runner, tmp_path, synthetic_csv, base_profile):
    out = tmp_path / "cal.yaml"
    r = runner.invoke(
        app, ["calibrate", str(synthetic_csv), "--profile", str(base_profile), "--output", str(out), "--format", "json"]
    )
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    (tier,) = report["tiers"]
    assert tier["bandwidth"]["after_Bps"] == pytest.approx(3e9, rel=0.05)
    assert tier["latency"]["after_s"] == pytest.approx(60e-6, rel=0.1)
    assert tier["holdout_points"] > 0 and tier["quality"]["median_rel_error_holdout"] < 0.05
    # round trip through `profiles validate`, and the calibration block is kept
    r2 = runner.invoke(app, ["profiles", "validate", str(out)])
    assert r2.exit_code == 0, r2.output
    from simcli.io.profiles import load_profile

    p = load_profile(out)
    assert p.name == "cal" and p.calibration["data"]["file"] == str(synthetic_csv)
    assert p.network[0].effective_Bps == pytest.approx(tier["bandwidth"]["after_Bps"], rel=1e-5)
    # the calibrated profile predicts the measurements it came from
    r3 = runner.invoke(
        app, ["validate", str(synthetic_csv), "--profile", str(out), "--format", "json", "--max-error", "5%"]
    )
    assert r3.exit_code == 0, r3.output
    assert json.loads(r3.stdout)["summary"]["time_s"]["overall"]["mdape"] < 0.05


def test_calibrate_table_output_and_no_clobber(runner, tmp_path, synthetic_csv, base_profile):
    out = tmp_path / "cal.yaml"
    out.write_text("keep me")
    r = runner.invoke(app, ["calibrate", str(synthetic_csv), "--profile", str(base_profile), "--output", str(out)])
    assert r.exit_code == 2 and "--force" in r.stderr
    assert out.read_text() == "keep me"
    r = runner.invoke(
        app, ["calibrate", str(synthetic_csv), "--profile", str(base_profile), "--output", str(out), "--force"]
    )
    assert r.exit_code == 0, r.output
    assert "held-out median" in r.stdout and "latency α" in r.stdout
    assert out.read_text().startswith("# calibrated by simcli calibrate")


def test_calibrate_cli_refuses_degenerate_data(runner, tmp_path, base_profile):
    k = np.array([2, 2, 2])
    n = np.array([65536.0] * 3)
    csv = write_csv(tmp_path / "one.csv", k, n, np.array([1e-3, 1.1e-3, 0.9e-3]))
    head, *rows = csv.read_text().splitlines()[1:]  # three rows of one size: declared as repeats (issue 27)
    csv.write_text("\n".join([head + ",repeat", *(f"{r},{i}" for i, r in enumerate(rows))]) + "\n")
    r = runner.invoke(
        app,
        ["calibrate", str(csv), "--profile", str(base_profile), "--output", str(tmp_path / "x.yaml"), "--holdout", "0"],
    )
    # one size and one world size: the latency is kept and said so, not fitted
    assert r.exit_code == 0, r.output
    assert "warning" in r.stderr and "one message size and one world size" in r.stderr
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + "\nallreduce,gloo,2,1024,fp32,10,abc,1,1,1,1\n")
    r = runner.invoke(
        app, ["calibrate", str(bad), "--profile", str(base_profile), "--output", str(tmp_path / "y.yaml")]
    )
    assert r.exit_code == 2
    assert "bad.csv: line 2: time_s: 'abc' is not a number" in r.stderr
    assert "Traceback" not in r.output and not (tmp_path / "y.yaml").exists()
    r = runner.invoke(
        app,
        [
            "calibrate",
            str(bad),
            "--profile",
            str(base_profile),
            "--output",
            str(tmp_path / "y.yaml"),
            "--tier",
            "nvlink",
        ],
    )
    assert r.exit_code == 2


def test_calibrate_per_tier_fits(runner, tmp_path):
    """World sizes inside one node and across nodes: each tier gets its own alpha and B."""
    from simcli.io.profiles import load_profile

    true = (Tier("nvlink", 100e9, 4e-6, size=4), Tier("ib", 10e9, 12e-6, per="node"))
    k = np.repeat([2, 4, 8, 16], 12)
    n = np.tile(np.geomspace(2**12, 2**30, 12), 4)
    t = collectives.allreduce("ring", true, k, nbytes=n).time
    csv = write_csv(tmp_path / "two.csv", k, n, t)
    base = tmp_path / "base2.yaml"
    base.write_text(
        "name: base2\nsources: [test]\nlibrary: textbook\n"
        "device: {name: gpu, peak_flops: {bf16: 100 TFLOP/s}, mfu: 0.4}\n"
        "network:\n  - {name: nvlink, size: 4, bandwidth: 50 GB/s, latency: 2 us}\n"
        "  - {name: ib, bandwidth: 5 GB/s, per: node, latency: 5 us}\n"
    )
    out = tmp_path / "cal2.yaml"
    r = runner.invoke(app, ["calibrate", str(csv), "--profile", str(base), "--output", str(out), "--holdout", "0"])
    assert r.exit_code == 0, r.output
    p = load_profile(out)
    assert p.network[0].effective_Bps == pytest.approx(100e9, rel=1e-4)
    assert p.network[0].latency_s == pytest.approx(4e-6, rel=1e-4)
    assert p.network[1].effective_Bps == pytest.approx(10e9, rel=1e-4)
    assert p.network[1].latency_s == pytest.approx(12e-6, rel=1e-4)
    assert [x["tier"] for x in p.calibration["network"]] == ["nvlink", "ib"]
    assert p.calibration["network"][1]["world_sizes"] == [8, 16]


_TWO_TIERS = (
    "name: base2\nsources: [test]\nlibrary: textbook\n"
    "device: {name: gpu, peak_flops: {bf16: 100 TFLOP/s}, mfu: 0.4}\n"
    "network:\n  - {name: nvlink, size: 4, bandwidth: 50 GB/s, latency: 2 us}\n"
    "  - {name: ib, bandwidth: 5 GB/s, per: node, latency: 5 us}\n"
)


def _two_tier_run(tmp_path, ks, true=None, *, base=_TWO_TIERS):
    """An all-reduce CSV over two tiers at world sizes ``ks`` (world size 1 rows: 1 us) and the base profile."""
    true = true or (Tier("nvlink", 100e9, 4e-6, size=4), Tier("ib", 10e9, 12e-6, per="node"))
    k = np.repeat(ks, 12)
    n = np.tile(np.geomspace(2**12, 2**30, 12), len(ks))
    t = np.where(k > 1, collectives.allreduce("ring", true, np.maximum(k, 2), nbytes=n).time, 1e-6)
    prof = tmp_path / "base2.yaml"
    prof.write_text(base)
    return write_csv(tmp_path / "two.csv", k, n, t), prof


def _calibrate(runner, tmp_path, csv, prof, *extra):
    out = tmp_path / "cal.yaml"
    r = runner.invoke(app, ["calibrate", str(csv), "--profile", str(prof), "-o", str(out), "--holdout", "0", *extra])
    return r, out


def test_calibrate_leaves_world_size_1_out_and_refuses_a_file_of_only_world_size_1(runner, tmp_path):
    from simcli.io.profiles import load_profile

    csv, prof = _two_tier_run(tmp_path, [1, 2, 4, 8, 16])
    r, out = _calibrate(runner, tmp_path, csv, prof)
    assert r.exit_code == 0, r.output
    assert f"{csv}: 12 row(s) with world size 1 left out (no communication)" in r.stderr
    assert load_profile(out).network[1].effective_Bps == pytest.approx(10e9, rel=1e-4)
    out.unlink()
    csv, prof = _two_tier_run(tmp_path, [1])
    r, out = _calibrate(runner, tmp_path, csv, prof)
    assert r.exit_code == 2 and not out.exists()
    assert r.stderr == f"simcli: error: {csv}: only world size 1: nothing to fit; measure world sizes >= 2\n"


def test_calibrate_tier_names_a_tier_the_rows_cross(runner, tmp_path):
    from simcli.io.profiles import load_profile

    csv, prof = _two_tier_run(tmp_path, [2, 4, 8, 16])
    r, out = _calibrate(runner, tmp_path, csv, prof, "--tier", "infiniband")
    assert r.exit_code == 2 and not out.exists()
    assert "--tier: base2 has no tier 'infiniband'; it has nvlink, ib" in r.stderr
    r, out = _calibrate(runner, tmp_path, csv, prof, "--tier", "ib")
    assert r.exit_code == 2 and not out.exists()
    assert "--tier ib: world sizes [2, 4] do not cross tier 'ib'; leave them out with --where" in r.stderr
    # every row fitted to the inner tier: the fitted NVLink is slower than the rings across nodes need, so the
    # profile's IB is the bottleneck there, and that is said
    r, out = _calibrate(runner, tmp_path, csv, prof, "--tier", "nvlink")
    assert r.exit_code == 0, r.output
    assert "tier nvlink: with the fitted values another tier is the bottleneck for k = [8, 16]" in r.stderr
    cal = load_profile(out).calibration
    assert [x["tier"] for x in cal["network"]] == ["nvlink"] and cal["network"][0]["world_sizes"] == [2, 4, 8, 16]


def test_calibrate_on_nccl_and_rccl_profiles(runner, tmp_path):
    a100 = "validation/published/nccl-allreduce-8xA100-nvswitch.csv"
    r, out = _calibrate(runner, tmp_path, a100, "dgx-a100", "--min-size", "1GiB", "--tier", "nvlink")
    assert r.exit_code == 0, r.output
    assert "--tier is for the textbook fit; NCCL's model is fitted on every tier the data identifies" in r.stderr
    out.unlink()
    r, out = _calibrate(runner, tmp_path, "validation/published/rccl-allreduce-8xMI300X-1node.csv", "mi300x")
    assert r.exit_code == 2 and not out.exists()
    assert "--profile: mi300x models RCCL (library: rccl), whose choice simcli does not fit yet" in r.stderr


@pytest.mark.parametrize(
    "args,fitted",
    [
        (
            [
                "tests/fixtures/scaling-fsdp-125m-a100.csv",
                *("-p", "dgx-a100", "--params", "125311488", "--compute-time", "0.40792", "--units", "12"),
                *("--strategy", "fsdp", "--grad-dtype", "bf16", "--no-activation-checkpointing"),
            ],
            "fitted device: speed spread (the slowest of k); from tests/fixtures/scaling-fsdp-125m-a100.csv;",
        ),
        (
            [
                "validation/published/ddp/dle-bert-pytorch-a100.csv",
                *("--where", "series=pyt-a100-s128-fp16", "-p", "dgx-a100", "-m", "bert-large", "--seq-len", "128"),
                *("--optimizer", "lamb", "--update-extras", "flatten", "--overlap", "none"),
            ],
            "fitted device: speed spread (the slowest of k); device: update bandwidth (the per-update time); from "
            "validation/published/ddp/dle-bert-pytorch-a100.csv;",
        ),
        (
            ["measurements/cpu-step-gpt-bf16.csv", "-p", "measurements/detected-cpu-host.yaml"],
            "fitted device: compute rate (mfu); from measurements/cpu-step-gpt-bf16.csv;",
        ),
    ],
)
def test_the_calibrated_profile_s_last_source_says_what_was_fitted_from_what(runner, tmp_path, args, fitted):
    from simcli.io.profiles import load_profile

    out = tmp_path / "cal.yaml"
    r = runner.invoke(app, ["calibrate", *args, "-o", str(out)])
    assert r.exit_code == 0, r.output
    p = load_profile(out)
    assert p.sources[-1].startswith("calibrated by simcli calibrate on ") and fitted in p.sources[-1]
    # the base profile's sources come first, each said to be the base profile's
    assert all(" (the base profile): " in x or "CALIBRATED by simcli calibrate" in x for x in p.sources[:-1])
    assert any(" (the base profile): " in x for x in p.sources[:-1])


def test_calibrate_profile_with_nothing_to_fit_is_refused():
    import datetime

    from simcli.fits.calibration import calibrate_profile
    from simcli.fits.fit_comm import CalibrationOptions
    from simcli.io.profiles import resolve_profile

    now = datetime.datetime(2026, 1, 2, tzinfo=datetime.timezone.utc)
    with pytest.raises(InputError, match="^calibrate: nothing to fit$"):
        calibrate_profile(
            resolve_profile("cpu-loopback"), None, None, opts=CalibrationOptions(name="x", now=now, host="h")
        )


def test_calibrate_with_a_step_file_fits_mfu_and_overlap(runner, tmp_path, synthetic_csv, base_profile):
    steps = tmp_path / "steps.csv"
    rows = ["world_size,backend,mode,params,batch_per_device,steps,t_compute_s,t_comm_s,t_step_s,speedup,efficiency"]
    params, b = 1e6, 32
    tc = 6 * params * b / (50e9 * 0.25)  # mfu 0.25 of the base's 50 GFLOP/s
    for k in (1, 2, 4):
        tm = 0.0 if k == 1 else 0.01 * k
        ts = tc + tm
        rows.append(f"{k},gloo,allreduce,{params:.0f},{b},10,{tc},{tm},{ts},{k * tc / ts},{tc / ts}")
    steps.write_text("\n".join(rows) + "\n")
    out = tmp_path / "cal3.yaml"
    r = runner.invoke(
        app,
        [
            "calibrate",
            str(synthetic_csv),
            str(steps),
            "--profile",
            str(base_profile),
            "--output",
            str(out),
            "--format",
            "json",
        ],
    )
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["step"]["mfu"]["after"] == pytest.approx(0.25)
    assert rep["step"]["overlap"] == pytest.approx(0.0)
    from simcli.io.profiles import load_profile

    assert load_profile(out).device.mfu == pytest.approx(0.25, rel=1e-5)


def test_calibrate_where_is_scoped_per_file(runner, tmp_path, synthetic_csv, base_profile):
    """--where FILE:COLUMN=VALUE filters that file only; a bare COLUMN=VALUE still filters every file with it."""
    steps = tmp_path / "steps.csv"
    rows = ["world_size,backend,mode,params,batch_per_device,steps,t_compute_s,t_comm_s,t_step_s,speedup,efficiency"]
    tc = 6 * 1e6 * 32 / (50e9 * 0.25)
    for k in (1, 2, 4):
        tm = 0.0 if k == 1 else 0.01 * k
        rows.append(f"{k},gloo,allreduce,1000000,32,10,{tc},{tm},{tc + tm},{k * tc / (tc + tm)},{tc / (tc + tm)}")
    steps.write_text("\n".join(rows) + "\n")

    def fit(*where):
        out = tmp_path / f"cal{len(list(tmp_path.iterdir()))}.yaml"
        args = ["calibrate", str(synthetic_csv), str(steps), "--profile", str(base_profile), "--output", str(out)]
        r = runner.invoke(app, [*args, *(x for w in where for x in ("--where", w)), "--format", "json"])
        return r

    assert json.loads(fit().stdout)["tiers"][0]["world_sizes"] == [2, 3, 4]
    # scoped to the all-reduce file: only its world_size=2 rows are fitted, the step file keeps all three k
    r = fit("run1.csv:world_size=2")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["tiers"][0]["world_sizes"] == [2]
    assert rep["step"]["mfu"]["after"] == pytest.approx(0.25)
    # the full path works as the name alone does
    r = fit(f"{synthetic_csv}:world_size=2")
    assert r.exit_code == 0 and json.loads(r.stdout)["tiers"][0]["world_sizes"] == [2]
    # a file that was not given: one line naming the files, exit 2
    r = fit("other.csv:world_size=2")
    assert r.exit_code == 2 and "other.csv" in r.stderr and "run1.csv" in r.stderr and "Traceback" not in r.output
    # scoped to a file without that column: the column is named
    r = fit("steps.csv:size=8")
    assert r.exit_code == 2 and "has no column 'size'" in r.stderr
