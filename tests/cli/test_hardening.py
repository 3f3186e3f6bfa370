"""Issue 12 part 2: each class of bad input ends in one InputError line (exit 2) or one environment line
(exit 1), caught in the shared mechanism (ranges/units, inputs.read_text, output.write_atomic, the YAML
loader, the workload builder, the scenario). Each test here failed before its fix."""

from __future__ import annotations

import os

import pytest

from simcli.base.types import InputError

# --------------------------------------------------------------------------- numbers beyond int64


@pytest.mark.parametrize(
    "text",
    ["99999999999999999999999", "1..99999999999999999999999", "1..99999999999999999999999:x2", "9007199254740993"],
)
def test_device_counts_beyond_the_model_are_input_errors(text):
    from simcli.base.ranges import parse_devices

    with pytest.raises(InputError, match=r"--devices: .*more than simcli models"):
        parse_devices(text)


@pytest.mark.parametrize("text", ["1e23TiB", "1KiB..1e23TiB:x2", "1e19", "5EiB"])
def test_sizes_beyond_int64_are_input_errors(text):
    from simcli.base.ranges import parse_sizes

    with pytest.raises(InputError, match=r"--size: .*more than simcli models"):
        parse_sizes(text)


def test_largest_geometric_ranges_stay_exact():
    from simcli.base.ranges import MAX_BYTES, MAX_DEVICES, parse_devices, parse_sizes

    assert parse_devices(f"1..{MAX_DEVICES}:x2")[-1] == MAX_DEVICES
    assert parse_sizes("1..4EiB:x2")[-1] == MAX_BYTES


# --------------------------------------------------------------------------- nccl-tests' size syntax


@pytest.mark.parametrize(
    "text,expected",
    [("1G", 2**30), ("16g", 16 * 2**30), ("512M", 512 * 2**20), ("8", 8), ("4k", 4096), ("1K", 1024), ("1GB", 1e9)],
)
def test_nccl_tests_size_syntax_is_binary(text, expected):
    from simcli.base.units import parse

    assert parse(text, "bytes") == expected


def test_nccl_tests_size_range():
    from simcli.base.ranges import parse_sizes

    assert parse_sizes("8..16G:x1024").tolist() == [8, 8 * 2**10, 8 * 2**20, 8 * 2**30]


# --------------------------------------------------------------------------- zero and negative lengths


@pytest.mark.parametrize("seq", [-5, 0, 1.5])
@pytest.mark.parametrize("model", ["gpt2", "resnet50"])
def test_seq_len_below_one_is_refused_at_the_workload_builder(seq, model):
    from simcli.io.workloads import build_workload

    with pytest.raises(InputError, match=r"^--seq-len: .*at least 1"):
        build_workload(model=model, seq_len=seq)


def test_seq_len_refused_for_workload_files_too(tmp_path):
    from simcli.io.workloads import build_workload

    f = tmp_path / "w.yaml"
    f.write_text("name: w\nkind: transformer\nparams: 1e6\nseq_len: 128\n")
    with pytest.raises(InputError, match="--seq-len"):
        build_workload(workload_file=str(f), seq_len=0)
    assert build_workload(workload_file=str(f), seq_len=7).seq_len == 7


@pytest.mark.parametrize("args", [["--seq-len", "-5"], ["--seq-len", "0"]])
@pytest.mark.parametrize("cmd", [["speedup"], ["explain", "-k", "8"]])
def test_cli_negative_seq_len_exits_2(runner, cmd, args):
    from simcli.cli import app

    r = runner.invoke(app, [*cmd, "--model", "gpt2", *args])
    assert r.exit_code == 2 and "--seq-len" in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("mb", [1e-320, 1e-300, 1e-4])
def test_absurdly_small_buckets_are_refused(two_tier, mb):
    from simcli.io.workloads import build_workload
    from simcli.step.engine import Scenario

    with pytest.raises(InputError, match=r"--bucket-mb: .*1 KiB"):
        Scenario(profile=two_tier, workload=build_workload(model="resnet50"), bucket_mb=mb)


