"""`simcli calibrate` and `simcli validate` on profiler traces whose DDP buckets come in 1, 2 or many sizes (issue 39).

A DDP run's buckets are all `bucket_cap_mb` but the last, so a real trace has two sizes; a model whose gradient fits
one bucket has one. The traces here are built in the documented Kineto form (simcli.io.measured.kineto) with times
from a known alpha-beta ring, so the fit can be held to the values that made them; the real gloo trace in
measurements/kineto-ddp-gloo-cpu (three 1 MiB buckets a step) is the one-size case from the world.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from simcli.cli.app import app
from simcli.fits.fitting import fit_alpha_beta, holdout_split

ROOT = Path(__file__).resolve().parents[2]
REAL_TRACE = ROOT / "measurements" / "kineto-ddp-gloo-cpu"
MiB = 1 << 20
ALPHA, B_RING = 5e-6, 1e9  # the ring's alpha and the bandwidth the ring sees (cpu-loopback's per-node g = 1/k)


def _x(name, ts, dur, tid=1, cat="cpu_op", **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def ring_time(k: int, n: float, alpha: float = ALPHA, bw: float = B_RING) -> float:
    return 2 * (k - 1) * alpha + 2 * (k - 1) / k * n / bw


def gloo_trace(path: Path, sizes: list[int], *, k: int = 2, steps: int = 3, rank: int = 0) -> Path:
    """A CPU (gloo) trace: `steps` ProfilerSteps, each with one fp32 all-reduce per bucket size, timed by the ring."""
    ev, t = [], 0.0
    for s in range(steps):
        ev.append(_x(f"ProfilerStep#{s}", t, 200_000, cat="user_annotation"))
        c = t + 1000
        for n in sizes:
            dur = ring_time(k, n) * 1e6
            dims = {"Input Dims": [[n // 4]], "Input type": ["float"]}
            ev.append(_x("gloo:all_reduce", c, dur, tid=2, cat="user_annotation", **dims))
            c += dur + 10
        t += 200_000
    info = {"backend": "gloo", "rank": rank, "world_size": k, "pg_config": [{"pg_name": "0", "pg_size": k}]}
    path.write_text(json.dumps({"schemaVersion": 1, "distributedInfo": info, "traceEvents": ev}))
    return path


def nccl_trace(path: Path, times_us: dict[int, float], *, k: int = 8, steps: int = 3) -> Path:
    """A GPU (NCCL) trace: each step one bf16 all-reduce kernel per (bytes -> time in us), metadata in its args."""
    ev, t = [], 0.0
    for s in range(steps):
        ev.append(_x(f"ProfilerStep#{s}", t, 100_000, cat="user_annotation"))
        c = t + 1000
        for n, dur in times_us.items():
            meta = {"Collective name": "allreduce", "In msg nelems": n // 2, "Out msg nelems": n // 2,
                    "Group size": k, "dtype": "BFloat16", "Process Group Name": "0"}  # fmt: skip
            ev.append(_x("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)", c, dur, tid=20, cat="kernel", **meta))
            c += dur + 10
        t += 100_000
    info = {"backend": "nccl", "rank": 0, "world_size": k, "pg_config": [{"pg_name": "0", "pg_size": k}]}
    path.write_text(json.dumps({"schemaVersion": 1, "distributedInfo": info, "traceEvents": ev}))
    return path


def _calibrate(runner, trace: Path, profile: str, tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / f"{trace.stem}.yaml"
    r = runner.invoke(app, ["calibrate", str(trace), "-p", profile, "-o", str(out), "-f", "json", *extra])
    assert r.exit_code == 0, r.output
    assert "lower --holdout" not in r.output
    rep = json.loads(r.stdout)
    rep["stderr"] = r.stderr
    return rep


# --------------------------------------------------------------------------- the textbook fit (gloo, cpu-loopback)


def test_two_bucket_sizes_fit_both_values_exactly_and_say_so(runner, tmp_path):
    """The issue's case: buckets of two sizes (25 MiB and the 8 MiB rest) at the default --holdout 0.25."""
    rep = _calibrate(runner, gloo_trace(tmp_path / "two.json", [25 * MiB, 8 * MiB]), "cpu-loopback", tmp_path)
    (tier,) = rep["tiers"]
    assert tier["points"] == 2 and tier["holdout_points"] == 0
    assert tier["latency"]["identified"] and tier["bandwidth"]["identified"]
    assert tier["latency"]["after_s"] == pytest.approx(ALPHA, rel=1e-3)
    # cpu-loopback's tier is a per-node medium: the ring sees b·g(k) with g = 1/k (simcli.fits.fitting)
    assert tier["bandwidth"]["after_Bps"] / 2 == pytest.approx(B_RING, rel=1e-3)
    assert tier["latency"]["se_s"] is None  # two points, two values: no standard error to give
    assert any("two points" in w and "solved exactly" in w for w in rep["warnings"])


