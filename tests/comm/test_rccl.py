"""AMD's RCCL (issue 37): latencies by hand from the tags' tuning.cc constants, RCCL's choice, MSCCL in one node,
the release rows and their selection, and a library: rccl profile end to end."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import yaml

from simcli.comm import collectives as C
from simcli.comm import nccl_choice, rccl, topology
from simcli.io.profiles import profile_from_dict

# ---- the constants, written out from ROCm/rccl src/graph/tuning.cc (tuning_model_5) at each tag
BASE = {"ll": 12.0, "ll128": 12.0, "simple": 17.0}  # baseLat, Tree and Ring alike
XGMI_2_21_5 = {"tree": (0.9, 0.0, 2.3), "ring": (0.8, 0.0, 2.1)}  # hwLat[NVLINK], develop @ 0cbce2a7
NET_2_21_5 = {"tree": (10.5, 0.0, 25.0), "ring": (9.5, 0.0, 320.0)}  # hwLat[NET]
XGMI_2_20_5 = {"tree": (0.8, 0.0, 2.5), "ring": (0.8, 0.0, 3.6)}  # rocm-6.2.2
NET_2_20_5 = {"tree": (12.5, 0.0, 22.4), "ring": (9.5, 0.0, 19.8)}
AMD_NET_OVERHEAD = 2.0  # getNetOverhead on an AMD x86 host, x3 for Simple

MI300X = """
name: mi-test
sources: [test]
library: rccl
nccl: {{version: "{version}", generation: {gen}, cpu: amd, channels: 16, nvls: false, ll128: false}}
device: {{name: Instinct MI300X, peak_flops: {{bf16: 1307.4 TFLOP/s}}, mfu: 0.3}}
network:
  - {{name: xgmi, kind: nvlink, size: 8, bandwidth: 448 GB/s, latency: {xgmi} us, efficiency: 0.75}}
  - {{name: nic, kind: infiniband, bandwidth: 400 Gb/s, latency: 14 us, efficiency: 0.92}}
"""


def _profile(version="2.21.5", gen="cdna3", xgmi=2.1):
    return profile_from_dict(yaml.safe_load(MI300X.format(version=version, gen=gen, xgmi=xgmi)), "test")


def _pairs(p, k):
    K = np.array([k])
    return {
        (pr.algorithm, pr.protocol): (pr, bw, corr)
        for pr, bw, corr in rccl.pairs(
            p.network, nccl_choice.nccl_spec(p), K, tier_Bps=topology.tier_bandwidth(p.network, K)
        )
    }


def test_one_node_ring_latencies_by_hand():
    """k = 8 in one node: Ring is baseLat + 2(k-1) xGMI hops, the tuner's and the cost alike at 2.1 us Simple."""
    prs = _pairs(_profile(), 8)
    ll, simple = prs[("ring", "ll")][0], prs[("ring", "simple")][0]
    assert ll.tuner_lat[0] == pytest.approx((BASE["ll"] + 14 * XGMI_2_21_5["ring"][0]) * 1e-6)  # 23.2 us
    assert simple.tuner_lat[0] == pytest.approx((BASE["simple"] + 14 * XGMI_2_21_5["ring"][2]) * 1e-6)  # 46.4 us
    assert ll.latency[0] == pytest.approx(23.2e-6) and simple.latency[0] == pytest.approx(46.4e-6)
    # 2.20.5's table: 3.6 us per Ring/Simple hop (its tuner; the cost scales with the tier's stated latency)
    old = _pairs(_profile("2.20.5", xgmi=3.6), 8)[("ring", "simple")][0]
    assert old.tuner_lat[0] == pytest.approx((17.0 + 14 * XGMI_2_20_5["ring"][2]) * 1e-6)  # 67.4 us


def test_one_node_tree_simple_is_off_on_gfx942_and_ll128_never_runs():
    one, two = _pairs(_profile(), 8), _pairs(_profile(), 16)
    assert not one[("tree", "simple")][0].enabled[0] and two[("tree", "simple")][0].enabled[0]
    assert not any(p == "ll128" for _, p in one) and not any(p == "ll128" for _, p in two)


