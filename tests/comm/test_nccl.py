"""NCCL's cost model (simcli.comm.nccl) by hand against NVIDIA/nccl 2.20.3 tuning.cc, on simcli's tiers."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from simcli.base.types import InputError, NcclSpec, Tier
from simcli.cli import app
from simcli.comm import collectives as C
from simcli.comm import crossover, nccl, nccl_choice, registry, specs, topology
from simcli.io.profiles import profile_from_dict, resolve_profile

from conftest import make_profile

US = 1e-6


def h100_like(**spec):
    """Two tiers as dgx-h100: 8 GPUs on NVLink (369 GB/s effective, 3.4 us), a 46 GB/s NIC per GPU (14 us)."""
    p = make_profile(
        Tier("nvlink", 450e9, 3.4e-6, size=8, efficiency=0.82),
        Tier("infiniband", 50e9, 14e-6, per="device", efficiency=0.92),
        name="h",
    )
    s = NcclSpec(
        generation="hopper", channels=24, nvls=True, nvls_channels=16, ll128=True, cpu="intel", version="2.20.3"
    )
    return dataclasses.replace(
        p, library="nccl", nccl=dataclasses.replace(s, **spec), device=dataclasses.replace(p.device, name="H100")
    )


def pair(p, k, algorithm, protocol, collective="all_reduce"):
    k = np.asarray([k])
    tb = topology.tier_bandwidth(p.network, k)
    (pr,) = [
        x
        for x in nccl.pairs(
            p.network,
            nccl_choice.nccl_spec(p),
            k,
            tier_Bps=tb,
            collective=collective,
            algorithms=[algorithm],
            protocols=[protocol],
        )
    ]
    return pr


def test_ring_hops_per_tier_by_hand():
    net = h100_like().network
    # 16 ranks on 2 nodes: 2 passes of 15 hops; each pass crosses both inter-node edges
    assert nccl.hops(net, np.array([16])).tolist() == [[26.0], [4.0]]
    # reduce-scatter / all-gather: one pass, N - 1 = 1 inter-node hop (tuning.cc nInterSteps)
    assert nccl.hops(net, np.array([16]), "reduce_scatter").tolist() == [[14.0], [1.0]]
    # a partial node: 12 ranks are 8 + 4, still 2 nodes
    assert nccl.hops(net, np.array([12])).tolist() == [[18.0], [4.0]]
    # inside one node nothing pays the network
    assert nccl.hops(net, np.array([8])).tolist() == [[14.0], [0.0]]
    three = (Tier("nvlink", 300e9, 2e-6, size=8), Tier("leaf", 50e9, 5e-6, size=64), Tier("spine", 100e9, 10e-6))
    # 128 ranks: 16 nodes, 2 leaves; per pass 2 spine edges, 16 - 2 leaf edges, 127 - 16 NVLink hops
    assert nccl.hops(three, np.array([128])).tolist() == [[222.0], [28.0], [4.0]]


def test_latencies_are_tuning_cc_on_two_nodes():
    p = h100_like()
    # Ring/Simple: baseLat 8.4 + (nsteps - nInterSteps) x max(3.4, 3 x 1.0 us net overhead) + 2N x 14
    assert pair(p, 16, "ring", "simple").latency[0] == pytest.approx((8.4 + 26 * 3.4 + 4 * 14.0) * US)
    # Ring/LL: 6.6 + 26 x max(0.6, 1.0) + 4 x 2.7
    assert pair(p, 16, "ring", "ll").latency[0] == pytest.approx((6.6 + 26 * 1.0 + 4 * 2.7) * US)
    # Tree/LL: 6.8 + 2 x ((ppn - 1) x 0.6 + log2(N) x 5.0)
    assert pair(p, 16, "tree", "ll").latency[0] == pytest.approx((6.8 + 2 * (7 * 0.6 + 1 * 5.0)) * US)
    # NVLSTree: 23 + 2 x log2(N) x 14; NVLS in one node: 23
    assert pair(p, 16, "nvls-tree", "simple").latency[0] == pytest.approx((23 + 2 * 14.0) * US)
    assert pair(p, 8, "nvls", "simple").latency[0] == pytest.approx(23 * US)
    # one node: Ring/Simple 8.4 + 14 x 3.4 (no network overhead floor)
    assert pair(p, 8, "ring", "simple").latency[0] == pytest.approx((8.4 + 14 * 3.4) * US)


def test_tier_latency_scales_the_hop_latencies():
    """A tier's `latency` is its Ring/Simple hop latency; the other pairs scale with it."""
    p = h100_like()
    slow = dataclasses.replace(p, network=(dataclasses.replace(p.network[0], latency_s=6.8e-6), p.network[1]))
    assert pair(slow, 8, "ring", "ll").latency[0] == pytest.approx((6.6 + 14 * 1.2) * US)


