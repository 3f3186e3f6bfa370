"""Issue 21: link kinds, the tree's own network traffic, EFA, multi-node NVLink domains, NCCL's pick vs the cost."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import yaml

from simcli.comm import collectives as C
from simcli.comm import nccl, nccl_choice, topology
from simcli.io.profiles import profile_from_dict, resolve_profile, with_nccl_version

ROOT = Path(__file__).resolve().parents[2]
#: the release issue 21 was written against (the default then): its cases of NCCL's pick against simcli's cost are
#: 2.20.3's tuner; under the default (2.29.7) they hold differently (tests/step/test_faster_network.py)
OLD = "2.20.3"


def _old(name: str):
    return with_nccl_version(resolve_profile(name), OLD)


def _pair(profile, k, algorithm, protocol):
    p = resolve_profile(profile) if isinstance(profile, str) else profile
    K = np.array([k])
    (pr,) = nccl.pairs(
        p.network,
        nccl_choice.nccl_spec(p),
        K,
        tier_Bps=topology.tier_bandwidth(p.network, K),
        collective="all_reduce",
        algorithms=[algorithm],
        protocols=[protocol],
    )
    return pr


def test_kinds_default_latency_and_efficiency_and_show_them():
    text = """
name: efa-box
sources: [test]
device: {name: H100 SXM5, peak_flops: {bf16: 989 TFLOP/s}, mfu: 0.4}
network:
  - {name: nvlink, kind: nvswitch, size: 8, bandwidth: 450 GB/s, latency: 3.4 us, efficiency: 0.82}
  - {name: efa, kind: efa, bandwidth: 400 Gb/s}
"""
    p = profile_from_dict(yaml.safe_load(text), "test")
    t = p.network[1]
    assert t.latency_s == pytest.approx(23e-6) and t.efficiency == pytest.approx(0.92)
    assert set(t.defaulted) == {"latency", "efficiency"}
    assert nccl_choice.nccl_spec(p).protocols == (
        "simple",
    )  # aws-ofi-nccl: NCCL_PROTO=simple without 128-byte ordering


@pytest.mark.parametrize("version, nvls_us, net_us", [("2.20.3", 23.0, 14.0), ("2.29.7", 25.0, 20.9)])
def test_efa_floor_is_nvls_tree_with_the_plugins_hop_latency(version, nvls_us, net_us):
    """2 p5 instances, 8 B: NVLSTree/Simple, the release's NVLS NVLink hop (23 us to 2.20.x, 25 from 2.21.5) + 2 x
    (20 + 3) us EFA hops = 69 / 71 us (AWS measured 65-74)."""
    p = with_nccl_version(resolve_profile("aws-p5"), version)
    t = C.collective(p, "nccl", np.array([16]), nbytes=np.array([1024.0]), protocol=None)
    assert t.algorithm[0] == "nvls-tree" and t.time[0] == pytest.approx((nvls_us + 46) * 1e-6, rel=0.01)
    pr = _pair(p, 16, "nvls-tree", "simple")
    # the tuner sees NCCL's NET row (NVLSTree 14 us, 20.9 from 2.28.9) plus the plugin's 75 us, twice for Simple
    assert pr.tuner_lat[0] == pytest.approx((nvls_us + 2 * (net_us + 150)) * 1e-6, rel=1e-6)


def test_two_node_tree_sends_half_the_rings_network_traffic():
    """p4de: 4x 100 Gb/s EFA per instance (per: node). A 2-node tree is capped by 2x the NICs, not by the ring's B."""
    p = resolve_profile("aws-p4de")
    tree = _pair(p, 16, "tree", "simple")
    ring = _pair(p, 16, "ring", "simple")
    net = 50e9 * 0.92
    assert ring.bus_Bps[0] == pytest.approx(net)
    assert tree.bus_Bps[0] == pytest.approx(0.92 * 2 * net)  # busbw ~ 0.92 x 92 x 15/16 ~ 79 GB/s
    # beyond two nodes the inner nodes of the double binary tree send 2n: the ring's bound again
    tree4 = _pair(p, 32, "tree", "simple")
    assert tree4.bus_Bps[0] == pytest.approx(0.92 * net)


