"""Issue 40 (items 1, 4, 5, 6): each class of bad input a sweep found ends in one line and the right exit status,
held by the shared mechanism, whatever the command: the finiteness gate (simcli.io.formats.finite_gate) and the
bound on number options (simcli.cli.common._check_options), the bounds on plan's searches, the output-name checks
(simcli.io.files.check_output_path, simcli.cli.options.check_outputs), and the environment's failures
(simcli.io.inputs.cannot_read, completion outside a shell). Each test is built from the kind of input, over
several commands and options; the refusals failed before their fix, the rest hold what must still work."""

from __future__ import annotations

import errno
import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcli.cli import app

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"
TRACE = str(ROOT / "measurements" / "kineto-ddp-gloo-cpu")
#: the run behind the trace (docs/calibration.md's example), for calibrate
TRACE_RUN = ["--params", "786432", "--batch-per-device", "64", "--optimizer", "sgd"]


def _one_line(r, start: str) -> None:
    """Exactly one line on stderr, beginning with ``start``; nothing on stdout; no traceback."""
    assert r.stderr.startswith(start) and r.stderr.count("\n") == 1, r.stderr
    assert r.stdout == "", r.stdout
    assert "Traceback" not in r.stderr


def _finite_numbers(obj) -> list[float]:
    """Every number in a parsed JSON document."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return []
    if isinstance(obj, (int, float)):
        return [float(obj)]
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _finite_numbers(v)]
    return [x for v in obj for x in _finite_numbers(v)]


# --------------------------------------------------------------------------- (1) numbers that are not numbers

#: what overflows after the engine: a step of 1e280 s over 1e30 samples at a price of 1e30 (each option within
#: its bound, the cost past float64), and a price of 1e-320 (the cost a subnormal 4e-322)
_OVER = ["--samples", "1e30", "--compute-time", "1e280", "--price-per-device-hour", "1e30"]
_UNDER = ["--samples", "1e6", "--price-per-device-hour", "1e-320"]
_PLAN_BEST = ["plan", "best", "-B", "512", "-k", "8..64:x2", "--objective", "cost"]
_TIME_TO_TRAIN = ["plan", "time-to-train", "-k", "8,16"]


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
@pytest.mark.parametrize(
    "cmd,extra,shown",
    [
        (_PLAN_BEST, _OVER, "infinite"),
        (_PLAN_BEST, _UNDER, "below float64's smallest normal number"),
        (_TIME_TO_TRAIN, _OVER, "infinite"),
        (_TIME_TO_TRAIN, _UNDER, "below float64's smallest normal number"),
    ],
)
def test_numbers_computed_after_the_engine_pass_the_gate(runner, cmd, extra, shown, fmt):
    """plan's cost (device-hours x price) is computed after the engine's gate: a cost past float64 or below its
    normal range is refused in one line naming it and the inputs, in every format (it printed 'cost inf')."""
    r = runner.invoke(app, [*cmd, *extra, "-f", fmt])
    assert r.exit_code == 2, r.output
    _one_line(r, "simcli: error: the result cost is ")
    assert shown in r.stderr and "--price-per-device-hour" in r.stderr


@pytest.mark.parametrize(
    "cmd,option",
    [
        (_PLAN_BEST + ["--samples", "1e6"], "--price-per-device-hour"),
        (_TIME_TO_TRAIN + ["--samples", "1e6"], "--price-per-device-hour"),
        (["plan", "best", "-m", "gpt2", "-B", "512", "-k", "8"], "--tokens"),
        (_TIME_TO_TRAIN, "--samples"),
        (["speedup", "-k", "8"], "--params"),
        (["speedup", "-k", "8"], "--flops-per-sample"),
        (["compare", "-k", "8", "-p", "dgx-a100,dgx-h100"], "--params"),
        (["calibrate", TRACE, *TRACE_RUN, "-o", "{tmp}/cal.yaml"], "--flops-per-sample"),
    ],
)
@pytest.mark.parametrize("value", ["1e308", "-1e300", "1.5e30"])
def test_number_options_past_the_bound_are_refused_naming_the_option(runner, tmp_path, cmd, option, value):
    """One place (cli.common._check_options) refuses a number option beyond 1e30 in magnitude, for every
    command, before any work: nothing written."""
    from simcli.cli.common import MAX_FLOAT

    assert float(value) != float("inf") and abs(float(value)) > MAX_FLOAT
    args = [a.replace("{tmp}", str(tmp_path)) for a in cmd]
    r = runner.invoke(app, [*args, option, value])
    assert r.exit_code == 2, r.output
    _one_line(r, f"simcli: error: {option}: ")
    assert "beyond what simcli computes with" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_values_within_the_bound_still_work(runner):
    r = runner.invoke(app, [*_TIME_TO_TRAIN, "--samples", "1e30", "--price-per-device-hour", "1e30", "-f", "json"])
    assert r.exit_code == 0, r.output
    assert all(math.isfinite(x) for x in _finite_numbers(json.loads(r.stdout)))


def test_a_fitted_error_past_float64_never_reaches_the_profile(runner, tmp_path, monkeypatch):
    """With the option bound lifted, calibrate's fit of a 1e300-FLOP sample has an infinite standard error: the
    gate refuses the profile (it wrote 'standard_error: .inf'), one line, no file."""
    from simcli.cli import common

    monkeypatch.setattr(common, "MAX_FLOAT", 1e308)
    out = tmp_path / "cal.yaml"
    r = runner.invoke(app, ["calibrate", TRACE, *TRACE_RUN, "--flops-per-sample", "1e300", "-o", str(out)])
    assert r.exit_code == 2, r.output
    err = r.stderr.splitlines()
    assert err[-1].startswith("simcli: error: the calibrated profile's ") and "standard_error is infinite" in err[-1]
    assert not any("Traceback" in line for line in err) and not out.exists()


@pytest.mark.parametrize(
    "record",
    [
        {"cost": float("inf")},
        {"device_hours": float("nan")},
        {"cost": 0.0},
        {"cost": 4e-322},
        {"days": float("inf")},
        {"mfu": {"standard_error": float("inf")}},  # a fit's, nested as in a profile's calibration block
        {"scanned": float("-inf")},  # any key: an infinity is never "not computed"
    ],
)
def test_the_gate_covers_costs_durations_fits_and_any_infinity(record):
    from simcli.base.types import NonFiniteResult
    from simcli.io.formats import finite_gate, to_csv, to_json

    with pytest.raises(NonFiniteResult):
        finite_gate({"profile": "p", "rows": [record]})
    with pytest.raises(NonFiniteResult):
        to_json([record])
    flat = {k: v for k, v in record.items() if not isinstance(v, dict)}
    if flat:
        with pytest.raises(NonFiniteResult):
            to_csv([flat])


def test_the_gate_leaves_undefined_statistics_alone():
    from simcli.io.formats import finite_gate

    finite_gate([{"rse": float("inf"), "noise": float("inf"), "r2": float("nan"), "bucket_mb": float("nan")}])
    finite_gate([{"cost": 2.5, "days": 0.0, "t_comm_s": 0.0}])


# --------------------------------------------------------------------------- (2) every search has a bound


@pytest.mark.parametrize("tol", ["1e-17", "2e-16", "1e-300", "5e-324", "9e-15"])
def test_plan_solve_tolerance_finer_than_float64_is_refused_before_work(runner, monkeypatch, tol):
    """A tolerance below float64's resolution made the bisection loop forever (1 + 1e-17 == 1)."""
    from simcli.decisions import solve

    monkeypatch.setattr(solve, "simulate", lambda *a, **k: pytest.fail("simulated before the tolerance check"))
    r = runner.invoke(app, ["plan", "solve", "inter_node.bandwidth", "-k", "64", "-e", "0.9", "--tolerance", tol])
    assert r.exit_code == 2, r.output
    _one_line(r, "simcli: error: --tolerance: ")
    assert f"at least {solve.MIN_RTOL:g}" in r.stderr


