"""NCCL releases as data (simcli.comm.releases): every carried release reproduces, on a DGX H100, three latencies
computed by hand from that tag's src/graph/tuning.cc (the constants written out below, not read from simcli), the
selection rule, and ``--nccl-version`` on the command line."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from simcli.base.types import NCCL_TABLES_VERSION, InputError
from simcli.comm import nccl, releases
from simcli.comm.topology import tier_bandwidth
from simcli.io.profiles import resolve_profile

# What each tag's ncclTopoTuneModel reads for the three cases, in us, copied from NVIDIA/nccl
# src/graph/tuning.cc at that tag (baseLat / hwLat, ncclTunerConstantsDefaults from 2.28.3):
#   tree_base: baseLat[Tree][Simple]; tree_nvl, tree_net: hwLat[NVLINK|NET][Tree][Simple]
#   nvlstree_nvl, nvlstree_net: hwLat[NVLINK|NET][NVLSTree][Simple]
#   ring_base: baseLat[Ring][LL128] (14.0 at every tag); ring_nvl: hwLat[NVLINK][Ring][LL128] (1.9);
#   ring_net: hwLat[NET][Ring][LL128] (4.0); tree_net_ll128: hwLat[NET][Tree][LL128] (8.5)
#   inter_minus_one: nInterSteps = 2*(nNodes-1) for all-reduce (2.23.4 on; 2*nNodes before)
#   ppn1_tree: "With ppn=1 latencies are fully exposed, use the Tree network latency" (2.23.4 on)
#   nvlstree_base: baseLat[NVLSTree][Simple]; nvlstree_linear: 2.18.x's "latencies += 2*(nNodes-1)*hwLat[NET]"
#   (v2.18.5-1 line 238) in place of 2.19.1's "+= intraLat + 2 * log2i(nNodes) * interLat" (v2.19.1-1 line 243)
# v2.18.1-1 lines 56-80: baseLat NVLS/NVLSTree Simple 23, hwLat NVLink Tree/Simple 28, NVLSTree 0, NET Tree/Simple
# 28, NVLSTree 19
_V2_18_1 = dict(tree_base=0.0, tree_nvl=28.0, tree_net=28.0, nvlstree_base=23.0, nvlstree_nvl=0.0, nvlstree_net=19.0)
_V2_18_3 = dict(_V2_18_1, tree_nvl=4.0, tree_net=14.0)  # v2.18.3-1 lines 66-78: Tree/Simple 4/6/14
# v2.19.1-1 lines 56-78: baseLat NVLS/NVLSTree 0, hwLat NVLink NVLS/NVLSTree 23, NET NVLSTree 14, Tree/Simple 28
_V2_20 = dict(tree_base=0.0, tree_nvl=28.0, tree_net=28.0, nvlstree_base=0.0, nvlstree_nvl=23.0, nvlstree_net=14.0)
_V2_21 = dict(_V2_20, nvlstree_nvl=25.0)  # v2.21.5-1: NVLS/NVLSTree NVLink 23 -> 25
_V2_23 = dict(_V2_21, tree_base=8.4, tree_nvl=4.0, tree_net=14.0)  # v2.23.4-1: Tree/Simple 8.4 + 4.0/4.0/14
_V2_28_9 = dict(_V2_23, nvlstree_net=20.9)  # v2.28.9-1: NVLSTree network hop 14 -> 20.9
_COMMON = dict(ring_base=14.0, ring_nvl=1.9, ring_net=4.0, tree_net_ll128=8.5)
_OLD = dict(inter_minus_one=False, ppn1_tree=False, nvlstree_linear=False)
_NEW = dict(inter_minus_one=True, ppn1_tree=True, nvlstree_linear=False)
_2_18 = dict(_OLD, nvlstree_linear=True)
TAGS = {
    "2.18.1": {**_V2_18_1, **_COMMON, **_2_18},
    "2.18.3": {**_V2_18_3, **_COMMON, **_2_18},
    "2.18.5": {**_V2_18_3, **_COMMON, **_2_18},
    "2.19.1": {**_V2_20, **_COMMON, **_OLD},
    "2.19.3": {**_V2_20, **_COMMON, **_OLD},
    "2.19.4": {**_V2_20, **_COMMON, **_OLD},
    "2.20.3": {**_V2_20, **_COMMON, **_OLD},
    "2.21.5": {**_V2_21, **_COMMON, **_OLD},
    "2.22.3": {**_V2_21, **_COMMON, **_OLD},
    "2.23.4": {**_V2_23, **_COMMON, **_NEW},
    "2.24.3": {**_V2_23, **_COMMON, **_NEW},
    "2.25.1": {**_V2_23, **_COMMON, **_NEW},
    "2.26.2": {**_V2_23, **_COMMON, **_NEW},
    "2.27.3": {**_V2_23, **_COMMON, **_NEW},
    "2.27.5": {**_V2_23, **_COMMON, **_NEW},
    "2.28.3": {**_V2_23, **_COMMON, **_NEW},
    "2.28.7": {**_V2_23, **_COMMON, **_NEW},
    "2.28.9": {**_V2_28_9, **_COMMON, **_NEW},
    "2.29.2": {**_V2_28_9, **_COMMON, **_NEW},
    "2.29.7": {**_V2_28_9, **_COMMON, **_NEW},
    "2.30.3": {**_V2_28_9, **_COMMON, **_NEW},
    "2.30.7": {**_V2_28_9, **_COMMON, **_NEW},
}
NET_OVERHEAD_INTEL = 1.0  # getNetOverhead: x86 Intel, 1 us (x3 for Simple only)


def by_hand(c: dict) -> dict[str, float]:
    """The three all-reduce latencies (us) as tuning.cc computes them."""
    # Tree/Simple, 2 DGX H100 nodes: base + 2*((nRanks/nNodes-1)*intraLat + log2i(nNodes)*interLat)
    tree = c["tree_base"] + 2 * ((8 - 1) * c["tree_nvl"] + math.log2(2) * c["tree_net"])
    # NVLSTree, 8 nodes: base + intraLat + 2*log2i(nNodes)*interLat; 2.18.x: base + 2*(nNodes-1)*hwLat[NET]
    net_hops = 2 * (8 - 1) if c["nvlstree_linear"] else 2 * math.log2(8)
    nvlstree = c["nvlstree_base"] + c["nvlstree_nvl"] + net_hops * c["nvlstree_net"]
    # Ring/LL128, 32 nodes of one GPU: base + (nsteps - nInterSteps)*max(intraLat, netOverhead) + nInterSteps*interLat
    nodes, nsteps = 32, 2 * (32 - 1)
    inter_steps = 2 * (nodes - 1) if c["inter_minus_one"] else 2 * nodes
    inter_lat = c["tree_net_ll128"] if c["ppn1_tree"] else c["ring_net"]
    intra_lat = max(c["ring_nvl"], NET_OVERHEAD_INTEL)
    ring = c["ring_base"] + (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat
    return {"tree": tree, "nvlstree": nvlstree, "ring": ring}


def test_the_hand_table_is_the_issues():
    """The issue's table, 2.20.3 against 2.28.9: 448 / 92.4, 107 / 150.4, 266 / 541 us; and 2.18's: 2.18.1 448,
    289 (23 + 2·7·19), 266.2; 2.18.3 and 2.18.5 84 (2·(7·4 + 14)), 289, 266.2; 2.19.x 2.20.3's."""
    old, new = by_hand(TAGS["2.20.3"]), by_hand(TAGS["2.28.9"])
    assert old == pytest.approx({"tree": 448.0, "nvlstree": 107.0, "ring": 266.2})
    assert new == pytest.approx({"tree": 92.4, "nvlstree": 150.4, "ring": 541.0})
    assert by_hand(TAGS["2.18.1"]) == pytest.approx({"tree": 448.0, "nvlstree": 289.0, "ring": 266.2})
    assert (
        by_hand(TAGS["2.18.3"])
        == by_hand(TAGS["2.18.5"])
        == pytest.approx({"tree": 84.0, "nvlstree": 289.0, "ring": 266.2})
    )
    assert by_hand(TAGS["2.19.1"]) == by_hand(TAGS["2.19.4"]) == old


