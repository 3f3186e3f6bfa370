"""Explanations: every term adds up, n* by hand, JSON and table output."""

import json

import pytest

from simcli.base.types import Tier, Workload
from simcli.cli import app
from simcli.decisions.explain import explain
from simcli.step.engine import Scenario, simulate

from conftest import make_profile


def _sc(profile, **kw):
    wl = Workload("w", params=1e9, flops_per_sample=6e12, batch_per_device=4)
    return Scenario(profile=profile, workload=wl, **kw)


@pytest.mark.parametrize("alg", ["ring", "tree", "hierarchical", "rabenseifner", "auto"])
@pytest.mark.parametrize("overlap,accum", [("buckets", 1), ("none", 1), ("buckets", 3)])
def test_terms_add_up(two_tier, alg, overlap, accum):
    d = explain(_sc(two_tier, algorithm=alg, overlap=overlap, accum=accum), 24)
    assert d["t_forward_s"] + d["t_backward_s"] == pytest.approx(d["t_compute_s"])
    assert d["t_latency_s"] + d["t_bandwidth_s"] + d["t_reduction_s"] == pytest.approx(d["t_comm_s"])
    assert sum(t["latency_term_s"] for t in d["tiers"]) == pytest.approx(d["t_latency_s"])
    assert sum(t["bandwidth_term_s"] for t in d["tiers"]) == pytest.approx(d["t_bandwidth_s"])
    assert d["t_comm_hidden_s"] + d["t_comm_exposed_s"] == pytest.approx(d["t_comm_s"])
    assert d["t_step_s"] == pytest.approx(d["t_compute_s"] + d["t_comm_exposed_s"])
    assert sum(m["count"] * m["time_s"] for m in d["messages"]) == pytest.approx(d["t_comm_s"])
    res = simulate(_sc(two_tier, algorithm=alg, overlap=overlap, accum=accum), [24])
    assert d["t_step_s"] == res.t_step_s[0] and d["speedup"] == res.speedup[0]
    json.dumps(d)  # JSON-ready
    if overlap == "none":
        assert d["t_comm_hidden_s"] == 0


def test_ring_crossover_by_hand(one_tier):
    # n* = k·α·B for the ring: 8 x 20 us x 10 GB/s = 1.6 MB; 4 GB of fp32 gradients in one message
    d = explain(_sc(one_tier, overlap="none"), 8)
    assert d["n_star_bytes"] == pytest.approx(8 * 20e-6 * 10e9)
    assert d["message_bytes"] == 4e9 and d["latency_bound"] is False
    assert d["bottleneck"] == "net"
    # 25 MB buckets are above n* too; 1 MB buckets are latency-bound
    assert explain(_sc(one_tier, bucket_mb=1), 8)["latency_bound"] is True


def test_bottleneck_and_tiers_on_two_tiers():
    p = make_profile(Tier("nvlink", 300e9, 3e-6, size=8), Tier("ib", 100e9 / 8, 10e-6, per="node"))
    d = explain(_sc(p, overlap="none"), 16)
    assert d["bottleneck"] == "ib"
    assert [t["spanned"] for t in d["tiers"]] == [True, True]
    assert d["tiers"][1]["ring_bandwidth_Bps"] == 12.5e9
    assert d["tiers"][1]["bandwidth_term_s"] == pytest.approx(2 * 15 / 16 * 4e9 / 12.5e9)
    inside = explain(_sc(p), 8)
    assert inside["tiers"][1]["spanned"] is False and inside["tiers"][1]["latency_term_s"] == 0


def test_k1_has_no_communication(one_tier):
    d = explain(_sc(one_tier), 1)
    assert d["t_comm_s"] == 0 and d["n_star_bytes"] is None and d["speedup"] == pytest.approx(1.0)


def test_cli_explain(runner, prof):
    r = runner.invoke(app, ["explain", "-p", prof, "-k", "16", "-a", "auto", "-f", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    for key in (
        "t_forward_s",
        "t_backward_s",
        "tiers",
        "t_reduction_s",
        "t_comm_s",
        "t_comm_hidden_s",
        "t_comm_exposed_s",
        "bottleneck",
        "n_star_bytes",
        "algorithm",
    ):
        assert key in d
    assert d["devices"] == 16 and len(d["tiers"]) == 2
    t = runner.invoke(app, ["explain", "-p", prof, "-k", "16"])
    assert t.exit_code == 0 and "crossover n*" in t.stdout and "exposed" in t.stdout
    c = runner.invoke(app, ["explain", "-p", prof, "-k", "16", "-f", "csv"])
    assert c.exit_code == 0 and c.stdout.startswith("term,value") and "t_comm_exposed_s" in c.stdout
    bad = runner.invoke(app, ["explain", "-p", prof, "-k", "0"])
    assert bad.exit_code == 2 and "--devices" in bad.stderr


def test_cli_speedup_explain(runner, prof):
    r = runner.invoke(app, ["speedup", "-p", prof, "-k", "8..64:x2", "-a", "auto", "--explain", "-f", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert len(d["records"]) == 4 and d["explain"][0]["devices"] == 64
    assert d["explain"][0]["t_step_s"] == pytest.approx(d["records"][-1]["t_step_s"])
    assert d["explain"][0]["algorithm"] == d["records"][-1]["algorithm"]
    t = runner.invoke(app, ["speedup", "-p", prof, "-k", "8..64:x2", "--explain"])
    assert t.exit_code == 0 and "explain: k = 64" in t.stdout and "S(k)" in t.stdout
    c = runner.invoke(app, ["speedup", "-p", prof, "-k", "8..64:x2", "--explain", "-f", "csv"])
    assert c.exit_code == 0 and c.stdout.startswith("# explain k=64")
