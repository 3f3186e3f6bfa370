"""Validation: reading measurement files, per-row errors and summaries, and the shipped published cases."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from simcli.base.types import InputError, Tier
from simcli.checks.validate import size_band, size_decade, summarise, validate
from simcli.cli.app import app
from simcli.comm import collectives, nccl
from simcli.io.measured.table import filter_rows, read_measurements
from simcli.io.profiles import resolve_profile

ROOT = Path(__file__).resolve().parents[2]

PUBLISHED = ROOT / "validation" / "published"
A100 = PUBLISHED / "nccl-allreduce-8xA100-nvswitch.csv"
AZURE = PUBLISHED / "nccl-allreduce-8xH100-8xH200-azure.csv"
DLPERF = PUBLISHED / "dlperf-resnet50-fp32-v100.csv"


def test_published_files_are_recognised_and_cite_their_source():
    for path, kind, n in ((A100, "allreduce", 11), (AZURE, "allreduce", 22), (DLPERF, "scaling", 5)):
        m = read_measurements(path)
        assert m.kind == kind and len(m) == n
        assert any("source:" in c for c in m.comments)


def test_busbw_only_rows_become_times_with_the_nccl_tests_factor():
    m = filter_rows(read_measurements(AZURE), ["system=nd-h100-v5"])
    assert len(m) == 11
    t = m.allreduce_time()
    n, bus = m.number("bytes"), m.number("busbw_GBps")
    # time = bytes · 2(k-1)/k / busbw, k = 8
    assert t[-1] == pytest.approx(8589934592 * 1.75 / 478.87e9)
    assert np.allclose(n * 1.75 / t / 1e9, bus)


def test_time_us_is_read_in_microseconds():
    m = read_measurements(A100)
    assert m.allreduce_time()[0] == pytest.approx(43.83e-6)


def test_errors_are_relative_to_the_measurement_and_summaries_group_them():
    net = (Tier("net", 1e9, 10e-6),)
    from simcli.base.types import Device, Profile

    prof = Profile("p", "", ("t",), Device("d", {"fp32": 1e12}, 0.5), net)
    k = np.array([2, 2, 4, 4])
    n = np.array([1e5, 1e7, 1e5, 1e7])
    t_pred = collectives.allreduce("ring", net, k, nbytes=n).time
    meas = t_pred * np.array([1.0, 1.25, 0.8, 2.0])

    lines = ["world_size,bytes,time_s"] + [f"{a},{b},{c!r}" for a, b, c in zip(k.tolist(), n.tolist(), meas.tolist())]
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.csv"
        p.write_text("\n".join(lines) + "\n")
        v = validate(read_measurements(p), prof, workload=None)
    errs = [r["error"] for r in v.records]
    assert errs == pytest.approx([0.0, 1 / 1.25 - 1, 1 / 0.8 - 1, -0.5])
    s = v.summary["time_s"]
    assert s["overall"]["n"] == 4
    assert s["overall"]["mdape"] == pytest.approx(np.median(np.abs(errs)))
    assert s["overall"]["max_ape"] == pytest.approx(0.5) and s["overall"]["worst_error"] == pytest.approx(-0.5)
    assert s["by_devices"][2]["mdape"] == pytest.approx(np.median(np.abs(errs[:2])))
    assert set(s["by_size_decade"]) == {"1e5..1e6 B", "1e7..1e8 B"}
    # the bands the NCCL model is held to: 1e5 B is at most 256 KiB, 1e7 B between 256 KiB and 128 MiB
    assert list(s["by_size_band"]) == ["<= 256 KiB", "0.5-64 MiB"]
    assert s["by_size_band"]["0.5-64 MiB"]["mdape"] == pytest.approx(np.median(np.abs([errs[1], errs[3]])))
    assert [size_band(x) for x in (256 * 1024, 256 * 1024 + 1, 2**27 - 1, 2**27)] == [
        "<= 256 KiB",
        "0.5-64 MiB",
        "0.5-64 MiB",
        ">= 128 MiB",
    ]
    assert size_decade(999) == "1e2..1e3 B" and size_decade(1000) == "1e3..1e4 B"
    assert summarise(v.records) == v.summary


@pytest.mark.parametrize(
    "content,match",
    [
        ("", "no header"),
        ("# only a comment\n", "no header"),
        ("a,b,c\n1,2,3\n", "not a measurement file"),
        ("world_size,bytes,time_s\n", "no measurement rows"),
        ("world_size,bytes,time_s\n2,1024\n", "2 values for 3 columns"),
        ("world_size,bytes,time_s\n2,1024,-1\n", r"time_s -1.0 is out of range; give a time \(> 0\)"),
        ("collective,world_size,bytes,time_s\nbroadcast,2,1024,1\n", "no all-reduce rows"),
    ],
)
def test_bad_measurement_files_are_refused(tmp_path, content, match):
    p = tmp_path / "bad.csv"
    p.write_text(content)
    with pytest.raises(InputError, match=match):
        m = read_measurements(p)
        m.allreduce_time()


def test_binary_and_missing_files_are_refused(tmp_path):
    p = tmp_path / "bin.csv"
    p.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(InputError, match="not a text file|NUL"):
        read_measurements(p)
    with pytest.raises(InputError, match="no such file"):
        read_measurements(tmp_path / "missing.csv")
    with pytest.raises(InputError, match="directory"):
        read_measurements(tmp_path)


def test_where_filter_names_the_column(tmp_path):
    with pytest.raises(InputError, match="no column 'sytem'"):
        filter_rows(read_measurements(AZURE), ["sytem=nd-h100-v5"])
    with pytest.raises(InputError, match="COLUMN=VALUE"):
        filter_rows(read_measurements(AZURE), ["nd-h100-v5"])
    with pytest.raises(InputError, match="no rows left"):
        filter_rows(read_measurements(AZURE), ["system=nope"])


# --------------------------------------------------------------------------- CLI, end to end on shipped cases


def test_validate_published_a100_case_end_to_end(runner):
    r = runner.invoke(app, ["validate", str(A100), "--profile", "dgx-a100", "--format", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["kind"] == "allreduce" and out["primary_metric"] == "time_s" and len(out["rows"]) == 11
    row = out["rows"][-1]
    assert row["bytes"] == 17179869184 and row["measured"] == pytest.approx(127997e-6)
    assert row["error"] == pytest.approx((row["predicted"] - row["measured"]) / row["measured"])
    # large messages: the profile's 0.8 x NVLink line rate holds against nccl-tests (the README's target)
    big = [x for x in out["rows"] if x["bytes"] >= 64 * 2**20]
    busbw_err = [x["busbw_predicted_GBps"] / x["busbw_measured_GBps"] - 1 for x in big]
    assert np.median(np.abs(busbw_err)) <= 0.15


def test_validate_max_error_gates_the_exit_code(runner):
    args = ["validate", str(A100), "--profile", "dgx-a100", "--format", "csv", "--min-size", "512MiB"]
    ok = runner.invoke(app, args + ["--max-error", "15%"])
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.splitlines()[1].startswith("metric,devices,bytes")
    tight = runner.invoke(app, args + ["--max-error", "0.001"])
    assert tight.exit_code == 1 and "above --max-error" in tight.stderr
    bad = runner.invoke(app, args + ["--max-error", "lots"])
    assert bad.exit_code == 2 and "--max-error" in bad.stderr


def test_validate_scaling_table_needs_a_model_and_skips_k1(runner):
    r = runner.invoke(app, ["validate", str(DLPERF), "--profile", "dgx-v100"])
    assert r.exit_code == 2 and "--model" in r.stderr
    r = runner.invoke(
        app, ["validate", str(DLPERF), *"--profile dgx-v100 --model resnet50 --dtype fp32 --format json".split()]
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    sp = [x for x in out["rows"] if x["metric"] == "speedup"]
    assert [x["devices"] for x in sp] == [4, 8, 16, 32]
    assert out["summary"]["samples_per_s"]["overall"]["n"] == 5


def test_validate_table_output_and_plot(runner, tmp_path):
    png = tmp_path / "v.png"
    r = runner.invoke(
        app, ["validate", str(AZURE), "--profile", "dgx-h100", "--where", "system=nd-h100-v5", "--plot", str(png)]
    )
    assert r.exit_code == 0, r.output
    assert "median |err|" in r.stdout and "1e9..1e10 B" in r.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = runner.invoke(app, ["validate", str(AZURE), "--profile", "dgx-h100", "--plot", str(png)])
    assert again.exit_code == 2 and "--force" in again.stderr


def test_validate_step_file(runner, tmp_path):
    steps = tmp_path / "steps.csv"
    rows = [
        "# bench step",
        "world_size,backend,mode,params,batch_per_device,steps,t_compute_s,t_comm_s,t_step_s,speedup,efficiency",
    ]
    for k, ts in ((1, 0.10), (2, 0.12), (4, 0.13)):
        rows.append(f"{k},gloo,allreduce,1000000,32,10,0.1,{ts - 0.1},{ts},{k * 0.1 / ts},{0.1 / ts}")
    steps.write_text("\n".join(rows) + "\n")
    r = runner.invoke(app, ["validate", str(steps), "--profile", "cpu-loopback", "--format", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["kind"] == "step" and out["primary_metric"] == "t_step_s"
    assert {x["metric"] for x in out["rows"]} == {"t_step_s", "speedup"}
    assert len([x for x in out["rows"] if x["metric"] == "t_step_s"]) == 3


def test_validate_reads_gpus_per_process(tmp_path):
    """A -g 8 run is priced with the host's launches as its floor; the same rows at -g 1 are not."""
    rows = "devices,bytes,time_us,gpus_per_process\n8,1024,30.0,{g}\n8,1073741824,4100.0,{g}\n"
    preds = {}
    for g in (1, 8):
        f = tmp_path / f"g{g}.csv"
        f.write_text(rows.format(g=g))
        recs = validate(
            read_measurements(f), resolve_profile("dgx-h100"), workload=None, scenario={"algorithm": "nvls"}
        ).records
        preds[g] = [r["predicted"] for r in recs]
    assert preds[8][0] == pytest.approx(8 * nccl.LAUNCH_US * 1e-6) and preds[1][0] < preds[8][0]
    assert preds[8][1] == preds[1][1]
    (tmp_path / "bad.csv").write_text(rows.format(g=0))
    with pytest.raises(InputError, match="gpus_per_process 0"):
        validate(
            read_measurements(tmp_path / "bad.csv"),
            resolve_profile("dgx-h100"),
            workload=None,
            scenario={"algorithm": "nvls"},
        )