def test_every_carried_release_has_a_hand_row():
    assert set(TAGS) == set(releases.carried())


def _pair(
    version: str,
    k: int,
    algorithm: str,
    protocol: str,
    ppn1: bool = False,
    *,
    profile: str = "dgx-h100",
    collective: str = "all_reduce",
) -> nccl.Pair:
    """One (algorithm, protocol) pair of ``profile`` at k devices, priced as NCCL ``version``."""
    prof = resolve_profile(profile)
    net = prof.network
    if ppn1:  # the same GPUs and NICs, one GPU per node
        net = (dataclasses.replace(net[0], size=1),) + tuple(net[1:])
    spec = dataclasses.replace(prof.nccl, version=version)
    kk = np.array([k])
    (pr,) = nccl.pairs(
        net,
        spec,
        kk,
        tier_Bps=tier_bandwidth(net, kk),
        collective=collective,
        algorithms=[algorithm],
        protocols=[protocol],
    )
    return pr


@pytest.mark.parametrize("version", list(TAGS))
def test_each_release_reproduces_its_tags_latencies(version):
    """NCCL's own estimate (the tuner's latency) of each case equals the tag's arithmetic; the cost's latency too
    where simcli's hop count is NCCL's (Tree, NVLSTree; a ring of one-GPU nodes from 2.23.4 on)."""
    want = by_hand(TAGS[version])
    tree = _pair(version, 16, "tree", "simple")
    nvlstree = _pair(version, 64, "nvls-tree", "simple")
    ring = _pair(version, 32, "ring", "ll128", ppn1=True)
    assert tree.enabled[0] and nvlstree.enabled[0] and ring.enabled[0]
    assert tree.tuner_lat[0] * 1e6 == pytest.approx(want["tree"], rel=1e-9)
    assert tree.latency[0] * 1e6 == pytest.approx(want["tree"], rel=1e-9)
    assert nvlstree.tuner_lat[0] * 1e6 == pytest.approx(want["nvlstree"], rel=1e-9)
    assert nvlstree.latency[0] * 1e6 == pytest.approx(want["nvlstree"], rel=1e-9)
    assert ring.tuner_lat[0] * 1e6 == pytest.approx(want["ring"], rel=1e-9)
    if TAGS[version]["inter_minus_one"]:
        assert ring.latency[0] * 1e6 == pytest.approx(want["ring"], rel=1e-9)
    else:  # 2.20.3 counts 2N inter-node steps of 2(N-1): the cost keeps no negative intra-node steps
        assert ring.latency[0] * 1e6 == pytest.approx(14.0 + 64 * 4.0, rel=1e-9)