def test_nvls_tree_network_halves_beyond_two_nodes():
    """The NVLS graph: G = 8 heads of S = 40 GB/s (NCCL's search, simcli.comm.nccl.nvls_graph); what it costs is
    2.28.3's formula (S x 0.85 x 7/8 x 2 per channel, x k/nsteps); 2.20.3 has no NVLSTree cap."""
    p = _old("dgx-h100")
    two, four = _pair(p, 16, "nvls-tree", "simple"), _pair(p, 32, "nvls-tree", "simple")
    assert two.alg_Bps[0] == pytest.approx(8 * 40e9 * 0.85 * 7 / 8 * 2 * 16 / 30)  # NVLS-bound
    assert four.alg_Bps[0] == pytest.approx(8 * 46e9 / 2)  # heads' NICs carry 2n per node
    # NCCL 2.20.3's tuner: per graph channel min(bwIntra, bwInter/2), bwInter the NIC's quantised speed (45 GB/s)
    assert four.tuner_alg_Bps[0] == pytest.approx(8 * 22.5e9 * 5 / 6)


def test_mnnvl_rack_is_one_nccl_node():
    p = resolve_profile("gb200-nvl72")
    assert nccl.tier_kind(p.network[0], 0) == "mnnvl"
    pr = _pair(p, 144, "tree", "ll")
    assert pr.hops[0, 0] == 2 * 71 and pr.hops[1, 0] == 2  # 72 GPUs per node, 2 nodes


def test_ll128_net_off_drops_ll128_only_across_nodes():
    p = resolve_profile("dgx-h100")
    off = dataclasses.replace(p, nccl=dataclasses.replace(nccl_choice.nccl_spec(p), ll128_net=False))
    assert _pair(off, 8, "ring", "ll128").enabled[0] and not _pair(off, 16, "ring", "ll128").enabled[0]


def test_faster_pair_names_the_env_that_gets_it():
    p = resolve_profile("dgx-h100")
    k = np.array([[8], [16], [32]])
    n = 2.0 ** np.arange(10, 34, 2)[None, :]
    faster, alg, proto, t = nccl_choice.nccl_faster_pair(p, k, n)
    picked = nccl_choice.nccl_collective(p, k, n, protocol=None)
    assert np.all(t <= picked.time * (1 + 1e-12))
    assert np.all(~faster | (t < (1 - nccl_choice.FASTER_MARGIN) * picked.time))
    assert nccl_choice.nccl_env("nvls-tree", "simple") == "NCCL_ALGO=NVLSTree NCCL_PROTO=Simple"


# --------------------------------------------------------------------------- saying where NCCL's pick costs more


def _fast_ib(tmp_path, gbps: int = 800):
    """dgx-h100 with its InfiniBand tier at ``gbps`` (the issue's faster-network paradox)."""
    text = (ROOT / "hardware_profiles" / "dgx-h100.yaml").read_text()
    path = tmp_path / f"dgx-h100-{gbps}.yaml"
    path.write_text(
        text.replace("name: dgx-h100", f"name: dgx-h100-{gbps}").replace(
            "bandwidth: 400 Gb/s", f"bandwidth: {gbps} Gb/s"
        )
    )
    return path


def test_one_size_and_an_array_of_sizes_price_the_tree_alike():
    """The tree's size factor applies to a scalar size too (the engine prices one bucket size as a 0-d array)."""
    p = resolve_profile("dgx-h100")
    k = np.array([16, 64, 512])
    one = C.collective(p, "nccl", k, nbytes=np.float64(25 * 2**20), protocol=None)
    many = C.collective(p, "nccl", k, nbytes=np.array([25 * 2**20]), protocol=None)
    np.testing.assert_allclose(one.time, many.time, rtol=1e-12)