def test_two_node_tuner_latencies_by_hand():
    """k = 16 on two nodes (ppn 8, AMD host): Ring/LL crosses the network 2N = 4 times in 2.21.5 and its intra
    hops cost at least the 2 us network post overhead; Tree/LL climbs 7 xGMI hops and log2(2) = 1 network hop, twice."""
    prs = _pairs(_profile(), 16)
    ring_ll = BASE["ll"] + (30 - 4) * max(XGMI_2_21_5["ring"][0], AMD_NET_OVERHEAD) + 4 * NET_2_21_5["ring"][0]
    tree_ll = BASE["ll"] + 2 * (7 * XGMI_2_21_5["tree"][0] + 1 * NET_2_21_5["tree"][0])
    tree_simple = BASE["simple"] + 2 * (7 * XGMI_2_21_5["tree"][2] + 1 * NET_2_21_5["tree"][2])
    assert prs[("ring", "ll")][0].tuner_lat[0] == pytest.approx(ring_ll * 1e-6)  # 102 us
    assert prs[("tree", "ll")][0].tuner_lat[0] == pytest.approx(tree_ll * 1e-6)  # 45.6 us
    assert prs[("tree", "simple")][0].tuner_lat[0] == pytest.approx(tree_simple * 1e-6)  # 99.2 us
    # 2.20.5: the same formula with its own network row
    old = _pairs(_profile("2.20.5", xgmi=3.6), 16)
    ring_old = BASE["ll"] + 26 * max(XGMI_2_20_5["ring"][0], AMD_NET_OVERHEAD) + 4 * NET_2_20_5["ring"][0]
    assert old[("ring", "ll")][0].tuner_lat[0] == pytest.approx(ring_old * 1e-6)
    # the develop row counts 2(N-1) network steps of an all-reduce ring
    dev = _pairs(_profile("2.21.5", gen="cdna4"), 16)  # gfx950 takes the develop row
    assert dev[("ring", "ll")][0].tuner_lat[0] == pytest.approx((12.0 + 28 * 2.0 + 2 * 9.5) * 1e-6)  # 87 us


def test_tuner_bandwidth_is_the_bus_times_bw_ratio_and_the_algorithm_ratio():
    p = _profile()
    bus = float(np.min(topology.tier_bandwidth(p.network, np.array([8])), axis=0)[0])
    prs = _pairs(p, 8)
    assert prs[("ring", "ll")][1][0] == pytest.approx(bus * 0.08 * 8 / 14)  # bwRatio[0][Ring][LL], k/nsteps
    assert prs[("ring", "simple")][1][0] == pytest.approx(bus * 1.00 * 8 / 14)
    assert prs[("tree", "ll")][1][0] == pytest.approx(bus * 0.06 * 0.5)
    # the cost: LL moves half its lines' bytes, Simple all of them
    assert prs[("ring", "ll")][0].alg_Bps[0] == pytest.approx(bus * 0.5 * 8 / 14)
    # the size correction: Ring only across nodes, Tree always (treeCorrectionFactor[LL][log2(64 KiB / 64)] = 1.0)
    assert float(prs[("ring", "ll")][2](np.array([65536.0]))[0]) == 1.0
    two = _pairs(p, 16)
    assert float(two[("ring", "ll")][2](np.array([65536.0]))[0]) == pytest.approx(0.1)  # ringCorrectionFactor[LL][10]


def test_msccl_all_pairs_runs_in_one_node_of_eight_from_1_kib():
    p = _profile()
    n = np.array([512.0, 1024.0, 65536.0, 262144.0, 1048576.0, 16777216.0, 33554432.0])
    c = C.collective(p, "nccl", np.full(n.shape, 8), nbytes=n, protocol=None)
    assert list(c.algorithm) == ["ring", "msccl", "msccl", "msccl", "msccl", "msccl", "ring"]
    assert list(c.protocol) == ["ll", "ll", "ll", "ll", "simple", "simple", "simple"]
    bus = float(np.min(topology.tier_bandwidth(p.network, np.array([8])), axis=0)[0])
    # all-pairs: baseLat + 2 hops (scatter, gather) + the ring's bytes per rank over every link at once
    assert c.time[2] == pytest.approx((12.0 + 2 * 0.8) * 1e-6 + 65536.0 / (bus * 0.5 * 8 / 14))
    assert c.time[5] == pytest.approx((17.0 + 2 * 2.1) * 1e-6 + 16777216.0 / (bus * 8 / 14))
    # not at 7 GPUs, not across nodes, not when an algorithm is forced
    assert C.collective(p, "nccl", np.array([7]), nbytes=np.array([65536.0]), protocol=None).algorithm[0] != "msccl"
    assert C.collective(p, "nccl", np.array([16]), nbytes=np.array([65536.0]), protocol=None).algorithm[0] != "msccl"
    assert C.collective(p, "ring", np.array([8]), nbytes=np.array([65536.0]), protocol=None).algorithm[0] == "ring"