def test_ring_ll128_at_one_gpu_per_node_runs_at_092_from_2_23_4():
    """tuning.cc: busBw * (ppn < 2 ? 0.7 : 0.92) to 2.22.3, busBw * 0.92 from 2.23.4 (the per-channel cap, 36.7
    GB/s x channels, is far above one 400 Gb/s NIC)."""
    old = _pair("2.22.3", 32, "ring", "ll128", ppn1=True)
    new = _pair("2.23.4", 32, "ring", "ll128", ppn1=True)
    assert new.alg_Bps[0] / old.alg_Bps[0] == pytest.approx(0.92 / 0.7, rel=1e-12)


def test_ring_ll_bandwidth_from_2_21_5_by_hand():
    """Ring/LL in one DGX H100 (k = 8): min(llMaxBw, busBw/4) with Hopper's one-node llMaxBw 87.7 GB/s in 2.20.3,
    min(llMaxBw, busBw/2) with 141 GB/s from 2.21.5; busBw is the NVLink's 450 GB/s x 0.82, algBw = busBw x 8/14."""
    bus = 450.0 * 0.82
    old = _pair("2.20.3", 8, "ring", "ll")
    new = _pair("2.21.5", 8, "ring", "ll")
    assert old.alg_Bps[0] / 1e9 == pytest.approx(min(87.7, bus / 4) * 8 / 14, rel=1e-9)
    assert new.alg_Bps[0] / 1e9 == pytest.approx(min(141.0, bus / 2) * 8 / 14, rel=1e-9)


def test_nvls_bandwidth_from_2_28_3_by_hand():
    """tuning.cc 2.28.3 on, one DGX H100 (k = 8): the NVLS graph has one channel per GPU (search.cc: maxChannels
    = min(NCCL_MAX_NVLS_ARITY, GPUs)), G = 8, each at the largest sm90SpeedArrayIntra step S with (G + 1) S <= the
    GPU's NVLink in NCCL's topology, 18 x SM90_NVLINK_BW 20.6 = 370.8 GB/s (a channel reserves S on every GPU's link,
    twice on its head's): S = 40; per channel S x nvlsEfficiency[Hopper] 0.85 x (G-1)/G x 2 (all-reduce), algBw = G x
    that x nRanks/nsteps = 8/14. To 2.27.x NCCL's tuner believes busBw = G x S, algBw 5/6 of it; what it costs is
    2.28.3's formula in every release."""
    G, S = 8, 40.0
    assert (G + 1) * S <= 18 * 20.6 < (G + 1) * 50.0
    new = _pair("2.28.3", 8, "nvls", "simple")
    old = _pair("2.27.5", 8, "nvls", "simple")
    assert new.alg_Bps[0] / 1e9 == pytest.approx(G * S * 0.85 * (G - 1) / G * 2 * 8 / 14, rel=1e-9)
    assert new.tuner_alg_Bps[0] == pytest.approx(new.alg_Bps[0], rel=1e-12)
    assert old.tuner_alg_Bps[0] / 1e9 == pytest.approx(G * S * 5 / 6, rel=1e-9)
    assert old.alg_Bps[0] == pytest.approx(new.alg_Bps[0], rel=1e-12)


