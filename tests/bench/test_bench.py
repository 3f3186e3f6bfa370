"""simcli bench without spawning ranks: statistics, the alpha-beta fit, the CSV writer, the nccl-tests reader."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcli.base.types import InputError
from simcli.cli import app
from simcli.io.measured.nccltests import parse_nccl_tests, parse_text
from simcli.io.measured.results import ALLREDUCE_COLUMNS, ResultWriter, read_results
from simcli.io.measured.stats import NOISY_SPREAD, allreduce_busbw_factor, summarize

FIX = Path(__file__).parents[1] / "fixtures"
PUBLISHED = Path("/work/shared/data/published/nccl-allreduce-8xA100-nvswitch.csv")


def _published() -> list[dict[str, str]]:
    return list(csv.DictReader(ln for ln in PUBLISHED.read_text().splitlines() if not ln.startswith("#")))


# ---------------------------------------------------------------- statistics


def test_summarize_by_hand():
    s = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.median, s.min, s.max, s.n) == (3.0, 1.0, 5.0, 5)
    # numpy linear interpolation: p10 at position 0.4 between 1 and 2, p90 at 3.6 between 4 and 5
    assert s.p10 == pytest.approx(1.4) and s.p90 == pytest.approx(4.6)
    assert s.spread == pytest.approx((4.6 - 1.4) / 3.0)
    assert s.noisy


def test_quiet_times_are_not_noisy():
    s = summarize([1.0, 1.01, 0.99, 1.0, 1.02])
    assert s.spread < NOISY_SPREAD and not s.noisy


@given(st.lists(st.floats(1e-7, 10.0), min_size=1, max_size=50))
def test_summary_is_ordered(times):
    s = summarize(times)
    assert s.min <= s.p10 <= s.median <= s.p90 <= s.max


def test_busbw_factor_by_hand():
    assert allreduce_busbw_factor(2) == 1.0
    assert allreduce_busbw_factor(8) == 1.75
    assert allreduce_busbw_factor(1) == 0.0


# ---------------------------------------------------------------- results CSV


def test_writer_appends_and_flushes_each_row(tmp_path):
    out = tmp_path / "r.csv"
    w = ResultWriter(out, ALLREDUCE_COLUMNS, ["host: h", "torch: 9"])
    w.append({"collective": "all_reduce", "world_size": 2, "bytes": 1024, "time_s": 1e-3})
    # visible on disk before close: a run that dies keeps it
    comments, rows = read_results(out)
    assert comments == ["host: h", "torch: 9"]
    assert rows[0]["bytes"] == "1024" and rows[0]["time_p10_s"] == ""
    w.close()


def test_writer_never_clobbers_without_force(tmp_path):
    out = tmp_path / "r.csv"
    out.write_text("precious\n")
    with pytest.raises(InputError, match="--force"):
        ResultWriter(out, ALLREDUCE_COLUMNS, [])
    assert out.read_text() == "precious\n"
    w = ResultWriter(out, ALLREDUCE_COLUMNS, [], force=True)
    w.close()  # nothing measured: the old file stays, no empty file replaces it
    assert out.read_text() == "precious\n"
    with ResultWriter(out, ALLREDUCE_COLUMNS, [], force=True) as w:
        w.append({"collective": "all_reduce", "world_size": 2, "bytes": 8, "time_s": 1e-6})
    assert out.read_text().startswith("collective,")


# ---------------------------------------------------------------- nccl-tests import


@pytest.mark.parametrize("name", ["all_reduce_perf_8xA100.txt", "all_reduce_perf_8xA100.json"])
def test_import_matches_the_published_measurement(name):
    recs = parse_nccl_tests(FIX / name)
    pub = _published()
    assert len(recs) == len(pub)
    for r, p in zip(recs, pub):
        assert r["collective"] == "all_reduce" and r["backend"] == "nccl"
        assert r["world_size"] == 8 and r["dtype"] == "fp32" and r["iters"] == 50
        assert r["bytes"] == int(p["bytes"]) and r["count"] == int(p["bytes"]) // 4
        assert r["time_s"] == pytest.approx(float(p["time_us"]) * 1e-6, rel=1e-3)
        assert r["algbw_GBps"] == pytest.approx(float(p["algbw_GBps"]))
        assert r["busbw_GBps"] == pytest.approx(float(p["busbw_GBps"]))
        # nccl-tests' own definitions hold in the imported rows (2-decimal rounding aside)
        assert r["algbw_GBps"] == pytest.approx(r["bytes"] / r["time_s"] / 1e9, rel=0.02, abs=0.01)
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * 1.75, rel=0.02, abs=0.01)


def test_import_world_size_from_busbw_ratio_and_prefixes(tmp_path):
    lines = [ln for ln in (FIX / "all_reduce_perf_8xA100.txt").read_text().splitlines() if "Rank" not in ln]
    f = tmp_path / "srun.txt"
    f.write_text("\n".join(ln if ln.startswith("#") else "0: " + ln for ln in lines) + "\n")
    recs = parse_nccl_tests(f)
    assert recs[0]["world_size"] == 8 and len(recs) == 11
    assert parse_nccl_tests(f, world_size=8)[0]["world_size"] == 8
    # a --world-size that the rows' busbw / algbw = 2(k-1)/k contradicts is refused (simcli.io.rules, issue 40)
    with pytest.raises(InputError, match=r"busbw 1.31 GB/s is not algbw x 1.875"):
        parse_nccl_tests(f, world_size=16)


def test_import_json_per_iteration_times(tmp_path):
    doc = json.loads((FIX / "all_reduce_perf_8xA100.json").read_text())
    doc["results"] = doc["results"][:1]
    doc["results"][0]["out_of_place_per_iter"] = {"times_us": [40.0, 50.0, 45.0, 41.0, 60.0]}
    f = tmp_path / "per_iter.json"
    f.write_text(json.dumps(doc))
    (r,) = parse_nccl_tests(f)
    assert r["time_s"] == pytest.approx(45e-6)
    assert r["time_p10_s"] < r["time_s"] < r["time_p90_s"]
    assert r["algbw_GBps"] == pytest.approx(32768 / 45e-6 / 1e9)


@pytest.mark.parametrize(
    "content, match",
    [
        ("", "no nccl-tests result rows"),
        ("# just a comment\nhello world\n", "no nccl-tests result rows"),
        ("{not json", "not valid JSON"),
        ('{"results": 3}', "no 'results' list"),
        ('{"results": [{"size": 1}]}', "results\\[0\\]"),
    ],
)
def test_import_bad_files(tmp_path, content, match):
    f = tmp_path / "bad.txt"
    f.write_text(content)
    with pytest.raises(InputError, match=match):
        parse_nccl_tests(f)


_A100 = FIX / "all_reduce_perf_8xA100.txt"


def test_text_placements_read_their_own_columns_and_name_a_header_without_them():
    text = _A100.read_text()
    out, inp = parse_text(text, "a.txt", placement="out"), parse_text(text, "a.txt", placement="in")
    assert len(out) == len(inp) == 11 and out[0]["world_size"] == 8
    assert out[2]["time_s"] == pytest.approx(101.90e-6) and out[2]["busbw_GBps"] == pytest.approx(18.00)
    # a column header with one placement only: in-place is refused with the fix, out-of-place reads
    one = "\n".join(
        line.split("  time ")[0] + "  time   algbw   busbw  #wrong" if "size         count" in line else line
        for line in text.splitlines()
    )
    assert len(parse_text(one, "a.txt", placement="out")) == 11
    with pytest.raises(InputError) as e:
        parse_text(one, "a.txt", placement="in")
    assert str(e.value) == "a.txt: the column header has no in-place columns (one 'time' only); pass --placement out"
    no_time = text.replace("  time   algbw", "  tyme   algbw")
    with pytest.raises(InputError) as e:
        parse_text(no_time, "a.txt")
    assert str(e.value).startswith("a.txt: the column header has no 'time' column: size count type redop root tyme")
    neg = "   -8  -2  float  sum  -1  10.0  1.0  1.0  0  10.0  1.0  1.0  0\n"
    with pytest.raises(InputError) as e:
        parse_text(neg, "n.txt")
    assert str(e.value) == "n.txt:1: size -8 and count -2 must be >= 0"


def test_import_cli_csv_and_errors(runner, tmp_path):
    out = tmp_path / "imported.csv"
    r = runner.invoke(app, ["bench", "import", str(FIX / "all_reduce_perf_8xA100.txt"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    comments, rows = read_results(out)
    assert any("nccl-tests" in c for c in comments)
    assert list(rows[0]) == list(ALLREDUCE_COLUMNS)
    assert [int(x["bytes"]) for x in rows] == [int(p["bytes"]) for p in _published()]
    r = runner.invoke(app, ["bench", "import", str(FIX / "all_reduce_perf_8xA100.txt"), "-o", str(out)])
    assert r.exit_code == 2 and "--force" in r.output
    r = runner.invoke(app, ["bench", "import", str(tmp_path / "missing.txt")])
    assert r.exit_code == 2 and "no such file" in r.output
    r = runner.invoke(app, ["bench", "import", str(FIX / "all_reduce_perf_8xA100.json"), "-f", "json"])
    assert r.exit_code == 0
    assert json.loads(r.stdout)[-1]["busbw_GBps"] == 234.89


# ---------------------------------------------------------------- CLI input errors (no ranks started)


@pytest.mark.parametrize(
    "args, match",
    [
        (["bench", "allreduce", "--world-sizes", "0"], "--world-sizes"),
        (["bench", "allreduce", "--size", "2B"], "less than one fp32 element"),
        (["bench", "allreduce", "--dtype", "fp7"], "--dtype"),
        (["bench", "allreduce", "--world-sizes", "64"], "--oversubscribe"),
        (["bench", "step", "--world-sizes", "1..2..3"], "--world-sizes"),
        (["bench", "step", "--params", "0"], "--params"),
        (["bench", "step", "--profile", "nosuchprofile"], "unknown profile"),
    ],
)
def test_bad_input_exits_2_before_starting_ranks(runner, args, match):
    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output
    assert match in r.output and "Traceback" not in r.output


def test_the_bench_option_groups_are_declared_once_and_reach_their_commands():
    """WorldOptions reach both measuring commands, ModelShapeOptions bench step; their values build the model."""
    import dataclasses

    import typer

    from simcli.bench.models import ModelSpec
    from simcli.bench.step import mlp_width_for_params
    from simcli.cli.bench_options import ModelShapeOptions, WorldOptions

    bench = typer.main.get_command(app).commands["bench"]
    for name, groups in (("allreduce", [WorldOptions]), ("step", [WorldOptions, ModelShapeOptions])):
        params = {p.name: p for p in bench.commands[name].params}
        for g in groups:
            missing = [f.name for f in dataclasses.fields(g) if f.name not in params]
            assert not missing, (name, g.__name__, missing)
        assert params["warmup"].default == (5 if name == "allreduce" else 3)
    assert ModelShapeOptions().spec(32) == ModelSpec()
    assert ModelShapeOptions(old_width=64).spec(32) == ModelSpec(width=64)  # --width: --model-width's old spelling
    assert ModelShapeOptions(params=1e6, depth=4).spec(32).width == mlp_width_for_params(1e6, 4)
    assert ModelShapeOptions(model="resnet", blocks="3,4,6,3").spec(2).blocks == (3, 4, 6, 3)
    with pytest.raises(InputError, match="--width and --model-width"):
        ModelShapeOptions(width=4, old_width=3)


def test_busy_port_is_refused(runner):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = runner.invoke(app, ["bench", "allreduce", "--port", str(port), "--world-sizes", "2"])
    assert r.exit_code == 2 and f"127.0.0.1:{port} is busy" in r.output


def test_missing_torch_says_how_to_install(runner, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    for cmd in (["bench", "allreduce"], ["bench", "step"]):
        r = runner.invoke(app, cmd)
        assert r.exit_code == 2
        assert "pip install 'simcli[bench]'" in r.output and len(r.output.strip().splitlines()) == 1


def test_torchrun_world_size_must_match(runner, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    r = runner.invoke(app, ["bench", "allreduce", "--world-sizes", "4"])
    assert r.exit_code == 2 and "WORLD_SIZE=2" in r.output


def test_help_and_cli_do_not_import_torch():
    import subprocess
    import sys

    code = (
        "import sys; from typer.testing import CliRunner; from simcli.cli import app; "
        "r = CliRunner().invoke(app, ['bench', '--help']); assert r.exit_code == 0; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("name", ["all_reduce_perf_8xA100.txt", "all_reduce_perf_8xA100.json"])
def test_import_records_gpus_per_process(name, tmp_path, runner):
    """nccl-tests' nGpus (-g 8: one process launching on 8 GPUs) travels into the rows, which validate reads."""
    recs = parse_nccl_tests(FIX / name)
    assert {r["gpus_per_process"] for r in recs} == {8}
    out = tmp_path / "imported.csv"
    r = runner.invoke(app, ["bench", "import", str(FIX / name), "-o", str(out)])
    assert r.exit_code == 0, r.output
    from simcli.io.measured.table import read_measurements

    assert set(read_measurements(out).number("gpus_per_process")) == {8.0}


def test_step_table_never_shows_a_negative_rest():
    """compute and step are timed in separate loops: a step faster than compute alone reads '~0', explained."""
    from simcli.cli.bench import _step_table
    from simcli.io.render import render_text

    base = {"backend": "gloo", "mode": "ddp", "t_comm_s": 0.002, "speedup": 1.0, "efficiency": 1.0}
    rows = [
        {**base, "world_size": 1, "t_compute_s": 0.0100, "t_step_s": 0.0104},
        {**base, "world_size": 2, "t_compute_s": 0.0110, "t_step_s": 0.0108},  # step < compute: noise
    ]
    text = render_text(_step_table(rows, "cpu-loopback", "gloo"), width=200)
    body = [line for line in text.splitlines() if "│" in line]
    heads = [c.strip() for c in next(line for line in text.splitlines() if "┃" in line).split("┃")]
    j = heads.index("+ rest ms")
    assert [line.split("│")[j].strip() for line in body] == ["0.4", "~0"]
    assert "~0: the step was timed no slower than compute alone" in " ".join(text.split())
    text = render_text(_step_table(rows[:1], "cpu-loopback", "gloo"), width=200)
    assert "~0" not in text
