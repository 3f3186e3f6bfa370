"""NCCL's CollNet algorithms (SHARP) and NCCL_MIN_CTAS/NCCL_MAX_CTAS, against answers worked by hand from NVIDIA/nccl's
source at the tags (simcli.comm.collnet, simcli.comm.ctas; docs/nccl.md, 'CollNet' and 'NCCL_MIN_CTAS')."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from simcli.base.types import InputError
from simcli.cli import app
from simcli.comm import collectives as C
from simcli.comm import collnet, ctas, nccl, nccl_choice, registry, releases
from simcli.comm.topology import tier_bandwidth
from simcli.io import schema as S
from simcli.io.profiles import describe, profile_from_dict, profile_to_dict, resolve_profile, with_nccl_min_ctas

US = 1e-6


def sharp(p, value="sharp"):
    """``p`` with every network tier past the first saying ``collnet: value``."""
    return dataclasses.replace(
        p, network=tuple(t if i == 0 else dataclasses.replace(t, collnet=value) for i, t in enumerate(p.network))
    )


@pytest.fixture(scope="module")
def h100():
    return sharp(resolve_profile("dgx-h100"))


def _pairs(p, k, version=None):
    spec = nccl_choice.nccl_spec(p)
    if version:
        spec = dataclasses.replace(spec, version=version)
    return {pr.algorithm: pr for pr in collnet.collnet_pairs(p.network, spec, np.asarray(k))}


# ------------------------------------------------------------------------------------ known answers by hand


def test_collnet_latency_by_hand_from_tuning_cc_at_two_dgx_h100_nodes(h100):
    """k = 16 (2 nodes of 8, NVSwitch, InfiniBand): tuning.cc v2.20.3-1 lines 254-258 with hwLat lines 66-77.
    CollNetChain: baseLat 0 + 2·(8-1)·2.8 (NVLink) + 30 (NET) = 69.2 us. CollNetDirect: 0 + 2·(min(1, 7)·3.7 +
    7·0.4) + 31 = 44.0 us. Every carried release from 2.19.1 has the same terms. 2.18.x (v2.18.1-1 tuning.cc lines
    67-80, 222-224): chain 0 + 2·7·4.75 + 14 = 80.5 us, direct 0 + 2·(8.0 + 7·0.5) + 10.7 = 33.7 us."""
    for version in releases.carried():
        prs = _pairs(h100, [16], version)
        old = releases.parse_version(version) < (2, 19)
        assert prs["collnet-chain"].latency[0] == pytest.approx((80.5 if old else 69.2) * US, rel=1e-9)
        assert prs["collnet-direct"].latency[0] == pytest.approx((33.7 if old else 44.0) * US, rel=1e-9)
        assert prs["collnet-chain"].enabled[0] and prs["collnet-direct"].enabled[0]


def test_collnet_bandwidth_by_hand_at_two_dgx_h100_nodes(h100):
    """The CollNet graph has the ring graph's 8 channels (init.cc v2.20.3-1 line 1031); a NIC (46 GB/s) carries one
    channel at 45 GB/s of the SM90 inter-node table, and 8 x 48 > 370.8 GB/s of NVLink keeps bwIntra at 45.
    CollNetChain: 8 x 45 x .5 = 180 GB/s; CollNetDirect: factor = 8/8 - 0 = 1, x .85 (Hopper) x .5 = 153 GB/s."""
    g, bw = collnet.collnet_graph(h100.network, nccl_choice.nccl_spec(h100), np.array([16, 64]))
    assert list(g) == [8, 8] and list(bw) == [45, 45]
    prs = _pairs(h100, [16])
    assert prs["collnet-chain"].alg_Bps[0] == pytest.approx(180e9)
    assert prs["collnet-direct"].alg_Bps[0] == pytest.approx(153e9)


def test_collnet_at_two_gpus_a_node_by_hand(h100):
    """k = 4 over 2 nodes of 2: ppn 2. Latency: chain 2·1·2.8 + 30 = 35.6 us, direct 2·(3.7 + 0.4) + 31 = 39.2 us.
    The ring graph: 2 channels at 45 GB/s, duplicated (nChannels <= 4) to 4; the CollNet graph's 4 channels share
    2 NICs, 2 a NIC, so bwInter 22 GB/s and pass 2 raises bwIntra to 42 (<= 2 x 22). Chain: 4 x 42 x .5 = 84 GB/s;
    direct: factor 2/4 -> 0.5 - (0.5 - 1)/2 = 0.75, 4 x 42 / 0.75 x .85 x .5 = 95.2 GB/s."""
    small = dataclasses.replace(h100, network=(dataclasses.replace(h100.network[0], size=2), h100.network[1]))
    prs = _pairs(small, [4])
    assert prs["collnet-chain"].latency[0] == pytest.approx(35.6 * US)
    assert prs["collnet-direct"].latency[0] == pytest.approx(39.2 * US)
    assert prs["collnet-chain"].alg_Bps[0] == pytest.approx(84e9)
    assert prs["collnet-direct"].alg_Bps[0] == pytest.approx(95.2e9)


def test_the_forced_chain_costs_its_latency_and_its_bytes(h100):
    """--algorithm collnet-chain at 64 ranks and 1 GiB: 69.2 us + 2^30 / 180 GB/s (all channels launch)."""
    n = float(2**30)
    cost = C.collective(h100, "collnet-chain", np.array([64]), nbytes=np.array([n]), protocol=None)
    assert str(cost.algorithm[0]) == "collnet-chain" and cost.protocol[0] == "simple"
    assert cost.time[0] == pytest.approx(69.2 * US + n / 180e9, rel=1e-9)


# ----------------------------------------------------------------------------------- when NCCL runs them


def test_collnet_runs_only_where_the_fabric_reduces_across_nodes_of_at_most_8(h100):
    plain = resolve_profile("dgx-h100")
    assert not any(pr.enabled.any() for pr in _pairs(plain, [16, 64]).values())  # no collnet field: off
    assert not any(pr.enabled.any() for pr in _pairs(sharp(plain, None), [16]).values())
    prs = _pairs(h100, [2, 8, 16])
    assert list(prs["collnet-chain"].enabled) == [False, False, True]  # one node: NCCL_COLLNET_NODE_THRESHOLD 2
    wide = dataclasses.replace(h100, network=(dataclasses.replace(h100.network[0], size=16), h100.network[1]))
    assert not _pairs(wide, [32])["collnet-chain"].enabled[0]  # 16 a node > NCCL_MAX_DIRECT_ARITY + 1
    p2p = dataclasses.replace(h100, network=(dataclasses.replace(h100.network[0], kind="nvlink"), h100.network[1]))
    prs = _pairs(p2p, [16])
    assert prs["collnet-chain"].enabled[0] and not prs["collnet-direct"].enabled[0]  # Direct needs an NVSwitch
    spec = nccl_choice.nccl_spec(h100)
    assert collnet.collnet_pairs(h100.network, spec, np.array([16]), collective="all_gather") == []
    assert collnet.collnet_pairs(h100.network, spec, np.array([16]), protocols=["ll128"]) == []


def test_forcing_collnet_where_it_cannot_run_runs_the_ring(h100):
    """NCCL (tuning.cc 2.20.3 lines 294-298, and the 'at least set ring algo available' rule): NCCL_ALGO=COLLNET
    without CollNet is ignored; simcli prices the ring there."""
    k, n = np.array([8, 16]), np.array([2.0**26])
    forced = C.collective(h100, "collnet-chain", k[:, None], nbytes=n[None, :], protocol=None)
    ring = C.collective(h100, "ring", k[:, None], nbytes=n[None, :], protocol=None)
    assert str(forced.algorithm[0, 0]) == "ring" and forced.time[0, 0] == pytest.approx(ring.time[0, 0])
    assert str(forced.algorithm[1, 0]) == "collnet-chain"


def test_nccl_may_choose_collnet_and_its_setting_is_named(h100):
    cost = C.collective(h100, "nccl", np.array([64]), nbytes=np.array([64.0 * 1024]), protocol=None)
    assert str(cost.algorithm[0]).startswith("collnet")
    assert nccl_choice.nccl_env("collnet-chain", "simple") == "NCCL_ALGO=CollNetChain NCCL_PROTO=Simple"


def test_registry_rows_name_the_collnet_algorithms():
    for name in collnet.ALGOS:
        spec = registry.SPECS[name]
        assert spec.nccl == name and spec.collectives == ("all_reduce",) and spec.textbook is None
        assert name in registry.CHOICES


# ------------------------------------------------------------------------------------------- NCCL_MIN_CTAS


def test_min_and_max_ctas_move_the_runtime_channels_as_connect_cc_says():
    """connect.cc ncclTopoPostset: min(nChannels, maxCTAs), then copied up to minCTAs; nvls.cc: nvlsChannels =
    max(minCTAs, min(maxCTAs, NVLS_NCHANNELS)); both capped at MAXCHANNELS (32)."""
    spec = nccl_choice.nccl_spec(resolve_profile("dgx-h100"))
    ch = np.array([16.0, 24.0])
    assert list(ctas.runtime_channels(ch, spec)) == [16, 24] and ctas.nvls_channels(spec) == 16
    assert list(ctas.runtime_channels(ch, dataclasses.replace(spec, min_ctas=24))) == [24, 24]
    assert ctas.nvls_channels(dataclasses.replace(spec, min_ctas=24)) == 24
    assert list(ctas.runtime_channels(ch, dataclasses.replace(spec, max_ctas=8))) == [8, 8]
    assert ctas.nvls_channels(dataclasses.replace(spec, max_ctas=8)) == 8
    both = dataclasses.replace(spec, min_ctas=20, max_ctas=12)  # init.cc: a minimum above the maximum is lowered
    assert list(ctas.runtime_channels(ch, both)) == [12, 12]


def test_min_ctas_leaves_the_choice_and_moves_the_cost():
    """64 H100 (8 nodes): the runtime channels go from 16 to 24 and NVLS's from 16 to 24; NCCL's pick is the same
    at every size (its tuner reads the graphs' channels), and what a size costs moves: a tree at 32 KiB launches
    floor(n / (512 x 64)) ... channels of 24 instead of 16 (getAlgoInfo), NVLSTree fills more chunks."""
    p = resolve_profile("dgx-h100")
    q = with_nccl_min_ctas(p, 24)
    k = np.array([64])
    n = 2.0 ** np.arange(10, 34)
    a = C.collective(p, "nccl", k[:, None], nbytes=n[None, :], protocol=None)
    b = C.collective(q, "nccl", k[:, None], nbytes=n[None, :], protocol=None)
    assert (np.asarray(a.algorithm) == np.asarray(b.algorithm)).all()
    assert (np.asarray(a.protocol) == np.asarray(b.protocol)).all()
    pa = {(x.algorithm, x.protocol): x for x in nccl.pairs(p.network, p.nccl, k, tier_Bps=tier_bandwidth(p.network, k))}
    pb = {(x.algorithm, x.protocol): x for x in nccl.pairs(q.network, q.nccl, k, tier_Bps=tier_bandwidth(q.network, k))}
    assert pa["ring", "simple"].channels[0] == 16 and pb["ring", "simple"].channels[0] == 24
    assert pb["nvls-tree", "simple"].ops[0] == pytest.approx(24 / 16 * pa["nvls-tree", "simple"].ops[0])
    nvlst = np.asarray(a.algorithm)[0] == "nvls-tree"
    assert nvlst.any() and (b.time[0][nvlst] > a.time[0][nvlst]).all()  # more concurrent chunks to fill
    # where every channel launches the bandwidth is the same
    assert b.time[0][-1] == pytest.approx(a.time[0][-1], rel=1e-12)


def test_min_ctas_is_refused_outside_nccls_channels(runner):
    with pytest.raises(InputError, match="--nccl-min-ctas"):
        with_nccl_min_ctas(resolve_profile("dgx-h100"), 33)
    r = runner.invoke(app, ["comm", "-p", "dgx-h100", "-k", "64", "-s", "1MiB", "--nccl-min-ctas", "0"])
    assert r.exit_code == 2
    r = runner.invoke(app, ["comm", "-p", "dgx-h100", "-k", "64", "-s", "1MiB", "--nccl-min-ctas", "24", "-f", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)


# --------------------------------------------------------------------------------------- the profile fields


def test_collnet_and_min_ctas_round_trip_through_the_profile(tmp_path):
    d = profile_to_dict(resolve_profile("dgx-h100"))
    d["network"][1]["collnet"] = "sharp"
    d["nccl"]["min_ctas"] = 24
    d["nccl"]["max_ctas"] = 32
    p = profile_from_dict(d, "x.yaml")
    assert p.network[1].collnet == "sharp" and p.network[0].collnet is None
    assert (p.nccl.min_ctas, p.nccl.max_ctas) == (24, 32)
    again = profile_to_dict(p)
    assert again["network"][1]["collnet"] == "sharp" and "collnet" not in again["network"][0]
    assert again["nccl"]["min_ctas"] == 24 and profile_from_dict(again, "x.yaml") == p
    rows = dict(describe(p))
    assert rows["network[1].collnet"] == "sharp" and rows["nccl.min_ctas"] == "24"
    assert "nccl.min_ctas" not in dict(describe(resolve_profile("dgx-h100")))  # not set: no row
    d["network"][1]["collnet"] = "none"
    assert profile_from_dict(d, "z.yaml").network[1].collnet is None


@pytest.mark.parametrize(
    ("where", "value", "says"),
    [
        (("network", 1, "collnet"), "shrap", "network[1].collnet"),
        (("nccl", "min_ctas"), 0, "nccl.min_ctas"),
        (("nccl", "min_ctas"), 40, "nccl.min_ctas"),
        (("nccl", "max_ctas"), 64, "nccl.max_ctas"),
    ],
)
def test_bad_collnet_or_ctas_names_the_field(where, value, says):
    d = profile_to_dict(resolve_profile("dgx-h100"))
    at = d
    for key in where[:-1]:
        at = at[key]
    at[where[-1]] = value
    with pytest.raises(InputError, match=says.replace("[", r"\[").replace("]", r"\]")):
        profile_from_dict(d, "bad.yaml")


def test_the_json_schema_knows_the_new_fields():
    schema = json.loads(json.dumps(S.json_schema()))
    text = json.dumps(schema)
    assert '"collnet"' in text and '"min_ctas"' in text and '"max_ctas"' in text
    assert {f.key for f in S.TIER} >= {"collnet"} and {f.key for f in S.NCCL} >= {"min_ctas", "max_ctas"}