def test_bandwidths_by_protocol():
    p = h100_like()
    B = 450e9 * 0.82  # the ring's bus bandwidth inside a node
    assert pair(p, 8, "ring", "simple").alg_Bps[0] == pytest.approx(B * 8 / 14)
    assert pair(p, 8, "ring", "ll").alg_Bps[0] == pytest.approx(min(87.7e9, B / 4) * 8 / 14)
    assert pair(p, 8, "ring", "ll128").alg_Bps[0] == pytest.approx(min(B * 0.92, 24 * 36.7e9) * 8 / 14)
    assert pair(p, 8, "tree", "simple").alg_Bps[0] == pytest.approx(min(B * 0.92, 24 * 38.7e9) * 0.5)
    # NVLS: NCCL's NVLS graph, 8 heads of 40 GB/s (the largest SM90 speed with 9 x s <= 18 x 20.6 GB/s); 2.20.3's
    # tuner believes 8 x 40 x 5/6, what it costs is 2.28.3's formula, 8 x 40 x 0.85 x 7/8 x 2 x 8/14
    nvls = pair(p, 8, "nvls", "simple")
    assert nvls.tuner_alg_Bps[0] == pytest.approx(8 * 40e9 * 5 / 6)
    assert nvls.alg_Bps[0] == pytest.approx(8 * 40e9 * 0.85 * 7 / 8 * 2 * 8 / 14)
    # busbw for large sizes on 8 GPUs is then ~476 GB/s (the published 8x H100 NVLS curve: 466 at 1 GiB, 479
    # at 8 GiB); at 64 GiB the pipeline fill is 0.1% of the time
    c = C.collective(p, "nvls", np.array([8]), nbytes=np.array([2.0**36]), protocol=None)
    assert 2.0**36 / c.time[0] * 1.75 / 1e9 == pytest.approx(476, rel=0.01)


def test_tree_at_one_gpu_per_node_takes_the_tree_patterns_085_by_hand():
    """One GPU per node: search.cc gives the tree graph NCCL_TOPO_PATTERN_TREE (``if (ngpus == 1) ...``) and
    tuning.cc multiplies Tree's busBw by .85 for it, after the protocol's own factors; eight GPUs per node: not."""
    one = dataclasses.replace(
        h100_like(), network=[dataclasses.replace(h100_like().network[0], size=1)] + list(h100_like().network[1:])
    )
    net = 50e9 * 0.92
    # 2 nodes: the tree's NICs carry n per node (2 x 46 GB/s bus), x0.92, capped at 2 graph channels x 41.4 GB/s
    # (perChMaxTreeBws Hopper N2, 2.20.3): 82.8 GB/s; x0.85 = 70.38
    assert pair(one, 2, "tree", "simple").bus_Bps[0] == pytest.approx(min(0.92 * 2 * net, 2 * 41.4e9) * 0.85)
    assert pair(one, 2, "tree", "simple").bus_Bps[0] == pytest.approx(70.38e9)
    # LL: that /3.8 (below llMaxBw 39), then x0.85; the tuner's view takes the same factor
    ll = pair(one, 2, "tree", "ll")
    assert ll.bus_Bps[0] == pytest.approx(82.8e9 / 3.8 * 0.85)
    assert ll.tuner_alg_Bps[0] == pytest.approx(82.8e9 / 3.8 * 0.85 * 0.5)
    # 4 nodes: inner nodes carry 2n, 46 GB/s bus, x0.92 = 42.32, x0.85 = 35.97
    assert pair(one, 4, "tree", "simple").bus_Bps[0] == pytest.approx(0.92 * net * 0.85)
    # 8 GPUs per node, 2 nodes: no factor (min(369, 2 x 8 x 46) x 0.92, capped at 8 graph channels x 41.4)
    assert pair(h100_like(), 16, "tree", "simple").bus_Bps[0] == pytest.approx(min(0.92 * 369e9, 8 * 41.4e9))