def test_develop_row_chooses_the_protocol_by_size_across_nodes():
    """rcclUpdateCollectiveProtocol: across nodes, LL while the bytes per rank are within the model's LL range
    (model 5 of the develop row: up to 1 MiB), else Simple, whatever the tuner preferred."""
    import dataclasses

    p = _profile()
    p = p.replace(nccl=dataclasses.replace(p.nccl, version="develop-9e22c79d"))
    n = np.array([16 * 200e3, 16 * 1048576.0, 16 * 2e6])
    c = C.collective(p, "nccl", np.full(n.shape, 16), nbytes=n, protocol=None)
    assert list(c.protocol) == ["ll", "ll", "simple"]
    by_time = C.collective(
        p, "auto", np.full(n.shape, 16), nbytes=n[:1], protocol=None
    )  # the cheapest by cost is not LL there
    assert by_time.protocol[0] != "ll"


def test_release_selection():
    assert rccl.select("2.21.5").version == "2.21.5"
    assert rccl.select("2.21.9").version == "2.21.5"  # between carried releases: the earlier
    assert rccl.select("2.20.5").version == "2.20.5"
    assert rccl.select(None) is rccl.DEFAULT_RCCL
    with pytest.raises(Exception, match="older than the oldest"):
        rccl.select("2.18.3")
    spec = nccl_choice.nccl_spec(_profile(gen="cdna4"))
    assert rccl.release(spec).version.startswith("develop")  # gfx950 is first known there
    for rel in rccl.RCCL_RELEASES:  # every row cites its tag or commit
        assert "ROCm/rccl" in rel.source and rel.changes


def test_profile_refuses_an_rccl_release_before_the_oldest(tmp_path, runner):
    from simcli.cli import app

    f = tmp_path / "old.yaml"
    f.write_text(MI300X.format(version="2.18.3", gen="cdna3", xgmi=2.1))
    r = runner.invoke(app, ["comm", "-p", str(f), "-k", "8", "-s", "1MiB"])
    assert r.exit_code == 2
    assert "nccl.version" in r.output and "2.20.5" in r.output and "Traceback" not in r.output


def test_rccl_prices_differently_from_nvidias_tables_in_the_direction_measured():
    """One MI300X node (rccl-tests): 13.7 us from 1 to 64 KiB; NCCL's tables said 26 us (ring/LL)."""
    rc = _profile()
    nv = rc.replace(library="nccl", nccl=dataclasses.replace(rc.nccl, version="2.20.3"))  # the tables simcli had
    n = np.array([65536.0])
    t_rccl = C.collective(rc, "nccl", np.array([8]), nbytes=n, protocol=None).time[0]
    t_nccl = C.collective(nv, "nccl", np.array([8]), nbytes=n, protocol=None).time[0]
    assert t_rccl < 0.7 * t_nccl
    assert t_rccl == pytest.approx(13.8e-6, rel=0.1)


def test_calibrate_refuses_to_fit_rccls_choice_in_one_line(tmp_path, runner):
    from simcli.cli import app

    f = tmp_path / "mi.yaml"
    f.write_text(MI300X.format(version="2.21.5", gen="cdna3", xgmi=2.1))
    data = tmp_path / "m.csv"
    data.write_text("devices,bytes,time_us\n8,1048576,28.0\n8,16777216,150.0\n8,268435456,1540.0\n")
    r = runner.invoke(app, ["calibrate", str(data), "-p", str(f), "-o", str(tmp_path / "out.yaml")])
    assert r.exit_code == 2 and "library: rccl" in r.output and "--algorithm ring" in r.output
    assert not (tmp_path / "out.yaml").exists()