def test_blackwell_nvls_graph_in_one_nvl72_rack_by_hand():
    """One GB200 NVL72 rack (k = 72, one MNNVL node): G = min(32, 72) heads, S the largest sm100SpeedArrayIntra step
    (2.29.2 on: 90, 80, 70, 60, 50, 45, 40, 30, 24, 20, ...) with (G + 1) S <= 18 x SM100_NVLINK_BW 40.1 = 721.8 GB/s:
    20; busBw = G x S x nvlsEfficiency[Blackwell] 0.74 x (G-1)/G x 2, algBw x 72/142; from 2.27.3 NVLS runs 24
    channels in one NVLink domain (nvls.cc NVLS_NCHANNELS_SM100_NVL), 32 from 2.25.1 to 2.27.x."""
    for version, nch in (("2.29.7", 24), ("2.26.2", 32)):
        pr = _pair(version, 72, "nvls", "simple", profile="gb200-nvl72")
        assert pr.enabled[0]
        assert pr.alg_Bps[0] / 1e9 == pytest.approx(32 * 20 * 0.74 * 31 / 32 * 2 * 72 / 142, rel=1e-9)
        assert float(np.asarray(pr.ops).reshape(-1)[0]) == nch * 32


def test_nvlstree_tuner_bandwidth_on_two_nodes_from_2_28_3_by_hand():
    """tuning.cc 2.28.3 on, 2 DGX H100 (k = 16): per channel min(S x 0.85 x 7/8 x 2 = 59.5, the NIC's 45 GB/s
    (sm90SpeedArrayInter's step at or below one NDR NIC's 46) x 2 on two nodes, perChMaxNVLSTreeBws[Hopper][N2]
    57.7) = 57.7 GB/s over G = 8 heads, algBw = busBw x 16/30."""
    pr = _pair("2.28.3", 16, "nvls-tree", "simple")
    assert pr.tuner_alg_Bps[0] / 1e9 == pytest.approx(8 * min(40 * 0.85 * 7 / 8 * 2, 45 * 2, 57.7) * 16 / 30, rel=1e-9)


def test_selection_rule():
    assert releases.select(None) is releases.DEFAULT_RELEASE
    assert releases.DEFAULT_RELEASE.version == NCCL_TABLES_VERSION == "2.29.7"  # PyPI torch 2.13.0's NCCL
    assert releases.select("2.27.5").version == "2.27.5"
    assert releases.select("2.27.7").version == "2.27.5"  # between 2.27.5 and 2.28.3: the earlier
    assert releases.select("2.20.5").version == "2.20.3"
    assert releases.select("2.27").version == "2.27.5"  # a series: its newest carried release
    assert releases.select("2.31.1").version == releases.RELEASES[-1].version
    assert releases.note("2.27.5") == ""
    assert "priced as 2.27.5" in releases.note("2.27.7")
    assert "newer than the newest" in releases.note("2.31.1")
    assert releases.select("2.18.6").version == "2.18.5"  # 2.18.6 changed only nvls.cc's setup
    assert releases.select("2.19.2").version == "2.19.1"
    assert releases.select("2.19.3").version == "2.19.3"
    with pytest.raises(InputError, match=r"--nccl-version: NCCL 2.17.1 is older than the oldest .* \(2.18.1\)"):
        releases.select("2.17.1")
    with pytest.raises(InputError, match="not an NCCL release"):
        releases.select("two")
    keys = [r.key for r in releases.RELEASES]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


def test_every_row_names_its_tag():
    for r in releases.RELEASES:
        assert f"v{r.version}-1" in r.source and "tuning.cc" in r.source or "enqueue.cc" in r.source
        assert r.changes