def test_nvls_pipeline_fill_by_hand():
    """NVLS: 16 channels x 8 heads = 128 concurrent chunks; the bytes take m + 2 chunk times (enqueue.cc chunks)."""
    p = h100_like()
    pr = pair(p, 8, "nvls", "simple")
    alg = pr.alg_Bps[0]
    KiB, MiB = 1024.0, 1024.0**2
    # chunk by size: 16 KiB below 2x128x32 KiB = 8 MiB, 32 KiB below 8x128x64 KiB = 64 MiB, 64 KiB below
    # 64x128x128 KiB = 1 GiB, then nvlsChunkSize (128 KiB)
    sizes = np.array([1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 1024 * MiB])
    assert nccl.nvls_chunk("nvls", sizes, 128.0, nodes=None).tolist() == [
        16 * KiB,
        16 * KiB,
        32 * KiB,
        64 * KiB,
        128 * KiB,
    ]
    # 1 MiB is 8 KiB per operation: one partial chunk, so the fill is twice the bytes' own time
    fills = [2 * 1 * MiB, 2 * 2 * MiB, 2 * 4 * MiB, 2 * 8 * MiB, 2 * 16 * MiB]
    assert pr.fill(sizes) == pytest.approx(np.array(fills) / alg)
    c = C.collective(p, "nvls", np.array([8]), nbytes=sizes, protocol=None)
    assert c.fill == pytest.approx(np.array(fills) / alg)
    assert c.time == pytest.approx(pr.latency[0] + sizes / alg + np.array(fills) / alg)
    assert c.time == pytest.approx(c.latency + c.bandwidth)
    # NVLSTree over 2 nodes starts at 128 KiB, 64 KiB below 4x128x128 KiB = 64 MiB, 32 KiB below 8 MiB; from 4
    # nodes on it starts at 64 KiB
    assert nccl.nvls_chunk("nvls-tree", sizes, 128.0, nodes=np.array([2])).tolist() == [
        32 * KiB,
        32 * KiB,
        64 * KiB,
        128 * KiB,
        128 * KiB,
    ]
    assert nccl.nvls_chunk("nvls-tree", np.array([1024 * MiB]), 128.0, nodes=np.array([4])).tolist() == [64 * KiB]
    # reduce-scatter and all-gather kernels have two stages, so one chunk time of fill
    rs = pair(p, 8, "nvls", "simple", "reduce_scatter")
    assert rs.fill(sizes) == pytest.approx(np.array(fills) / 2 / rs.alg_Bps[0])
    # auto keeps the term where it picks an NVLS pair (0 where it picks a textbook algorithm)
    auto = C.collective(p, "auto", np.array([8]), nbytes=sizes, protocol=None)
    picked = np.array([a == "nvls" for a in auto.algorithm])
    assert picked.any() and auto.fill[picked] == pytest.approx(c.fill[picked])
    assert not np.any(auto.fill[~picked])
    # rings and trees have no fill term
    assert pair(p, 8, "ring", "simple").fill(sizes) == 0.0
    assert not np.any(C.collective(p, "ring", np.array([8]), nbytes=sizes, protocol=None).fill)


