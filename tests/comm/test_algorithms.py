"""All-reduce algorithms: hand-computed costs, topology cases, bounds (hypothesis), auto, crossovers, CLI."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcli.base.types import InputError, Tier
from simcli.cli import app
from simcli.comm import collectives as C
from simcli.comm import crossover, registry, topology

from conftest import make_profile

B, A = 10e9, 20e-6  # the one_tier fixture: 10 GB/s, 20 us


def t(alg, profile, k, n, gamma=None):
    return C.allreduce(alg, profile.network, np.array([k]), nbytes=n, reduce_Bps=gamma)


# ----------------------------------------------------------------------------- by hand, one tier


@pytest.mark.parametrize(
    "alg,k,lat_steps,bw_factor",
    [
        ("ring", 8, 14, 1.75),
        ("ring", 6, 10, 10 / 6),
        ("tree", 8, 6, 2.0),
        ("tree", 6, 6, 2.0),  # 2·ceil(lg k)·α + 2n/B
        ("recursive-doubling", 8, 3, 3.0),  # lg k·(α + n/B)
        ("recursive-doubling", 6, 4, 4.0),  # floor(lg 6) + 2 = 4 steps
        ("rabenseifner", 8, 6, 1.75),  # 2 lg k·α + 2(k-1)/k·n/B
        ("rabenseifner", 6, 6, 1.5 + 2.0),  # k' = 4: (2·2 + 2)α + (2·3/4 + 2)·n/B
        ("hierarchical", 8, 14, 1.75),
        ("hierarchical", 6, 10, 10 / 6),  # one tier: the ring
        ("ps", 8, 14, 14.0),
        ("ps", 6, 10, 10.0),  # 2(k-1)α + 2(k-1)·n/B
        ("ps-sharded", 8, 14, 1.75),
        ("ps-sharded", 6, 10, 10 / 6),
    ],
)
@pytest.mark.parametrize("n", [1e6, 4e9])
def test_one_tier_by_hand(one_tier, alg, k, lat_steps, bw_factor, n):
    c = t(alg, one_tier, k, n)
    assert c.latency[0] == pytest.approx(lat_steps * A)
    assert c.bandwidth[0] == pytest.approx(bw_factor * n / B)
    assert c.time[0] == pytest.approx(lat_steps * A + bw_factor * n / B)
    assert t(alg, one_tier, 1, n).time[0] == 0.0


@pytest.mark.parametrize(
    "alg,factor",
    [
        ("ring", 7 / 8),
        ("recursive-doubling", 3),
        ("rabenseifner", 7 / 8),
        ("ps", 7),
        ("ps-sharded", 7 / 8),
        ("tree", 1),
        ("hierarchical", 7 / 8),
    ],
)
def test_reduction_term_uses_gamma(one_tier, alg, factor):
    n, gamma = 1e8, 50e9
    c = t(alg, one_tier, 8, n, gamma)
    assert c.reduction[0] == pytest.approx(factor * n / gamma)
    assert t(alg, one_tier, 8, n).reduction[0] == 0.0


def test_hierarchical_two_tiers_by_hand(two_tier):
    # nvlink 100 GB/s, 5 us, 8 per node; ib 25 GB/s per device, 10 us
    n = 1e9
    c = t("hierarchical", two_tier, 16, n)
    intra = 14 * 5e-6 + 1.75 * n / 100e9  # reduce-scatter + all-gather among 8
    inter = 2 * 10e-6 + 1.0 * n / (8 * 25e9)  # all-reduce across 2 nodes, 8 NICs per node
    assert c.time[0] == pytest.approx(intra + inter)
    assert c.tier_latency[:, 0].tolist() == pytest.approx([14 * 5e-6, 2 * 10e-6])
    assert c.tier_bandwidth_s[:, 0].tolist() == pytest.approx([1.75 * n / 100e9, n / 200e9])
    # k = 12: a node of 8 and one of 4; the 4-device node reaches IB with 4 x 25 GB/s
    c12 = t("hierarchical", two_tier, 12, n)
    assert c12.time[0] == pytest.approx(intra + 2 * 10e-6 + n / 100e9)
    # inside one node it is the ring
    assert t("hierarchical", two_tier, 8, n).time[0] == pytest.approx(t("ring", two_tier, 8, n).time[0])


def test_flat_algorithms_use_the_per_device_link(two_tier):
    # every device sends across IB at once: 25 GB/s each, not the node's 200 GB/s aggregate
    assert topology.tier_link_bandwidth(two_tier.network, np.array([16]))[:, 0].tolist() == [100e9, 25e9]
    c = t("rabenseifner", two_tier, 16, 1e9)
    assert c.bandwidth[0] == pytest.approx(2 * 15 / 16 * 1e9 / 25e9)
    assert c.latency[0] == pytest.approx(8 * 10e-6)
    assert c.bottleneck[0] == 1


# ----------------------------------------------------------------------------- topology cases

NV = Tier("nvlink", 450e9, 3e-6, size=8, efficiency=0.8)


def test_dgx_h100_vs_one_shared_nic():
    per_gpu = make_profile(NV, Tier("ib", 400e9 / 8, 8e-6, per="device", efficiency=0.8))
    shared = make_profile(NV, Tier("ib", 100e9 / 8, 8e-6, per="node", efficiency=0.8))
    k, n = np.array([16, 64, 256]), 1e9
    for alg in ("ring", "hierarchical", "tree"):
        fast = C.allreduce(alg, per_gpu.network, k, nbytes=n).time
        slow = C.allreduce(alg, shared.network, k, nbytes=n).time
        assert np.all(slow / fast > 4), alg
    # the documented formula: the ring's inter-node term 2(k-1)/k · n / B with B = 12.5 GB/s x 0.8 (one NIC)
    # against min(NVLink 360 GB/s, 8 x 40 GB/s) = 320 GB/s
    ring_slow = C.allreduce("ring", shared.network, k, nbytes=n)
    assert ring_slow.bandwidth.tolist() == pytest.approx((2 * (k - 1) / k * n / 10e9).tolist())
    ring_fast = C.allreduce("ring", per_gpu.network, k, nbytes=n)
    assert ring_fast.bandwidth.tolist() == pytest.approx((2 * (k - 1) / k * n / 320e9).tolist())


def test_nvl72_never_touches_the_network_up_to_72():
    p = make_profile(Tier("nvlink", 900e9, 3.4e-6, size=72, efficiency=0.8), Tier("ib", 50e9, 14e-6, per="device"))
    k = np.arange(2, 73)
    assert not topology.tier_spanned(p.network, k)[1].any()
    for alg in registry.TEXTBOOK_CHOICES:
        c = C.allreduce(alg, p.network, k, nbytes=1e8)
        assert np.all(c.tier_latency[1] == 0) and np.all(c.tier_bandwidth_s[1] == 0), alg
        assert np.all(c.bottleneck == 0), alg
    assert topology.tier_spanned(p.network, np.array([73]))[1, 0]


def test_three_tiers():
    p = make_profile(
        Tier("nvlink", 300e9, 2e-6, size=8),
        Tier("leaf", 50e9, 5e-6, size=64, per="device"),
        Tier("spine", 100e9, 10e-6, per="node"),
    )
    k = np.array([8, 64, 128])
    assert topology.tier_spanned(p.network, k).tolist() == [
        [True, True, True],
        [False, True, True],
        [False, False, True],
    ]
    n = 1e9
    c = C.allreduce("hierarchical", p.network, np.array([128]), nbytes=n)
    # level 0: 8 devices; level 1: 8 nodes in a 64-device leaf domain (8 x 50 GB/s per node);
    # level 2: 2 leaf domains, one shared 100 GB/s spine link each
    want = (14 * 2e-6 + 1.75 * n / 300e9) + (14 * 5e-6 + 1.75 * n / 400e9) + (2 * 10e-6 + 1.0 * n / 100e9)
    assert c.time[0] == pytest.approx(want)
    # the ring: alpha of the slowest spanned tier, B the smallest (spine 100 GB/s)
    r = C.allreduce("ring", p.network, np.array([128]), nbytes=n)
    assert r.time[0] == pytest.approx(254 * 10e-6 + 2 * 127 / 128 * n / 100e9)
    assert r.bottleneck[0] == 2


def test_k_not_a_multiple_of_the_node():
    p = make_profile(Tier("nvlink", 100e9, 5e-6, size=8), Tier("ib", 25e9, 10e-6, per="device"))
    # k = 12: the partial node has 4 devices, so it reaches IB with 4 x 25 GB/s; per-device links stay 25 GB/s
    assert topology.tier_bandwidth(p.network, np.array([12]))[:, 0].tolist() == [100e9, 100e9]
    assert topology.tier_link_bandwidth(p.network, np.array([12]))[:, 0].tolist() == [100e9, 25e9]
    assert t("ring", p, 12, 1e9).time[0] == pytest.approx(22 * 10e-6 + 22 / 12 * 1e9 / 100e9)


# ----------------------------------------------------------------------------- properties

bw = st.floats(1e8, 1e12)
lat = st.floats(1e-7, 1e-3)
sizes = st.floats(1.0, 1e11)
pers = st.sampled_from(["device", "node"])


@st.composite
def networks(draw, tiers=None):
    n_tiers = tiers if tiers is not None else draw(st.integers(1, 3))
    out, size = [], draw(st.sampled_from([2, 4, 8, 72]))
    for i in range(n_tiers):
        last = i == n_tiers - 1
        out.append(
            Tier(
                f"t{i}",
                draw(bw),
                draw(lat),
                size=None if last else size,
                per=draw(pers),
                efficiency=draw(st.floats(0.3, 1.0)),
            )
        )
        size *= draw(st.sampled_from([2, 4]))
    return tuple(out)


def _bound(net, k, n):
    """Patarasuk & Yuan's bandwidth lower bound 2(k-1)/k · n/B with B the ring's bottleneck."""
    _, bus, _ = topology.ring_params(net, k)
    return 2 * (k - 1) / k * n / bus


@settings(max_examples=60, deadline=None)
@given(networks(1), sizes, st.integers(2, 600), st.one_of(st.none(), bw))
def test_every_algorithm_meets_the_bandwidth_bound_on_one_tier(net, n, k, gamma):
    ks = np.array([k])
    lb = _bound(net, ks, n)[0]
    for alg in registry.TEXTBOOK_CHOICES:
        assert C.allreduce(alg, net, ks, nbytes=n, reduce_Bps=gamma).time[0] >= lb * (1 - 1e-12), alg
    assert C.allreduce("hierarchical", net, ks, nbytes=n, reduce_Bps=gamma).time[0] == pytest.approx(
        C.allreduce("ring", net, ks, nbytes=n, reduce_Bps=gamma).time[0], rel=1e-12
    )


@settings(max_examples=40, deadline=None)
@given(networks(), sizes, st.integers(2, 600), st.one_of(st.none(), bw))
def test_bounds_on_any_network(net, n, k, gamma):
    ks = np.array([k])
    lb = _bound(net, ks, n)[0]
    costs = {alg: C.allreduce(alg, net, ks, nbytes=n, reduce_Bps=gamma) for alg in registry.TEXTBOOK_CHOICES}
    for alg, c in costs.items():
        assert np.isfinite(c.time[0]) and c.time[0] > 0
        assert c.tier_latency[:, 0].sum() == pytest.approx(c.latency[0], rel=1e-9, abs=1e-18)
        assert c.tier_bandwidth_s[:, 0].sum() == pytest.approx(c.bandwidth[0], rel=1e-9, abs=1e-18)
        if alg not in ("hierarchical", "auto"):  # hierarchical (so auto) sends less through slow tiers
            assert c.time[0] >= lb * (1 - 1e-12), alg
    # hierarchical still meets the bound of its outermost level: the m outer domains, each with B_outer
    spanned = topology.tier_spanned(net, ks)[:, 0]
    i = int(np.flatnonzero(spanned)[-1])
    m = k if i == 0 else -(-k // net[i - 1].size)
    b_outer = topology.tier_bandwidth(net, ks)[i, 0]
    assert costs["hierarchical"].time[0] >= 2 * (m - 1) / m * n / b_outer * (1 - 1e-12)
    best = min(costs[a].time[0] for a in registry.ALGORITHMS)
    assert costs["auto"].time[0] == best
    assert costs["auto"].algorithm[0] in registry.ALGORITHMS


@settings(max_examples=40, deadline=None)
@given(networks(), sizes, sizes, st.integers(2, 300))
def test_every_algorithm_grows_with_bytes(net, n1, n2, k):
    lo, hi = sorted([n1, n2])
    for alg in registry.TEXTBOOK_CHOICES:
        assert (
            C.allreduce(alg, net, np.array([k]), nbytes=hi).time[0]
            >= C.allreduce(alg, net, np.array([k]), nbytes=lo).time[0]
        ), alg


def test_auto_reports_its_choice_per_element(two_tier):
    k = np.array([2, 16, 64])
    n = np.array([1e3, 1e10])
    c = C.allreduce("auto", two_tier.network, k[:, None], nbytes=n[None, :])
    for i in range(3):
        for j in range(2):
            name = c.algorithm[i, j]
            assert c.time[i, j] == C.allreduce(name, two_tier.network, k[i : i + 1], nbytes=n[j]).time[0]


def test_crossovers_are_where_costs_are_equal():
    p = make_profile(Tier("nvlink", 369e9, 3.4e-6, size=8), Tier("ib", 46e9, 14e-6, per="device"))
    k = np.array([8, 16, 1024])
    cross = crossover.crossovers(p.network, k, 1024.0, n_hi=4 * 2.0**30)
    assert cross, "expected at least one crossover"
    for c in cross:
        ks = np.array([c["devices"]])
        a = C.allreduce(c["from"], p.network, ks, nbytes=c["bytes"]).time[0]
        b = C.allreduce(c["to"], p.network, ks, nbytes=c["bytes"]).time[0]
        assert a == pytest.approx(b, rel=1e-9)
        below = C.allreduce("auto", p.network, ks, nbytes=c["bytes"] * 0.999).algorithm[0]
        above = C.allreduce("auto", p.network, ks, nbytes=c["bytes"] * 1.001).algorithm[0]
        assert (below, above) == (c["from"], c["to"])


def test_unknown_algorithm_lists_the_choices(one_tier):
    with pytest.raises(InputError, match="did you mean tree.*choose one of nccl, ring, tree"):
        C.allreduce("trie", one_tier.network, np.array([4]), nbytes=1e6)


# ----------------------------------------------------------------------------- CLI


def test_cli_algorithms_json_and_table(runner, prof):
    r = runner.invoke(app, ["algorithms", "-p", prof, "-k", "2..64:x2", "-s", "1KiB..1GiB:x32", "-f", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert len(d["grid"]) == 6 * 5
    for rec in d["grid"]:
        assert rec["time_s"] == min(rec[f"{a}_s"] for a in registry.ALGORITHMS)
        assert rec["time_s"] == rec[f"{rec['fastest']}_s"]
    assert all(c["from"] != c["to"] for c in d["crossovers"])
    r = runner.invoke(app, ["algorithms", "-p", prof, "-k", "2..64:x2", "-s", "1KiB..1GiB:x32"])
    assert r.exit_code == 0 and "costs are equal" in r.stdout and "rd = recursive-doubling" in r.stdout


def test_cli_comm_auto_has_algorithm_per_row(runner, prof):
    r = runner.invoke(app, ["comm", "-p", prof, "-k", "2,64", "-s", "1KiB,1GiB", "-a", "auto", "-f", "json"])
    assert r.exit_code == 0, r.output
    recs = json.loads(r.stdout)
    assert {x["algorithm"] for x in recs} <= set(registry.ALGORITHMS)
    assert len({x["algorithm"] for x in recs}) > 1


def test_cli_speedup_auto_and_bad_algorithm(runner, prof):
    r = runner.invoke(app, ["speedup", "-p", prof, "-k", "1..64:x4", "-a", "auto", "-f", "json"])
    assert r.exit_code == 0, r.output
    assert all(x["algorithm"] in set(registry.SPECS) | {"none"} for x in json.loads(r.stdout))
    r = runner.invoke(app, ["speedup", "-p", prof, "-a", "rings"])
    assert r.exit_code == 2 and "--algorithm" in r.stderr and "ring" in r.stderr and "Traceback" not in r.output