def test_the_default_release_prices_as_before():
    """A spec that names the default release (2.29.7) and one that names nothing give the same pairs."""
    from simcli.base.types import NcclSpec

    prof = resolve_profile("dgx-h100")
    k = np.array([2, 8, 16, 64, 512])
    tb = tier_bandwidth(prof.network, k)
    a = nccl.pairs(prof.network, dataclasses.replace(prof.nccl, version="2.29.7"), k, tier_Bps=tb)
    b = nccl.pairs(prof.network, dataclasses.replace(prof.nccl, version=NcclSpec().version), k, tier_Bps=tb)
    for x, y in zip(a, b):
        assert np.array_equal(x.latency, y.latency) and np.array_equal(x.alg_Bps, y.alg_Bps)
        assert np.array_equal(x.tuner_lat, y.tuner_lat) and np.array_equal(x.tuner_alg_Bps, y.tuner_alg_Bps)


@pytest.mark.parametrize("version, want_us", [("2.28.9", 92.4), ("2.20.3", 448.0)])
def test_comm_prints_the_releases_latency(runner, version, want_us):
    """``simcli comm -k 16 -s 64KiB -a tree --protocol simple --nccl-version V``: latency_s is the tag's."""
    from simcli.cli import app

    args = ["comm", "-k", "16", "-s", "64KiB", "-a", "tree", "--protocol", "simple", "--nccl-version", version]
    r = runner.invoke(app, args + ["--format", "json"])
    assert r.exit_code == 0, r.output
    (rec,) = json.loads(r.stdout)
    assert rec["latency_s"] * 1e6 == pytest.approx(want_us, rel=1e-9)
    r = runner.invoke(app, args)  # the table's title names a release other than the default
    assert r.exit_code == 0, r.output
    assert ("nccl.version 2.28.9" in r.stdout) == (version == "2.28.9")


def test_comm_says_which_release_prices_an_uncarried_one(runner):
    from simcli.cli import app

    base = ["comm", "-k", "16", "-s", "64KiB", "-a", "tree", "--protocol", "simple", "--format", "json"]
    r = runner.invoke(app, base + ["--nccl-version", "2.28.8"])
    assert r.exit_code == 0, r.output
    assert r.stderr.count("\n") == 1 and "2.28.8 is not a carried release; priced as 2.28.7" in r.stderr
    assert json.loads(r.stdout)[0]["latency_s"] * 1e6 == pytest.approx(92.4)
    r = runner.invoke(app, base + ["--nccl-version", "2.18.6"])
    assert r.exit_code == 0 and r.stderr.count("\n") == 1 and "priced as 2.18.5" in r.stderr
    assert json.loads(r.stdout)[0]["latency_s"] * 1e6 == pytest.approx(84.0)  # 2.18.3's Tree/Simple 4/14 us hops
    r = runner.invoke(app, base + ["--nccl-version", "2.17.1"])
    assert r.exit_code == 2 and r.stdout == "" and r.stderr.count("\n") == 1
    assert "--nccl-version: NCCL 2.17.1 is older than the oldest release simcli carries (2.18.1)" in r.stderr


def test_speedup_and_explain_take_the_option(runner):
    from simcli.cli import app

    outs = {}
    for v in ("2.20.3", "2.28.9"):
        r = runner.invoke(app, ["speedup", "-k", "16,64", "--nccl-version", v, "--format", "json"])
        assert r.exit_code == 0, r.output
        outs[v] = r.stdout
    assert outs["2.20.3"] != outs["2.28.9"]
    r = runner.invoke(app, ["explain", "-k", "16", "--nccl-version", "2.28.9"])
    assert r.exit_code == 0, r.output
    assert "NCCL release │ nccl.version 2.28.9" in " ".join(r.stdout.split())


def test_fp8_rings_past_8_ranks_give_way_from_2_24_3():
    """src/enqueue.cc (topoGetAlgoInfo, 2.24.3 on): an fp8 collective on more than 8 ranks prices Ring x1024 in
    the cost table, so where a bf16 all-reduce runs Ring, an fp8 one runs something else; 2.23.4 has no such rule,
    and 8 ranks are left alone."""
    from simcli.comm import collectives as C
    from simcli.io.profiles import with_nccl_version

    k = np.array([8, 16, 32])[:, None]
    n = (2.0 ** np.arange(10, 33, 2))[None, :]
    picks = {}
    for v in ("2.23.4", "2.24.3"):
        p = with_nccl_version(resolve_profile("dgx-a100"), v)
        for d in ("bf16", "fp8"):
            picks[v, d] = np.asarray(
                C.collective(p, "nccl", k, nbytes=n, collective="all_reduce", message_dtype=d, protocol=None).algorithm
            )
    ring = picks["2.24.3", "bf16"] == "ring"
    past8 = np.broadcast_to(k > 8, ring.shape)
    assert np.any(ring & past8) and np.any(ring & ~past8)
    assert np.all(picks["2.24.3", "fp8"][ring & past8] != "ring")
    assert np.array_equal(picks["2.24.3", "fp8"][~past8], picks["2.24.3", "bf16"][~past8])
    assert np.array_equal(picks["2.23.4", "fp8"], picks["2.23.4", "bf16"])