def test_one_kib_bucket_is_allowed(two_tier):
    import numpy as np

    from simcli.io.workloads import build_workload
    from simcli.step.engine import MIN_BUCKET_MB, Scenario, simulate

    w = build_workload(model="resnet50")
    sc = Scenario(profile=two_tier, workload=w, bucket_mb=MIN_BUCKET_MB)
    res = simulate(sc, [1, 8])
    # the boundary itself is taken and planned as 1 KiB buckets: gradient bytes / 1024 of them
    assert res.plan.size == 1024 and res.plan.full == int(sc.grad_bytes // 1024)
    # and priced: finite, with more latency than DDP's 25 MiB buckets at k = 8 (each bucket pays alpha)
    default = simulate(Scenario(profile=two_tier, workload=w), [1, 8])
    assert np.all(np.isfinite(res.t_step_s)) and res.t_comm_s[1] > default.t_comm_s[1]
    with pytest.raises(InputError, match="--bucket-mb"):  # just below it is refused
        Scenario(profile=two_tier, workload=w, bucket_mb=MIN_BUCKET_MB * 0.999)


# --------------------------------------------------------------------------- files that are not regular files


def test_read_text_refuses_devices_at_open():
    """Issue 27 replaces issue 12's bounded read of a device: a device is not a file, refused before any read."""
    from simcli.io.inputs import read_text

    for dev in ("/dev/zero", "/dev/urandom"):
        with pytest.raises(InputError, match=rf"^{dev}: is a character device, not a file; give a profile"):
            read_text(dev, "a profile", max_bytes=1024)


def test_read_text_stops_an_anonymous_pipe_at_the_limit():
    """A shell's <(...) is an anonymous pipe with a writer: read, but never past the limit."""
    import threading

    from simcli.io.inputs import read_text

    r, w = os.pipe()
    stop = threading.Event()

    def writer():  # an endless writer: only a bounded read returns
        try:
            with os.fdopen(w, "wb") as f:
                while not stop.is_set():
                    f.write(b"a: 1\n" * 1000)
        except (BrokenPipeError, OSError):
            pass

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        with pytest.raises(InputError, match="too large"):
            read_text(f"/proc/self/fd/{r}", "a profile", max_bytes=4096)
    finally:
        stop.set()
        os.close(r)
        t.join(5)


def test_profiles_validate_dev_zero_exits_2(runner):
    from simcli.cli import app

    r = runner.invoke(app, ["profiles", "validate", "/dev/zero"])
    assert r.exit_code == 2 and "is a character device, not a file" in r.stderr


# --------------------------------------------------------------------------- duplicated YAML keys


@pytest.mark.parametrize(
    "text,line,first",
    [
        ("name: x\ndevice:\n  mfu: 0.4\n  mfu: 0.5\n", 4, 3),
        ("a: {b: 1, b: 2}\n", 1, 1),
        ("name: x\nname: y\n", 2, 1),
        ("net:\n  - {name: a, size: 8}\n  - name: b\n    size: 2\n    size: 3\n", 5, 4),
    ],
)
def test_duplicated_yaml_keys_are_refused_naming_the_line(tmp_path, text, line, first):
    from simcli.io.profiles import read_yaml

    f = tmp_path / "p.yaml"
    f.write_text(text)
    with pytest.raises(InputError, match=rf"line {line}: key .* twice .*first on line {first}"):
        read_yaml(f)


def test_same_keys_in_different_mappings_are_fine(tmp_path):
    from simcli.io.profiles import read_yaml

    f = tmp_path / "p.yaml"
    f.write_text("a:\n  - {b: 1, c: 2}\n  - {b: 1, c: 2}\nd: [1, 1]\ne: {f: {b: 1}, g: {b: 2}}\n")
    assert read_yaml(f)["e"] == {"f": {"b": 1}, "g": {"b": 2}}


# --------------------------------------------------------------------------- outputs


def test_a_named_pipe_is_written_into_never_renamed_over(tmp_path):
    import stat

    from simcli.io.files import write_atomic

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the reader is there before simcli opens the pipe
    write_atomic(fifo, "hello\n", force=True)  # six bytes: the pipe's buffer holds them, the write returns
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as r:
        assert r.read() == b"hello\n"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still the pipe, not a regular file
    assert sorted(os.listdir(tmp_path)) == ["fifo"]


def test_a_socket_target_is_refused(tmp_path):
    import socket

    from simcli.io.files import write_atomic

    path = tmp_path / "s"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    try:
        with pytest.raises(InputError, match="is a socket"):
            write_atomic(path, "x", force=True)
    finally:
        sock.close()


def test_a_symlink_is_kept_and_its_file_replaced(tmp_path):
    from simcli.io.files import write_atomic

    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    write_atomic(link, "new", force=True)
    assert link.is_symlink() and real.read_text() == "new"


def test_output_that_is_an_input_is_refused(tmp_path):
    from simcli.io.files import check_output_path, write_atomic

    m = tmp_path / "m.csv"
    m.write_text("measurements\n")
    with pytest.raises(InputError, match=r"--output: .* is also an input"):
        write_atomic(tmp_path / "." / "m.csv", "yaml", force=True, inputs=[str(m)])
    assert m.read_text() == "measurements\n"
    alias = tmp_path / "alias.csv"
    alias.symlink_to(m)
    with pytest.raises(InputError, match="is also an input"):
        check_output_path(alias, True, inputs=[None, m])
    assert check_output_path(tmp_path / "other.csv", False, inputs=[m]).name == "other.csv"


def test_path_under_a_regular_file_is_one_line_exit_1(tmp_path, runner):
    from simcli.base.types import EnvironmentFailure
    from simcli.cli import app
    from simcli.io.files import write_atomic

    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(EnvironmentFailure, match="cannot write it .*is a file, not a directory"):
        write_atomic(f / "out.csv", "data")
    r = runner.invoke(app, ["speedup", "-k", "8", "-o", str(f / "out.csv")])
    assert r.exit_code == 1 and r.stderr.count("\n") == 1 and "is a file, not a directory" in r.stderr
    assert f.read_text() == "x"


@pytest.mark.parametrize("err", ["ENOSPC", "EROFS", "EACCES", "EIO"])
@pytest.mark.parametrize("where", ["fsync", "mkstemp"])
def test_refused_writes_are_environment_failures_and_leave_nothing(tmp_path, monkeypatch, err, where):
    import errno
    import tempfile

    from simcli.base.types import EnvironmentFailure
    from simcli.io.files import write_atomic

    def fail(*a, **k):
        raise OSError(getattr(errno, err), os.strerror(getattr(errno, err)))

    monkeypatch.setattr(os if where == "fsync" else tempfile, where, fail)
    with pytest.raises(
        EnvironmentFailure, match=rf"--output: .*out.csv: cannot write it \({os.strerror(getattr(errno, err))}\)"
    ) as e:
        write_atomic(tmp_path / "out.csv", "data\n" * 100)
    assert e.value.exit_code == 1
    assert os.listdir(tmp_path) == []


def test_write_stdout_closed_full_and_ascii(monkeypatch):
    import errno
    import io

    from simcli.base.types import EnvironmentFailure
    from simcli.io.stdout import StdoutClosed, write_stdout

    with pytest.raises(StdoutClosed):
        _closed_stdout(monkeypatch, write_stdout)

    class Full(io.StringIO):
        def flush(self):
            raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(EnvironmentFailure, match="standard output: cannot write it"):
        write_stdout("x", stream=Full())
    buf = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    write_stdout("α = 3 µs · 2\n", stream=buf)
    buf.seek(0)
    assert buf.read() == "alpha = 3 us * 2\n"


def _closed_stdout(monkeypatch, write_stdout):
    import sys

    monkeypatch.setattr(sys, "stdout", None)  # what Python gives a process started with >&-
    write_stdout("x")


# --------------------------------------------------------------------------- progressive bench results


def test_result_rows_are_whole_or_absent_when_the_disk_fills(tmp_path, monkeypatch):
    import errno

    from simcli.base.types import EnvironmentFailure
    from simcli.io.measured.results import ALLREDUCE_COLUMNS, ResultWriter, read_results

    out = tmp_path / "r.csv"
    w = ResultWriter(out, ALLREDUCE_COLUMNS, ["backend: gloo"])
    row = {"collective": "all_reduce", "world_size": 2, "bytes": 1024, "time_s": 1e-3, "source": "x" * 40}
    w.append(row)
    w.append(row)
    real_write = os.write

    def short_then_full(fd, data):  # the disk takes half a line, then refuses
        if fd == w._fd and len(data) > 10:
            real_write(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", short_then_full)
    with pytest.raises(EnvironmentFailure, match="No space left"):
        w.append(row)
    monkeypatch.undo()
    w.close()
    text = out.read_text()
    assert text.endswith("\n") and len(read_results(out)[1]) == 2
    assert len(w.rows) == 3  # the measurement is not lost: the caller still has it


def test_no_empty_results_file_is_left(tmp_path, monkeypatch):
    import errno

    from simcli.base.types import EnvironmentFailure
    from simcli.io.measured.results import ALLREDUCE_COLUMNS, ResultWriter

    out = tmp_path / "r.csv"
    ResultWriter(out, ALLREDUCE_COLUMNS, ["x"]).close()  # nothing measured
    assert not out.exists()

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    w = ResultWriter(out, ALLREDUCE_COLUMNS, ["x"])
    monkeypatch.setattr(os, "write", full)
    with pytest.raises(EnvironmentFailure):
        w.append({"bytes": 8})
    monkeypatch.undo()
    assert not out.exists()


# --------------------------------------------------------------------------- nccl-tests import


def _fixture(ext):
    from pathlib import Path

    return (Path(__file__).parents[1] / "fixtures" / f"all_reduce_perf_8xA100.{ext}").read_text()


def _txt_case(name):
    txt = _fixture("txt")
    lines = txt.splitlines()
    row = "   43.83    0.75    1.31       0    43.83"
    return {
        "cut_after_a_row": "\n".join(lines[:20]) + "\n",
        "cut_mid_row": "\n".join(lines[:19]) + "\n" + lines[19][:70] + "\n",
        "negative_time": txt.replace(row, "  -43.83    0.75    1.31       0    43.83", 1),
        "zero_time": txt.replace(row, "    0.00    0.75    1.31       0    43.83", 1),
        "wrong": txt.replace("   61.38    4.27    7.47       0", "   61.38    4.27    7.47       3", 1),
        "no_in_place": "\n".join(ln if ln.startswith("#") else ln[:-34] for ln in lines) + "\n",
    }[name]


@pytest.mark.parametrize(
    "case,placement,match",
    [
        ("cut_after_a_row", "out", r"cut before its end .*size 1048576"),
        ("cut_mid_row", "out", r":20: the row is cut short .*out-of-place columns"),
        ("negative_time", "out", r":18: time -43.83 us is not a positive time"),
        ("zero_time", "out", r":18: time 0 us is not a positive time"),
        ("wrong", "out", r":19: size 262144: nccl-tests counted 3 wrong results"),
        ("no_in_place", "in", r":18: the row is cut short .*in-place columns"),
    ],
)
def test_nccl_tests_text_is_checked(tmp_path, case, placement, match):
    from simcli.io.measured.nccltests import parse_nccl_tests

    f = tmp_path / "perf.txt"
    f.write_text(_txt_case(case))
    with pytest.raises(InputError, match=match):
        parse_nccl_tests(f, placement=placement)


def test_nccl_tests_validation_off_is_accepted(tmp_path):
    from simcli.io.measured.nccltests import parse_nccl_tests

    f = tmp_path / "perf.txt"
    f.write_text(_fixture("txt").replace("1.31       0", "1.31     N/A"))
    assert len(parse_nccl_tests(f)) == 11


def _json_case(name):
    import copy
    import json

    doc = json.loads(_fixture("json"))
    d = copy.deepcopy(doc)
    r2 = d["results"][2]
    {
        "result_is_a_list": lambda: d["results"].__setitem__(0, [1, 2]),
        "devices_an_int": lambda: d["config"].__setitem__("devices", 8),
        "config_a_list": lambda: d.__setitem__("config", [1]),
        "none_time": lambda: r2["out_of_place"].__setitem__("time", None),
        "none_size": lambda: r2.__setitem__("size", None),
        "negative_time": lambda: r2["out_of_place"].__setitem__("time", -1),
        "zero_time": lambda: r2["out_of_place"].__setitem__("time", 0),
        "wrong": lambda: r2["out_of_place"].__setitem__("nwrong", 2),
        "no_out_of_place": lambda: r2.pop("out_of_place"),
        "placement_a_string": lambda: r2.__setitem__("out_of_place", "x"),
        "no_bus_bw": lambda: r2["out_of_place"].pop("bus_bw"),
        "per_iter_none": lambda: r2.__setitem__("out_of_place_per_iter", {"times_us": [1.0, None]}),
    }[name]()
    return json.dumps(d)


@pytest.mark.parametrize(
    "case,match",
    [
        ("result_is_a_list", r"results\[0\]: expected a mapping .*got \[1, 2\]"),
        ("devices_an_int", r"config.devices: expected a list of devices, got 8"),
        ("config_a_list", r"config: expected a mapping"),
        ("none_time", r"results\[2\].out_of_place.time: null is not a number"),
        ("none_size", r"results\[2\].size: null is not a number"),
        ("negative_time", r"results\[2\].out_of_place: time -1 us is not a positive time"),
        ("zero_time", r"results\[2\].out_of_place: time 0 us"),
        ("wrong", r"results\[2\].*counted 2 wrong results"),
        ("no_out_of_place", r"results\[2\]: no out_of_place \(out-of-place\) timings; .*--placement in"),
        ("placement_a_string", r"results\[2\].out_of_place: expected a mapping"),
        ("no_bus_bw", r"results\[2\].out_of_place: missing field 'bus_bw'"),
        ("per_iter_none", r"times_us\[1\]: null is not a number"),
    ],
)
def test_nccl_tests_json_shapes_are_checked(tmp_path, case, match):
    from simcli.io.measured.nccltests import parse_nccl_tests

    f = tmp_path / "perf.json"
    f.write_text(_json_case(case))
    with pytest.raises(InputError, match=match) as e:
        parse_nccl_tests(f)
    assert "NoneType" not in str(e.value) and "object" not in str(e.value)


def test_nccl_tests_json_cut_mid_run(tmp_path):
    from simcli.io.measured.nccltests import parse_nccl_tests

    f = tmp_path / "perf.json"
    f.write_text(_fixture("json")[:3000])
    with pytest.raises(InputError, match="not valid JSON .*cut mid-run"):
        parse_nccl_tests(f)


# --------------------------------------------------------------------------- typer's own errors, one line


@pytest.mark.parametrize(
    "args,line",
    [
        (["bench", "allreduce", "--iters", "0"], "simcli: error: --iters: 0 is below the minimum 1"),
        (["bench", "allreduce", "--iters=-3"], "simcli: error: --iters: -3 is below the minimum 1"),
        (["bench", "allreduce", "-n0"], "simcli: error: --iters: 0 is below the minimum 1"),
        (["bench", "step", "--mode", "weird"], "simcli: error: --mode: 'weird' is not one of 'flat', 'ddp', 'both'"),
        (["explain", "-k", "1..8"], "simcli: error: --devices: '1..8' is not a whole number"),
        (["speedup", "-f", "yaml"], "simcli: error: --format: 'yaml' is not one of 'table', 'csv', 'json'"),
        (["speedup", "--mfu", "abc"], "simcli: error: --mfu: 'abc' is not a number"),
        (["speedup", "--foo"], "simcli: error: --foo: no such option"),
        (["nosuch"], "simcli: error: nosuch: no such command; see 'simcli -h'"),
        (["speedu"], "simcli: error: speedu: no such command (did you mean speedup?); see 'simcli -h'"),
        (["profiles", "lst"], "simcli: error: lst: no such command (did you mean list?)"),
        (["calibrate"], "simcli: error: files: required; see 'simcli calibrate -h'"),
        (["speedup", "extra"], "simcli: error: extra: unexpected argument"),
        (["speedup", "-k"], "simcli: error: -k: needs a value"),
    ],
)
def test_usage_errors_are_one_line_exit_2(runner, args, line):
    from simcli.cli import app

    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith(line) and r.stderr.count("\n") == 1, r.stderr
    assert "Usage:" not in r.output and "Traceback" not in r.output


def test_group_alone_still_shows_its_help(runner):
    from simcli.cli import app

    r = runner.invoke(app, ["bench"])
    # a group named alone shows its help with the usage status (2, as click's no_args_is_help): never an error line
    assert r.exit_code == 2, r.output
    assert "allreduce" in r.output and "Usage:" in r.output and "simcli: error" not in r.output
    assert "Traceback" not in r.output


# --------------------------------------------------------------------------- stdout that fails


def test_closed_stdout_is_one_line_exit_1():
    import subprocess
    import sys

    p = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, sys; os.close(1); sys.argv=['simcli','speedup','-k','8'];from simcli.cli import main; main()",
        ],
        capture_output=False,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    assert p.returncode == 1 and p.stderr.strip() == (
        "simcli: error: standard output is closed; nothing can be printed (use --output FILE)"
    )


def test_stdout_on_a_full_device_is_one_line_exit_1():
    import subprocess
    import sys

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:  # a redirect (> /dev/full): simcli writes into it, never replaces it
        p = subprocess.run(
            [sys.executable, "-m", "simcli", "speedup", "-k", "1..64", "-f", "csv"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert p.returncode == 1
    # the model's own notes (NCCL's choice at partial nodes, issue 21) may come before the error
    lines = [x for x in p.stderr.strip().splitlines() if "NCCL's own choice" not in x]
    assert lines == [
        "simcli: error: standard output: cannot write it (No space left on device); free some space or write elsewhere"
    ]


def test_broken_pipe_is_quiet():
    import subprocess
    import sys

    # more than a chunk of k: the rows stream out chunk by chunk (chunks of 1,000 rather than 100,000 here, so that
    # the reader's close lands after ~2 chunks' work, not 23 s of it)
    code = (
        "import sys, simcli.cli.speedup as sp; sp.STREAM_CHUNK = 1000\n"
        "sys.argv = ['simcli', 'speedup', '-k', '1..200000', '-f', 'csv']\n"
        "from simcli.cli import main; main()"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.read(100)
    p.stdout.close()
    err = p.stderr.read().decode()
    p.wait(120)
    assert err == ""


@pytest.mark.parametrize(
    "env", [{"PYTHONIOENCODING": "ascii"}, {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}]
)
def test_stdout_that_is_not_utf8_gets_ascii_spellings(env):
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-m", "simcli", "explain", "-k", "8"],
        capture_output=True,
        env={**os.environ, **env},
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode("ascii")  # every byte is ASCII
    assert "alpha" in out and "Traceback" not in p.stderr.decode()


# --------------------------------------------------------------------------- calibration on a busy machine


def test_rounds_interleave_sizes_in_a_shuffled_order_the_same_on_every_rank():
    from simcli.bench.allreduce import auto_rounds, round_plan

    plan = round_plan(5, iters=10, rounds=auto_rounds(10), seed=0)
    assert len(plan) == 10 and plan == round_plan(5, 10, 10, seed=0)  # pure: every rank agrees
    assert all(sorted(i for i, _ in visits) == list(range(5)) for visits in plan)
    assert len({tuple(i for i, _ in visits) for visits in plan}) > 1  # the order changes between rounds
    per_size = [sum(n for visits in plan for i, n in visits if i == s) for s in range(5)]
    assert per_size == [10] * 5
    assert [[i for i, _ in v] for v in round_plan(3, 7, 1)] == [[0, 1, 2]]  # one round: sizes in order
    assert sum(n for v in round_plan(2, 7, 3) for i, n in v if i == 0) == 7


def test_statistics_and_noise():
    from simcli.io.measured.stats import DEFAULT_STAT, STATS, summarize

    s = summarize([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 11.0])  # one preempted iteration
    assert s.stat("min") == 1.0 and s.stat("p10") == 1.0 and s.stat("median") == 1.0 and s.stat("mean") == 2.0
    assert s.noise == pytest.approx(2.0) and DEFAULT_STAT in STATS
    with pytest.raises(ValueError):
        s.stat("p99")


def test_json_results_file_is_valid_after_every_row(tmp_path):
    import json

    from simcli.io.measured.results import ALLREDUCE_COLUMNS, ResultWriter

    out = tmp_path / "r.json"
    with ResultWriter(out, ALLREDUCE_COLUMNS, ["x"], fmt="json") as w:
        for i in range(3):
            w.append({"bytes": i, "times_s": [1.0, float("nan")]})
            assert [r["bytes"] for r in json.loads(out.read_text())] == list(range(i + 1))
    assert json.loads(out.read_text())[0]["times_s"] == [1.0, None]


def test_bench_allreduce_refuses_a_closed_stdout_before_measuring():
    import subprocess
    import sys

    p = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, sys; os.close(1); sys.argv=['simcli','bench','allreduce',"
            "'-k','2','-s','1KiB','--iters','1','-f','json']; from simcli.cli import main; main()",
        ],
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    assert p.returncode == 1 and "measurements would be lost; give --output FILE" in p.stderr
    assert "world size" not in p.stderr  # refused before any world was started


# ----------------------------------------------------------------- CLI: whole numbers past 2**53, outputs over inputs


@pytest.mark.parametrize(
    "args,option",
    [
        (["explain", "-k", "100000000000000000000"], "--devices"),
        (["speedup", "--batch-per-device", "99999999999999999999999"], "--batch-per-device"),
        (["speedup", "--accum", "99999999999999999999999"], "--accum"),
        (["bench", "allreduce", "--iters", "99999999999999999999999"], "--iters"),
    ],
)
def test_whole_number_options_past_2_53_are_one_line(runner, args, option):
    from simcli.cli import app

    r = runner.invoke(app, args)
    assert r.exit_code == 2 and r.stderr.startswith(f"simcli: error: {option}: {args[-1]} is more than simcli models")
    assert r.stderr.count("\n") == 1


def test_calibrate_refuses_its_measurements_as_the_output(runner, tmp_path):
    from pathlib import Path

    from simcli.cli import app

    m = tmp_path / "m.csv"
    m.write_text((Path(__file__).parents[2] / "validation" / "cpu-loopback" / "busy1.csv").read_text())
    before = m.read_text()
    r = runner.invoke(app, ["calibrate", str(m), "-o", str(m), "--force", "--profile", "cpu-loopback"])
    assert r.exit_code == 2 and "is also an input" in r.stderr
    assert m.read_text() == before


def test_any_command_refuses_to_write_over_a_file_it_read(runner, prof, tmp_path):
    from pathlib import Path

    from simcli.cli import app

    before = Path(prof).read_text()
    r = runner.invoke(
        app, ["speedup", "-k", "8", "--profile", prof, "-o", str(tmp_path / "." / "t2.yaml"), "--force", "-f", "csv"]
    )
    assert r.exit_code == 2 and "is also an input" in r.stderr
    assert Path(prof).read_text() == before


# --------------------------------------------------------------------------- huge ranges


def test_a_huge_range_table_computes_only_the_rows_shown(runner, monkeypatch):
    import simcli.step.engine as engine
    from simcli.cli import app

    sizes = []
    real = engine.simulate

    def counting(sc, k, *args, **kw):
        sizes.append(len(k))
        return real(sc, k, *args, **kw)

    monkeypatch.setattr(engine, "simulate", counting)
    monkeypatch.setattr("simcli.cli.speedup.simulate", counting)  # the name the command imported
    r = runner.invoke(app, ["speedup", "-k", "1..5000000", "--rows", "40"])
    assert r.exit_code == 0, r.output
    # the rows shown, two corners of their band, and the other two only for the rows below k0 (simcli.step.band)
    assert sizes[:3] == [40] * 3 and len(sizes) <= 8 and max(sizes) == 40
    assert "… 4999960 rows" in r.stdout and "5000000 │" in r.stdout.replace("  ", " ")


@pytest.mark.parametrize("fmt", ["csv", "json"])
@pytest.mark.parametrize("extra", [[], ["--profile", "dgx-h100,dgx-a100"]])
def test_streamed_csv_and_json_equal_the_whole(runner, monkeypatch, fmt, extra):
    import simcli.cli.speedup as sp
    from simcli.cli import app

    args = ["speedup", "-k", "1..1000", "-f", fmt, *extra]
    whole = runner.invoke(app, args).stdout
    monkeypatch.setattr(sp, "STREAM_CHUNK", 300)  # chunks of 300, 300, 300 and a last one of 100
    assert runner.invoke(app, args).stdout == whole


# --------------------------------------------------------------------------- one name per meaning


@pytest.mark.parametrize(
    "args,line",
    [
        (["--bucket-mb", "1e-9"], "simcli: error: --bucket-mb: 1e-09 MiB must be at least 1 KiB"),
        (["--bucket-cap-mb", "0"], "simcli: error: --bucket-mb: 0 MiB must be at least 1 KiB"),  # the old spelling
        (["--width", "3", "--model-width", "4"], "simcli: error: --width and --model-width are the same option"),
    ],
)
def test_bench_step_bucket_and_width_names(runner, args, line):
    from simcli.cli import app

    r = runner.invoke(app, ["bench", "step", *args])
    assert r.exit_code == 2 and r.stderr.startswith(line), r.output


def test_bench_step_help_uses_the_shared_names(runner):
    from simcli.cli import app

    h = runner.invoke(app, ["bench", "step", "-h"]).stdout
    assert "--bucket-mb" in h and "--model-width" in h
    assert "--bucket-cap-mb" not in h and "  --width" not in h


def test_speedup_records_name_the_bottleneck_bandwidth(runner):
    import json

    from simcli.cli import app

    (rec,) = json.loads(runner.invoke(app, ["speedup", "-k", "8", "-f", "json"]).stdout)
    assert "bottleneck_GBps" in rec and "bus_GBps" not in rec
    assert "bottleneck GB/s" in runner.invoke(app, ["speedup", "-k", "8"]).stdout


# ----------------------------------------------------------------- calibrate and validate: which profile, which file


def _fixture_path(ext):
    from pathlib import Path

    return Path(__file__).parents[1] / "fixtures" / f"all_reduce_perf_8xA100.{ext}"


@pytest.mark.parametrize("ext", ["txt", "json"])
def test_validate_reads_raw_nccl_tests_output(runner, ext):
    import json

    from simcli.cli import app

    r = runner.invoke(app, ["validate", str(_fixture_path(ext)), "--profile", "dgx-a100", "-f", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["kind"] == "allreduce" and len(doc["rows"]) == 11 and {x["devices"] for x in doc["rows"]} == {8}


def test_measurements_default_to_their_backends_profile(runner, tmp_path):
    import json
    from pathlib import Path

    from simcli.cli import app

    busy = Path(__file__).parents[2] / "validation" / "cpu-loopback" / "busy1.csv"
    r = runner.invoke(app, ["validate", str(busy), "-f", "json"])
    assert r.exit_code == 0 and "--profile cpu-loopback (the measurements' backend is gloo)" in r.stderr
    assert json.loads(r.stdout)["profile"] == "cpu-loopback"
    r = runner.invoke(app, ["validate", str(_fixture_path("txt"))])
    assert r.exit_code == 2 and "measured with nccl" in r.stderr and "give --profile" in r.stderr
    plain = tmp_path / "plain.csv"
    plain.write_text("world_size,bytes,time_s\n2,1024,0.001\n2,2048,0.002\n")
    r = runner.invoke(app, ["calibrate", str(plain), "-o", str(tmp_path / "c.yaml")])
    assert r.exit_code == 2 and "does not say which backend" in r.stderr


def test_a_calibrated_profile_says_what_was_fitted(runner, tmp_path):
    from pathlib import Path

    import yaml

    from simcli.cli import app

    busy = Path(__file__).parents[2] / "validation" / "cpu-loopback" / "busy1.csv"
    out = tmp_path / "c.yaml"
    r = runner.invoke(app, ["calibrate", str(busy), "-o", str(out)])
    assert r.exit_code == 0, r.output
    src = yaml.safe_load(out.read_text())["sources"]
    assert all(s.startswith("cpu-loopback (the base profile): ") for s in src[:-1])
    assert "fitted tier cores: latency and bandwidth; tier oversubscribed: latency and bandwidth; from" in src[-1]
    assert str(busy) in src[-1]


# --------------------------------------------------------------------------- profiles: every error, both names

BAD3 = """\
name: bad
sources: [x]
device: {name: D, peak_flops: {bf16: 100 TFLOP/s}, mfu: 1.5, colour: red}
network:
  - {name: nvlink, size: 8, bandwidth: -3 GB/s, latency: 3 us}
  - {name: ib, bandwidth: 200 Gb/s, latency: soon}
calibration: 7
"""


def test_profiles_validate_reports_every_error(runner, tmp_path):
    from simcli.cli import app

    f = tmp_path / "bad.yaml"
    f.write_text(BAD3)
    r = runner.invoke(app, ["profiles", "validate", str(f)])
    assert r.exit_code == 2
    lines = r.stderr.splitlines()
    assert [ln.split(": ")[3] for ln in lines] == [
        "device.colour",
        "device.mfu",
        "network[0].bandwidth",
        "network[1].latency",
        "calibration",
    ]
    assert all(ln.startswith(f"simcli: error: {f}: ") for ln in lines)
    r = runner.invoke(app, ["speedup", "--profile", str(f)])  # other commands: the first error, one line
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "device.colour" in r.stderr


def test_profile_on_the_search_path_by_file_name_or_yaml_name(runner, tmp_path, monkeypatch, prof):
    import json
    from pathlib import Path

    from simcli.cli import app

    d = tmp_path / "profiles"
    d.mkdir()
    (d / "box-v2.yaml").write_text(Path(prof).read_text().replace("name: t2", "name: my-box"))
    monkeypatch.setenv("SIMCLI_PROFILE_PATH", str(d))
    for ref in ("box-v2", "my-box"):
        r = runner.invoke(app, ["speedup", "-k", "8", "--profile", ref, "-f", "json"])
        assert r.exit_code == 0, (ref, r.output)
        assert json.loads(r.stdout)[0]["devices"] == 8
    (d / "twin.yaml").write_text(Path(prof).read_text().replace("name: t2", "name: my-box"))
    r = runner.invoke(app, ["speedup", "-k", "8", "--profile", "my-box"])
    assert r.exit_code == 2 and "is the name of 2 profiles" in r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["-k", "2..64:x2", "-s", "1KiB..1GiB:x4"],
        ["-k", "1..300", "-s", "1MiB,8MiB"],
        ["-k", "8", "-s", "1KiB..1GiB:x2"],
    ],
)
def test_a_huge_comm_table_computes_only_the_rows_shown(runner, args, tmp_path):
    from simcli.base.ranges import parse_devices, parse_sizes
    from simcli.cli import app
    from simcli.cli.views import comm_table
    from simcli.comm.grid import comm_grid
    from simcli.io.profiles import resolve_profile
    from simcli.io.render import render_text

    out = tmp_path / "t.txt"
    r = runner.invoke(app, ["comm", *args, "--rows", "6", "-o", str(out)])
    prof = resolve_profile(None)
    from simcli.comm.collectives import default_algorithm

    alg = default_algorithm(prof)
    full = comm_grid(
        prof, parse_devices(args[1]), parse_sizes(args[3]), algorithm=alg, message_dtype="fp32", protocol=None
    )
    assert r.exit_code == 0, r.output
    assert out.read_text() == render_text(comm_table(prof, full, alg, max_rows=6))  # the same table as computing it all


@pytest.mark.parametrize(
    "args,rows",
    [
        (["-k", "1..300", "--profile", "dgx-h100,dgx-a100"], 10),
        (["-k", "1..64:x2", "--grad-dtype", "fp32,bf16", "--algorithm", "ring,tree"], 7),
        (["-k", "1..64"], 9),
    ],
)
def test_a_huge_compare_table_computes_only_the_rows_shown(runner, monkeypatch, args, rows, tmp_path):
    import simcli.decisions.compare as C
    from simcli.cli import app

    calls = []
    real = C.compare

    def spy(base, choices, devices, **kw):
        calls.append(len(devices))
        return real(base, choices, devices, **kw)

    monkeypatch.setattr("simcli.cli.compare.run_compare", spy)  # the name the command imported
    part, whole = tmp_path / "part.txt", tmp_path / "whole.txt"
    assert runner.invoke(app, ["compare", *args, "--rows", str(rows), "-o", str(part)]).exit_code == 0
    assert calls[-1] < 64
    # the whole computation, shown with the same elision: the same text
    import simcli.cli.compare as cp

    monkeypatch.setattr(cp, "_compare_view", lambda cmp, r, n_devices=None, _v=cp._compare_view: _v(cmp, rows))
    assert runner.invoke(app, ["compare", *args, "--rows", "0", "-o", str(whole)]).exit_code == 0
    assert part.read_text() == whole.read_text()


# =========================================================================== issue 27
# Each class of the third round's fault sweep, at its shared mechanism: outputs claimed at the start
# (simcli.io.files.Claim), the finiteness gate (simcli.io.formats.finite_gate), measured tables checked where read
# (simcli.io.tables.check_measured, the nccl-tests reader), limits before work (simcli.base.ranges, inputs.load_json,
# the profile loader), special files at open (simcli.io.inputs.read_text), signals (cli.common.handle_errors),
# control characters (simcli.io.stdout.escape_controls).

import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402


def _simcli(*args: str, timeout: float = 120, **kw):
    """simcli in a process of its own, as a user runs it: exit status, stdout, stderr."""
    env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", COLUMNS="140", **kw.pop("env", {}))
    return subprocess.run(
        [sys.executable, "-m", "simcli", *args], capture_output=True, text=True, timeout=timeout, env=env, **kw
    )


def _one_line(r, start: str) -> None:
    """Exactly one line on stderr, beginning with ``start``; no traceback, no numpy warning."""
    err = getattr(r, "stderr", "")
    assert err.startswith(start) and err.count("\n") == 1, err
    assert "Traceback" not in err and "RuntimeWarning" not in err


def _bench_args(out, fmt: str = "csv") -> list[str]:
    """A bench that takes a few seconds: two ranks, tiny sizes, a fixed number of iterations."""
    return [
        "bench", "allreduce", "--world-sizes", "2", "--size", "1KiB..64KiB:x4", "--iters", "3",
        "--max-iters", "3", "--warmup", "0", "--backend", "gloo", "-f", fmt, "-o", str(out),
    ]  # fmt: skip


# --------------------------------------------------------------------------- (1) outputs are claimed


def test_two_benches_one_output_file_one_is_refused_before_measuring(tmp_path):
    """Two real benches started together on one -o: one writes its whole run, the other is refused (exit 2,
    one line) before it measures anything; the file holds exactly one run's rows."""
    pytest.importorskip("torch")
    from simcli.io.measured.results import read_results

    out = tmp_path / "out.csv"
    env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    cmd = [sys.executable, "-m", "simcli", *_bench_args(out)]
    ps = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in "ab"]
    results = [(p, *p.communicate(timeout=240)) for p in ps]
    codes = sorted(p.returncode for p, _, _ in results)
    assert codes == [0, 2], [(p.returncode, e[-500:]) for p, _, e in results]
    loser = next(e for p, _, e in results if p.returncode == 2)
    assert loser.startswith(f"simcli: error: --output: {out} exists") and loser.count("\n") == 1, loser
    assert "world size" not in loser  # refused before it started a single rank
    comments, rows = read_results(out)
    assert [int(r["bytes"]) for r in rows] == [1024, 4096, 16384, 65536]  # one run, every row whole
    assert sum(c.startswith("simcli bench allreduce") for c in comments) == 1
    assert sorted(os.listdir(tmp_path)) == ["out.csv"]


def test_a_claimed_output_refuses_every_other_command(tmp_path):
    """The claim is the one rule for every command that writes: while one holds the file, speedup, explain,
    bench import and plot are each refused with exit 2, and nothing is written over the claim."""
    from simcli.io.files import check_output_path, claims

    out = tmp_path / "out.csv"
    fix = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "all_reduce_perf_8xA100.txt")
    with claims():
        check_output_path(out, False)  # this process's command holds out.csv from its start
        for args in (
            ["speedup", "-k", "8", "-f", "csv"],
            ["explain", "-k", "8", "-f", "json"],
            ["bench", "import", fix],
            ["algorithms", "-k", "8", "-f", "csv"],
        ):
            r = _simcli(*args, "-o", str(out))
            assert r.returncode == 2, (args, r.stderr)
            _one_line(r, f"simcli: error: --output: {out} exists")
            assert out.read_bytes() == b""
    assert not out.exists()  # a claim never written is removed at the command's end


def test_a_command_that_fails_after_claiming_leaves_no_file(runner, tmp_path):
    from simcli.cli import app

    out = tmp_path / "never.csv"
    r = runner.invoke(app, ["speedup", "-k", "8", "--mfu", "1e-320", "-f", "csv", "-o", str(out)])
    assert r.exit_code == 2 and not out.exists()


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_bench_whose_file_is_replaced_keeps_its_rows_beside_it(tmp_path, fmt):
    """--force by another command replaces the file atomically; the bench writing it notices at its next row,
    keeps every row it measured in NAME.PID.saved and stops with one line (exit 1); the new file is intact."""
    import json

    from simcli.base.types import EnvironmentFailure
    from simcli.io.files import claims, write_atomic
    from simcli.io.measured.results import ALLREDUCE_COLUMNS, ResultWriter, read_results

    out = tmp_path / f"r.{fmt}"
    row = {"collective": "all_reduce", "world_size": 2, "bytes": 1024, "time_s": 1e-3}
    with claims():
        w = ResultWriter(out, ALLREDUCE_COLUMNS, ["simcli bench allreduce"], fmt=fmt)
        w.append(row)
        w.append({**row, "bytes": 2048})
    with claims():  # the other command, --force
        write_atomic(out, "other,command\n1,2\n", force=True)
    with claims():
        with pytest.raises(EnvironmentFailure, match=r"was replaced or removed by another command.*3 rows measured"):
            w.append({**row, "bytes": 4096})
    assert out.read_text() == "other,command\n1,2\n"
    (saved,) = [p for p in tmp_path.iterdir() if p.name.endswith(".saved")]
    assert saved.name == f"r.{fmt}.{os.getpid()}.saved"
    if fmt == "csv":
        assert [int(r["bytes"]) for r in read_results(saved)[1]] == [1024, 2048, 4096]
    else:
        assert [r["bytes"] for r in json.loads(saved.read_text())] == [1024, 2048, 4096]


def test_a_whole_file_writer_whose_claim_was_replaced_does_not_write_over(tmp_path):
    from simcli.base.types import EnvironmentFailure
    from simcli.io.files import check_output_path, claims, write_atomic

    out = tmp_path / "plan.csv"
    with claims():
        check_output_path(out, False)  # claimed at the start
        out.unlink()
        out.write_text("someone else's\n")  # replaced meanwhile
        with pytest.raises(EnvironmentFailure, match="replaced or removed by another command"):
            write_atomic(out, "mine\n")
    assert out.read_text() == "someone else's\n"
    (saved,) = [p for p in tmp_path.iterdir() if p.name.endswith(".saved")]
    assert saved.read_text() == "mine\n"


def test_force_replaces_only_when_the_output_is_ready(tmp_path):
    """--force over an existing file: the old one stays whole until the new content replaces it at once."""
    from simcli.io.files import claims
    from simcli.io.measured.results import ALLREDUCE_COLUMNS, ResultWriter

    out = tmp_path / "r.csv"
    out.write_text("old\n")
    with claims():
        w = ResultWriter(out, ALLREDUCE_COLUMNS, ["x"], force=True)
        assert out.read_text() == "old\n"  # nothing measured yet: the old file is untouched
        w.append({"collective": "all_reduce", "world_size": 2, "bytes": 8, "time_s": 1e-6})
        assert out.read_text().startswith("# x\ncollective,")
        w.close()
    assert sorted(os.listdir(tmp_path)) == ["r.csv"]


def test_output_pipe_with_no_reader_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    r = _simcli("speedup", "-k", "8", "-f", "csv", "-o", str(fifo), "--force", timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    _one_line(r, f"simcli: error: --output: {fifo} is a named pipe that nothing reads")


def test_empty_output_name_is_refused(runner):
    from simcli.cli import app

    for args in (["speedup", "-k", "8", "-o", ""], ["speedup", "-k", "8", "--output="]):
        r = runner.invoke(app, args)
        assert r.exit_code == 2 and r.stdout == "", r.output
        _one_line(r, "simcli: error: --output: an empty value")


# --------------------------------------------------------------------------- (2) the finiteness gate


def _profile_with(tmp_path, bandwidth: str = "200 Gb/s", name: str = "D") -> str:
    from tests.conftest import TWO_TIER_YAML

    text = TWO_TIER_YAML.replace("bandwidth: 200 Gb/s", f"bandwidth: {bandwidth}").replace("name: D", f"name: {name}")
    f = tmp_path / "p.yaml"
    f.write_text(text)
    return str(f)


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
@pytest.mark.parametrize(
    "args,named",
    [
        (["--compute-time", "1e308"], "--compute-time 1e308"),
        (["--mfu", "1e-320"], "--mfu 1e-320"),
        (["--model", "gpt2", "--mfu", "1e-320"], "--mfu 1e-320"),
    ],
)
def test_non_finite_results_are_refused_naming_the_input(runner, args, named, fmt):
    from simcli.cli import app

    r = runner.invoke(app, ["speedup", "-k", "1,8", *args, "-f", fmt])
    assert r.exit_code == 2 and r.stdout == "", r.output
    _one_line(r, "simcli: error: the result ")
    assert "not a positive finite number" in r.stderr and named in r.stderr


def test_a_tiny_bandwidth_in_a_profile_is_refused_naming_the_file(runner, tmp_path):
    from simcli.cli import app

    # with its unit, the profile is read and the finiteness gate refuses what it makes; bare, the loader refuses it
    # as a unit left out (issue 40), naming the field
    prof = _profile_with(tmp_path, "5e-324 B/s")
    for cmd in (["speedup", "-k", "16"], ["speedup", "-k", "16", "-f", "json"], ["comm", "-k", "16", "-f", "csv"]):
        r = runner.invoke(app, [*cmd, "--profile", prof])
        assert r.exit_code == 2 and r.stdout == "", (cmd, r.output)
        _one_line(r, "simcli: error: the result ")
        assert f"file {prof}" in r.stderr
    bare = _profile_with(tmp_path, "5e-324")
    r = runner.invoke(app, ["speedup", "-k", "16", "--profile", bare])
    assert r.exit_code == 2 and r.stdout == ""
    _one_line(r, f"simcli: error: {bare}: network[1].bandwidth: 5e-324 has no unit")


def test_tiny_flops_per_sample_in_a_workload_file_is_refused(runner, tmp_path):
    from simcli.cli import app

    f = tmp_path / "w.yaml"
    f.write_text("name: tiny\nkind: custom\nparams: 1e6\nflops_per_sample: 1e-320\n")
    r = runner.invoke(app, ["speedup", "-k", "8", "--workload", str(f), "-f", "csv"])
    assert r.exit_code == 2 and r.stdout == ""
    _one_line(r, "simcli: error: the result ")


def test_numpy_warnings_never_reach_stderr():
    r = _simcli("speedup", "-k", "8", "--compute-time", "1e308", "-f", "csv")
    assert r.returncode == 2 and "RuntimeWarning" not in r.stderr and "encountered" not in r.stderr
    _one_line(r, "simcli: error: the result t_compute_s is infinite")


@pytest.mark.parametrize(
    "cmd",
    [
        ["explain", "-k", "8", "--mfu", "1e-320"],
        ["plan", "max-devices", "-e", "0.9", "--mfu", "1e-320"],
        ["plan", "solve", "device.mfu", "-k", "64", "-e", "0.8", "--compute-time", "1e308"],
        ["plan", "best", "-m", "llama2-7b", "--global-batch", "512", "--devices", "64", "--mfu", "1e-320"],
        ["plan", "time-to-train", "-k", "8", "--samples", "1e6", "--compute-time", "1e308"],
        ["compare", "-k", "8", "-p", "dgx-a100,dgx-h100", "--mfu", "1e-320"],
    ],
)
def test_the_engine_refuses_a_non_finite_step_for_every_command(runner, cmd):
    """The gate at the engine (simcli.step.engine._finite): the commands whose answer is prose or a picture, not
    only the tables, refuse a step that is not a positive finite number, with one line and exit 2."""
    from simcli.cli import app

    r = runner.invoke(app, cmd)
    assert r.exit_code == 2, r.output
    _one_line(r, "simcli: error: the result ")


def test_a_library_warning_is_one_line_not_a_crash(runner, monkeypatch):
    """warnings.showwarning is called with a file argument; the CLI's handler takes it and prints one line."""
    import warnings

    from simcli.cli import app

    orig = warnings.warn

    def noisy(*a, **k):
        orig("a library's own warning", RuntimeWarning, stacklevel=1)

    from simcli.step import engine

    monkeypatch.setattr(engine, "_finite", lambda *a, **k: noisy())
    r = runner.invoke(app, ["speedup", "-k", "1,8", "-f", "csv"])
    assert r.exit_code == 0, r.output
    assert "simcli: warning: a library's own warning" in r.stderr and "Traceback" not in r.output


def test_finite_gate_directly():
    from simcli.base.types import NonFiniteResult
    from simcli.io.formats import finite_gate, to_csv, to_json

    ok = [{"devices": 1, "t_comm_s": 0.0, "speedup": 1.0, "rse": float("nan")}]  # t_comm 0 at k=1; rse may be nan
    finite_gate(ok)
    for bad in ({"speedup": float("inf")}, {"t_step_s": 0.0}, {"busbw_GBps": float("nan")}, {"speedup": -1.0}):
        with pytest.raises(NonFiniteResult):
            to_csv([{"devices": 8, **bad}])
        with pytest.raises(NonFiniteResult):
            to_json({"records": [{"devices": 8, **bad}]})


def test_one_serializer_for_csv_and_json_numbers():
    import csv
    import io
    import json

    import numpy as np

    from simcli.io.formats import to_csv, to_json

    rec = {"bytes": np.int64(1024), "busbw_GBps": np.float64(0.0029123456789), "time_s": np.float32(0.5)}
    row = next(csv.DictReader(io.StringIO(to_csv([rec]))))
    js = json.loads(to_json([rec]))[0]
    assert "np." not in to_csv([rec])
    assert float(row["busbw_GBps"]) == js["busbw_GBps"] == 0.0029123456789 and int(row["bytes"]) == js["bytes"]


def test_validate_csv_writes_plain_numbers(runner):
    import csv
    import io

    from simcli.cli import app

    fix = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "all_reduce_perf_8xA100.txt")
    r = runner.invoke(app, ["validate", fix, "--profile", "dgx-a100", "-f", "csv"])
    assert r.exit_code == 0, r.output
    assert "np.float64" not in r.stdout
    rows = list(csv.DictReader(io.StringIO("\n".join(ln for ln in r.stdout.splitlines() if not ln.startswith("#")))))
    assert rows and all(float(v) >= 0 for row in rows for k, v in row.items() if "busbw" in k and v)


# --------------------------------------------------------------------------- (3) measured tables checked where read

_NCCL = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "all_reduce_perf_8xA100.txt")


def _nccl_text() -> str:
    with open(_NCCL) as f:
        return f.read()


def _row_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def _edit_row(text: str, i: int, **cols) -> str:
    """The fixture with result row i's columns changed (0 size, 1 count, 2 type)."""
    line = _row_lines(text)[i]
    toks = line.split()
    for c, v in cols.items():
        toks[{"size": 0, "count": 1, "type": 2}[c]] = str(v)
    return text.replace(line, "  " + "  ".join(toks), 1)


@pytest.mark.parametrize(
    "make,msg",
    [
        (lambda t: t + t, r"a second run's header \('# nThread \.\.\.'\): one nccl-tests run per file"),
        (lambda t: t.replace(_row_lines(t)[3], _row_lines(t)[3] + "\n" + _row_lines(t)[3].replace(".", "9", 1), 1),
         r"a second row for size \d+ B, float, sum"),
        (lambda t: _edit_row(t, 2, count=7), r"count 7 x 4 B \(float\) = 28 B, not the row's size"),
        (lambda t: _edit_row(t, 2, type="float128"), r"type 'float128' is not an nccl-tests type"),
        (lambda t: _edit_row(t, 2, size=10**26, count=25 * 10**24), r"is more than simcli reads"),
    ],
)  # fmt: skip
def test_nccl_tests_files_that_contradict_themselves_are_refused(runner, tmp_path, make, msg):
    from simcli.cli import app

    f = tmp_path / "bad.txt"
    f.write_text(make(_nccl_text()))
    for cmd in (["bench", "import", str(f)], ["validate", str(f), "--profile", "dgx-a100"]):
        r = runner.invoke(app, cmd)
        assert r.exit_code == 2 and r.stdout == "", (cmd, r.output)
        _one_line(r, "simcli: error: ")
        assert __import__("re").search(msg, r.stderr), r.stderr


def test_a_world_size_flag_that_contradicts_the_file_is_refused(runner, tmp_path):
    from simcli.cli import app

    r = runner.invoke(app, ["bench", "import", _NCCL, "--world-size", "3"])
    assert r.exit_code == 2 and r.stdout == ""
    _one_line(r, "simcli: error: --world-size: 3 contradicts")
    assert "lists 8 ranks" in r.stderr
    assert runner.invoke(app, ["bench", "import", _NCCL, "--world-size", "8", "-f", "csv"]).exit_code == 0


def test_duplicate_json_keys_are_refused(runner, tmp_path):
    from simcli.cli import app

    fix = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "all_reduce_perf_8xA100.json")
    with open(fix) as fh:
        text = fh.read()
    f = tmp_path / "dup.json"
    f.write_text(text.replace('"size":', '"size": 8, "size":', 1))
    r = runner.invoke(app, ["bench", "import", str(f)])
    assert r.exit_code == 2
    _one_line(r, f"simcli: error: {f}: JSON key 'size' is given twice in one object")