def test_plan_solve_at_the_finest_tolerance_ends(two_tier):
    """At MIN_RTOL the bisection ends, with the answer of a coarser tolerance within that tolerance."""
    from simcli.decisions.solve import MIN_RTOL, solve_field
    from simcli.io.workloads import build_workload
    from simcli.step.engine import Scenario

    sc = Scenario(profile=two_tier, workload=build_workload(model="resnet50"))
    ans = solve_field(sc, devices=64, target=0.9, path="network[1].bandwidth", rtol=MIN_RTOL)
    assert ans.answer is not None and ans.efficiency >= 0.9 and ans.rtol == MIN_RTOL
    coarse = solve_field(sc, devices=64, target=0.9, path="network[1].bandwidth", rtol=1e-6).answer
    assert coarse == pytest.approx(ans.answer, rel=2e-6)


@pytest.mark.parametrize(
    "grid,count",
    [
        (["-k", "1..100000", "--partial-nodes", "-b", "1..64"], 100_000 * 64 * 5),
        (["-k", "1..200000", "--partial-nodes", "--strategy", "ddp"], 200_000 * 8),
        (["-k", "8..65536:+8", "-b", "1..16", "--grad-dtype", "fp32,bf16", "--activation-checkpointing", "on,off"],
         8192 * 16 * 5 * 2 * 2),
    ],
)  # fmt: skip
def test_plan_best_counts_its_grid_and_refuses_a_huge_one_before_work(runner, monkeypatch, grid, count):
    """plan best searched 32 M configurations with no answer in 90 s: the count is computed and refused first,
    naming it and how to narrow the grid; nothing is priced."""
    from simcli.decisions import plan_best

    monkeypatch.setattr(plan_best, "simulate", lambda *a, **k: pytest.fail("priced before the count was checked"))
    r = runner.invoke(app, ["plan", "best", "-B", "512", *grid])
    assert r.exit_code == 2, r.output
    _one_line(r, f"simcli: error: plan best: {count:,} configurations to search")
    assert f"more than the {plan_best.MAX_CONFIGURATIONS:,}" in r.stderr and "--devices" in r.stderr