@pytest.mark.parametrize("version, factor", [("2.22.3", None), ("2.23.4", 0.85), ("2.24.3", 0.75), ("2.30.7", 0.75)])
def test_pat_at_one_gpu_per_node_by_hand(version, factor):
    """tuning.cc 2.23.4 on (ncclPatEnable: nNodes == nRanks): PAT all-gather/reduce-scatter, Simple, latency
    8 + log2i(nNodes)·interLat/3.5 + nRanks·2.8 us with interLat Tree's network hop (14 us), busBw x 0.85
    (2.23.4) or 0.75 (2.24.3 on) kept as the algorithm bandwidth; none before 2.23.4, none at 8 GPUs per node."""
    for coll in ("all_gather", "reduce_scatter"):
        pat = _pair(version, 32, "pat", "simple", True, collective=coll)
        ring = _pair(version, 32, "ring", "simple", True, collective=coll)
        assert bool(pat.enabled[0]) == (factor is not None)
        if factor is not None:
            assert pat.tuner_lat[0] * 1e6 == pytest.approx(8 + 5 * 14.0 / 3.5 + 32 * 2.8, rel=1e-9)
            assert pat.latency[0] * 1e6 == pytest.approx(8 + 5 * 14.0 / 3.5 + 32 * 2.8, rel=1e-9)
            assert pat.alg_Bps[0] == pytest.approx(ring.bus_Bps[0] * factor, rel=1e-12)
        assert not _pair(version, 32, "pat", "simple", collective=coll).enabled[0]  # 8 GPUs per node


def test_comm_picks_pat_where_nccl_would(runner, tmp_path):
    """32 one-GPU nodes, a 64 KiB all-gather: Ring/LL's 2·31 steps cost more than PAT's log-depth latency from
    2.23.4 on; 2.20.3 has no PAT."""
    from simcli.cli import app

    src = (Path(__file__).resolve().parents[2] / "hardware_profiles" / "dgx-h100.yaml").read_text()
    one = tmp_path / "one.yaml"
    one.write_text(src.replace("size: 8 ", "size: 1 ", 1))
    base = ["comm", "-p", str(one), "-k", "32", "-s", "64KiB", "--collective", "all_gather", "--format", "json"]
    picks = {}
    for v in ("2.20.3", "2.28.9"):
        r = runner.invoke(app, base + ["--nccl-version", v])
        assert r.exit_code == 0, r.output
        picks[v] = json.loads(r.stdout)[0]["algorithm"]
    assert picks == {"2.20.3": "ring", "2.28.9": "pat"}


@pytest.mark.parametrize("given, row, before", [("2.29.7", "2.29.7", "2.29.2"), ("2.28.8", "2.28.7", "2.28.3")])
def test_explain_says_what_the_release_changes_against_the_one_before(given, row, before):
    """issue 37: explain names the carried row that prices the release and what that row changes against the one
    before it (the row's own words, simcli.comm.releases), the default (2.29.7) too; the oldest has nothing before
    it."""
    from typer.testing import CliRunner

    from simcli.cli.app import app

    args = ["explain", "-m", "llama2-7b", "-p", "dgx-h100", "-k", "64", "--strategy", "hsdp", "--nccl-version", given]
    r = CliRunner().invoke(app, [*args, "-f", "json"])
    assert r.exit_code == 0, r.output
    rel = json.loads(r.stdout)["nccl_release"]
    changes = next(x.changes for x in releases.RELEASES if x.version == row)
    assert rel == {"version": row, "previous": before, "changes": changes}
    text = " ".join(CliRunner().invoke(app, args, env={"COLUMNS": "200"}).stdout.split())
    assert f"against {before}: {' '.join(changes.split())}" in text and f"{row}" in text
    assert ("the default: what torch 2.13's CUDA wheels install" in text) == (row == "2.29.7")
    assert releases.against_previous(None)[0] is releases.DEFAULT_RELEASE
    assert releases.against_previous("2.18.1") == (releases.RELEASES[0], None)
    assert releases.against_previous("2.20.3") == (releases.V2_20_3, releases.V2_19_4)