_BENCH_HEAD = "# simcli bench allreduce\ncollective,backend,world_size,bytes,count,dtype,time_s\n"


@pytest.mark.parametrize(
    "body,msg",
    [
        ("all_reduce,gloo,2,1024,256,fp32,1e-4\nall_reduce,gloo,2,1024,256,fp32,2e-4\n", "(line 4|row 2): a second "
         "row for world size 2, 1024 bytes \\(first at (line 3|row 1)\\)"),
        ("all_reduce,gloo,2,1024,255,fp32,1e-4\n", r"count 255 x 4 B \(fp32\) = 1020 B, not the row's 1024 bytes"),
        ("all_reduce,gloo,2,1024,256,fp33,1e-4\n", "dtype 'fp33' is not a type simcli knows"),
        ("all_reduce,gloo,9223372036854775808,1024,256,fp32,1e-4\n", r"world_size: 9223372036854775808 is more than "
         r"simcli reads \(at most 2\*\*53 ranks\)"),
        ("all_reduce,gloo,2,100000000000000000000000000,25000000000000000000000000,fp32,1e-4\n", "bytes: .* is more "
         "than simcli reads"),
        ("all_reduce,gloo,2,1024,256,fp32,1e-4\nbroadcast,gloo,2,1024,256,fp32,1e-4\n", "more than one collective"),
        ("all_reduce,gloo,2,1024,256,fp32,1e-4\n# simcli bench allreduce\nall_reduce,gloo,2,2048,512,fp32,1e-4\n",
         "holds 2 runs"),
    ],
)  # fmt: skip
def test_bench_tables_that_contradict_themselves_are_refused(runner, tmp_path, body, msg):
    from simcli.cli import app

    f = tmp_path / "m.csv"
    f.write_text(_BENCH_HEAD + body)
    for cmd in (["validate", str(f), "--profile", "dgx-a100"], ["plot", str(f), "-o", str(tmp_path / "x.png")]):
        r = runner.invoke(app, cmd)
        assert r.exit_code == 2, (cmd, r.output)
        _one_line(r, "simcli: error: ")
        assert __import__("re").search(msg, r.stderr), r.stderr
    assert not (tmp_path / "x.png").exists()