def test_plan_best_reports_progress_for_every_configuration(runner, monkeypatch):
    """The search advances a progress bar (drawn where stderr is a terminal) by every configuration it prices."""
    from simcli.cli import progress as P

    seen = []

    class Recorder(P.Progress):
        def __exit__(self, *exc):
            seen.append((self.description, self.total, self.completed))
            return super().__exit__(*exc)

    monkeypatch.setattr("simcli.cli.plan_best.progress", lambda d, total=None, **kw: Recorder(d, total, delay=3600))
    r = runner.invoke(app, ["plan", "best", "-B", "512", "-k", "8..64:x2", "-b", "1,2,4", "-f", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["scanned"] == 4 * 3 * 5
    assert seen == [("plan best: 60 configurations", 60, 60)]


# --------------------------------------------------------------------------- (3) names, overflows, one file twice


def _outputs(tmp_path):
    return [
        ["speedup", "-k", "8", "-o"],
        ["comm", "-k", "8", "-o"],
        ["check", str(FIX / "all_reduce_perf_8xA100.txt"), "-p", "dgx-a100", "-o"],
        ["profiles", "detect", "-o"],
        ["plan", "best", "-B", "512", "-k", "8", "-o"],
        ["calibrate", TRACE, *TRACE_RUN, "--flops-per-sample", "4718592", "-o"],
        ["speedup", "-k", "8", "--plot"],
    ]


@pytest.mark.parametrize("i", range(7))
@pytest.mark.parametrize("where", ["file", "folder"])
def test_a_name_too_long_for_the_file_system_is_one_line(runner, tmp_path, monkeypatch, i, where):
    """ENAMETOOLONG (a part of the path over NAME_MAX) was a traceback from `speedup -o`, `check -o`, `profiles
    detect -o`: now one line, exit 2, nothing written, for every command that writes a file."""
    monkeypatch.chdir(tmp_path)
    cmd = _outputs(tmp_path)[i]
    name = "a" * 300 + (".png" if cmd[-1] == "--plot" else ".csv")
    path = name if where == "file" else f"{'d' * 300}/x.csv"
    if where == "folder" and cmd[-1] == "--plot":
        path = f"{'d' * 300}/x.png"
    r = runner.invoke(app, [*cmd, path])
    assert r.exit_code == 2, r.output
    err = r.stderr.splitlines()[-1]  # calibrate says which profile it starts from first
    option = "--output" if cmd[-1] == "-o" else cmd[-1]
    assert err.startswith(f"simcli: error: {option}: ") and "too long" in err, r.stderr
    assert "Traceback" not in r.output and sorted(os.listdir(tmp_path)) == []


def test_a_name_near_the_limit_is_written(runner, tmp_path):
    """A name that fits NAME_MAX is written, although the temporary file beside it would not fit whole."""
    out = tmp_path / ("b" * 250 + ".csv")
    r = runner.invoke(app, ["speedup", "-k", "8", "-f", "csv", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert out.read_text().startswith("devices") and sorted(os.listdir(tmp_path)) == [out.name]


@pytest.mark.parametrize(
    "args,line",
    [
        (["plan", "best", "-B", "1e30"], "--global-batch: '1e30' is 1e+30 samples, more than simcli models"),
        (["plan", "best", "-B", "1e300", "-k", "8"], "--global-batch: "),
        (["plan", "best", "-m", "gpt2", "-B", "1e40 tokens", "-k", "8"], "--global-batch: "),
    ],
)
def test_overflowing_values_are_one_line(runner, args, line):
    """plan best -B 1e30 was an OverflowError traceback (int64 arithmetic on the global batch)."""
    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output
    _one_line(r, f"simcli: error: {line}")


@pytest.mark.parametrize(
    "module,cmd,named",
    [
        ("simcli.cli.speedup", ["speedup", "-k", "8", "--mfu", "0.3"], "--mfu 0.3"),
        ("simcli.decisions.plan_best", ["plan", "best", "-B", "512", "-k", "8"], "--global-batch 512"),
        ("simcli.decisions.plan", ["plan", "time-to-train", "-k", "8", "--samples", "1e6"], "--samples 1000000.0"),
        ("simcli.decisions.solve", ["plan", "solve", "device.mfu", "-k", "8", "-e", "0.9"], "--min-efficiency 0.9"),
    ],
)
def test_any_overflow_in_a_command_is_one_line_naming_the_inputs(runner, monkeypatch, module, cmd, named):
    """The last net (cli.common.handle_errors): an OverflowError anywhere in a command's arithmetic is one line
    naming the inputs given, exit 2, not a traceback."""
    import importlib

    def overflow(*a, **k):
        raise OverflowError("(34, 'Numerical result out of range')")

    monkeypatch.setattr(importlib.import_module(module), "simulate", overflow)
    r = runner.invoke(app, cmd)
    assert r.exit_code == 2, r.output
    _one_line(r, "simcli: error: a value is beyond what simcli computes with (")
    assert named in r.stderr


def test_plan_best_whose_step_is_all_update_answers(runner):
    """--update-time 1e300: every k as slow as the next (a KeyError in 'why'); the tie goes to fewer devices."""
    r = runner.invoke(app, ["plan", "best", "-B", "512", "-k", "8..64:x2", "--update-time", "1e300", "-f", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["answer"]["devices"] == 8 and "no faster" in doc["why"]
    assert all(math.isfinite(x) for x in _finite_numbers(doc))


@pytest.mark.parametrize(
    "cmd",
    [
        ["speedup", "-k", "1..16"],
        ["compare", "-k", "8", "-p", "dgx-a100,dgx-h100"],
        ["algorithms", "-k", "8", "--size", "1MiB"],
        ["plan", "best", "-B", "512", "-k", "8..64:x2"],
    ],
)
@pytest.mark.parametrize("spelling", ["same", "dot", "link", "force"])
def test_output_and_plot_naming_one_file_are_refused_before_either_is_written(runner, tmp_path, cmd, spelling):
    """-o and --plot naming one file wrote the picture and then refused, or with --force replaced it with the
    CSV: refused first (exit 2, one line), and nothing written or changed."""
    pic = tmp_path / "x.png"
    out = {"same": str(pic), "dot": f"{tmp_path}/./x.png", "link": str(tmp_path / "l.png"), "force": str(pic)}
    extra = []
    if spelling == "link":
        pic.write_bytes(b"old")
        (tmp_path / "l.png").symlink_to(pic)
        extra = ["--force"]
    if spelling == "force":
        pic.write_bytes(b"old")
        extra = ["--force"]
    before = sorted(os.listdir(tmp_path))
    r = runner.invoke(app, [*cmd, "-f", "csv", "-o", out[spelling], "--plot", str(pic), *extra])
    assert r.exit_code == 2, r.output
    _one_line(r, f"simcli: error: --plot: {pic} is also --output")
    assert sorted(os.listdir(tmp_path)) == before
    if pic.exists():
        assert pic.read_bytes() == b"old"


# --------------------------------------------------------------------------- (4) the environment's failures


def _unreadable(monkeypatch, path: Path) -> None:
    """``path`` refuses to open (EACCES), as a file without read permission does for a user that is not root."""
    import builtins

    bad = os.path.realpath(path)
    real_open, real_os_open = builtins.open, os.open

    def refuse(p) -> None:
        if isinstance(p, (str, os.PathLike)) and os.path.realpath(p) == bad:
            raise PermissionError(errno.EACCES, "Permission denied", str(p))

    def os_open(p, *a, **k):
        refuse(p)
        return real_os_open(p, *a, **k)

    def b_open(p, *a, **k):
        refuse(p)
        return real_open(p, *a, **k)

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(builtins, "open", b_open)


def _inputs(tmp_path):
    """(command, the file that cannot be read): each kind of input file a command reads."""
    import shutil

    dump = tmp_path / "dump"
    shutil.copytree(FIX / "inspector", dump)
    nccl = tmp_path / "nccl.txt"
    shutil.copy(FIX / "all_reduce_perf_8xA100.txt", nccl)
    prof = tmp_path / "p.yaml"
    from tests.conftest import TWO_TIER_YAML

    prof.write_text(TWO_TIER_YAML)
    work = tmp_path / "w.yaml"
    work.write_text("name: w\nkind: custom\nparams: 1e6\nflops_per_sample: 1e9\n")
    first = sorted(dump.iterdir())[0]
    last = sorted(dump.iterdir())[-1]
    return [
        (["validate", str(nccl), "-p", "dgx-a100"], nccl),
        (["check", str(nccl), "-p", "dgx-a100"], nccl),
        (["validate", str(dump), "-p", "dgx-h100"], first),  # the dump folder's first log: it said "is a directory"
        (["validate", str(dump), "-p", "dgx-h100"], last),
        (["calibrate", str(dump), "-p", "dgx-h100", "-o", str(tmp_path / "c.yaml")], first),
        (["speedup", "-k", "8", "--profile", str(prof)], prof),
        (["speedup", "-k", "8", "--workload", str(work)], work),
    ]


@pytest.mark.parametrize("i", range(7))
def test_an_unreadable_input_is_an_environment_failure(runner, tmp_path, monkeypatch, i):
    """EACCES on an input was exit 2 (bad input) or, for a dump folder's first log, 'is a directory': one line
    naming the file, exit 1, nothing written."""
    cmd, bad = _inputs(tmp_path)[i]
    _unreadable(monkeypatch, bad)
    r = runner.invoke(app, cmd)
    assert r.exit_code == 1, r.output
    assert r.stderr.splitlines()[-1] == f"simcli: error: {bad}: cannot read it (permission denied); make it " + (
        "readable (chmod u+r) or copy it"
    ), r.stderr
    assert r.stdout == "" and "is a directory" not in r.stderr and not (tmp_path / "c.yaml").exists()


def test_a_wrong_name_is_still_bad_input(runner, tmp_path):
    r = runner.invoke(app, ["validate", str(tmp_path / "missing.txt"), "-p", "dgx-a100"])
    assert r.exit_code == 2
    _one_line(r, f"simcli: error: {tmp_path / 'missing.txt'}: no such file")


@pytest.mark.parametrize("shell", [None, "tcsh", "sh", "python"])
@pytest.mark.parametrize("option", ["--install-completion", "--show-completion"])
def test_completion_outside_a_shell_is_one_line_on_stderr(runner, tmp_path, monkeypatch, shell, option):
    """From a parent that is not a shell typer completes, --install-completion printed 'Shell None is not
    supported.' on stdout: one line on stderr, exit 1, nothing on stdout, nothing installed."""
    import typer._completion_shared as C

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(C, "_get_shell_name", lambda: shell)
    r = runner.invoke(app, [option])
    assert r.exit_code == 1, r.output
    _one_line(r, f"simcli: error: {option}: ")
    assert (f"its shell is {shell}" if shell else "does not run under a shell") in r.stderr
    assert "_SIMCLI_COMPLETE=source_bash simcli" in r.stderr and list(tmp_path.iterdir()) == []


def test_completion_under_bash_is_still_shown(runner, monkeypatch):
    import typer._completion_shared as C
    import typer.completion

    monkeypatch.setattr(C, "_get_shell_name", lambda: "bash")
    monkeypatch.setattr(typer.completion, "_get_shell_name", lambda: "bash")  # typer's callback's own binding
    r = runner.invoke(app, ["--show-completion"])
    assert r.exit_code == 0 and "complete -o default -F" in r.stdout and r.stderr == ""


# --------------------------------------------------------------------------- the property over numeric options

#: huge, tiny and inf-ish spellings, and any float at all
_VALUES = st.one_of(
    st.sampled_from(
        ["1e308", "-1e308", "1e400", "1e30", "1.1e30", "1e-30", "1e-320", "5e-324", "0", "-0.0", "inf", "-inf", "nan"]
        + ["1e-17", "2.2e-16", "0.5", "1", "9007199254740993", "1e19", "99999999999999999999999"]
    ),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
#: (command, the numeric options it takes): small grids, so that one example takes well under a second
_COMMANDS = {
    "speedup": (
        ["speedup", "-k", "1,8,64"],
        ["--params", "--flops-per-sample", "--mfu", "--bucket-mb", "--compute-time", "--update-time", "--spread"],
    ),
    "best": (
        ["plan", "best", "-B", "512", "-k", "8..64:x2", "-b", "1,8", "--samples", "1e6"],
        ["--price-per-device-hour", "--max-days", "--budget", "-e", "--mfu", "--compute-time", "-B"],
    ),
    "solve": (
        ["plan", "solve", "device.mfu", "-k", "64", "-e", "0.9", "--tolerance", "1e-3"],
        ["--tolerance", "-e", "--compute-time", "--params"],
    ),
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_numeric_value_is_finite_json_or_one_line(runner, data):
    """Random huge, tiny and inf-ish values of numeric options to speedup, plan best and plan solve: exit 0 with
    only finite numbers in the JSON, or exit 2 with exactly one line on stderr (or, where a constraint leaves no
    answer, plan's one 'no ...' line and exit 1); never a traceback."""
    name = data.draw(st.sampled_from(sorted(_COMMANDS)), label="command")
    base, options = _COMMANDS[name]
    chosen = data.draw(st.lists(st.sampled_from(options), min_size=1, max_size=2, unique=True), label="options")
    args = list(base)
    for opt in chosen:
        args += [opt, data.draw(_VALUES, label=opt)]
    if "--budget" in chosen:
        args += ["--price-per-device-hour", "2.5"]
    r = runner.invoke(app, [*args, "-f", "json"])
    assert r.exit_code in (0, 1, 2), (args, r.output, r.exception)
    if r.exit_code == 0:
        numbers = _finite_numbers(json.loads(r.stdout))
        assert numbers and all(math.isfinite(x) for x in numbers), args
    else:  # exit 1 only for a well-posed question with no answer (Infeasible: 'no k ...', 'no configuration ...')
        start = "simcli: error: " if r.exit_code == 2 else "simcli: error: no "
        assert r.stderr.startswith(start) and r.stderr.count("\n") == 1, (args, r.stderr)
        assert r.stdout == ""