def test_nccl_picks_ll_small_and_simple_large_and_protocol_can_be_forced():
    p = h100_like(nvls=False)
    c = C.collective(p, "nccl", np.array([8]), nbytes=np.array([1024.0, 2.0**30]), protocol=None)
    assert c.protocol.tolist() == ["ll", "simple"]
    forced = C.collective(p, "ring", np.array([8]), nbytes=np.array([1024.0]), protocol="simple")
    assert forced.protocol.tolist() == ["simple"] and forced.time[0] > c.time[0]
    with pytest.raises(InputError, match="--protocol"):
        C.collective(p, "nvls", np.array([8]), nbytes=np.array([1024.0]), protocol="ll")
    with pytest.raises(InputError, match="--protocol: unknown"):
        C.collective(p, "ring", np.array([8]), nbytes=np.array([1024.0]), protocol="ll256")


def test_the_fastest_pair_is_never_slower_than_nccls_choice():
    p = h100_like()
    k, n = np.array([8, 16, 64, 512])[:, None], 2.0 ** np.arange(10, 35, 3)[None, :]
    pick = C.collective(p, "nccl", k, nbytes=n, protocol=None)
    best = nccl_choice.nccl_collective(p, np.broadcast_to(k, (4, 1)), n, protocol=None, by="time")
    assert np.all(best.time <= pick.time + 1e-15)
    for a in ("ring", "tree", "nvls-tree"):  # NCCL's choice is one of the pairs it could run
        forced = C.collective(p, a, k, nbytes=n, protocol=None)
        assert np.all(np.isfinite(forced.time) | (a == "nvls-tree"))
    # (not monotone in n: NCCL chooses on its tuner's estimate, which ignores the channels a small message uses)


def test_per_tier_terms_add_up_and_one_node_never_pays_the_network():
    p = h100_like()
    k, n = np.arange(2, 33)[:, None], np.array([1e3, 1e6, 1e9])[None, :]
    c = C.collective(p, "nccl", k, nbytes=n, protocol=None)
    assert np.allclose(c.tier_latency.sum(axis=0), c.latency, rtol=1e-9, atol=1e-15)
    assert np.allclose(c.tier_bandwidth_s.sum(axis=0), c.bandwidth, rtol=1e-9, atol=1e-15)
    inside = (k <= 8)[:, 0]
    assert np.all(c.tier_latency[1][inside] == 0) and np.all(c.tier_hops[1][inside] == 0)
    assert np.all(C.collective(p, "nccl", np.array([1]), nbytes=np.array([1e6]), protocol=None).time == 0)


def test_collectives_and_their_busbw_factors():
    p = h100_like(nvls=False)
    k, n = np.array([8]), np.array([2.0**30])
    ar = C.collective(p, "ring", k, nbytes=n, collective="all_reduce", protocol="simple").time[0]
    ag = C.collective(p, "ring", k, nbytes=n, collective="all_gather", protocol="simple").time[0]
    rs = C.collective(p, "ring", k, nbytes=n, collective="reduce_scatter", protocol="simple").time[0]
    # one ring pass moves (k-1)/k of the bytes: half an all-reduce's bandwidth term
    assert ag == pytest.approx(rs) and ag == pytest.approx(ar / 2, rel=0.02)
    assert specs.busbw_factor(np.array([8.0]), "all_gather")[0] == pytest.approx(7 / 8)
    assert specs.busbw_factor(np.array([8.0]), "broadcast")[0] == 1.0
    with pytest.raises(InputError, match="does not run reduce_scatter"):
        C.collective(p, "tree", k, nbytes=n, collective="reduce_scatter", protocol=None)
    # the textbook ring on a textbook profile: (k-1)·alpha + (k-1)/k · n/B per pass
    tp = make_profile(Tier("net", 10e9, 20e-6))
    t = C.collective(tp, "ring", k, nbytes=n, collective="all_gather", protocol=None).time[0]
    assert t == pytest.approx(7 * 20e-6 + 7 / 8 * 2.0**30 / 10e9)


def test_registry_rows_are_complete():
    labels = set()
    for a in registry.REGISTRY:
        assert a.name and a.label and a.formula and a.source and a.collectives, a
        assert a.textbook is not None or a.nccl is not None, a
        assert set(a.collectives) <= set(specs.COLLECTIVES), a
        labels.add(a.label)
    assert len(labels) == len(registry.REGISTRY)
    assert registry.CHOICES == tuple(a.name for a in registry.REGISTRY) + ("auto",)