def test_one_bucket_size_fits_the_bandwidth_and_keeps_the_latency(runner, tmp_path):
    rep = _calibrate(runner, gloo_trace(tmp_path / "one.json", [25 * MiB]), "cpu-loopback", tmp_path)
    (tier,) = rep["tiers"]
    assert tier["points"] == 1 and tier["size_range"] == "25 MiB (1 size)"
    assert not tier["latency"]["identified"] and tier["bandwidth"]["identified"]
    assert tier["latency"]["after_s"] == tier["latency"]["before_s"]  # held from the profile
    # with alpha held at the profile's 374 us, B is what makes the one measured time come out exactly
    from simcli.io.profiles import resolve_profile

    alpha0 = resolve_profile("cpu-loopback").network[0].latency_s
    t = ring_time(2, 25 * MiB)
    assert 2 * alpha0 + (25 * MiB) / (tier["bandwidth"]["after_Bps"] / 2) == pytest.approx(t, rel=1e-6)
    w = next(w for w in rep["warnings"] if "one message size and one world size" in w)
    assert "alpha kept at the base value" in w and "bandwidth fitted" in w


def test_many_bucket_sizes_hold_out_as_asked_and_recover_the_ring(runner, tmp_path):
    sizes = [25 * MiB, 16 * MiB, 8 * MiB, 4 * MiB, 2 * MiB, MiB, 256 << 10, 64 << 10]
    rep = _calibrate(runner, gloo_trace(tmp_path / "many.json", sizes), "cpu-loopback", tmp_path)
    (tier,) = rep["tiers"]
    assert tier["points"] == 6 and tier["holdout_points"] == 2  # 0.25 of 8
    assert tier["latency"]["after_s"] == pytest.approx(ALPHA, rel=1e-3)
    assert tier["bandwidth"]["after_Bps"] / 2 == pytest.approx(B_RING, rel=1e-3)
    assert not any("held out, not" in w for w in rep["warnings"])


def test_three_sizes_at_the_default_holdout_are_all_fitted_with_a_note(runner, tmp_path):
    rep = _calibrate(runner, gloo_trace(tmp_path / "three.json", [25 * MiB, 8 * MiB, MiB]), "cpu-loopback", tmp_path)
    (tier,) = rep["tiers"]
    assert tier["points"] == 3 and tier["holdout_points"] == 0
    assert any("--holdout 0.25: 0 of the 3 point(s) held out, not 1" in w for w in rep["warnings"])
    # with --holdout 0 nothing is said about it
    rep = _calibrate(runner, tmp_path / "three.json", "cpu-loopback", tmp_path, "--holdout", "0", "--force")
    assert not any("--holdout" in w for w in rep["warnings"])


def test_the_real_one_size_trace_fits_one_value(runner, tmp_path):
    """measurements/kineto-ddp-gloo-cpu: three 1 MiB buckets a step on 2 gloo ranks."""
    rep = _calibrate(runner, REAL_TRACE, "cpu-loopback", tmp_path)
    (tier,) = rep["tiers"]
    assert tier["sizes"] == [MiB] and tier["points"] == 1
    assert sum([tier["latency"]["identified"], tier["bandwidth"]["identified"]]) == 1
    assert any("pin one parameter" in w for w in rep["warnings"])


def test_a_trace_without_all_reduces_names_its_backend_profile(runner, tmp_path):
    """An FSDP-like trace (all-gathers only): no tier to fit, and the profile comes from the trace's backend."""
    ev = [_x("ProfilerStep#0", 0, 1000, cat="user_annotation")]
    ev.append(
        _x("gloo:all_gather", 10, 50, tid=2, cat="user_annotation", **{"Input Dims": [[256]], "Input type": ["float"]})
    )
    info = {"backend": "gloo", "rank": 0, "world_size": 2, "pg_config": [{"pg_name": "0", "pg_size": 2}]}
    f = tmp_path / "ag.json"
    f.write_text(json.dumps({"schemaVersion": 1, "distributedInfo": info, "traceEvents": ev}))
    r = runner.invoke(app, ["calibrate", str(f), "-o", str(tmp_path / "ag.yaml"), "-f", "json"])
    assert r.exit_code == 0, r.output
    assert "--profile cpu-loopback (the trace's backend is gloo)" in r.stderr
    assert json.loads(r.stdout)["tiers"] == [] and "no all-reduce" in r.stderr


# --------------------------------------------------------------------------- NCCL's model (GPU trace, dgx-a100)