def test_declared_repeats_are_taken(runner, tmp_path):
    from simcli.io.tables import check_measured

    rows = [{"world_size": "2", "bytes": "1024", "time_s": t, "repeat": str(i)} for i, t in enumerate(["1", "2"])]
    check_measured(rows, "m.csv")  # numbered repeats: one measurement taken twice, not a contradiction
    with pytest.raises(InputError, match="a second row"):
        check_measured([{k: v for k, v in r.items() if k != "repeat"} for r in rows], "m.csv")


# --------------------------------------------------------------------------- (4) limits before work


@pytest.mark.parametrize(
    "args,line",
    [
        (["speedup", "-k", "1..2:x1.0000000001"], "simcli: error: --devices: '1..2:x1.0000000001' has 6,931,471,"),
        (["speedup", "-k", "1" * 100_000], "simcli: error: --devices: a number of 100,000 digits is more than"),
        (["speedup", "-k", "8", "--params", "1e308", "--flops-per-sample", "1e9"], "simcli: error: --params: 1e+308"),
        (["speedup", "-k", "8", "--strategy", "fsdp", "--units", str(2**53)], "simcli: error: --units: 9,007,"),
        (["comm", "-k", "8", "-s", "1KiB.." + "9" * 5000], "simcli: error: --size: "),
    ],
)
def test_limits_are_checked_before_any_work(runner, args, line):
    from simcli.cli import app

    r = runner.invoke(app, args)
    assert r.exit_code == 2 and r.stdout == "", r.output
    _one_line(r, line)