def test_collective_and_protocol_rows_are_complete_and_read_by_the_nccl_model():
    k = np.array([2.0, 8.0, 64.0])
    for c in specs.COLLECTIVE_SPECS:
        assert c.name and c.label and c.busbw and c.source and c.nccl_algorithms, c
        assert set(c.nccl_algorithms) <= set(nccl.ALGOS), c
        assert c.ring_passes in (1, 2) and np.all(c.ring_steps(k) >= k - 1), c
        # the busbw text and function say the same (nccl-tests doc/PERFORMANCE.md) and the bytes a rank reduces
        # never exceed those it sends
        text = {"2(k-1)/k": 2 * (k - 1) / k, "(k-1)/k": (k - 1) / k, "1": np.ones_like(k)}[c.busbw]
        assert c.busbw_of(k) == pytest.approx(text), c
        assert np.all(c.reduced(k) <= c.busbw_of(k)), c
        assert ("nvls" in c.nccl_algorithms) == (c.nvls_fill > 0), c
    assert specs.PROTOCOLS == nccl.PROTOCOLS == tuple(p.name for p in specs.PROTOCOL_SPECS)
    for p in specs.PROTOCOL_SPECS:
        assert p.name and p.nccl and p.max_threads > 0 and p.thread_threshold > 0 and p.summary and p.source, p
    # getAlgoInfo's tables are the rows' (one copy)
    assert nccl.MAX_THREADS == (512, 640, 512) and nccl.THREAD_THRESHOLD == (8, 8, 64)


def test_builtin_profiles_model_nccl_and_cpu_loopback_gloo():
    assert resolve_profile("dgx-h100").library == "nccl" and resolve_profile("dgx-h100").nccl.nvls
    assert resolve_profile("cpu-loopback").library == "gloo"
    assert C.default_algorithm(resolve_profile("dgx-a100")) == "nccl"
    assert C.default_algorithm(resolve_profile("cpu-loopback")) == "ring"


BASE = {
    "name": "u",
    "sources": ["me"],
    "device": {"name": "H100", "peak_flops": {"bf16": "989 TFLOP/s"}, "mfu": 0.4},
    "network": [
        {"name": "nvlink", "size": 8, "bandwidth": "450 GB/s", "latency": "3.4 us"},
        {"name": "ib", "bandwidth": "400 Gb/s", "latency": "14 us"},
    ],
}


def test_a_datasheet_profile_gets_nccl_defaults_and_says_so():
    p = profile_from_dict(BASE, "u.yaml")
    assert p.library == "nccl" and p.nccl.generation == "hopper" and "channels" in p.nccl.defaulted
    q = profile_from_dict({**BASE, "nccl": {"channels": 32}}, "u.yaml")
    assert q.nccl.channels == 32 and "channels" not in q.nccl.defaulted
    cpu = profile_from_dict(
        {
            **BASE,
            "device": {**BASE["device"], "name": "cpu"},
            "network": [{"name": "loopback", "bandwidth": "1 GB/s", "latency": "10 us"}],
        },
        "c.yaml",
    )
    assert cpu.library == "textbook"


@pytest.mark.parametrize(
    "patch,fragment",
    [
        ({"library": "mpi"}, "library"),
        ({"nccl": {"generation": "kepler"}}, "nccl.generation"),
        ({"nccl": {"channels": 0}}, "nccl.channels"),
        ({"nccl": {"nvls": "yes"}}, "nccl.nvls"),
        ({"nccl": {"chanels": 8}}, "chanels"),
        ({"library": "textbook", "nccl": {"channels": 8}}, "nccl"),
    ],
)
def test_bad_nccl_blocks_name_the_field(patch, fragment):
    with pytest.raises(InputError, match=fragment):
        profile_from_dict({**BASE, **patch}, "u.yaml")