def test_the_step_names_the_cheaper_pair_and_its_setting(tmp_path):
    """dgx-h100 as built in (400 Gb/s) under 2.20.3: past two nodes NCCL's tuner picks NVLSTree for bert-large's
    25 MiB buckets, which simcli prices above Tree/LL128 (the tuner's caps count the 8 graph channels, the cost the
    heads' NICs); 2.29.7 (the default) picks Tree/LL128 there."""
    from simcli.io.workloads import get_model
    from simcli.step.engine import Scenario, simulate
    from simcli.step.notes import STEP_MARGIN, nccl_faster

    p = _old("dgx-h100")
    res = simulate(Scenario(p, get_model("bert-large").workload(None)), [16, 512])
    rows = nccl_faster(res)
    assert not nccl_faster(
        simulate(Scenario(resolve_profile("dgx-h100"), get_model("bert-large").workload(None)), [512])
    )
    assert all(r["release"] == OLD for r in rows)
    assert {r["devices"] for r in rows} == {512}
    r = rows[0]
    assert (r["algorithm"], r["protocol"]) == ("nvls-tree", "simple")
    assert (r["faster_algorithm"], r["faster_protocol"]) == ("tree", "ll128")
    assert r["setting"] == "NCCL_ALGO=Tree NCCL_PROTO=LL128"
    assert r["faster_time_s"] < r["time_s"]
    step = float(res.t_step_s[1])
    assert sum(x["saving_s"] for x in rows) > STEP_MARGIN * step  # said only where the step gains more than 1%
    # a forced algorithm or protocol, or a textbook profile: NCCL does not choose, nothing to say
    assert nccl_faster(simulate(Scenario(p, get_model("bert-large").workload(None), protocol="simple"), [512])) == []


def test_speedup_explain_and_comm_say_it_once_on_stderr(tmp_path, runner):
    import json

    from simcli.cli import app

    prof = "dgx-h100"
    old = ["--nccl-version", OLD]  # an older release's line names it and the pair
    said = "NCCL 2.20.3 picks nvls-tree/simple, tree/ll128 is faster"
    r = runner.invoke(app, ["speedup", "-m", "bert-large", "-p", prof, "-k", "64..1024:x2", "-f", "json", *old])
    assert r.exit_code == 0, r.output
    lines = [x for x in r.stderr.splitlines() if said in x]
    # one short line (issue 39: the table starts on the first screen) naming the k and where the details are
    assert len(lines) == 1 and len(lines[0]) <= 160 and "k = 64..1024 (5 k)" in lines[0]
    assert "'simcli explain -k 64' says which" in lines[0]
    r = runner.invoke(app, ["explain", "-k", "512", "-m", "bert-large", "-p", prof, "-f", "json", *old])
    d = json.loads(r.stdout)
    assert d["nccl_faster"] and d["nccl_faster"][0]["setting"] == "NCCL_ALGO=Tree NCCL_PROTO=LL128"
    assert len([x for x in r.stderr.splitlines() if said in x]) == 1
    r = runner.invoke(app, ["explain", "-k", "512", "-m", "bert-large", "-p", prof, *old])
    assert "NCCL's choice" in r.stdout and "NCCL_ALGO=Tree" in r.stdout
    # one node: NCCL's pick is simcli's cheapest, nothing said
    r = runner.invoke(app, ["speedup", "-m", "bert-large", "-p", prof, "-k", "8", "-f", "json"])
    assert "NCCL's own choice" not in r.stderr
    r = runner.invoke(app, ["comm", "-p", "dgx-h100", "-k", "64", "-s", "1GiB,1KiB", "-f", "json", *old])
    recs = {x["bytes"]: x for x in json.loads(r.stdout)}
    assert recs[2**30]["faster"] == "NCCL_ALGO=NVLSTree NCCL_PROTO=Simple" and recs[1024]["faster"] is None
    assert len([x for x in r.stderr.splitlines() if "NCCL's own choice" in x]) == 1


def test_explain_and_profiles_show_name_the_kinds_and_their_defaults(runner):
    import json

    from simcli.cli import app

    d = json.loads(runner.invoke(app, ["explain", "-k", "16", "-p", "aws-p5", "-f", "json"]).stdout)
    efa = d["tiers"][1]
    assert efa["kind"] == "efa" and set(efa["defaulted"]) == {"latency", "efficiency"}
    assert "75 us" in efa["kind_note"] and "protocols simple" in efa["kind_note"]
    out = runner.invoke(app, ["explain", "-k", "16", "-p", "aws-p5"]).stdout
    assert "link kinds" in out and "the kind's defaults" in out
    out = runner.invoke(app, ["profiles", "show", "aws-p5"]).stdout
    assert "(default of its kind)" in out and "NCCL class net" in out