def test_combination_counts_are_capped(runner):
    from simcli.base.ranges import MAX_COMBINATIONS
    from simcli.cli import app

    algs = "ring,tree,nvls,ps,rabenseifner,hierarchical,recursive-doubling,ps-sharded,auto,nccl"
    bkt = ",".join(str(1 + i) for i in range(120))
    r = runner.invoke(app, ["compare", "-k", "8", "--algorithm", algs, "--bucket-mb", bkt])
    assert r.exit_code == 2 and r.stdout == "", r.output
    _one_line(r, "simcli: error: ")
    assert f"1,200 combinations, more than {MAX_COMBINATIONS:,}" in r.stderr


def test_deep_and_long_json_is_refused_before_parsing(runner, tmp_path):
    from simcli.cli import app

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    digits = tmp_path / "digits.json"
    digits.write_text('[{"devices": 1, "speedup": ' + "1" * 100_000 + "}]")
    for f, msg in ((deep, "JSON nested more than 64 levels deep"), (digits, "a JSON integer of 100,000 digits")):
        r = runner.invoke(app, ["plot", str(f), "-o", str(tmp_path / "x.png")])
        assert r.exit_code == 2, r.output
        _one_line(r, f"simcli: error: {f}: {msg}")


def test_huge_tier_and_world_sizes_are_refused_at_load(runner, tmp_path):
    from simcli.cli import app
    from tests.conftest import TWO_TIER_YAML

    f = tmp_path / "big.yaml"
    f.write_text(TWO_TIER_YAML.replace("size: 8", "size: 100000000000000000000000"))
    r = runner.invoke(app, ["profiles", "validate", str(f)])
    assert r.exit_code == 2
    _one_line(r, f"simcli: error: {f}: network[0].size: 1e+23 devices is more than simcli models")
    f.write_text(TWO_TIER_YAML.replace("size: 8", "size: " + "9" * 5000))
    r = runner.invoke(app, ["speedup", "-k", "8", "--profile", str(f)])
    assert r.exit_code == 2
    _one_line(r, f"simcli: error: {f}: line 6: a number of 5,000 characters")


