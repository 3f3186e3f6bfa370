"""Closed-form checks by hand and properties of the ring model and the engine."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcli.base.types import InputError, Tier, Workload
from simcli.comm.specs import busbw_factor
from simcli.comm.textbook import ring_allreduce
from simcli.comm.topology import tier_bandwidth
from simcli.step.engine import Scenario, simulate

from conftest import make_profile


def test_ring_by_hand_k2_and_k8(one_tier):
    # one tier: B = 10 GB/s, alpha = 20 us; n = 100 MB
    n = 100e6
    c2 = ring_allreduce(one_tier.network, np.array([2]), n)
    # k=2: 2(k-1)·α = 40 us; 2(k-1)/k · n/B = 1 · 100e6/10e9 = 10 ms
    assert c2.time[0] == pytest.approx(40e-6 + 10e-3)
    c8 = ring_allreduce(one_tier.network, np.array([8]), n)
    # k=8: 14·20 us = 280 us; 14/8 · 10 ms = 17.5 ms
    assert c8.latency[0] == pytest.approx(280e-6)
    assert c8.bandwidth[0] == pytest.approx(17.5e-3)
    assert ring_allreduce(one_tier.network, np.array([1]), n).time[0] == 0.0


def test_busbw_factor():
    assert busbw_factor(np.array([2, 4, 8])).tolist() == pytest.approx([1.0, 1.5, 1.75])


def test_two_tiers_by_hand(two_tier):
    n = 1e9
    c = ring_allreduce(two_tier.network, np.array([8, 16]), n)
    # k=8 inside a node: B = 100 GB/s, alpha = 5 us
    assert c.time[0] == pytest.approx(14 * 5e-6 + 1.75 * n / 100e9)
    # k=16 on two nodes, one 25 GB/s link per device: the node reaches the IB tier with 8 x 25 = 200 GB/s,
    # more than NVLink's 100, so NVLink stays the bottleneck; alpha is IB's 10 us
    assert c.time[1] == pytest.approx(30 * 10e-6 + 30 / 16 * n / 100e9)
    assert c.bottleneck.tolist() == [0, 0]


def test_per_node_nic_is_much_slower_than_per_device():
    nv = Tier("nvlink", 300e9 * 0.8, 3e-6, size=8)
    per_device = make_profile(nv, Tier("ib", 400e9 / 8, 8e-6, per="device"))
    per_node = make_profile(nv, Tier("ib", 100e9 / 8, 8e-6, per="node"))
    k = np.array([16, 64])
    n = 1e9
    fast = ring_allreduce(per_device.network, k, n).time
    slow = ring_allreduce(per_node.network, k, n).time
    # per device: 8 NICs x 50 GB/s = 400 GB/s aggregate > 240 GB/s NVLink; per node: one 12.5 GB/s NIC
    assert tier_bandwidth(per_node.network, k)[1].tolist() == [12.5e9, 12.5e9]
    assert tier_bandwidth(per_device.network, k)[1].tolist() == [400e9, 400e9]
    assert np.all(slow / fast > 15)


def test_partial_node_limits_per_device_links(two_tier):
    # k = 12 on 8-device nodes: nodes of 8 and 4 devices; the 4-device node reaches IB with 4 x 25 GB/s
    bw = tier_bandwidth(two_tier.network, np.array([12, 16, 9]))
    assert bw[1].tolist() == [100e9, 200e9, 25e9]


def test_tier_0_shared_medium():
    p = make_profile(Tier("pcie", 32e9, 5e-6, size=8, per="node"), Tier("eth", 12.5e9, 20e-6, per="node"))
    assert tier_bandwidth(p.network, np.array([2, 4, 8]))[0].tolist() == [16e9, 8e9, 4e9]


def _scenario(profile, **kw):
    wl = Workload("w", params=25e6, flops_per_sample=24e9, batch_per_device=64)
    return Scenario(profile=profile, workload=wl, **kw)


def test_weak_scaling_by_hand(one_tier):
    sc = _scenario(one_tier, overlap="none")
    res = simulate(sc, [1, 2])
    t_compute = 24e9 * 64 / (100e12 * 0.5)
    t_comm = 2 * 20e-6 + 1.0 * 25e6 * 4 / 10e9
    assert res.t_compute_s.tolist() == pytest.approx([t_compute] * 2)
    assert res.t_comm_s.tolist() == pytest.approx([0.0, t_comm])
    assert res.speedup[1] == pytest.approx(2 * t_compute / (t_compute + t_comm))
    assert res.samples_per_s[1] == pytest.approx(2 * 64 / (t_compute + t_comm))


def test_strong_scaling_by_hand(one_tier):
    sc = _scenario(one_tier, global_batch=256, overlap="none")
    res = simulate(sc, [1, 4])
    t1 = 24e9 * 256 / 50e12
    t4 = t1 / 4 + 6 * 20e-6 + 1.5 * 100e6 / 10e9
    assert res.speedup.tolist() == pytest.approx([1.0, t1 / t4])
    assert res.batch_per_device.tolist() == [256, 64]


def test_compute_time_replaces_flops(one_tier):
    wl = Workload("w", params=5e8, flops_per_sample=None)
    res = simulate(Scenario(profile=one_tier, workload=wl, compute_time_s=0.46), [1, 8])
    assert res.t_compute_s.tolist() == [0.46, 0.46]
    strong = simulate(Scenario(profile=one_tier, workload=wl, compute_time_s=0.4, global_batch=64), [1, 4])
    assert strong.t_compute_s.tolist() == pytest.approx([0.4, 0.1])


def test_grad_dtype_halves_bytes(one_tier):
    a = simulate(_scenario(one_tier), [8])
    b = simulate(_scenario(one_tier, grad_dtype="bf16"), [8])
    assert b.comm.bandwidth[0] == pytest.approx(a.comm.bandwidth[0] / 2)


@pytest.mark.parametrize(
    "kw,fragment",
    [
        ({"batch_per_device": 8, "global_batch": 64}, "exclude each other"),
        ({"dtype": "fp8"}, "no peak"),
        ({"grad_dtype": "int3"}, "--grad-dtype"),
        ({"mfu": 1.5}, "--mfu"),
        ({"mfu": 0.0}, "--mfu"),
    ],
)
def test_scenario_refuses(one_tier, kw, fragment):
    with pytest.raises(InputError, match=fragment):
        _scenario(one_tier, **kw)


@pytest.mark.parametrize(
    "kw,message",
    [
        ({"global_batch": 0}, "--global-batch: 0 must be at least 1"),
        ({"compute_time_s": -1.0}, "--compute-time: -1.0 must be a positive number of seconds"),
        ({"overlap": "half"}, "--overlap: unknown mode 'half'; choose one of"),
        ({"bucket_mb": float("nan")}, "--bucket-mb: nan must be a positive number of MiB"),
        ({"bucket_mb": 1e-9}, "--bucket-mb: 1e-09 MiB is below the smallest bucket simcli models"),
        ({"accum": 1.5}, "--accum: 1.5 must be a whole number of micro-steps, at least 1"),
        ({"accum": True}, "--accum: True must be a whole number of micro-steps"),
        ({"backward_fraction": 1.5}, "backward_fraction: 1.5 is not in [0, 1]"),
        ({"param_dtype": "int3"}, "--param-dtype: unknown dtype 'int3'"),
        ({"shard_group": 0}, "--shard-group: 0 must be a whole number, at least 1"),
        ({"units": 2.5}, "--units: 2.5 must be a whole number, at least 1"),
        ({"strategy": "fsdp", "units": 200_000}, "--units: 200,000 FSDP units is more than simcli models"),
        ({"spread": 2.0}, "--spread: 2.0 is not in [0, 1]"),
        ({"update_time_s": -1.0}, "--update-time: -1.0 must be a non-negative number of seconds"),
        ({"compute_time_at_k": 0}, "--compute-time-at-k: 0 must be a whole number of devices, at least 1"),
        # several bad fields: the first group's is the one named (batch, compute, communication, buckets, ...)
        ({"accum": 0, "compute_time_s": 0.0}, "--compute-time: 0.0 must be a positive number"),
        ({"spread": 5.0, "bucket_mb": -1.0}, "--bucket-mb: -1.0 must be a positive number"),
        ({"units": 0, "backward_fraction": -1.0}, "backward_fraction: -1.0 is not in"),
        ({"update_time_s": -1.0, "param_dtype": "x"}, "--param-dtype: unknown dtype 'x'"),
    ],
)
def test_scenario_names_the_first_bad_field(one_tier, kw, message):
    with pytest.raises(InputError) as e:
        _scenario(one_tier, **kw)
    assert str(e.value).startswith(message)


def test_scenario_without_a_compute_source_is_refused(one_tier):
    wl = Workload("w", params=25e6, flops_per_sample=None, batch_per_device=64)
    with pytest.raises(InputError, match="the workload has no FLOPs per sample: give --flops-per-sample"):
        Scenario(profile=one_tier, workload=wl)
    assert Scenario(profile=one_tier, workload=wl, compute_time_s=0.1).compute_time_s == 0.1


def test_scenario_resolves_the_algorithm_protocol_and_extras(one_tier):
    sc = _scenario(one_tier, protocol="simple", update_extras=["clip", "unscale", "clip"])
    assert sc.algorithm == "ring" and sc.protocol == "simple"
    assert sc.update_extras == ("clip", "unscale")  # each once, in the order given, a tuple


def test_devices_beyond_profile_refused():
    p = make_profile(Tier("nvl", 900e9, 1e-6, size=72))
    with pytest.raises(InputError, match="exceed"):
        simulate(_scenario(p), [1, 128])


def test_vectorised_over_many_k(two_tier):
    k = np.arange(1, 100001)
    res = simulate(_scenario(two_tier), k)
    assert res.speedup.shape == (100000,)
    assert np.all(np.isfinite(res.t_step_s))


# ----------------------------------------------------------------------------- properties

bw = st.floats(1e8, 1e12)
lat = st.floats(1e-7, 1e-3)
sizes = st.floats(1.0, 1e11)


def _prof(b0, l0, b1, l1, per, node):
    return make_profile(Tier("in", b0, l0, size=node), Tier("out", b1, l1, per=per))


profiles = st.builds(_prof, bw, lat, bw, lat, st.sampled_from(["device", "node"]), st.sampled_from([2, 4, 8]))


@settings(max_examples=60, deadline=None)
@given(profiles, st.floats(1e6, 1e11), st.integers(1, 512))
def test_speedup_bounds(p, params, batch):
    wl = Workload("w", params=params, flops_per_sample=1e9, batch_per_device=batch)
    res = simulate(Scenario(profile=p, workload=wl), np.arange(1, 130))
    assert res.speedup[0] == pytest.approx(1.0)
    assert np.all(res.speedup <= res.devices + 1e-9)
    assert np.all(res.efficiency <= 1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(profiles, sizes, sizes, st.integers(2, 300))
def test_comm_grows_with_bytes(p, n1, n2, k):
    lo, hi = sorted([n1, n2])
    a = ring_allreduce(p.network, np.array([k]), lo).time[0]
    b = ring_allreduce(p.network, np.array([k]), hi).time[0]
    assert b >= a


@settings(max_examples=60, deadline=None)
@given(profiles, sizes, st.integers(2, 300), st.floats(0.1, 1.0), st.integers(0, 1))
def test_less_bandwidth_never_faster(p, n, k, factor, tier):
    import dataclasses

    slower = list(p.network)
    slower[tier] = dataclasses.replace(slower[tier], bandwidth_Bps=slower[tier].bandwidth_Bps * factor)
    q = p.replace(network=tuple(slower))
    a = ring_allreduce(p.network, np.array([k]), n).time[0]
    b = ring_allreduce(q.network, np.array([k]), n).time[0]
    assert b >= a * (1 - 1e-12)
    wl = Workload("w", params=n / 4, flops_per_sample=1e9, batch_per_device=32)
    s_fast = simulate(Scenario(profile=p, workload=wl), [k]).t_step_s[0]
    s_slow = simulate(Scenario(profile=q, workload=wl), [k]).t_step_s[0]
    assert s_slow >= s_fast * (1 - 1e-12)