# --------------------------------------------------------------------------- plan solve over a non-monotone E


def test_plan_solve_finds_the_smallest_value_and_the_ranges_where_more_is_worse(runner):
    """dgx-h100, bert-large, k = 512 (issue 37, item 7, under the default 2.29.7): E rises with the InfiniBand
    bandwidth until NCCL's inter-node search graph, at an effective NIC of 45 GB/s (~391 Gb/s line), stops at 8
    channels of 45 GB/s instead of 16 of 22: the tuner's per-channel caps count the graph's channels, so Tree/LL128
    runs slower with the same name (simcli.comm.nccl.graph_tie). The search refines there (answers.solve._graph)
    and answers; under 2.20.3 the drop is NCCL's tuner switching to NVLSTree."""
    import json

    from simcli.cli import app

    args = ["plan", "solve", "network[1].bandwidth", "--devices", "512", "-p", "dgx-h100", "-m", "bert-large"]
    r = runner.invoke(app, [*args, "-e", "0.85", "-f", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["bound"] == "minimum" and 300e9 / 8 < d["answer"] < 391e9 / 8
    assert d["efficiency_at_answer"] >= 0.85
    drop = [w for w in d["worse_ranges"] if w["efficiency_from"] >= 0.85 > w["efficiency_to"]]
    assert len(drop) == 1 and 380e9 / 8 < drop[0]["from"] < 400e9 / 8
    assert (drop[0]["picks_from"], drop[0]["picks_to"]) == ("tree/ll128", "tree/ll128")
    assert drop[0]["to"] / drop[0]["from"] - 1 < 1e-5  # the graph's change, bisected to the tolerance
    table = runner.invoke(app, [*args, "-e", "0.85"]).stdout
    assert "a larger value is worse" in table and "where a larger network[1].bandwidth is worse" in table
    # under 2.20.3: NCCL's tuner switches the buckets to NVLSTree, which simcli prices higher
    r = runner.invoke(app, [*args, "-e", "0.86", "-f", "json", "--nccl-version", OLD])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    drop = [w for w in d["worse_ranges"] if w["efficiency_from"] >= 0.86 > w["efficiency_to"]]
    assert drop and ("tree/ll128", "nvls-tree/simple") in {(w["picks_from"], w["picks_to"]) for w in drop}
    # a target no value reaches: answered with the best E, where it is reached and where more bandwidth is worse
    r = runner.invoke(app, [*args, "-e", "0.9125"])
    assert r.exit_code == 1
    assert "the best is E = 0.8" in r.stderr and "a larger value is worse" in r.stderr


# --------------------------------------------------------------------------- a better network never silently slower


def test_a_better_tier_never_makes_speedup_slower_without_saying_why():
    """Doubling any tier's bandwidth, or halving its latency, never makes ``simcli speedup`` slower unless its stderr
    line (:func:`simcli.cli.common.warn_nccl_faster`, fed by :func:`simcli.step.notes.nccl_faster`) names the cause
    at that k: NCCL's tuner picking a pair that simcli prices higher, and the NCCL_ALGO/NCCL_PROTO of the cheaper one.

    Every built-in profile, every transformer and CNN preset, k = 16..1024:x2. The line names the k where the
    cheaper pairs would save more than STEP_MARGIN (1%) of the step; elsewhere a better tier can make the step slower
    by at most that much (each pair's cost never grows with a better tier, so the step with the new picks is at most
    their saving above the step with the old ones), and the sweep holds that bound. 484 cases in about a second.
    """
    from simcli.io.profiles import list_profiles
    from simcli.io.workloads import presets
    from simcli.step.engine import Scenario, simulate
    from simcli.step.notes import STEP_MARGIN, graph_notes, nccl_faster

    K = 2 ** np.arange(4, 11)
    models = {n: m for n, m in presets().items() if m.kind in ("transformer", "cnn")}
    assert {m.kind for m in models.values()} == {"transformer", "cnn"}
    checked, slower_named, silent = 0, 0, []
    for entry in (e for e in list_profiles() if e.origin == "built-in"):
        p = resolve_profile(entry.name)
        for name, preset in models.items():
            w = preset.workload(None)
            base = simulate(Scenario(p, w), K)
            for i, t in enumerate(p.network):
                for what, better in (
                    ("bandwidth x2", dataclasses.replace(t, bandwidth_Bps=2 * t.bandwidth_Bps)),
                    ("latency / 2", dataclasses.replace(t, latency_s=t.latency_s / 2)),
                ):
                    net = list(p.network)
                    net[i] = better
                    res = simulate(Scenario(p.replace(network=tuple(net)), w), K)
                    checked += 1
                    slower = res.t_step_s > base.t_step_s * (1 + 1e-12)
                    if not slower.any():
                        continue
                    named = {r["devices"] for r in nccl_faster(res) if r["setting"].startswith("NCCL_ALGO=")}
                    named |= {r["devices"] for r in graph_notes(res)}  # a faster NIC, fewer graph channels
                    for j in np.flatnonzero(slower):
                        if int(K[j]) in named:
                            slower_named += 1
                            continue
                        extra = res.t_step_s[j] - base.t_step_s[j]
                        silent.append((entry.name, name, t.name, what, int(K[j]), extra / res.t_step_s[j]))
                        assert extra <= STEP_MARGIN * res.t_step_s[j] * (1 + 1e-9), silent[-1]
    assert checked >= 400 and slower_named > 0  # the paradox exists, and is named where it matters


def test_the_speedup_warning_speaks_of_every_k_asked_for_not_only_the_rows_shown():
    """A table elides middle rows and computes only the shown ones; its NCCL-choice warning still names the same k as
    the JSON output's (every k), and lists a few k one by one rather than as a range that hides the gaps."""
    from typer.testing import CliRunner

    from simcli.cli import app
    from simcli.cli.common import where_k
    from simcli.cli.options import ScenarioOptions
    from simcli.step.engine import simulate
    from simcli.step.notes import nccl_faster

    assert where_k([50, 9, 42, 9]) == "k = 9, 42, 50" and where_k([8]) == "k = 8"
    assert where_k(range(8, 520, 72)) == "k = 8..512 (8 k)"
    ks = np.arange(1, 65)
    named = {r["devices"] for r in nccl_faster(simulate(ScenarioOptions().build(), ks))}
    assert len(named) >= 2  # dgx-h100's default model: NCCL's pick is not its cheapest at some k
    lines = {}
    for fmt in ("table", "json"):
        r = CliRunner().invoke(app, ["speedup", "-k", "1..64", "-f", fmt, "--rows", "10"])
        assert r.exit_code == 0, r.output
        lines[fmt] = [x for x in r.stderr.splitlines() if "NCCL's own choice" in x]
    assert lines["table"] == lines["json"] and len(lines["table"]) == 1
    shown = set(range(1, 6)) | set(range(60, 65))
    assert named - shown  # some named k is not a shown row, and the line still names it
    for k in named - shown:
        line = lines["table"][0]
        if ".." in line:  # many k: the range's ends are the least and the most named
            assert f"= {min(named)}.." in line and f"..{max(named)} " in line
        else:
            assert f" {k}," in line or f" {k} " in line


def test_a_kind_default_changed_later_is_the_tiers_own():
    """A calibrated or solved latency replaces the kind's default: written out, shown without the mark."""
    from simcli.io.profiles import describe, profile_to_dict

    p = resolve_profile("aws-p5")
    assert "latency" not in profile_to_dict(p)["network"][1]  # still the kind's: left to it
    net = list(p.network)
    net[1] = dataclasses.replace(net[1], latency_s=30e-6)
    q = p.replace(network=tuple(net))
    assert profile_to_dict(q)["network"][1]["latency"] == "30 us"
    assert nccl.tier_defaulted(q.network[1]) == ("efficiency",)
    rows = dict(describe(q))
    assert "default" not in rows["network[1].latency"] and "default of its kind" in rows["network[1].efficiency"]
    again = profile_from_dict(yaml.safe_load(yaml.safe_dump(profile_to_dict(q))), "test")
    assert again.network[1].latency_s == pytest.approx(30e-6) and again.network[1].efficiency == pytest.approx(0.92)


def test_the_graph_search_reads_nccl_nvlink_constant_not_the_measured_efficiency():
    """NCCL sizes its search graph with SM100_NVLINK_BW 40.1 of 50 GB/s per link (topo.h), whatever the links
    measure; the profile's NVLink5 efficiency (0.9, measured) prices the bytes but must not move the search.
    Reading the tier's effective bandwidth there gave 18 channels instead of 15 for gb200 with doubled NICs."""
    from simcli.comm.specs import LINK_KIND_SPECS

    p = resolve_profile("gb200-nvl72")
    assert p.network[0].efficiency == pytest.approx(0.9)
    # a rack a user writes from a datasheet (kind: mnnvl, no efficiency) gets the built-in's NVLink5 figure
    assert {s.name: s.efficiency for s in LINK_KIND_SPECS}["mnnvl"] == p.network[0].efficiency
    assert nccl.NVLINK_SEARCH_FRACTION["blackwell"] * 900 == pytest.approx(721.8)
    k = np.array([144, 288, 1440])
    spec = nccl_choice.nccl_spec(p)
    got = []
    for eff in (0.8, 0.9, 0.95):
        net = list(p.network)
        net[0] = dataclasses.replace(net[0], efficiency=eff)
        net[1] = dataclasses.replace(net[1], bandwidth_Bps=2 * net[1].bandwidth_Bps)
        tie = nccl.graph_tie(tuple(net), spec, k)
        got.append((tie["channels"].tolist(), tie["speed_GBps"].tolist()))
    assert got[0] == got[1] == got[2]
    # the bytes do move with it: a 1 GiB ring all-reduce inside one rack is faster at 0.9 than at 0.8 (NVLS, NCCL's
    # pick there from 2.21.5, is priced on NCCL's own graph and nvlsEfficiency: simcli.comm.nccl.nvls_graph)
    slow = p.replace(network=(dataclasses.replace(p.network[0], efficiency=0.8),) + tuple(p.network[1:]))
    t9 = C.collective(p, "ring", np.array([72]), nbytes=np.array([2.0**30]), protocol=None).time[0]
    t8 = C.collective(slow, "ring", np.array([72]), nbytes=np.array([2.0**30]), protocol=None).time[0]
    assert t9 < t8 * 0.92


def test_a_faster_nic_that_stops_the_graph_search_at_fewer_channels_is_said():
    """gb200-nvl72 with its NICs doubled, under 2.20.3 (no NVLS on a multi-node NVLink domain, so Ring and Tree run
    on the graph's channels): NCCL's inter-node search takes 15 channels of 48 GB/s where a NIC just under 48 GB/s
    would give 16 of 45 GB/s; the tuner's per-channel caps make the step slower, and graph_notes says so."""
    from simcli.io.workloads import get_model
    from simcli.step.engine import Scenario, simulate
    from simcli.step.notes import STEP_MARGIN, graph_notes

    p = _old("gb200-nvl72")
    net = list(p.network)
    net[1] = dataclasses.replace(net[1], bandwidth_Bps=2 * net[1].bandwidth_Bps)
    fast = p.replace(network=tuple(net))
    tie = nccl.graph_tie(fast.network, nccl_choice.nccl_spec(fast), np.array([72, 144]))
    assert tie["tie"].tolist() == [False, True]  # one rack is one node: no network graph
    assert (tie["channels"][1], tie["speed_GBps"][1], tie["alt_channels"][1]) == (15, 48, 16)
    w = get_model("vgg16").workload(None)
    rows = graph_notes(simulate(Scenario(fast, w), [128]))
    assert rows and rows[0]["alt_t_step_s"] < rows[0]["t_step_s"] * (1 - STEP_MARGIN)
    assert (
        nccl.graph_tie(
            resolve_profile("dgx-a100").network, nccl_choice.nccl_spec(resolve_profile("dgx-a100")), np.array([16])
        )
        is None
    )
