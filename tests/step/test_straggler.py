"""The slowest-of-k model (simcli.step.straggler): expected maxima of normals, the spread's fit, and the engine's
use."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcli.base.types import InputError, Workload
from simcli.cli.app import app
from simcli.io.profiles import list_profiles, profile_from_dict, profile_to_dict, resolve_profile
from simcli.step import straggler
from simcli.step.engine import Scenario, simulate


# E[max of n standard normals]: Tippett (1925) and Harter (1961); n = 2 and 3 in closed form
@pytest.mark.parametrize(
    "k, m",
    [
        (1, 0.0),
        (2, 1 / math.sqrt(math.pi)),
        (3, 1.5 / math.sqrt(math.pi)),
        (5, 1.16296),
        (10, 1.53875),
        (20, 1.86748),
        (100, 2.50759),
        (1000, 3.24144),
    ],
)
def test_expected_max_is_the_published_value(k, m):
    assert float(straggler.expected_max(k)) == pytest.approx(m, abs=2e-5)


def test_expected_max_by_sampling():
    rng = np.random.default_rng(0)
    draws = rng.standard_normal((20000, 16)).max(axis=1)
    # 20000 draws of the max of 16: the standard error of their mean is about 0.004
    assert float(straggler.expected_max(16)) == pytest.approx(draws.mean(), abs=0.02)


def test_expected_max_grows_ever_more_slowly():
    k = 2 ** np.arange(0, 21)
    m = straggler.expected_max(k)
    steps = np.diff(m)
    assert np.all(steps > 0)
    assert np.all(np.diff(steps[1:]) < 0)  # front-loaded: every doubling from 2 on adds less than the one before


def test_spread_from_inverts_the_ratio():
    for sigma, k0, k1 in ((0.05, 16, 32), (0.01, 8, 64), (0.2, 1, 2)):
        m0, m1 = straggler.expected_max([k0, k1])
        ratio = (1 + sigma * m0) / (1 + sigma * m1)
        assert straggler.spread_from(float(ratio), k0, k1) == pytest.approx(sigma, rel=1e-9)
    assert straggler.spread_from(1.01, 16, 32) < 0  # faster at more devices: no spread explains it
    with pytest.raises(ValueError):
        straggler.spread_from(0.9, 32, 16)


def _scenario(profile, **kw):
    wl = Workload("w", params=25e6, flops_per_sample=24e9, batch_per_device=64)
    return Scenario(profile=profile, workload=wl, **kw)


def test_the_engine_stretches_compute_by_the_slowest_of_k(two_tier):
    k = [1, 8, 64]
    plain = simulate(_scenario(two_tier), k)
    slow = simulate(_scenario(two_tier, spread=0.04), k)
    factor = 1 + 0.04 * straggler.expected_max(k)
    assert slow.t_compute_s == pytest.approx(plain.t_compute_s * factor)
    assert slow.t_straggler_s == pytest.approx(plain.t_compute_s * (factor - 1))
    assert slow.speedup[0] == pytest.approx(1.0)  # one device waits for no one
    assert np.all(slow.t_step_s >= plain.t_step_s)
    assert plain.t_straggler_s.tolist() == [0.0, 0.0, 0.0]
    zero = simulate(_scenario(two_tier, spread=0.0), k)
    assert zero.t_step_s.tolist() == plain.t_step_s.tolist()


def test_weak_scaling_ratio_is_the_closed_form_when_nothing_communicates(one_tier):
    """With overlap none and a free network the per-device throughput ratio is (1 + σ m_k0)/(1 + σ m_k)."""
    free = dataclasses.replace(one_tier, network=(dataclasses.replace(one_tier.network[0], latency_s=0.0),))
    wl = Workload("w", params=1.0, flops_per_sample=24e9, batch_per_device=64)
    res = simulate(Scenario(profile=free, workload=wl, spread=0.1, overlap="none"), [16, 128])
    m16, m128 = straggler.expected_max([16, 128])
    assert res.efficiency[1] / res.efficiency[0] == pytest.approx((1 + 0.1 * m16) / (1 + 0.1 * m128), rel=1e-6)


@settings(max_examples=40, deadline=None)
@given(
    sigma=st.floats(min_value=0.0, max_value=0.5),
    more=st.floats(min_value=0.0, max_value=0.4),
    k=st.integers(min_value=1, max_value=4096),
    strategy=st.sampled_from(["ddp", "fsdp", "zero2"]),
)
def test_a_larger_spread_never_makes_a_step_shorter(sigma, more, k, strategy):
    """With the compute speed taken on one device (--mfu given: k0 = 1), a larger spread only adds waiting; against
    an MFU measured at k0 (dgx-h100's device.mfu_at_k) it adds above k0 and takes away below (issue 22)."""
    p = resolve_profile("dgx-h100")
    wl = Workload("w", params=1e9, flops_per_sample=6e9 * 2048, batch_per_device=4, layers=24)
    for mfu in (0.4, None):
        a = simulate(Scenario(profile=p, workload=wl, strategy=strategy, spread=sigma, mfu=mfu), [k])
        b = simulate(Scenario(profile=p, workload=wl, strategy=strategy, spread=min(sigma + more, 0.99), mfu=mfu), [k])
        k0 = a.scenario.reference_k
        if k >= k0:
            assert b.t_step_s[0] >= a.t_step_s[0] * (1 - 1e-12)
        else:
            assert b.t_step_s[0] <= a.t_step_s[0] * (1 + 1e-12)


def test_the_profile_carries_the_spread_and_the_option_overrides_it(two_tier):
    d = profile_to_dict(resolve_profile("dgx-a100"))
    d["device"]["spread"] = 0.03
    p = profile_from_dict(d, "t.yaml")
    assert p.device.spread == 0.03
    assert profile_to_dict(p)["device"]["spread"] == 0.03
    wl = Workload("w", params=25e6, flops_per_sample=24e9, batch_per_device=64)
    assert Scenario(profile=p, workload=wl).device_spread == 0.03
    assert Scenario(profile=p, workload=wl, spread=0.0).device_spread == 0.0
    d["device"]["spread"] = 1.5
    with pytest.raises(InputError, match=r"device\.spread"):
        profile_from_dict(d, "t.yaml")


def test_every_gpu_profile_carries_the_published_gpu_spread_and_its_source():
    """device.spread is Sinha et al.'s 8% variation (SC22, v3) read with their artifact's definition.

    plot_aggregated.py: (Q3 + 1.5 IQR - (Q1 - 1.5 IQR)) / median = 4 IQR / median; a normal's IQR is
    2·Φ⁻¹(0.75)·σ, so 8% is σ = 0.08 / (8·Φ⁻¹(0.75)).
    """
    from statistics import NormalDist

    sigma = 0.08 / (8 * NormalDist().inv_cdf(0.75))
    assert round(sigma, 4) == 0.0148
    names = [e.name for e in list_profiles() if e.origin == "built-in"]
    assert len(names) >= 8
    for name in names:
        p = resolve_profile(name)
        assert p.device.spread is None, name  # one default per device kind, not a number copied into each file
        sigma, src = straggler.default_spread(p)
        if name == "cpu-loopback":  # CPU processes, not GPUs: no population measured
            assert sigma == 0.0
            continue
        assert sigma == 0.0148 and "Sinha et al. SC22" in src, name


def test_the_scenario_refuses_a_spread_outside_0_1(one_tier):
    for bad in (1.01, -0.01, float("nan")):
        with pytest.raises(InputError, match="--spread"):
            _scenario(one_tier, spread=bad)


def test_cli_spread_option(runner):
    r = runner.invoke(app, ["speedup", "-m", "gpt2", "-k", "1,64", "--spread", "3%", "--mfu", "0.4", "-f", "json"])
    assert r.exit_code == 0, r.output
    import json

    d = json.loads(r.stdout)
    recs = d["records"] if isinstance(d, dict) else d
    assert recs[0]["t_straggler_s"] == 0.0 and recs[1]["t_straggler_s"] > 0
    bad = runner.invoke(app, ["speedup", "-m", "gpt2", "-k", "8", "--spread", "150%"])
    assert bad.exit_code == 2 and "--spread" in bad.stderr and "Traceback" not in bad.output
    r = runner.invoke(app, ["explain", "-m", "gpt2", "-k", "64", "--spread", "3%"])
    assert r.exit_code == 0 and "slowest of k" in r.stdout


def test_fit_spread_recovers_the_spread_that_made_the_table():
    from simcli.fits.fit_compute import fit_spread

    p = resolve_profile("dgx-a100")
    wl = Workload("w", params=125e6, flops_per_sample=None, layers=12, batch_per_device=26)
    sc = Scenario(profile=p, workload=wl, compute_time_s=0.4, strategy="fsdp", grad_dtype="bf16")
    k = np.array([16, 32, 64, 128])
    truth = simulate(sc.replace(spread=0.05), k)
    f = fit_spread(sc, k, truth.speedup * 3.0)  # any reference throughput: only ratios count
    assert f.spread == pytest.approx(0.05, abs=1e-6)
    assert f.k0 == 16 and f.n_rows == 3
    assert all(r["predicted_after"] == pytest.approx(r["measured"], rel=1e-6) for r in f.rows)
    flat = fit_spread(sc, k, simulate(sc.replace(spread=0.0), k).speedup)  # a table met without a spread
    assert flat.spread == 0.0
    # a measured table is noisy: +-0.4% on each row moves the fit, and its standard error says by how much
    noisy = truth.speedup * np.array([1.0, 1.004, 0.996, 1.004])
    g = fit_spread(sc, k, noisy)
    assert g.spread_se is not None and g.spread_se > 0
    assert g.spread != pytest.approx(0.05, abs=1e-4) and abs(g.spread - 0.05) < 3 * g.spread_se
    with pytest.raises(InputError, match="measure two or more"):
        fit_spread(sc, np.array([16, 16]), np.array([16.0, 16.0]))


SCALING = """\
# a weak-scaling run: per-device throughput x k (ratios only)
devices,batch_per_device,speedup
16,26,16
32,26,31.163
64,26,61.401
128,26,121.529
"""

RUN = ["--params", "125311488", "--compute-time", "0.40792", "--units", "12", "--strategy", "fsdp"]


def test_calibrate_fits_the_spread_from_a_scaling_table_and_speedup_uses_it(runner, tmp_path):
    table = tmp_path / "run.csv"
    table.write_text(SCALING)
    out = tmp_path / "cluster.yaml"
    args = ["calibrate", str(table), "-p", "dgx-a100", *RUN, "--grad-dtype", "bf16", "-o", str(out)]
    r = runner.invoke(app, [*args, "--no-activation-checkpointing", "-f", "json"])
    assert r.exit_code == 0, r.output
    import json

    rep = json.loads(r.stdout)
    sigma = rep["spread"]["after"]
    assert 0.06 < sigma < 0.09 and rep["spread"]["se"] > 0
    assert rep["spread"]["median_rel_error_after"] < rep["spread"]["median_rel_error_before"]
    prof = resolve_profile(str(out))
    assert prof.device.spread == pytest.approx(sigma, rel=1e-5)
    sp = runner.invoke(app, ["speedup", "-p", str(out), *RUN, "--grad-dtype", "bf16", "-k", "16,128", "-f", "json"])
    recs = json.loads(sp.stdout)
    recs = recs["records"] if isinstance(recs, dict) else recs
    assert recs[1]["efficiency"] / recs[0]["efficiency"] == pytest.approx(
        rep["spread"]["per_row"][-1]["predicted_after"], rel=1e-4
    )


def test_calibrate_scaling_table_refusals(runner, tmp_path):
    table = tmp_path / "run.csv"
    table.write_text(SCALING)
    out = str(tmp_path / "o.yaml")
    no_profile = runner.invoke(app, ["calibrate", str(table), *RUN, "-o", out])
    assert no_profile.exit_code == 2 and "--profile" in no_profile.stderr
    no_model = runner.invoke(app, ["calibrate", str(table), "-p", "dgx-a100", "-o", out])
    assert no_model.exit_code == 2 and "--model" in no_model.stderr
    bench = tmp_path / "ar.csv"
    bench.write_text("world_size,bytes,time_s\n2,1048576,0.001\n2,4194304,0.003\n")
    stray = runner.invoke(app, ["calibrate", str(bench), "-p", "cpu-loopback", "--strategy", "fsdp", "-o", out])
    assert stray.exit_code == 2 and "--strategy" in stray.stderr and "scaling table" in stray.stderr
    assert not (tmp_path / "o.yaml").exists()


def test_plan_says_what_the_wait_costs(runner):
    # --mfu: a compute speed taken on one device, so every k > 1 waits (dgx-h100's own mfu was measured at 16,384)
    args = "plan max-devices -m gpt2 -p dgx-h100 --min-efficiency 0.9 -k 1..64 --mfu 0.4".split()
    with_spread = runner.invoke(app, [*args, "--spread", "3%"])
    assert with_spread.exit_code == 0, with_spread.output
    assert "waiting for the slowest device" in with_spread.stdout and "--spread 3%" in with_spread.stdout
    none = runner.invoke(app, [*args, "--spread", "0"])
    assert none.exit_code == 0 and "slowest" not in none.stdout
    default = runner.invoke(app, args)  # the default spread of the device kind (1.48%) is a wait too
    assert "waiting for the slowest device" in default.stdout and "--spread" not in default.stdout


def test_minimise_scalar_finds_interior_and_boundary_minima():
    from simcli.fits.fit_compute import minimise_scalar

    assert minimise_scalar(lambda x: (x - 0.3) ** 2, 0.0, 0.9) == pytest.approx(0.3, abs=1e-9)
    assert minimise_scalar(lambda x: (x + 0.1) ** 2, 0.0, 0.9) == 0.0  # the bound itself, exactly


def test_the_stored_m_k_table_is_the_integration():
    """simcli/step/straggler_table.py holds what straggler._exact integrates at the table's k (no run integrates at
    start-up); a change to the grid without write_table() fails here."""
    from pathlib import Path

    from simcli.step import straggler

    stored = Path(straggler.__file__).with_name("straggler_table.py").read_text(encoding="utf-8")
    fresh = straggler.table_source()
    # the same text around the numbers, and as many numbers: the file is what write_table() writes
    number = r"-?[0-9.]+(?:e-?[0-9]+)?,\n"
    assert re.sub(number, "X\n", stored) == re.sub(number, "X\n", fresh)
    logk, m = straggler._table()
    assert np.array_equal(logk, np.log(straggler._table_k()))
    # the numbers agree to rounding, not to the last bit: exp and log are vectorised differently by numpy's
    # dispatch on each CPU (AVX-512 or not, NEON), which moves the midpoint sum by a few ulp (issue 39); a
    # change to the grid moves them by 1e-7 or more
    np.testing.assert_allclose(m, straggler._exact(straggler._table_k()), rtol=1e-12, atol=1e-12)
    # Tippett's and Harter's values (to their 4-5 digits)
    assert straggler.expected_max([2, 10, 100, 1000]).round(4).tolist() == [0.5642, 1.5388, 2.5076, 3.2414]