# ------------------------------------------------------------------- 2.18.x and 2.19.x (issue 37: the older runs)


def test_nvls_ratio_is_075_in_2_18_1_and_5_6_from_2_18_3_by_hand():
    """One DGX H100 (k = 8), NVLS: the tuner's busBw = G x S = 8 x 40 GB/s (the NVLS graph, as 2.20.3's), algBw x .75
    (v2.18.1-1 tuning.cc line 187) or x 5/6 (v2.18.3-1 line 197); what it costs is the same (2.28.3's formula)."""
    a, b = _pair("2.18.1", 8, "nvls", "simple"), _pair("2.18.3", 8, "nvls", "simple")
    assert a.tuner_alg_Bps[0] / 1e9 == pytest.approx(8 * 40.0 * 0.75, rel=1e-9)
    assert b.tuner_alg_Bps[0] / 1e9 == pytest.approx(8 * 40.0 * 5 / 6, rel=1e-9)
    assert a.alg_Bps[0] == pytest.approx(b.alg_Bps[0], rel=1e-12)
    # one node: baseLat 23 + hwLat[NVLink] 0 (2.18) and baseLat 0 + hwLat[NVLink] 23 (2.19.1) are the same 23 us
    assert a.tuner_lat[0] * 1e6 == pytest.approx(23.0) == _pair("2.19.1", 8, "nvls", "simple").tuner_lat[0] * 1e6


@pytest.mark.parametrize("k, nodes", [(16, 2), (64, 8)])
def test_nvlstree_tuner_bandwidth_in_2_18_by_hand(k, nodes):
    """v2.18.5-1 tuning.cc lines 174 and 198: per channel bwIntra up to 2 nodes (the NVLS graph's 40 GB/s) and
    bwInter beyond (one NDR NIC's 45 GB/s step of sm90SpeedArrayInter; no min with bwIntra, no halving), algBw =
    busBw x .70·N/(2(N-1)): 8 x 40 x .70 = 224 GB/s on 2 nodes, 8 x 45 x .40 = 144 GB/s on 8. 2.19.1 (line 176,
    199): min(40, 45) or min(40, 45/2), x 5/6."""
    old, new = _pair("2.18.5", k, "nvls-tree", "simple"), _pair("2.19.1", k, "nvls-tree", "simple")
    per_old = 40.0 if nodes <= 2 else 45.0
    per_new = min(40.0, 45.0 if nodes <= 2 else 45.0 / 2)
    assert old.tuner_alg_Bps[0] / 1e9 == pytest.approx(8 * per_old * 0.70 * nodes / (2 * (nodes - 1)), rel=1e-9)
    assert new.tuner_alg_Bps[0] / 1e9 == pytest.approx(8 * per_new * 5 / 6, rel=1e-9)
    assert old.alg_Bps[0] == pytest.approx(new.alg_Bps[0], rel=1e-12)  # the cost is one formula in every release


def test_tree_pattern_factor_from_2_18_3():
    """Tree at one GPU per node: x.85 for NCCL_TOPO_PATTERN_TREE from v2.18.3-1 (tuning.cc line 183), not in 2.18.1;
    2.18.1's Hopper Tree cap beyond 2 nodes is 33 GB/s a channel (36 from 2.18.3), far above one NIC's ring."""
    a, b = _pair("2.18.1", 32, "tree", "simple", ppn1=True), _pair("2.18.3", 32, "tree", "simple", ppn1=True)
    assert b.alg_Bps[0] / a.alg_Bps[0] == pytest.approx(0.85, rel=1e-12)


def test_nvls_all_gather_and_reduce_scatter_from_2_19_1():
    """tuning.cc before 2.19.1: "if (coll == ncclFuncAllGather && a != NCCL_ALGO_RING) continue" (v2.18.5-1 lines
    168-169); from v2.19.1-1 NVLS too."""
    for coll in ("all_gather", "reduce_scatter"):
        for version, on in (("2.18.5", False), ("2.19.1", True)):
            assert bool(_pair(version, 8, "nvls", "simple", collective=coll).enabled[0]) == on