def test_llama2_7b_buckets_never_cost_more_than_one_allreduce_after_backward(runner):
    def steps(overlap):
        r = runner.invoke(
            app,
            ["speedup", "-m", "llama2-7b", "-p", "dgx-h100", "-k", "1..1024:x2", "--overlap", overlap, "-f", "json"],
        )
        assert r.exit_code == 0, r.output
        return np.array([x["t_step_s"] for x in json.loads(r.stdout)]), json.loads(r.stdout)

    buckets, recs = steps("buckets")
    none, _ = steps("none")
    assert np.all(buckets <= 1.3 * none)
    assert any(x["t_comm_hidden_s"] > 0 for x in recs[1:])
    assert {x["protocol"] for x in recs[1:]} <= {"ll", "ll128", "simple"}


def test_comm_cli_collective_and_protocol(runner):
    r = runner.invoke(
        app, ["comm", "-p", "dgx-h100", "-k", "8", "-s", "1GiB", "--collective", "all_gather", "-f", "json"]
    )
    assert r.exit_code == 0, r.output
    (x,) = json.loads(r.stdout)
    assert x["collective"] == "all_gather" and x["busbw_GBps"] == pytest.approx(x["algbw_GBps"] * 7 / 8)
    r = runner.invoke(
        app, ["comm", "-p", "dgx-h100", "-k", "16", "-s", "64KiB", "-a", "ring", "--protocol", "simple", "-f", "json"]
    )
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["protocol"] == "simple"
    r = runner.invoke(app, ["comm", "-p", "cpu-loopback", "-k", "2", "-s", "64KiB", "--protocol", "ll"])
    assert r.exit_code == 2 and "--protocol" in r.stderr


def _synthetic(truth, seed):
    rng = np.random.default_rng(seed)
    k = np.repeat([8, 16, 32], 15)
    n = np.tile(2.0 ** np.arange(12, 42, 2), 3)
    return k, n, C.collective(truth, "nccl", k, nbytes=n, protocol=None).time * (1 + 0.03 * rng.standard_normal(k.size))


def _nccl_truth():
    """(dgx-h100 without NVLS, the same with other NVLink/network latencies and efficiencies): what the NCCL fits
    start from and the times they are given."""
    p = resolve_profile("dgx-h100")
    p = dataclasses.replace(p, nccl=dataclasses.replace(p.nccl, nvls=False))
    truth = dataclasses.replace(
        p,
        network=(
            dataclasses.replace(p.network[0], latency_s=4e-6, efficiency=0.75),
            dataclasses.replace(p.network[1], latency_s=10e-6, efficiency=0.85),
        ),
    )
    return p, truth


def test_calibrate_fits_nccls_constants_from_two_or_more_k():
    """NVLink and network hop latencies and the NVLink bandwidth come back from noisy times at k = 8, 16, 32."""
    from simcli.fits.fit_nccl import fit_nccl

    # without NVLS: NVLS's cost reads NCCL's own NVLink figure and nvlsEfficiency (simcli.comm.nccl_graph.nvls_graph),
    # not the tier's measured efficiency, so NVLS-bound points do not identify the NVLink bandwidth
    p, truth = _nccl_truth()
    k, n, t = _synthetic(truth, 7)
    f = fit_nccl(p, k, n, t=t, algorithm="nccl", holdout=0.2, seed=1)
    assert f.latency_identified[0] and f.latency_identified[1] and f.bandwidth_identified[0]
    assert f.latency_s[0] == pytest.approx(4e-6, rel=0.1)
    assert f.latency_s[1] == pytest.approx(10e-6, rel=0.1)
    # NVLink binds only the one-node sizes once the multi-node trees are priced by their own network traffic
    assert f.bandwidth_Bps[0] == pytest.approx(450e9 * 0.75, rel=0.1)
    assert f.holdout_median_rel < 0.05