def _nccl_times(sizes: list[int], lat: float, bw: float) -> dict[int, float]:
    """What simcli's NCCL model gives on dgx-a100 with the nvlink tier at (lat, bw): the times to fit back."""
    import dataclasses

    from simcli.comm import collectives
    from simcli.io.profiles import resolve_profile

    p = resolve_profile("dgx-a100")
    net = (dataclasses.replace(p.network[0], latency_s=lat, bandwidth_Bps=bw, efficiency=1.0), *p.network[1:])
    p = dataclasses.replace(p, network=net)
    t = collectives.collective(
        p, "nccl", np.full(len(sizes), 8), nbytes=np.array(sizes, float), collective="all_reduce", protocol=None
    ).time
    return {n: float(x) * 1e6 for n, x in zip(sizes, t)}


@pytest.mark.parametrize("sizes", [[25 * MiB], [25 * MiB, 8 * MiB], [25 * MiB, 16 * MiB, 8 * MiB, 4 * MiB, MiB]])
def test_nccl_profile_fits_traces_of_1_2_and_many_sizes(runner, tmp_path, sizes):
    lat, bw = 6e-6, 150e9  # not dgx-a100's 3.4 us and 240 GB/s: the fit has to move
    rep = _calibrate(runner, nccl_trace(tmp_path / "g.json", _nccl_times(sizes, lat, bw)), "dgx-a100", tmp_path)
    nv = next(t for t in rep["tiers"] if t["tier"] == "nvlink")
    assert nv["bandwidth"]["identified"]
    if len(sizes) == 1:  # one point pins the value the time depends on most, the bandwidth at 25 MiB
        assert not nv["latency"]["identified"]
        assert any("pin at most 1 value" in w and "nvlink bandwidth" in w for w in rep["warnings"])
        assert nv["quality"]["max_rel_error_fit"] < 0.02  # the coordinate search stops at steps of 0.5%
    else:
        assert nv["latency"]["identified"]
        # the latency is a small part of these times (25 MiB .. 1 MiB): it comes back within 10%, B within 3%
        assert nv["latency"]["after_s"] == pytest.approx(lat, rel=0.1)
        assert nv["bandwidth"]["after_Bps"] == pytest.approx(bw, rel=0.03)
        assert nv["quality"]["max_rel_error_fit"] < 0.02  # the coordinate search stops at steps of 0.5%


# --------------------------------------------------------------------------- the fit on its own


def test_holdout_never_leaves_fewer_than_three_points():
    cases = [(1, 0.25, 0), (2, 0.25, 0), (3, 0.25, 0), (3, 0.5, 0), (4, 0.25, 1), (4, 0.75, 1), (8, 0.25, 2)]
    for m, frac, held in cases:
        mask, note = holdout_split(m, frac, 0)
        assert int(mask.sum()) == held, (m, frac)
        assert (note is None) == (held == round(frac * m)), (m, frac, note)


def test_two_points_two_world_sizes_are_solved_exactly():
    k, n = np.array([2, 4]), np.array([MiB, 4 * MiB], float)
    t = np.array([ring_time(int(a), b, 3e-6, 10e9) for a, b in zip(k, n)])
    f = fit_alpha_beta(k, n, t, algorithm="ring", base_alpha_s=1e-5, base_bandwidth_Bps=1e9)
    assert f.identified == {"alpha": True, "bandwidth": True}
    assert f.alpha_s == pytest.approx(3e-6, rel=1e-6) and f.bandwidth_Bps == pytest.approx(10e9, rel=1e-6)
    assert f.alpha_se_s is None and f.bandwidth_se_Bps is None
    assert any("solved exactly" in w for w in f.warnings)


# --------------------------------------------------------------------------- validate takes them too


@pytest.mark.parametrize("sizes", [[25 * MiB], [25 * MiB, 8 * MiB], [25 * MiB, 8 * MiB, MiB, 64 << 10]])
def test_validate_takes_traces_of_any_number_of_sizes(runner, tmp_path, sizes):
    f = gloo_trace(tmp_path / "v.json", sizes)
    r = runner.invoke(app, ["validate", str(f), "-p", "cpu-loopback", "-f", "json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["rows"]
    assert sorted(int(x["bytes"]) for x in rows) == sorted(sizes)
    # term by term against the run's model: every bucket size is one row of the step's table
    r = runner.invoke(app, ["validate", str(f), "-p", "cpu-loopback", "--params", str(sum(sizes) // 4), "-f", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert sorted(int(b["bytes"]) for b in doc["buckets"]) == sorted(sizes)
    assert sum(t["term"].startswith("all_reduce") for t in doc["terms"]) == len(sizes)
