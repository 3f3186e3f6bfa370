"""A live job's own measurements: NCCL Inspector logs, PyTorch profiler traces, and `simcli check`.

The trace is real: tests write it once per session with measurements/kineto_ddp.py (2 gloo ranks on CPU, a
3 x 512 x 512 MLP, DDP buckets of 1 MiB, so three 1 MiB all-reduces a step). The Inspector files are written
in the documented v4.0 format (tests/fixtures/README.md).
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from simcli.base.types import InputError
from simcli.cli.app import app
from simcli.io.measured.calls import collective_name, sniff
from simcli.io.measured.inspector import parse_json_records, parse_prometheus, read_inspector
from simcli.io.measured.live import read_live

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
PUBLISHED = ROOT / "validation" / "published" / "nccl-allreduce-16xH100-2node-ib400x8.csv"
PARAMS = 3 * 512 * 512


@pytest.fixture(scope="session")
def trace_dir(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("kineto")
    r = subprocess.run(
        [sys.executable, str(ROOT / "measurements" / "kineto_ddp.py"), str(out), "--steps", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["rank0.json", "rank1.json"]
    return out


def _ok(runner, args, code=0):
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code in ((0, 1) if code is None else (code,)), r.output
    return r


def _bad(runner, args, *needles):
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("simcli: error:"), r.output
    assert "Traceback" not in r.output
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


# --------------------------------------------------------------------------- the real CPU trace


def test_trace_has_three_1mib_allreduces_a_step_adding_up_to_the_gradient(trace_dir):
    live = read_live(trace_dir)
    assert live.kind == "kineto" and len(live.traces) == 2
    assert {t.rank for t in live.traces} == {0, 1} and all(t.world_size == 2 for t in live.traces)
    for t in live.traces:
        assert t.backend == "gloo" and t.device == "cpu"
        assert len(t.steps) == 2
        for s in t.steps:
            ar = [b for b in s.buckets if b["collective"] == "all_reduce"]
            assert [b["bytes"] for b in ar] == [1 << 20] * 3
            assert sum(b["count"] for b in ar) == PARAMS  # element counts add up to the gradient
            assert sum(b["bytes"] for b in ar) == PARAMS * 4  # fp32 gradient bytes per step
            assert all(b["dtype"] == "fp32" and b["ranks"] == 2 for b in ar)
            for b in ar:
                assert 0 <= b["hidden_s"] <= b["time_s"]  # a call hides at most itself (timestamps round)
                assert b["exposed_s"] == pytest.approx(b["time_s"] - b["hidden_s"], abs=1e-9)
            assert s.forward_s > 0 and s.backward_s > 0 and s.optimizer_s > 0
            assert s.exposed_s <= s.comm_s + 1e-9
            assert s.compute_s + s.optimizer_s <= s.step_s + 1e-9  # terms of one step, summed in floating point
    row = next(r for r in live.rows if r["collective"] == "all_reduce")
    assert (row["world_size"], row["bytes"], row["count"], row["dtype"]) == (2, 1 << 20, 262144, "fp32")
    assert row["iters"] >= 6  # 3 a step, 2 steps, warm-up not profiled
    eps = 1e-9 * row["time_s"]  # order statistics of the same samples, computed apart: equal up to rounding
    assert row["time_p10_s"] <= row["time_s"] + eps and row["time_s"] <= row["time_p90_s"] + eps


def test_bench_import_trace(runner, trace_dir):
    r = _ok(runner, ["bench", "import", trace_dir, "-f", "csv"])
    rows = list(csv.DictReader(line for line in r.stdout.splitlines() if not line.startswith("#")))
    ar = [x for x in rows if x["collective"] == "all_reduce"]
    assert len(ar) == 1 and ar[0]["world_size"] == "2" and ar[0]["bytes"] == str(1 << 20)
    doc = json.loads(_ok(runner, ["bench", "import", trace_dir, "-f", "json"]).stdout)
    steps = doc["step"]
    assert [b["bytes"] for b in steps["buckets"] if b["collective"] == "all_reduce"] == [1 << 20] * 3
    assert steps["ranks"] == 2 and steps["rank_spread"] is not None
    table = _ok(runner, ["bench", "import", trace_dir]).stdout
    assert "3 MiB all-reduced a step" in table


def test_validate_trace_term_by_term(runner, trace_dir):
    args = ["validate", trace_dir, "-p", "cpu-loopback", "--params", PARAMS, "--batch-per-device", 64]
    v = json.loads(_ok(runner, [*args, "-f", "json"]).stdout)
    names = [t["term"] for t in v["terms"]]
    for need in ("forward", "backward", "all_reduce 1 MiB x3", "exposed communication", "update (optimizer)", "step"):
        assert need in names
    assert v["gradient_bytes_measured"] == v["gradient_bytes_predicted"] == PARAMS * 4
    assert v["bucket_mb"] == 1.0 and v["devices"] == 2
    leaves = [t for t in v["terms"] if t["leaf"]]
    worst = max(leaves, key=lambda t: abs(t["difference_s"]))
    assert v["differs_most"] == worst["term"]
    upd = next(t for t in v["terms"] if t["term"] == "update (optimizer)")
    assert upd["measured_s"] > 0
    for t in v["terms"]:
        if t["modelled"]:
            assert t["difference_s"] == pytest.approx(t["predicted_s"] - t["measured_s"])
    text = _ok(runner, args).stdout
    assert "differs most:" in text and "term by term" in text


def test_calibrate_from_trace(runner, trace_dir, tmp_path):
    out = tmp_path / "cal.yaml"
    args = ["calibrate", trace_dir, "--params", PARAMS, "--flops-per-sample", 6 * PARAMS, "--batch-per-device", 64]
    r = _ok(runner, [*args, "--optimizer", "sgd", "-o", out, "-f", "json"])
    rep = json.loads(r.stdout)
    st = rep["step"]
    fp32 = next(d for d in st["by_dtype"] if d["dtype"] == "fp32")
    assert fp32["rows"] == 2 and 0 < fp32["mfu"] <= 1  # one row per rank
    assert rep["run"]["update_s"] > 0 and "update_bandwidth" in rep["run"]["update_note"]
    # the optimizer's step (plain SGD: 12 B per parameter) over the measured per-update time: update_bandwidth
    upd = st["update"]
    assert upd["after"] == pytest.approx(PARAMS * 12 / upd["per_row"][0]["measured_s"], rel=0.25)
    assert rep["run"]["rank_spread"] is not None
    import yaml

    prof = yaml.safe_load(out.read_text())
    assert prof["device"]["mfu_by_dtype"]["fp32"] == pytest.approx(fp32["mfu"], abs=1e-6)  # the YAML keeps 6 digits
    assert prof["calibration"]["measured_run"]["update_s"] == pytest.approx(rep["run"]["update_s"])
    assert float(prof["device"]["update_bandwidth"].split()[0]) * 1e9 == pytest.approx(upd["after"], rel=1e-5)
    # its buckets are one size (1 MiB): that point pins one value of the tier, fitted; the other is kept, and said so
    assert any("one message size and one world size" in w and "pin one parameter" in w for w in rep["warnings"])
    (tier,) = rep["tiers"]
    assert tier["points"] == 1 and tier["latency"]["identified"] != tier["bandwidth"]["identified"]


def test_truncated_trace_is_one_line(runner, trace_dir, tmp_path):
    text = (trace_dir / "rank0.json").read_text()
    f = tmp_path / "cut.json"
    f.write_text(text[: len(text) // 2])
    _bad(runner, ["bench", "import", f], "not valid JSON", str(f))


# --------------------------------------------------------------------------- traces built in the documented form


def _trace(events, pg_sizes=(2,), rank=0):
    return {
        "schemaVersion": 1,
        "distributedInfo": {
            "backend": "gloo",
            "rank": rank,
            "world_size": pg_sizes[0],  # the default group (pg_name "0") is the whole world
            "pg_config": [{"pg_name": str(i), "pg_size": s, "ranks": list(range(s))} for i, s in enumerate(pg_sizes)],
        },
        "traceEvents": events,
    }


def _x(name, ts, dur, tid=1, cat="cpu_op", **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def test_trace_without_collectives_is_refused(runner, tmp_path):
    f = tmp_path / "t.json"
    f.write_text(json.dumps(_trace([_x("ProfilerStep#1", 0, 100, cat="user_annotation"), _x("aten::mm", 1, 5)])))
    _bad(runner, ["bench", "import", f], "no collectives")


def test_gloo_ops_with_groups_of_several_sizes_are_refused(runner, tmp_path):
    ev = [
        _x("ProfilerStep#1", 0, 100, cat="user_annotation"),
        _x("gloo:all_reduce", 10, 5, tid=2, cat="user_annotation", **{"Input Dims": [[256]], "Input type": ["float"]}),
    ]
    f = tmp_path / "t.json"
    f.write_text(json.dumps(_trace(ev, pg_sizes=(4, 2))))
    _bad(runner, ["bench", "import", f], "groups of 2, 4 ranks")


def test_gpu_trace_nccl_kernels_with_record_param_comms(tmp_path):
    """ncclDevKernel_* kernels whose metadata is in the record_param_comms op around their launch, compute
    kernels launched from forward, backward and the optimizer: phases by launch, hidden by overlap."""
    meta = {"Collective name": "allreduce", "In msg nelems": 1 << 20, "Out msg nelems": 1 << 20,
            "Group size": 8, "dtype": "BFloat16", "Process Group Name": "0"}  # fmt: skip
    ev = [
        _x("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        _x("DistributedDataParallel.forward", 10, 90, cat="user_annotation"),
        _x("cudaLaunchKernel", 20, 2, cat="cuda_runtime", correlation=1),
        _x(f"{'autograd::engine::evaluate_function: MmBackward0'}", 200, 100),
        _x("cudaLaunchKernel", 210, 2, cat="cuda_runtime", correlation=2),
        _x("record_param_comms", 250, 10, **meta),
        _x("cudaLaunchKernel", 252, 2, cat="cuda_runtime", correlation=3),
        _x("Optimizer.step#AdamW.step", 600, 50, cat="user_annotation"),
        _x("cudaLaunchKernel", 610, 2, cat="cuda_runtime", correlation=4),
        # GPU: forward kernel 100..300, backward kernel 300..500, NCCL 400..700 (100 us hidden), optimizer 700..720
        _x("sm90_xmma_gemm_bf16", 100, 200, tid=7, cat="kernel", correlation=1),
        _x("sm90_xmma_gemm_bf16", 300, 200, tid=7, cat="kernel", correlation=2),
        _x(
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            400,
            300,
            tid=20,
            cat="kernel",
            correlation=3,
        ),  # fmt: skip
        _x("multi_tensor_apply_kernel", 700, 20, tid=7, cat="kernel", correlation=4),
    ]
    f = tmp_path / "gpu.json"
    f.write_text(json.dumps(_trace(ev, pg_sizes=(8,))))
    live = read_live(f)
    (t,) = live.traces
    assert t.device == "gpu"
    (s,) = t.steps
    assert s.forward_s == pytest.approx(200e-6) and s.backward_s == pytest.approx(200e-6)
    assert s.optimizer_s == pytest.approx(20e-6)
    (b,) = s.buckets
    assert (b["collective"], b["bytes"], b["dtype"], b["ranks"]) == ("all_reduce", 2 << 20, "bf16", 8)
    assert b["hidden_s"] == pytest.approx(100e-6) and s.exposed_s == pytest.approx(200e-6)


def test_collective_names():
    assert collective_name("AllReduce") == "all_reduce"
    assert collective_name("_allgather_base") == "all_gather"
    assert collective_name("reduce_scatter_tensor_coalesced") == "reduce_scatter"
    assert collective_name("all_reduce") == "all_reduce"


# --------------------------------------------------------------------------- NCCL Inspector


def test_inspector_directory_several_ranks_and_communicators():
    calls, _ = read_inspector(FIX / "inspector")
    assert len(calls) == 4 * (6 + 2)
    live = read_live(FIX / "inspector")
    assert live.kind == "inspector"
    rows = {(r["collective"], r["world_size"], r["bytes"]): r for r in live.rows}
    small = rows[("all_reduce", 4, 1 << 20)]
    # each call's slowest rank is rank 3 (+6 us): 66, 68, 67 us -> median 67
    assert small["time_s"] == pytest.approx(67e-6) and small["iters"] == 3 and small["calls"] == 12
    assert small["nodes"] == 2 and small["ranks_seen"] == 4
    assert rows[("all_reduce", 4, 64 << 20)]["time_s"] == pytest.approx(911e-6)
    ag = rows[("all_gather", 2, 8 << 20)]  # two node-local communicators, two calls each
    assert ag["iters"] == 4 and ag["time_s"] == pytest.approx(42e-6) and ag["nodes"] == 1
    assert ag["busbw_GBps"] == pytest.approx((8 << 20) / 42e-6 / 1e9 * 0.5)


def test_inspector_verbose_kernel_timestamps():
    text = (FIX / "inspector" / "node0-pid1001.log").read_text()
    calls = parse_json_records(text, "x")
    assert calls[0]["channels"] == 2
    assert calls[0]["kernel_span_s"] == pytest.approx((60 - 3 + 1) * 1e-6)
    assert "kernel_span_s" not in parse_json_records((FIX / "inspector" / "node0-pid1002.log").read_text(), "y")[0]


def test_inspector_pretty_printed_records_as_the_readme_shows_them():
    rec = json.loads((FIX / "inspector" / "node0-pid1002.log").read_text().splitlines()[0])
    text = json.dumps(rec, indent=2) + "\n" + json.dumps(rec, indent=2) + "\n"
    assert len(parse_json_records(text, "x")) == 2


def test_inspector_prometheus():
    text = (FIX / "nccl_inspector_metrics_GPU-4.prom").read_text()
    assert sniff(text) == "inspector-prometheus"
    calls = parse_prometheus(text, "p")
    assert len(calls) == 3
    live = read_live(FIX / "nccl_inspector_metrics_GPU-4.prom")
    big = next(r for r in live.rows if r["bytes"] == 2 << 30)
    assert big["world_size"] == 8 and big["nodes"] == 1
    assert big["time_s"] == pytest.approx(8990e-6)  # the slower of ranks 4 and 5
    assert big["rank_spread"] == pytest.approx(40 / 8990)


def _first_record() -> dict:
    return json.loads((FIX / "inspector" / "node0-pid1002.log").read_text().splitlines()[0])


def test_inspector_record_without_exec_time(runner, tmp_path):
    rec = _first_record()
    del rec["coll_perf"]["coll_exec_time_us"]
    f = tmp_path / "a.log"
    f.write_text(json.dumps(rec) + "\n")
    _bad(runner, ["bench", "import", f], "coll_perf.coll_exec_time_us", "record 1")


def test_inspector_one_communicator_with_two_sizes_is_refused(runner, tmp_path):
    """A communicator id seen with two sizes is two runs' records mixed: refused with both files named, never
    silently split into two groups."""
    a, b = _first_record(), _first_record()
    b["header"]["n_ranks"] = a["header"]["n_ranks"] * 2
    d = tmp_path / "dump"
    d.mkdir()
    (d / "h1-pid1.log").write_text(json.dumps(a) + "\n")
    (d / "h2-pid2.log").write_text(json.dumps(b) + "\n")
    _bad(runner, ["bench", "import", d], f"communicator {a['header']['id']}", "two runs")


def test_inspector_unknown_version_is_named(runner, tmp_path):
    rec = _first_record()
    rec["metadata"]["inspector_output_format_version"] = "v5.0"
    f = tmp_path / "a.log"
    f.write_text(json.dumps(rec) + "\n")
    _bad(runner, ["bench", "import", f], "'v5.0'")


def test_inspector_truncated_log(runner, tmp_path):
    text = (FIX / "inspector" / "node0-pid1002.log").read_text()
    f = tmp_path / "a.log"
    f.write_text(text[: len(text) - 40])
    _bad(runner, ["bench", "import", f], "cut short")


def test_inspector_prometheus_without_time(runner, tmp_path):
    lines = (FIX / "nccl_inspector_metrics_GPU-4.prom").read_text().splitlines()
    f = tmp_path / "m.prom"
    f.write_text("\n".join(x for x in lines if "exec_time" not in x) + "\n")
    with pytest.raises(InputError, match="nccl_collective_exec_time_microseconds"):
        parse_prometheus(f.read_text(), str(f))


# --------------------------------------------------------------------------- simcli check


def _scaled(tmp_path, factor: float) -> Path:
    lines = PUBLISHED.read_text().splitlines()
    com = [x for x in lines if x.startswith("#")]
    rows = list(csv.DictReader(x for x in lines if not x.startswith("#")))
    buf = io.StringIO()
    w = csv.DictWriter(buf, list(rows[0]), lineterminator="\n")
    w.writeheader()
    for r in rows:
        for c in ("time_us", "time_inplace_us"):
            r[c] = repr(float(r[c]) * factor)
        for c in ("algbw_GBps", "busbw_GBps", "busbw_inplace_GBps"):  # a slower run's bandwidths, as nccl-tests says
            if c in r:
                r[c] = repr(float(r[c]) / factor)
        w.writerow(r)
    f = tmp_path / f"x{factor}.csv"
    f.write_text("\n".join(com) + "\n" + buf.getvalue())
    return f


def test_check_published_16xh100_is_ok_at_64mib_and_above(runner):
    r = _ok(runner, ["check", PUBLISHED, "-p", "dgx-h100", "-f", "json"], 0)
    doc = json.loads(r.stdout)
    big = [x for x in doc["rows"] if x["bytes"] >= 64 << 20]
    assert big and all(x["verdict"] == "OK" for x in big)
    assert doc["low"] == 0
    assert all(x["tier"] == "infiniband" for x in big)
    _ok(runner, ["check", PUBLISHED, "-p", "dgx-h100"], 0)


def test_check_the_same_curve_1_6x_slower_is_low(runner, tmp_path):
    slow = _scaled(tmp_path, 1.6)
    r = _ok(runner, ["check", slow, "-p", "dgx-h100", "-f", "json"], 1)
    doc = json.loads(r.stdout)
    low = [x for x in doc["rows"] if x["verdict"] == "LOW"]
    assert low and all(x["bytes"] >= 128 << 20 for x in doc["rows"] if x["bytes"] >= 128 << 20 and x in low)
    assert all(x["verdict"] == "LOW" for x in doc["rows"] if x["bytes"] >= 128 << 20)
    # a bandwidth-bound size names the tier's bandwidth; a latency-bound one the latency it should take
    for x in low:
        bound = x["latency_s"] > 0.5 * x["expected_s"]
        assert ("latency-bound" in x["expected"]) == bound and ("should give" in x["expected"]) == (not bound), x
    assert any("latency-bound" in x["expected"] for x in low) and any("should give" in x["expected"] for x in low)
    text = _ok(runner, ["check", slow, "-p", "dgx-h100"], 1).stdout
    assert "LOW" in text and "infiniband" in text


def test_check_tolerance_option(runner, tmp_path):
    # 1%: every size is held to 1% (the curve is 6-9% below the model at large sizes: LOW); 90%: all OK
    doc = json.loads(_ok(runner, ["check", PUBLISHED, "-p", "dgx-h100", "-f", "json", "--tolerance", "1%"], 1).stdout)
    assert {x["tolerance"] for x in doc["rows"]} == {0.01}
    doc = json.loads(_ok(runner, ["check", PUBLISHED, "-p", "dgx-h100", "-f", "json", "--tolerance", "90%"]).stdout)
    assert all(x["verdict"] == "OK" for x in doc["rows"])
    _bad(runner, ["check", PUBLISHED, "-p", "dgx-h100", "--tolerance", "1%,2%"], "--tolerance")
    _bad(runner, ["check", PUBLISHED, "-p", "dgx-h100", "--tolerance", "150%"], "--tolerance")


def test_check_reads_nccl_tests_text_and_inspector(runner):
    doc = json.loads(_ok(runner, ["check", FIX / "all_reduce_perf_8xA100.txt", "-p", "dgx-a100", "-f", "json"], None)
                     .stdout)  # fmt: skip
    assert len(doc["rows"]) == 11 and {x["verdict"] for x in doc["rows"]} <= {"OK", "MODEL", "LOW", "HIGH"}
    r = runner.invoke(app, ["check", str(FIX / "inspector"), "-p", "dgx-h100", "-f", "json"])
    assert r.exit_code in (0, 1), r.output
    rows = json.loads(r.stdout)["rows"]
    assert {x["collective"] for x in rows} == {"all_reduce", "all_gather"}


def test_validate_and_calibrate_read_an_inspector_directory(runner, tmp_path):
    r = runner.invoke(app, ["validate", str(FIX / "inspector"), "-p", "dgx-h100", "-f", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert sorted(x["bytes"] for x in doc["rows"]) == [1 << 20, 64 << 20]  # the all-reduces only
    assert any("ran on 2 node(s)" in n for n in doc["notes"])  # Inspector's nnodes against the profile's placement
    out = tmp_path / "insp.yaml"
    r = runner.invoke(app, ["calibrate", str(FIX / "inspector"), "-p", "dgx-h100", "-o", str(out), "-f", "json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert [t["tier"] for t in rep["tiers"]] == ["nvlink"]
    # per size, the median call's (slowest - fastest rank) / slowest: 6/67 at 1 MiB, 6/911 at 64 MiB; their median
    assert rep["run"]["collective_rank_spread"] == pytest.approx((6 / 67 + 6 / 911) / 2)


def test_the_step_terms_add_up(trace_dir):
    from simcli.io.measured.kineto import step_summary

    live = read_live(trace_dir)
    s = step_summary(live.traces)
    parts = s["forward_s"] + s["backward_s"] + s["exposed_s"] + s["optimizer_s"] + s["other_s"]
    assert parts == pytest.approx(s["step_s"])
    slowest = max(sorted(t.steps, key=lambda x: x.step_s)[(len(t.steps) - 1) // 2].step_s for t in live.traces)
    assert s["step_s"] == slowest and len(s["rank_compute_s"]) == 2


def test_gpu_kernel_with_its_own_metadata_and_a_generic_name(tmp_path):
    """ncclDevKernel_Generic says no collective; its args do (torch copies record_param_comms' metadata onto it)."""
    meta = {"Collective name": "_allgather_base", "In msg nelems": 1024, "Out msg nelems": 8192, "Group size": 8,
            "dtype": "Float", "Process Group Name": "3"}  # fmt: skip
    ev = [
        _x("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        _x("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", 100, 50, tid=20, cat="kernel", **meta),
        _x(
            "nccldevkernel_allreduce_sum_f32_ring_ll",
            200,
            50,
            tid=20,
            cat="kernel",
            **{**meta, "Collective name": "allreduce", "Out msg nelems": 1024},
        ),
    ]
    f = tmp_path / "gpu.json"
    f.write_text(json.dumps(_trace(ev, pg_sizes=(8, 2))))  # groups of two sizes: the kernels say theirs
    (s,) = read_live(f).traces[0].steps
    assert [(b["collective"], b["bytes"], b["ranks"]) for b in s.buckets] == [
        ("all_gather", 8192 * 4, 8),
        ("all_reduce", 4096, 8),
    ]


def test_gzipped_logs_are_read(tmp_path):
    import gzip

    d = tmp_path / "dump"
    d.mkdir()
    for f in (FIX / "inspector").iterdir():
        (d / (f.name + ".gz")).write_bytes(gzip.compress(f.read_bytes()))
    plain = read_live(FIX / "inspector").rows
    assert read_live(d).rows == [{**r, "source": "nccl inspector dump"} for r in plain]
    bad = tmp_path / "cut.log.gz"
    bad.write_bytes(gzip.compress((FIX / "inspector" / "node0-pid1002.log").read_bytes())[:-20])
    with pytest.raises(InputError, match="does not decompress|cut short"):
        read_live(bad)
