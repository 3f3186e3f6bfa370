"""Transports with their own costs (issue 37): every network link kind row reaches the pricing, in the direction its
source says, and the new built-in profiles load and validate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from simcli.comm import collectives as C
from simcli.comm import nccl_choice
from simcli.comm.specs import LINK_KINDS
from simcli.io.profiles import profile_from_dict

ROOT = Path(__file__).resolve().parents[2]
NEW_PROFILES = ("gcp-a3-mega", "mi300x-roce", "mi325x", "mi355x")

H100 = """
name: kind-{kind}
sources: [test]
device: {{name: H100 SXM5, peak_flops: {{bf16: 989 TFLOP/s}}, mfu: 0.4}}
network:
  - {{name: nvlink, kind: nvswitch, size: 8, bandwidth: 450 GB/s, latency: 3.4 us, efficiency: 0.82}}
  - {{name: nic, kind: {kind}, bandwidth: 400 Gb/s}}
"""


def _kind(kind: str):
    return profile_from_dict(yaml.safe_load(H100.format(kind=kind)), "test")


def _time(p, k, n, algorithm="nccl"):
    return C.collective(p, algorithm, np.array([k]), nbytes=np.array([float(n)]), protocol=None).time[0]


@pytest.mark.parametrize("kind", ["roce", "socket", "tcpx", "tcpxo"])
def test_each_new_kind_prices_slower_than_infiniband_across_nodes(kind):
    """Two nodes, 64 KiB: RoCE's hops cost a little more than InfiniBand's (Ethernet switches, RoCE v2 framing),
    TCP-based transports far more (a kernel or offloaded TCP stack per message); one node is not affected unless the
    plugin restricts NCCL's protocols for the whole process (TCPX, TCPXO)."""
    ib, other = _kind("infiniband"), _kind(kind)
    t_ib, t_o = _time(ib, 16, 65536), _time(other, 16, 65536)
    assert t_o > t_ib
    if kind != "roce":
        assert t_o > 2 * t_ib
    if LINK_KINDS[kind].protocols == LINK_KINDS["infiniband"].protocols:
        assert _time(other, 8, 65536) == pytest.approx(_time(ib, 8, 65536))


def test_roce_is_infiniband_plus_its_own_hop_and_framing():
    lk, ib = LINK_KINDS["roce"], LINK_KINDS["infiniband"]
    assert lk.hw == ib.hw == "net" and lk.latency_us == pytest.approx(ib.latency_us + 0.55)
    assert lk.efficiency < ib.efficiency and lk.protocols == ib.protocols
    # bandwidth-bound sizes see the framing: a 1 GiB all-reduce over RoCE is slower, by less than 2%
    r = _time(_kind("roce"), 16, 2**30) / _time(_kind("infiniband"), 16, 2**30)
    assert 1.0 < r < 1.02


def test_protocols_the_transports_allow():
    """TCPX's unpack device runs in NCCL's Simple primitives only; TCPXO's plugin sets NCCL_PROTO=Simple,LL128."""
    assert nccl_choice.nccl_spec(_kind("tcpx")).protocols == ("simple",)
    assert nccl_choice.nccl_spec(_kind("tcpxo")).protocols == ("ll128", "simple")
    assert nccl_choice.nccl_spec(_kind("socket")).protocols == ("ll", "ll128", "simple")
    c = C.collective(_kind("tcpxo"), "nccl", np.array([16, 16]), nbytes=np.array([1024.0, 2.0**30]), protocol=None)
    assert "ll" not in set(c.protocol)


def test_a_transports_hop_scales_with_the_tiers_stated_latency():
    """A tier that states its own latency is priced at it (the kind's per-protocol hops scale with it)."""
    base = _kind("tcpxo")
    d = yaml.safe_load(H100.format(kind="tcpxo"))
    d["network"][1]["latency"] = "100 us"
    slow = profile_from_dict(d, "test")
    assert _time(slow, 16, 1024) > _time(base, 16, 1024) + 40e-6


@pytest.mark.parametrize("name", NEW_PROFILES)
def test_new_profiles_load_validate_and_price(name, runner):
    from simcli.cli import app

    path = ROOT / "hardware_profiles" / f"{name}.yaml"
    r = runner.invoke(app, ["profiles", "validate", str(path)])
    assert r.exit_code == 0, r.output
    p = profile_from_dict(yaml.safe_load(path.read_text()), str(path))
    assert len(p.sources) >= 5
    t = C.collective(p, None, np.array([8, 16]), nbytes=np.array([2.0**20, 2.0**20]), protocol=None)
    assert np.all(t.time > 0) and t.time[1] > t.time[0]  # the network costs more than one node


def test_a3_mega_small_messages_cost_the_tcpxo_hops():
    """2 A3 Mega, 64 KiB: the model sits above 100 us, where the published 2-node TCPXO all-gather sits (110 us),
    not at InfiniBand's ~35 us."""
    path = ROOT / "hardware_profiles" / "gcp-a3-mega.yaml"
    p = profile_from_dict(yaml.safe_load(path.read_text()), str(path))
    ag = C.collective(p, None, np.array([16]), nbytes=np.array([65536.0]), collective="all_gather", protocol=None).time[
        0
    ]
    assert 80e-6 < ag < 160e-6


def test_a_tuner_plugin_takes_the_pair_simcli_prices_fastest():
    """nccl.tuner: fastest (a platform's tuner plugin replaces NCCL's choice, docs/nccl.md 'Tuner plugins'): every
    (k, n) costs the least of NCCL's pairs; with NCCL's own tuner some (k, n) of A3 Mega cost more than that least,
    and the plugin never costs more than NCCL's own choice."""
    import dataclasses

    path = ROOT / "hardware_profiles" / "gcp-a3-mega.yaml"
    p = profile_from_dict(yaml.safe_load(path.read_text()), str(path))
    assert p.nccl.tuner == "fastest"
    own = p.replace(nccl=dataclasses.replace(p.nccl, tuner="nccl"))
    k = np.array([8, 16, 32, 64, 256])[:, None]
    n = 2.0 ** np.arange(10, 31, 2)[None, :]
    plugin = nccl_choice.nccl_collective(p, k, n, protocol=None)
    nccl = nccl_choice.nccl_collective(own, k, n, protocol=None)
    least = nccl_choice.nccl_collective(own, k, n, protocol=None, by="time")
    np.testing.assert_allclose(plugin.time, least.time, rtol=1e-12)
    assert np.all(plugin.time <= nccl.time * (1 + 1e-12))
    assert np.any(nccl.time > least.time * 1.001)
