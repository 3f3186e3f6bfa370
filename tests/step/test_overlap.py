"""DDP bucket overlap and gradient accumulation: closed form vs timeline, the issue's properties, CLI."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcli.base.types import InputError, Tier, Workload
from simcli.cli import app
from simcli.comm.collectives import allreduce
from simcli.step.buckets import BucketPlan, bucket_exposure, bucket_plan, bucket_timeline
from simcli.step.engine import Scenario, simulate

from conftest import make_profile


def _sc(profile, params=25e6, **kw):
    wl = Workload("w", params=params, flops_per_sample=24e9, batch_per_device=64)
    return Scenario(profile=profile, workload=wl, **kw)


def test_bucket_plan():
    p = bucket_plan(100e6, 25e6)
    assert (p.full, p.size, p.last, p.count) == (4, 25e6, 0.0, 4)
    p = bucket_plan(110e6, 25e6)
    assert (p.full, p.last, p.count) == (4, 10e6, 5)
    p = bucket_plan(10e6, 25e6)  # smaller than one bucket: one message
    assert (p.full, p.last, p.count) == (0, 10e6, 1)
    assert bucket_plan(110e6, None).count == 1


def test_timeline_by_hand(one_tier):
    # 100 MB in 4 buckets of 25 MB; backward 4 ms, so a bucket is ready every 1 ms;
    # each all-reduce takes 1.5 ms: a queue builds, the last ends at 1 + 4·1.5 = 7 ms; exposed 3 ms
    tl = bucket_timeline(bucket_plan(100e6, 25e6), 4e-3, 1.5e-3, c_last=0.0)
    assert [r["ready_s"] for r in tl] == pytest.approx([1e-3, 2e-3, 3e-3, 4e-3])
    assert [r["end_s"] for r in tl] == pytest.approx([2.5e-3, 4e-3, 5.5e-3, 7e-3])
    # through the engine: compute time chosen so that backward (2/3) is 4 ms; 100 MiB of fp32 gradients
    # in DDP's 25 MiB buckets (DDP reads bucket_cap_mb as MiB)
    wl = Workload("w", params=25 * 2**20, flops_per_sample=None)
    sc = Scenario(profile=one_tier, workload=wl, compute_time_s=6e-3)
    assert sc.bucket_bytes == 25 * 2**20
    res = simulate(sc, [4])
    c = allreduce("ring", one_tier.network, np.array([4]), nbytes=25 * 2**20).time[0]
    end = max(1e-3 + 4 * c, 4e-3 + c)
    assert res.t_comm_s[0] == pytest.approx(4 * c)
    assert res.t_comm_exposed_s[0] == pytest.approx(max(0.0, end - 4e-3))
    assert res.t_step_s[0] == pytest.approx(6e-3 + max(0.0, end - 4e-3))
    assert res.t_forward_s[0] == pytest.approx(2e-3) and res.t_backward_s[0] == pytest.approx(4e-3)


bw = st.floats(1e8, 1e12)
lat = st.floats(1e-7, 1e-3)


def _prof(b0, l0, b1, l1, per, node):
    return make_profile(Tier("in", b0, l0, size=node), Tier("out", b1, l1, per=per))


profiles = st.builds(_prof, bw, lat, bw, lat, st.sampled_from(["device", "node"]), st.sampled_from([2, 8]))
algs = st.sampled_from(["ring", "tree", "hierarchical", "auto"])


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 30),
    st.floats(1e3, 1e8),
    st.floats(0, 1e8),
    st.floats(1e-5, 1.0),
    st.floats(0, 0.1),
    st.floats(0, 0.1),
)
def test_closed_form_equals_the_timeline(full, size, last, t_b, c_full, c_last):
    plan = BucketPlan(full=full, size=size, last=last if full else max(last, 1.0))
    total, end = bucket_exposure(plan, np.array([t_b]), np.array([c_full]), c_last=np.array([c_last]))
    tl = bucket_timeline(plan, t_b, c_full, c_last=c_last)
    assert end[0] == pytest.approx(tl[-1]["end_s"], rel=1e-9, abs=1e-15)
    assert total[0] == pytest.approx(plan.full * c_full + (c_last if plan.last else 0.0))


@settings(max_examples=40, deadline=None)
@given(profiles, st.floats(1e6, 1e10), st.floats(0.5, 500), algs, st.integers(1, 8))
def test_overlap_properties(p, params, bucket_mb, alg, accum):
    k = np.array([1, 2, 3, 8, 12, 64, 200])
    sc = _sc(p, params=params, algorithm=alg, bucket_mb=bucket_mb, accum=accum)
    r = simulate(sc, k)
    # T_step >= max(T_compute, T_forward + T_comm) with buckets
    assert np.all(r.t_step_s >= r.t_compute_s * (1 - 1e-12))
    # the last micro-step: forward then at least all of T_comm
    t_fwd_last = r.t_forward_s / accum
    assert np.all(r.t_step_s - (accum - 1) * r.t_compute_s / accum >= (t_fwd_last + r.t_comm_s) * (1 - 1e-9))
    # overlap never makes a step slower than the same all-reduces after backward
    assert np.all(r.t_step_s <= (r.t_compute_s + r.t_comm_s) * (1 + 1e-12))
    assert np.all(r.t_comm_hidden_s >= -1e-15) and np.all(r.t_comm_exposed_s <= r.t_comm_s * (1 + 1e-12))
    # one bucket holding the whole gradient: never slower than no overlap
    one = simulate(sc.replace(bucket_mb=params * 4 / 1e6 * 2), k)
    none = simulate(sc.replace(overlap="none"), k)
    assert np.all(one.t_step_s <= none.t_step_s * (1 + 1e-12))
    assert np.all(none.t_comm_exposed_s == none.t_comm_s) and np.all(none.t_comm_hidden_s == 0)


@settings(max_examples=30, deadline=None)
@given(profiles, st.floats(1e6, 1e10), algs, st.sampled_from(["buckets", "none"]), st.integers(2, 16))
def test_accum_never_lowers_efficiency(p, params, alg, overlap, m):
    k = np.array([1, 2, 8, 16, 100])
    sc = _sc(p, params=params, algorithm=alg, overlap=overlap)
    e1 = simulate(sc, k).efficiency
    em = simulate(sc.replace(accum=m), k)
    assert np.all(em.efficiency >= e1 * (1 - 1e-12))
    assert em.speedup[0] == pytest.approx(1.0)
    assert np.all(em.samples_per_s == pytest.approx(k * 64 * m / em.t_step_s))


def test_bigger_bucket_fewer_latency_terms_more_exposed(one_tier):
    # a fast network: every bucket is done before the next is ready, so only the last bucket is exposed
    fast = make_profile(Tier("net", 1e12, 1e-6))
    sc = _sc(fast, params=250 * 2**20)  # 1000 MiB of fp32 gradients
    small = simulate(sc.replace(bucket_mb=10), [8])
    big = simulate(sc.replace(bucket_mb=100), [8])
    assert small.plan.count == 100 and big.plan.count == 10
    assert small.comm.latency[0] == pytest.approx(10 * big.comm.latency[0])
    assert big.t_comm_exposed_s[0] > small.t_comm_exposed_s[0]
    assert big.t_comm_exposed_s[0] == pytest.approx(big.comm_bucket.time[0])
    assert small.t_comm_exposed_s[0] == pytest.approx(small.comm_bucket.time[0])


def test_strong_scaling_with_accum(one_tier):
    sc = _sc(one_tier, global_batch=512, accum=4)
    r = simulate(sc, [1, 4])
    assert r.batch_per_device.tolist() == [128, 32]  # per micro-step
    assert r.speedup[0] == pytest.approx(1.0)
    assert r.t_compute_s[1] == pytest.approx(r.t_compute_s[0] / 4)


def test_buckets_are_vectorised(two_tier):
    r = simulate(_sc(two_tier, params=7e9), np.arange(1, 100001))
    # 28 GB of fp32 gradients in 25 MiB buckets: 1068 full ones and a partial one
    assert r.plan.count == int(np.ceil(7e9 * 4 / (25 * 2**20))) == 1069 and np.all(np.isfinite(r.t_step_s))


@pytest.mark.parametrize(
    "kw,fragment",
    [
        ({"overlap": "always"}, "--overlap"),
        ({"bucket_mb": 0}, "--bucket-mb"),
        ({"accum": 0}, "--accum"),
        ({"accum": 1.5}, "--accum"),
        ({"backward_fraction": 1.5}, "backward_fraction"),
        ({"algorithm": "rng"}, "--algorithm"),
    ],
)
def test_scenario_refuses(one_tier, kw, fragment):
    with pytest.raises(InputError, match=fragment):
        _sc(one_tier, **kw)


def test_cli_overlap_options(runner, prof):
    base = ["speedup", "-p", prof, "-k", "1..64:x2", "-f", "json"]
    none = json.loads(runner.invoke(app, base + ["--overlap", "none"]).stdout)
    for x in none:
        assert x["t_step_s"] == pytest.approx(x["t_compute_s"] + x["t_comm_s"])
        assert x["t_comm_exposed_s"] == x["t_comm_s"]
    r = runner.invoke(app, base + ["--bucket-mb", "10", "--accum", "4"])
    assert r.exit_code == 0, r.output
    for x, y in zip(json.loads(r.stdout), none):
        assert x["t_step_s"] == pytest.approx(x["t_compute_s"] + x["t_comm_exposed_s"])
        assert x["efficiency"] >= y["efficiency"]
    for bad, fragment in (
        [("--overlap", "half"), "--overlap"],
        [("--accum", "0"), "--accum"],
        [("--bucket-mb", "-1"), "--bucket-mb"],
    ):
        r = runner.invoke(app, ["speedup", "-p", prof, *bad])
        assert r.exit_code == 2 and fragment in r.stderr and "Traceback" not in r.output