def test_calibrate_refuses_a_bad_gpus_per_process_in_one_line(tmp_path, runner):
    f = tmp_path / "bad.csv"
    f.write_text("world_size,bytes,time_s,gpus_per_process\n8,1024,3e-5,2.5\n8,1073741824,4e-3,8\n")
    r = runner.invoke(app, ["calibrate", str(f), "-p", "dgx-h100", "-o", str(tmp_path / "out.yaml")])
    assert r.exit_code == 2 and "gpus_per_process 2.5 must be a whole number" in r.output
    assert not (tmp_path / "out.yaml").exists()


FSDP_FILES = (
    "fsdp-llm-foundry-a100-small.csv",
    "fsdp-llm-foundry-a100-large.csv",
    "fsdp-llm-foundry-h100.csv",
    "fsdp-torchtitan-h100.csv",
)


@pytest.mark.parametrize("name", FSDP_FILES)
def test_fsdp_weak_scaling_files_hold_one_batch_per_model_and_cite_their_source(name):
    """benchmarks/validate_fsdp.py compares each model's rows to its smallest k: that is weak scaling only if
    the micro-batch, accumulation and sequence are the same in every row of the model (the files' selection)."""
    import csv

    text = (PUBLISHED / name).read_text().splitlines()
    assert any(line.startswith("# source:") for line in text)
    rows = list(csv.DictReader(line for line in text if not line.startswith("#")))
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["gpu"], r["model"]), []).append(r)
    assert groups
    for rs in groups.values():
        assert len(rs) >= 2
        assert len({(r["mb"], r["accum"], r["seq"], r["mp_mode"], r["act_ckpt"]) for r in rs}) == 1
        assert len({r["k"] for r in rs}) == len(rs)
        # the reduction dtype: a grad_dtype column, else Composer's mixed-precision mode names it
        assert all(r.get("grad_dtype") in ("fp32", "bf16") or r["mp_mode"] in ("PURE", "DEFAULT") for r in rs)
        assert all(float(r["tps_gpu"]) > 0 for r in rs)


