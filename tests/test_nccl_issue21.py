"""Issue 21: link kinds, the tree's own network traffic, EFA, multi-node NVLink domains, NCCL's pick vs the cost."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import yaml

from simcli.comm import collectives as C
from simcli.comm import nccl, topology
from simcli.io.profiles import profile_from_dict, resolve_profile


def _pair(profile, k, algorithm, protocol):
    p = resolve_profile(profile) if isinstance(profile, str) else profile
    K = np.array([k])
    (pr,) = nccl.pairs(
        p.network, nccl.nccl_spec(p), K, topology.tier_bandwidth(p.network, K), "all_reduce", [algorithm], [protocol]
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
    assert nccl.nccl_spec(p).protocols == ("simple",)  # aws-ofi-nccl: NCCL_PROTO=simple without 128-byte ordering


def test_efa_floor_is_nvls_tree_with_the_plugins_hop_latency():
    """2 p5 instances, 8 B: NVLSTree/Simple, 23 us NVLS + 2 x (20 + 3) us EFA hops = 69 us (AWS measured 65-74)."""
    t = C.collective(resolve_profile("aws-p5"), "nccl", np.array([16]), np.array([1024.0]))
    assert t.algorithm[0] == "nvls-tree" and t.time[0] == pytest.approx(69e-6, rel=0.01)
    pr = _pair("aws-p5", 16, "nvls-tree", "simple")
    # the tuner sees NCCL's NET row plus the plugin's 75 us, twice for Simple: 23 + 2 x (14 + 150)
    assert pr.tuner_lat[0] == pytest.approx(351e-6, rel=1e-6)


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
    p = resolve_profile("dgx-h100")
    two, four = _pair(p, 16, "nvls-tree", "simple"), _pair(p, 32, "nvls-tree", "simple")
    assert two.alg_Bps[0] == pytest.approx(16 * 20e9 * 5 / 6)  # NVLS-bound
    assert four.alg_Bps[0] == pytest.approx(8 * 46e9 / 2)  # heads' NICs carry 2n per node
    # NCCL's tuner: per channel min(bwIntra, bwInter/2), bwInter the graph's quantised speed (22 GB/s)
    assert four.tuner_alg_Bps[0] == pytest.approx(16 * 11e9 * 5 / 6)


def test_mnnvl_rack_is_one_nccl_node():
    p = resolve_profile("gb200-nvl72")
    assert nccl.tier_kind(p.network[0], 0) == "mnnvl"
    pr = _pair(p, 144, "tree", "ll")
    assert pr.hops[0, 0] == 2 * 71 and pr.hops[1, 0] == 2  # 72 GPUs per node, 2 nodes


def test_ll128_net_off_drops_ll128_only_across_nodes():
    p = resolve_profile("dgx-h100")
    off = dataclasses.replace(p, nccl=dataclasses.replace(nccl.nccl_spec(p), ll128_net=False))
    assert _pair(off, 8, "ring", "ll128").enabled[0] and not _pair(off, 16, "ring", "ll128").enabled[0]


def test_faster_pair_names_the_env_that_gets_it():
    p = resolve_profile("dgx-h100")
    k = np.array([[8], [16], [32]])
    n = 2.0 ** np.arange(10, 34, 2)[None, :]
    faster, alg, proto, t = nccl.nccl_faster_pair(p, k, n)
    picked = nccl.nccl_collective(p, k, n)
    assert np.all(t <= picked.time * (1 + 1e-12))
    assert np.all(~faster | (t < 0.95 * picked.time))
    assert nccl.nccl_env("nvls-tree", "simple") == "NCCL_ALGO=NVLSTree NCCL_PROTO=Simple"