# v2.18.1-1 src/graph/tuning.cc, lines 56-59, 67-80, 88-99, 160, 187-188 (NVIDIA/nccl, BSD-3-Clause)
_TUNING_2_18_1 = """
static const float baseLat  [NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] = {
       {  6.8, 14.0,    0 }, {  6.6, 14.0,  8.4 }, // Tree, Ring
       {  6.8, 14.0,    0 }, {  6.8, 14.0,    0 },       // Collnet Direct, Chain
       {    0,    0, 23.0 }, {    0,    0, 23.0 }};     // NVLS, NVLS Tree
static float hwLat [3][NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] =
{ /* NVLINK */
  { /* Tree (LL/LL128/Simple)*/ { .6, 1.25, 28 }, /* Ring (LL/LL128/Simple)*/ { .6, 1.9, 3.4 },
    /* CollNetDirect (Simple)*/ { 0, 0, 8.0 }, /* CollNetChain (Simple)*/ { 0, 0, 4.75 },
    /* NVLS */ { 0, 0, 0 }, /* NVLSTree */ { 0, 0, 0 } },
  /* PCI */
  { /* Tree (LL/LL128/Simple)*/ { 1.0, 1.9, 28 }, /* Ring (LL/LL128/Simple)*/ { 1.0, 2.5, 5.7 },
    /* CollNetDirect (Simple)*/ { 0, 0, 8.0 }, /* CollNetChain (Simple)*/ { 0, 0, 8.0 },
    /* NVLS */ { 0, 0, 0 }, /* NVLSTree */ { 0, 0, 0 } },
  /* NET */
  { /* Tree (LL/LL128/Simple)*/ { 5.0, 8.5, 28 }, /* Ring (LL/LL128/Simple)*/ { 2.7, 4.0, 14.0 },
    /* CollNetDirect (Simple)*/ { 0, 0, 10.7 }, /* CollNetChain (Simple)*/ { 0, 0, 14 },
    /* NVLS */ { 0, 0, 18 }, /* NVLSTree */ { 0, 0, 19 } }
};
static const double ll128MaxBwPerCh[3] = { 20.0, 20.0, 36.7 };
static const double llMaxBws[3][3] = {
  /* Volta-N1/Intel-N2/Intel-N4) */ {39.0, 39.0, 20.4},
  /* Ampere-N1/AMD-N2/AMD-N4) */ {87.7, 22.5 /*avg of ring & tree*/, 19.0},
  /* Hopper-N1/AMD-N2/AMD-N4) */ {87.7, 22.5 /*avg of ring & tree*/, 19.0}
};

static const double perChMaxTreeBws[3][3] = {
  /* Volta (N1/N2/N4) */ {26.5, 18.5, 10.0},
  /* Ampere (N1/N2/N4) */ {24.0, 23.6, 17.8},
  /* Hopper (N1/N2/N4) */ {38.7, 41.4, 33.0},
};
      if (coll == ncclFuncAllGather && a != NCCL_ALGO_RING) continue;
        else if (a == NCCL_ALGO_NVLS) ratio = .75;
        else if (a == NCCL_ALGO_NVLS_TREE) ratio = .70 * nNodes / (2*(nNodes-1));
"""


def test_the_release_checker_reads_2_18_1s_tables_and_switch_lines():
    """benchmarks/check_nccl_releases.py on 2.18.1's own text: its one ll128MaxBwPerCh row caps Ring/LL128 and
    Tree/LL128 alike, CollNet's columns are read against simcli.comm.collnet's row of the release, the switch lines
    decide tree_pattern_factor, nvls_ratio, nvls_tree_2_18 and nvls_ag_rs: the 2.18.1 row agrees, 2.18.3's (read as
    if it were 2.18.1) disagrees on its hops, its caps and its two switches."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "check_nccl_releases.py"
    spec = importlib.util.spec_from_file_location("check_nccl_releases", path)
    chk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(chk)
    t = chk.tables(_TUNING_2_18_1)
    assert t["ring_ll128"] == t["tree_ll128"] == [20.0] * 6 + [36.7] * 3
    row = releases.V2_18_1
    assert chk.compare(row, t) == [] and chk.compare_collnet(row, t) == []
    assert chk.compare_switches(row, _TUNING_2_18_1) == []
    wrong = dataclasses.replace(releases.V2_18_3, version="2.18.1")
    bad = chk.compare(wrong, t) + chk.compare_switches(wrong, _TUNING_2_18_1)
    assert any("hwLat[net][tree]" in b for b in bad) and any("tree_ll128[hopper]" in b for b in bad)
    assert any("tree_pattern_factor" in b for b in bad) and any("nvls_ratio" in b for b in bad)
    later = dataclasses.replace(releases.V2_18_1, version="2.19.1")  # CollNet's row is the release's: 2.19.1's
    assert any("hwLat[nvlink][collnet-chain]" in b for b in chk.compare_collnet(later, t))