def test_validate_takes_every_scenario_option(runner):
    """validate reads the scenario options as speedup does (issue 25): --spread and --strategy change the
    prediction of a scaling table, --overlap none is the one all-reduce after backward, and a bad value of any
    of them is the same one-line error as in speedup."""
    f = str(ROOT / "validation" / "published" / "dlperf-resnet50-fp32-v100.csv")
    prof = str(ROOT / "validation" / "published" / "profiles" / "dgx-v100-1xedr.yaml")
    base = ["validate", f, "-p", prof, "--model", "resnet50", "-f", "json"]

    def speedups(*extra: str) -> list[float]:
        r = runner.invoke(app, [*base, *extra])
        assert r.exit_code == 0, r.output
        return [x["predicted"] for x in json.loads(r.stdout)["rows"] if x["metric"] == "speedup"]

    plain = speedups()
    assert speedups("--spread", "0") != plain
    assert speedups("--spread", "5%") < plain  # a wider spread waits longer for the slowest device
    assert speedups("--overlap", "none") <= plain
    assert speedups("--strategy", "zero2") != plain
    for bad, msg in (("--strategy", "zero9"), ("--spread", "-1"), ("--overlap", "sideways")):
        r = runner.invoke(app, [*base, bad, {"--strategy": "zero9", "--spread": "-1", "--overlap": "sideways"}[bad]])
        assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.output
        assert bad in r.stderr