# --------------------------------------------------------------------------- (5) special files


@pytest.mark.parametrize(
    "args",
    [
        ["speedup", "-k", "8", "--profile", "{fifo}"],
        ["speedup", "-k", "8", "--workload", "{fifo}"],
        ["bench", "import", "{fifo}"],
        ["validate", "{fifo}", "--profile", "dgx-a100"],
        ["plot", "{fifo}", "-o", "{dir}/x.png"],
    ],
)
def test_a_named_pipe_without_writer_is_refused_not_waited_on(tmp_path, args):
    fifo = tmp_path / ("in.csv" if args[0] in ("plot", "validate") else "in.yaml")
    os.mkfifo(fifo)
    r = _simcli(*(a.format(fifo=fifo, dir=tmp_path) for a in args), timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    _one_line(r, f"simcli: error: {fifo}: is a named pipe, not a file")


def test_a_device_is_refused_as_an_input(runner):
    from simcli.cli import app

    r = runner.invoke(app, ["speedup", "-k", "8", "--profile", "/dev/zero"])
    assert r.exit_code == 2
    _one_line(r, "simcli: error: /dev/zero: is a character device, not a file")


def test_a_stray_fifo_on_the_profile_path_is_skipped_with_a_warning(tmp_path):
    from tests.conftest import TWO_TIER_YAML

    (tmp_path / "mine.yaml").write_text(TWO_TIER_YAML)
    os.mkfifo(tmp_path / "stray.yaml")
    # -f csv: the source column (the file's path) is there however long tmp_path is (under xdist it is longer, and
    # the table left the column out to fit 140 columns)
    r = _simcli("profiles", "list", "-f", "csv", timeout=60, env={"SIMCLI_PROFILE_PATH": str(tmp_path)})
    assert r.returncode == 0 and "mine.yaml" in r.stdout and "stray.yaml" not in r.stdout
    assert (
        r.stderr
        == f"simcli: warning: {tmp_path / 'stray.yaml'}: is a named pipe, not a profile on the search path; skipped\n"
    )


# --------------------------------------------------------------------------- (6) signals


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_during_a_bench_keep_the_rows(tmp_path, sig, code):
    """As Ctrl-C: the rows measured stay in the file, every rank is stopped, one line, exit 128 + the signal."""
    pytest.importorskip("torch")
    from simcli.io.measured.results import read_results

    out = tmp_path / "r.csv"
    args = _bench_args(out)
    args[args.index("1KiB..64KiB:x4")] = "1KiB..1GiB:x2"  # more sizes than the test waits for
    args[args.index("--max-iters") : args.index("--max-iters") + 2] = ["--rounds", "1"]
    env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", SIMCLI_TEST_SIG=str(int(sig)))
    p = subprocess.Popen(
        [sys.executable, "-m", "simcli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None:
            if out.exists() and len(read_results(out)[1]) >= 1:
                break
            time.sleep(0.1)
        assert p.poll() is None, p.communicate()
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == code, err
    name = signal.Signals(sig).name
    assert err.splitlines()[-1] == f"simcli: terminated by {name}" and "Traceback" not in err
    rows = read_results(out)[1]
    assert len(rows) >= 1 and all(r["time_s"] for r in rows)  # the rows measured before the signal, whole
    _no_rank_left(str(int(sig)))


def _no_rank_left(marker: str) -> None:
    from pathlib import Path

    def tagged() -> list[int]:
        found = []
        for p in Path("/proc").iterdir():
            if p.name.isdigit() and int(p.name) != os.getpid():
                try:
                    env = (p / "environ").read_bytes().split(b"\0")
                except OSError:
                    continue
                if f"SIMCLI_TEST_SIG={marker}".encode() in env and b"SIMCLI_BENCH_TASK=allreduce" in env:
                    found.append(int(p.name))
        return found

    deadline = time.monotonic() + 10
    while tagged() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert tagged() == []


def test_signals_are_documented():
    doc = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "bench.md")
    with open(doc) as f:
        text = f.read()
    assert "SIGTERM" in text and "143" in text and "SIGHUP" in text and "129" in text


# --------------------------------------------------------------------------- (7) the terminal


def test_escape_codes_in_a_profile_are_shown_not_obeyed(runner, tmp_path):
    from simcli.cli import app

    prof = _profile_with(tmp_path, name='"D\\e]0;pwned\\a\\e[31mred"')
    for cmd in (["speedup", "-k", "8"], ["profiles", "show", prof], ["profiles", "list"]):
        env = {"SIMCLI_PROFILE_PATH": str(tmp_path)}
        r = runner.invoke(app, [*cmd, "--profile", prof] if cmd[0] != "profiles" else cmd, env=env)
        assert r.exit_code == 0, r.output
        assert "\x1b" not in r.stdout and "\x07" not in r.stdout
        assert "\\x1b]0;pwned\\x07\\x1b[31mred" in r.stdout


def test_escape_codes_in_error_lines_are_shown_not_obeyed(runner, tmp_path):
    from simcli.cli import app

    f = tmp_path / "w.yaml"
    f.write_text('name: "x"\nkind: "\\e[2J"\nparams: 1e6\n')
    r = runner.invoke(app, ["speedup", "--workload", str(f)])
    assert r.exit_code == 2 and "\x1b" not in r.stderr and "\\x1b[2J" in r.stderr


# --------------------------------------------------------------------------- (8) the smaller ones


def test_rows_below_zero_is_refused(runner):
    from simcli.cli import app

    r = runner.invoke(app, ["speedup", "--rows", "-1"])
    assert r.exit_code == 2
    _one_line(r, "simcli: error: --rows: -1 is below the minimum 0")


def test_yaml_exponent_without_a_dot_is_a_number(tmp_path):
    from simcli.io.profiles import load_profile
    from tests.conftest import TWO_TIER_YAML

    f = tmp_path / "e.yaml"
    f.write_text(TWO_TIER_YAML.replace("mfu: 0.5", "mfu: 5e-1"))
    assert load_profile(str(f)).device.mfu == 0.5
    f.write_text(TWO_TIER_YAML.replace("mfu: 0.5", 'mfu: "5e-1"'))
    with pytest.raises(InputError, match=r"device.mfu: '5e-1' is not a number \(the YAML file gives it as text"):
        load_profile(str(f))


def test_a_fit_on_identical_points_says_r2_is_undefined():
    import numpy as np

    from simcli.cli.measured import r2_cell
    from simcli.fits.fitting import r2_log

    same = np.array([1e-3, 1e-3, 1e-3])  # no spread of times: R² is 0/0
    assert r2_cell(r2_log(same, same)) == "undefined"
    assert r2_cell(None) == "undefined" and r2_cell(0.98765) == "0.9877"


@pytest.mark.parametrize(
    "args,line",
    [
        (["bench", "allreduce", "-k", ""], "simcli: error: --world-sizes: an empty value"),
        (["bench", "step", "--lr", "inf"], "simcli: error: --lr: inf is not a finite number"),
        (["bench", "step", "--lr", "nan"], "simcli: error: --lr: nan is not a finite number"),
        (["speedup", "-k", ""], "simcli: error: --devices: an empty value"),
    ],
)
def test_empty_and_non_finite_option_values_are_refused(runner, args, line):
    from simcli.cli import app

    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output
    _one_line(r, line)


@pytest.mark.parametrize("cmd", [["validate"], ["check"], ["calibrate", "-o", "cal.yaml"]])
def test_a_csv_field_over_csvs_limit_is_one_line(runner, tmp_path, cmd, monkeypatch):
    """csv refuses a field over 128 KiB with its own error; every CSV reader turns it into the file and line."""
    from simcli.cli import app

    monkeypatch.chdir(tmp_path)
    f = tmp_path / "big.csv"
    f.write_text("devices,bytes,time_us\n8,1048576," + "9" * 200_000 + "\n", encoding="utf-8")
    r = runner.invoke(app, [cmd[0], str(f), "-p", "dgx-h100", *cmd[1:]])
    assert r.exit_code == 2, r.output
    _one_line(r, f"simcli: error: {f}: line 2: not a CSV row")