def test_calibrate_and_validate_an_nccl_profile_through_the_cli(tmp_path, runner):
    """calibrate on one noisy run of the truth, validate on another: the calibrated profile still models NCCL and
    predicts the second run within 5% (the fit itself: the test above)."""
    _, truth = _nccl_truth()
    # through the CLI: calibrate on one run, validate on another; the profile still models NCCL
    for name, seed in (("a", 7), ("b", 8)):
        k, n, t = _synthetic(truth, seed)
        (tmp_path / f"{name}.csv").write_text(
            "devices,bytes,time_us\n" + "".join(f"{a},{int(b)},{c * 1e6:.4f}\n" for a, b, c in zip(k, n, t))
        )
    out = tmp_path / "cal.yaml"
    src = (Path(__file__).resolve().parents[2] / "hardware_profiles" / "dgx-h100.yaml").read_text()
    assert "  nvls: true" in src
    (tmp_path / "h.yaml").write_text(src.replace("  nvls: true", "  nvls: false", 1))
    r = runner.invoke(
        app, ["calibrate", str(tmp_path / "a.csv"), "-p", str(tmp_path / "h.yaml"), "-o", str(out), "-f", "json"]
    )
    assert r.exit_code == 0, r.output
    assert "NCCL's model" in json.loads(r.stdout)["method"]
    from simcli.io.profiles import load_profile

    assert load_profile(out).library == "nccl"
    r = runner.invoke(app, ["validate", str(tmp_path / "b.csv"), "-p", str(out), "-f", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["summary"]["time_s"]["overall"]["mdape"] < 0.05


def test_algorithms_map_on_an_nccl_profile_compares_nccls_algorithms(runner):
    r = runner.invoke(app, ["algorithms", "-p", "dgx-h100", "-k", "8,16", "-s", "64KiB..64MiB:x8", "-f", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    names = crossover.algorithm_names(resolve_profile("dgx-h100"))
    assert "nvls" in names and "nccl" not in names and "recursive-doubling" in names
    for rec in d["grid"]:
        times = {a: rec[f"{a}_s"] for a in names if rec[f"{a}_s"] is not None}
        assert rec["fastest"] == min(times, key=times.get)
        assert rec["nccl_algorithm"] in ("ring", "tree", "nvls", "nvls-tree") and rec["nccl_s"] >= rec["time_s"]
    p = resolve_profile("dgx-h100")
    for c in d["crossovers"]:
        # a crossover: "from" wins just below it and "to" just above (where the costs are equal, or where one
        # of them jumps: NCCL changing protocol, channel count or NVLS chunk size there)
        k, n = np.array([c["devices"]]), c["bytes"]
        below, above = np.array([n * (1 - 1e-6)]), np.array([n * (1 + 1e-6)])
        a0, b0 = (C.collective(p, x, k, nbytes=below, protocol=None).time[0] for x in (c["from"], c["to"]))
        a1, b1 = (C.collective(p, x, k, nbytes=above, protocol=None).time[0] for x in (c["from"], c["to"]))
        assert a0 <= b0 * (1 + 1e-9) and b1 <= a1 * (1 + 1e-9), c


def test_a_cost_is_freed_without_the_cyclic_collector():
    """Lazy terms must not close over their CommCost: a cycle keeps every grid-sized result alive until gc runs."""
    import gc
    import weakref

    p = h100_like()
    k, n = np.arange(2, 40)[:, None], np.geomspace(1e3, 1e9, 20)[None, :]
    makers = (
        lambda: C.collective(p, "nccl", k, nbytes=n, protocol=None),
        lambda: C.allreduce("ring", p.network, k, nbytes=n),
    )
    gc.disable()
    try:
        for make in makers:
            cost = make()
            cost.alpha, cost.tier_bandwidth_s, cost.tier_latency  # read the lazy terms too
            ref = weakref.ref(cost)
            del cost
            assert ref() is None
    finally:
        gc.enable()


def test_a_forced_algorithm_that_cannot_run_falls_back_to_ring_as_nccl_does():
    p = h100_like()
    c = C.collective(p, "nvls", np.array([8, 16]), nbytes=np.array([2.0**20]), protocol=None)
    assert c.algorithm.tolist() == ["nvls", "ring"]
    a100 = h100_like(nvls=False)
    assert C.collective(
        a100, "nvls-tree", np.array([16]), nbytes=np.array([2.0**20]), protocol=None
    ).algorithm.tolist() == ["ring"]
    with pytest.raises(InputError, match="--protocol"):
        C.collective(h100_like(ll128=False), "ring", np.array([8]), nbytes=np.array([1e6]), protocol="ll128")


# ------------------------------------------------------------- the host's issue rate (nccl-tests -g G)


def test_one_thread_on_g_gpus_is_no_faster_than_g_launches():
    p = resolve_profile("dgx-h100")
    k, n = np.array([8, 8, 8]), np.array([1024.0, 32768.0, 1 << 30])
    gpu = C.collective(p, "nvls", k, nbytes=n, protocol=None)
    g8 = C.collective(p, "nvls", k, nbytes=n, collective="all_reduce", protocol=None, gpus_per_process=8)
    floor = 8 * nccl.LAUNCH_US * US
    assert gpu.host is None  # one GPU per process: nothing added, the default everywhere else
    np.testing.assert_allclose(g8.time, np.maximum(gpu.time, floor))
    np.testing.assert_allclose(g8.host, g8.time - gpu.time)
    assert g8.time[0] == pytest.approx(floor) and g8.host[0] > 0  # 1 KiB: 23 us of NVLS under 33.6 us of launches
    assert g8.host[2] == 0.0 and g8.time[2] == gpu.time[2]  # 1 GiB: the GPU is the bottleneck
    # every NCCL pair's latency is above one launch: at -g 1 the floor could never bind
    assert np.all(
        C.collective(p, "nccl", np.array([2, 8, 16]), nbytes=np.array([8.0] * 3), protocol=None).time
        > nccl.host_floor(1)
    )


def test_host_floor_leaves_textbook_costs_and_refuses_zero_gpus():
    p = make_profile(Tier("loop", 10e9, 5e-6, size=None), name="flat")
    k, n = np.array([4]), np.array([1024.0])
    assert (
        C.collective(p, "ring", k, nbytes=n, collective="all_reduce", protocol=None, gpus_per_process=8).time
        == C.collective(p, "ring", k, nbytes=n, protocol=None).time
    )
    with pytest.raises(InputError, match="--gpus-per-process"):
        C.collective(
            resolve_profile("dgx-h100"), "nccl", k, nbytes=n, collective="all_reduce", protocol=None, gpus_per_process=0
        )


def test_comm_gpus_per_process_shows_what_the_launches_add(runner):
    r = runner.invoke(
        app, ["comm", "-p", "dgx-h100", "-k", "8", "-s", "1KiB,1GiB", "-a", "nvls", "-g", "8", "-f", "json"]
    )
    assert r.exit_code == 0, r.output
    small, big = json.loads(r.stdout)
    assert small["time_s"] == pytest.approx(8 * nccl.LAUNCH_US * US) and small["host_s"] > 0
    assert big["host_s"] == 0.0
    r = runner.invoke(app, ["comm", "-p", "dgx-h100", "-k", "8", "-s", "1KiB", "-a", "nvls", "-g", "8"])
    assert r.exit_code == 0 and "host +" in r.stdout


def test_gpus_per_process_per_element_matches_each_scalar():
    """validate and calibrate pass one -g per measured row: the array prices each row as its scalar would."""
    p = resolve_profile("dgx-h100")
    k, n, g = np.array([8, 8, 8, 16]), np.array([1024.0, 1024.0, 1 << 30, 8.0]), np.array([1, 8, 8, 2])
    mixed = C.collective(p, "nccl", k, nbytes=n, collective="all_reduce", protocol=None, gpus_per_process=g).time
    each = [
        C.collective(
            p,
            "nccl",
            k[i : i + 1],
            nbytes=n[i : i + 1],
            collective="all_reduce",
            protocol=None,
            gpus_per_process=int(g[i]),
        ).time[0]
        for i in range(4)
    ]
    np.testing.assert_allclose(mixed, each)
    assert mixed[1] > mixed[0]
