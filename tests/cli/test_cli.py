"""The command line through typer's runner: formats, files, errors and exit codes."""

import csv
import io
import itertools
import json
import subprocess
import sys

import pytest

from simcli import __version__
from simcli.cli import app

from conftest import run


@pytest.fixture
def prof(h100_prof):
    return h100_prof


def test_help_and_version(runner):
    for flag in ("--help", "-h"):
        r = run(runner, flag)
        assert r.exit_code == 0 and "speedup" in r.stdout and "comm" in r.stdout
    r = run(runner, "--version")
    assert r.exit_code == 0 and r.stdout.strip() == f"simcli {__version__}"
    r = run(runner, "speedup", "-h")
    assert r.exit_code == 0 and "--devices" in r.stdout


def test_speedup_json_keys_and_values(runner, prof):
    r = run(runner, "speedup", "--profile", prof, "--devices", "1..64:x2", "--format", "json")
    assert r.exit_code == 0, r.output
    recs = json.loads(r.stdout)  # stdout holds only the data
    assert [x["devices"] for x in recs] == [1, 2, 4, 8, 16, 32, 64]
    for key in ("devices", "t_compute_s", "t_comm_s", "t_step_s", "speedup", "efficiency", "samples_per_s"):
        assert key in recs[0]
    assert recs[0]["speedup"] == 1.0 and recs[0]["t_comm_s"] == 0.0
    for x in recs:
        # DDP buckets (the default) hide part of the all-reduce behind backward
        assert x["t_step_s"] == pytest.approx(x["t_compute_s"] + x["t_comm_exposed_s"])
        assert x["t_comm_exposed_s"] + x["t_comm_hidden_s"] == pytest.approx(x["t_comm_s"])
        assert x["efficiency"] == pytest.approx(x["speedup"] / x["devices"])
        assert x["speedup"] <= x["devices"]


def test_speedup_csv_matches_json(runner, prof):
    j = json.loads(run(runner, "speedup", "--profile", prof, "-k", "1..16", "-f", "json").stdout)
    c = list(csv.DictReader(io.StringIO(run(runner, "speedup", "--profile", prof, "-k", "1..16", "-f", "csv").stdout)))
    assert len(c) == len(j) == 16
    for a, b in zip(c, j):
        assert float(a["speedup"]) == pytest.approx(b["speedup"], rel=1e-12)
        assert int(a["devices"]) == b["devices"]


def test_speedup_table_names_inputs(runner, prof):
    r = run(runner, "speedup", "--profile", prof, "--devices", "1..64", "--model", "gpt2")
    assert r.exit_code == 0, r.output
    out = r.stdout
    for fragment in ("t-h100", "gpt2", "per device (weak scaling)", "fp32", "S(k)", "E(k)", "samples/s", "rows"):
        assert fragment in out, fragment
    assert out.count("\n") < 70  # 64 rows are elided in the middle


def test_table_rows_all(runner, prof):
    r = run(runner, "speedup", "--profile", prof, "--devices", "1..64", "--rows", "0")
    import re

    assert r.exit_code == 0 and not re.search(r"… \d+ rows", r.stdout) and re.search(r"^ *64 ", r.stdout, re.M)


def test_strong_scaling(runner, prof):
    recs = json.loads(run(runner, "speedup", "--profile", prof, "-k", "1,2,4", "-B", "256", "-f", "json").stdout)
    assert [x["batch_per_device"] for x in recs] == [256, 128, 64]
    assert recs[2]["speedup"] < 4


@pytest.mark.parametrize(
    "args",
    [
        ["--model", "resnet50", "--compute-time", "0.35"],
        ["--params", "5e8", "--compute-time", "0.46"],
        ["--params", "5e8", "--flops-per-sample", "3e12"],
        ["--model", "llama2-7b", "--seq-len", "2048", "--grad-dtype", "bf16", "--dtype", "bf16"],
    ],
)
def test_workload_options(runner, prof, args):
    r = run(runner, "speedup", "--profile", prof, "-k", "1,8", "-f", "json", *args)
    assert r.exit_code == 0, r.output
    recs = json.loads(r.stdout)
    if "--compute-time" in args:
        # measured on one device: k = 1 takes it as it is; k = 8 adds the wait for the slowest of 8 (the default spread
        # of the device kind applies to every GPU profile, built in or not: issue 22)
        assert recs[0]["t_compute_s"] == pytest.approx(float(args[args.index("--compute-time") + 1]))
        assert recs[1]["t_compute_s"] >= recs[0]["t_compute_s"]


def test_workload_file(runner, prof, tmp_path):
    w = tmp_path / "w.yaml"
    w.write_text("name: mine\nparams: 1e9\nflops_per_sample: 6e12\nbatch_per_device: 4\n")
    r = run(runner, "speedup", "--profile", prof, "-k", "1,8", "-f", "json", "--workload", w)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)[0]["t_compute_s"] == pytest.approx(6e12 * 4 / (989e12 * 0.4))


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--devices", "0"], "--devices: '0'"),
        (["--devices", "64..1"], "runs backwards"),
        (["--devices", "1..64:x1"], "greater than 1"),
        (["--devices", "abc"], "not a whole number"),
        (["--devices", "1..1000000000000"], "add a step"),
        (["--model", "resnet5"], "unknown model 'resnet5' (did you mean resnet50"),
        (["--model", "gpt2", "--params", "1e9"], "exclude each other"),
        (["--params", "1e9"], "--params needs --flops-per-sample"),
        (["--params", "-5", "--compute-time", "1"], "--params"),
        (["--compute-time", "-1"], "--compute-time"),
        (["--compute-time", "fast"], "--compute-time"),
        (["--mfu", "2"], "--mfu"),
        (["--dtype", "fp64"], "--dtype"),
        (["--grad-dtype", "int4"], "--grad-dtype"),
        (["--batch-per-device", "8", "--global-batch", "64"], "exclude each other"),
        (["--seq-len", "128", "--model", "resnet50"], "not a transformer"),
        (["--workload", "/nonexistent/w.yaml"], "no such file"),
    ],
)
def test_bad_options_exit_2(runner, prof, args, fragment):
    r = run(runner, "speedup", "--profile", prof, *args)
    assert r.exit_code == 2, r.output
    assert fragment in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.output
    assert r.stdout == ""


def test_output_is_atomic_and_never_clobbers(runner, prof, tmp_path):
    out = tmp_path / "res.json"
    r = run(runner, "speedup", "--profile", prof, "-k", "1..8", "-f", "json", "-o", out)
    assert r.exit_code == 0 and r.stdout == ""
    first = out.read_text()
    assert len(json.loads(first)) == 8
    r = run(runner, "speedup", "--profile", prof, "-k", "1..4", "-f", "json", "-o", out)
    assert r.exit_code == 2 and "--force" in r.stderr
    assert out.read_text() == first
    # a failing run leaves the old file untouched and no temporary files behind
    r = run(runner, "speedup", "--profile", prof, "-k", "0", "-f", "json", "-o", out, "--force")
    assert r.exit_code == 2 and out.read_text() == first
    r = run(runner, "speedup", "--profile", prof, "-k", "1..4", "-f", "json", "-o", out, "--force")
    assert r.exit_code == 0 and len(json.loads(out.read_text())) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res.json", "t-h100.yaml"]
    r = run(runner, "speedup", "--profile", prof, "-o", tmp_path / "missing" / "x.txt")
    assert r.exit_code == 2 and "does not exist" in r.stderr


def test_table_to_file(runner, prof, tmp_path):
    out = tmp_path / "t.txt"
    r = run(runner, "speedup", "--profile", prof, "-k", "1,8", "-o", out)
    assert r.exit_code == 0 and "S(k)" in out.read_text()


def test_comm_nccl_tests_columns(runner, prof):
    r = run(
        runner, "comm", "--profile", prof, "--devices", "8", "--size", "32KiB..16GiB:x4", "-a", "ring", "-f", "json"
    )
    assert r.exit_code == 0, r.output
    recs = json.loads(r.stdout)
    assert [x["bytes"] for x in recs][:2] == [32768, 131072]
    for x in recs:
        assert x["algbw_GBps"] == pytest.approx(x["bytes"] / x["time_s"] / 1e9)
        assert x["busbw_GBps"] == pytest.approx(x["algbw_GBps"] * 2 * 7 / 8)
        assert x["count"] == x["bytes"] // 4
    # large messages approach the bus bandwidth B = 450 GB/s x 0.8 (NCCL's ring runs Simple there)
    assert recs[-1]["busbw_GBps"] == pytest.approx(360, rel=0.01)
    t = run(runner, "comm", "--profile", prof, "--devices", "2..16:x2", "--size", "1MiB")
    assert t.exit_code == 0 and "busbw" in t.stdout and "algbw" in t.stdout


def test_comm_takes_a_profile_list_as_speedup_does(runner, prof):
    one = lambda p: json.loads(run(runner, "comm", "-p", p, "-k", "8,16", "--size", "1MiB", "-f", "json").stdout)  # noqa: E731
    r = run(runner, "comm", "-p", f"{prof},dgx-a100", "-k", "8,16", "--size", "1MiB", "-f", "json")
    assert r.exit_code == 0, r.output
    recs = json.loads(r.stdout)
    assert [x["profile"] for x in recs] == ["t-h100", "t-h100", "dgx-a100", "dgx-a100"]
    assert [x["time_s"] for x in recs] == [x["time_s"] for x in one(prof) + one("dgx-a100")]
    t = run(runner, "comm", "-p", f"{prof},dgx-a100", "-k", "8", "--size", "1MiB")
    assert t.exit_code == 0 and "profile t-h100" in t.stdout and "profile dgx-a100" in t.stdout
    bad = run(runner, "comm", "-p", f"{prof},dgx-a100", "--plot", "x.png")
    assert bad.exit_code == 2 and "--plot" in bad.stderr


@pytest.mark.parametrize(
    "size,fragment", [("1KiB..1GiB", "add a step"), ("12 parsecs", "--size"), ("0B", "at least 1")]
)
def test_comm_bad_sizes(runner, prof, size, fragment):
    r = run(runner, "comm", "--profile", prof, "--size", size)
    assert r.exit_code == 2 and fragment in r.stderr


def test_models_list(runner):
    r = run(runner, "models", "list", "--format", "json")
    assert r.exit_code == 0
    models = {m["name"]: m for m in json.loads(r.stdout)}
    need = {
        "resnet50",
        "resnet101",
        "vgg16",
        "inception_v3",
        "bert-base",
        "bert-large",
        "gpt2",
        "gpt2-xl",
        "llama2-7b",
        "llama2-13b",
        "llama2-70b",
    }
    assert need <= set(models)
    # torchvision counts MACs: ResNet-50 forward 4.09 GMAC -> 8.18 GFLOP -> training 24.5 GFLOP
    assert models["resnet50"]["flops_per_sample"] == pytest.approx(3 * 2 * 4.089e9)
    assert models["gpt2"]["flops_per_sample"] == pytest.approx(6 * 124439808 * 1024)
    assert all(m["source"] for m in models.values())
    assert run(runner, "models", "list").exit_code == 0


def test_python_m_simcli(prof):
    r = subprocess.run(
        [sys.executable, "-m", "simcli", "speedup", "--profile", prof, "-k", "1,2", "-f", "csv"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("devices,")


#: what no start-up path needs: the optional heavy libraries, and numpy.ma (8 ms), which np.unique's and
#: np.median's first calls import
HEAVY = ("torch", "matplotlib", "pandas", "scipy", "numpy.ma")


@pytest.mark.parametrize(
    "argv",
    [
        ["speedup", "-k", "1..64", "-f", "json"],
        ["speedup", "-k", "1..64:x2"],
        ["comm", "-k", "2..64:x2", "-s", "1KiB..1GiB:x4"],
        ["algorithms"],
        ["explain", "-k", "64"],
        ["compare", "--profile", "dgx-a100,dgx-h100", "-k", "8..512:x2"],
    ],
    ids=lambda a: " ".join(a[:1]),
)
def test_start_up_paths_import_nothing_heavy_and_resume_the_collector(argv):
    """The console script's path (main()): nothing heavy imported, and the garbage collector, paused for the
    start-up, is on again with what start-up built frozen (simcli.cli.common.pause_collector)."""
    code = (
        "import gc, sys\n"
        "assert gc.isenabled()\n"
        "from simcli.cli import main\n"
        "assert gc.isenabled()  # importing the command line leaves the collector as it found it\n"
        f"sys.argv = ['simcli', *{argv!r}]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "sys.stderr.write(f'\\nRESULT {gc.isenabled()} {gc.get_freeze_count() > 1000} '\n"
        f"    + ','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr.rsplit("RESULT ", 1)[1].strip() == "True True", r.stderr


@pytest.mark.parametrize("argv", [["speedup", "--bogus"], ["--help"], ["--version"]], ids=["usage", "help", "version"])
def test_main_gives_the_collector_back_when_no_command_body_runs(argv):
    """A usage error, --help or --version ends before any command's body: main() itself turns it on again."""
    code = (
        "import gc, sys\n"
        "from simcli.cli import main\n"
        f"sys.argv = ['simcli', *{argv!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write(f'\\nRESULT {gc.isenabled()}')"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stderr.rsplit("RESULT ", 1)[1].strip() == "True", r.stderr


def _command_modules() -> set[str]:
    """Every module that holds commands: the root's table and the lazy commands of its groups (plan best, ...)."""
    import typer

    from simcli.cli.app import COMMANDS

    root = typer.main.get_command(app)
    groups = [c for n, c in root.commands.items() if COMMANDS[n].group]
    lazy = [*COMMANDS.values(), *(x for g in groups for x in getattr(type(g), "lazy", {}).values())]
    return {f"simcli.cli.{x.module}" for x in lazy}


@pytest.mark.parametrize(
    "argv, own",
    [
        (["speedup", "-k", "1..64", "-f", "json"], {"speedup"}),
        (["speedup", "-k", "1..8"], {"speedup"}),
        (["comm", "-k", "2..8", "-s", "1KiB..1MiB:x4"], {"speedup"}),
        (["explain", "-k", "64"], {"algorithms"}),
        (["compare", "--profile", "dgx-a100,dgx-h100", "-k", "8,16"], {"compare"}),
        (["plan", "max-devices", "-e", "0.9", "-k", "8..64:x2"], {"plan"}),
        (["profiles", "list"], {"catalog"}),
        (["--help"], set()),
        (["plan", "--help"], {"plan"}),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else "",
)
def test_start_up_imports_the_invoked_commands_module_only(argv, own):
    """simcli.cli.app lists the commands (app.COMMANDS); a command's module is imported when it runs, and no
    other command's module is: `simcli speedup` imports simcli.cli.speedup and none of plot, bench, plan, ..."""
    code = (
        "import sys\nfrom simcli.cli import main\n"
        f"sys.argv = ['simcli', *{argv!r}]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "sys.stderr.write('\\nMODULES ' + ' '.join(m for m in sys.modules if m.startswith('simcli.cli.')))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    loaded = set(r.stderr.rsplit("MODULES ", 1)[1].split())
    commands = _command_modules()
    assert {"simcli.cli.speedup", "simcli.cli.plot", "simcli.cli.bench", "simcli.cli.plan_best"} <= commands
    assert loaded & commands == {f"simcli.cli.{m}" for m in own}


def test_the_command_tables_help_lines_are_the_commands_own(runner):
    """--help lists a lazy command by its table's line (app.COMMANDS, plan's): the first sentence of the command's
    own help, so the listing reads as the commands would write it, at any width."""
    import typer

    from simcli.cli.app import COMMANDS

    root = typer.main.get_command(app)
    lazy = [(root, COMMANDS)] + [(g, type(g).lazy) for g in root.commands.values() if hasattr(type(g), "lazy")]
    assert len(lazy) >= 2  # the root and plan
    for group, table in lazy:
        assert list(group.commands) == [*(n for n in group.commands if n not in table), *table]
        for name, entry in table.items():
            assert group.commands[name].get_short_help_str(10**6) == entry.help, name
    wide = runner.invoke(app, ["--help"], terminal_width=200).stdout
    assert all(f"{n}  " in wide for n in COMMANDS) and COMMANDS["speedup"].help in wide


def test_heavy_modules_not_imported_on_fast_paths(prof):
    code = (
        "import sys; from simcli.cli import app\n"
        "from typer.testing import CliRunner\n"
        f"r = CliRunner().invoke(app, ['speedup', '--profile', {prof!r}, '-k', '1..64', '-f', 'json'])\n"
        "assert r.exit_code == 0, r.output\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ""


def test_import_simcli_is_lazy_and_its_api_whole():
    """``import simcli`` loads no engine (PEP 562); every name of ``__all__`` is there on first use."""
    code = (
        "import sys, simcli\n"
        "print('numpy' in sys.modules, 'simcli.step.engine' in sys.modules)\n"
        "from simcli import *\n"
        "print(all(callable(getattr(simcli, n)) or n == '__version__' for n in simcli.__all__))\n"
        "print(set(simcli.__all__) <= set(dir(simcli)))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False", "True", "True"]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        import simcli

        simcli.nope  # noqa: B018


def test_output_file_permissions_follow_umask(runner, prof, tmp_path):
    import os

    old = os.umask(0o022)
    try:
        out = tmp_path / "p.csv"
        assert run(runner, "speedup", "--profile", prof, "-k", "1,2", "-f", "csv", "-o", out).exit_code == 0
        assert out.stat().st_mode & 0o777 == 0o644
    finally:
        os.umask(old)


def test_every_predicting_command_takes_every_scenario_option():
    """The scenario options are declared once (ScenarioOptions) and reach every command that predicts."""
    import dataclasses

    import typer

    from simcli.cli.options import ScenarioOptions

    root = typer.main.get_command(app)
    paths = [
        ["speedup"],
        ["explain"],
        ["compare"],
        ["plan", "max-devices"],
        ["plan", "solve"],
        ["plan", "time-to-train"],
        ["plan", "measure"],
        ["plot", "speedup"],
        ["plot", "breakdown"],
    ]
    for path in paths:
        cmd = root
        for name in path:
            cmd = cmd.commands[name]
        names = {p.name for p in cmd.params}
        missing = [f.name for f in dataclasses.fields(ScenarioOptions) if f.name not in names]
        assert not missing, (path, missing)


def test_shell_completion_is_offered_and_completes_commands_and_options(runner, monkeypatch):
    import os
    import subprocess
    import sys
    from pathlib import Path

    import typer._completion_shared as shared

    # typer names the shell from this process's parents (shellingham): pinned, so that a run without a shell
    # above it (a scheduler, a background job) tests the same thing; outside a shell is test_hardening_gate's
    monkeypatch.setattr(shared, "_get_shell_name", lambda: "bash")
    import typer.completion

    monkeypatch.setattr(typer.completion, "_get_shell_name", lambda: "bash")  # typer's callback's own binding
    r = runner.invoke(app, ["--help"])
    assert "--install-completion" in r.stdout and "--show-completion" in r.stdout
    r = runner.invoke(app, ["--show-completion", "bash"])
    assert "complete -o default -F _simcli_completion simcli" in r.stdout
    exe = str(Path(sys.executable).with_name("simcli"))  # the console script a shell completes (not python -m)
    env = {**os.environ, "_SIMCLI_COMPLETE": "complete_bash", "COMP_CWORD": "1", "COMP_WORDS": "simcli spe"}
    done = subprocess.run([exe], env=env, capture_output=True, text=True)
    assert done.stdout.split() == ["speedup"], done
    env.update(COMP_CWORD="2", COMP_WORDS="simcli speedup --gra")
    done = subprocess.run([exe], env=env, capture_output=True, text=True)
    assert set(done.stdout.split()) == {"--grad-dtype"}, done


# --------------------------------------------------------------------------- help and completion (issue 39)


def _commands():
    """Every command and group of the application, as (path, click command), the root first."""
    import typer

    root = typer.main.get_command(app)
    out, todo = [], [((), root)]
    while todo:
        path, cmd = todo.pop(0)
        out.append((path, cmd))
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            if not sub.hidden:
                todo.append(((*path, name), sub))
    return root, out


def _parse(root, argv: list[str]):
    """Parse ``argv`` as the shell would pass it to simcli, down to the command, without running it (a usage error
    raises): options that exist, values of the right type, required arguments given."""
    cmd, ctx = root, root.make_context("simcli", list(argv))
    while hasattr(cmd, "commands"):
        rest = [*getattr(ctx, "_protected_args", getattr(ctx, "protected_args", [])), *ctx.args]
        name, cmd, args = cmd.resolve_command(ctx, rest)
        ctx = cmd.make_context(name, args, parent=ctx)
    return cmd


def test_every_help_ends_with_examples_that_parse_and_names_what_each_option_takes(runner):
    """All 32 help screens: one or two '$ simcli ...' examples at the end (one shared epilog helper), each a command
    line that parses; every option's metavar says what it takes (no '<str>', TEXT, '<int>' or '<float>')."""
    import re
    import shlex

    root, cmds = _commands()
    assert len(cmds) >= 32
    for path, cmd in cmds:
        r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
        assert r.exit_code == 0, (path, r.output)
        lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
        assert max(len(ln) for ln in lines) <= 80, path
        tail = list(itertools.takewhile(lambda ln: ln.startswith("    $ simcli "), reversed(lines)))
        assert 1 <= len(tail) <= 2 and lines[-len(tail) - 1].strip() in ("Example:", "Examples:"), (path, lines[-4:])
        for ex in tail:
            argv = shlex.split(ex.strip()[len("$ simcli ") :])
            assert argv[: len(path)] == list(path) or path == (), (path, ex)  # a group's example runs one of its own
            found = _parse(root, argv)
            assert found is cmd or hasattr(cmd, "commands"), (path, ex, found.name)  # a command's example: itself
        bad = re.findall(r"<(?:str|int|float|list)[^>]*>|\bTEXT\b|\bINTEGER\b|\bFLOAT\b", r.stdout)
        assert not bad, (path, bad)
    opts = runner.invoke(app, ["speedup", "--help"]).stdout
    for shown in ("--devices K-RANGE", "--profile PROFILE", "--model MODEL", "--workload FILE", "--accum N"):
        assert shown in opts
    assert "--size SIZES" in runner.invoke(app, ["comm", "--help"]).stdout


def test_a_bad_example_would_not_parse():
    """The parse the help test uses refuses what the shell would refuse (so the test above can fail)."""
    root, _ = _commands()
    assert _parse(root, ["speedup", "-k", "1..8"]).name == "speedup"
    for argv in (["speedup", "--no-such-option"], ["explain", "-k", "eight"], ["check"], ["plan", "nothing"]):
        with pytest.raises(Exception):
            _parse(root, argv)


def test_completion_offers_profile_and_model_names(tmp_path, monkeypatch):
    import os
    from pathlib import Path

    from simcli.cli.options import complete_model, complete_profile

    exe = str(Path(sys.executable).with_name("simcli"))

    def complete(words: str) -> list[str]:
        env = {**os.environ, "_SIMCLI_COMPLETE": "complete_bash", "COMP_WORDS": words}
        env["COMP_CWORD"] = str(len(words.split()) - 1)
        return subprocess.run([exe], env=env, capture_output=True, text=True, cwd=tmp_path).stdout.split()

    assert {"dgx-h100", "dgx-a100"} <= set(complete("simcli speedup --profile dgx"))
    assert all(x.startswith("dgx") for x in complete("simcli speedup --profile dgx"))
    assert {"llama2-7b", "llama2-70b"} <= set(complete("simcli explain -m llama2"))
    assert "dgx-h100" in complete("simcli profiles show dgx-h")
    assert complete("simcli compare -p dgx-a100,dgx-h1") == ["dgx-a100,dgx-h100"]
    # profile files: those on the search path by name (list_profiles), and YAML files by path
    (tmp_path / "my-cluster.yaml").write_text("name: x\n")
    monkeypatch.chdir(tmp_path)
    assert complete_profile("my-") == ["my-cluster.yaml"]
    assert complete_model("resnet") == ["resnet50"] or "resnet50" in complete_model("resnet")


def test_a_tuner_plugin_profile_says_whose_choice_runs(runner):
    """gcp-a3-mega (nccl.tuner: fastest): comm's and speedup's headers and explain's rows say the platform's tuner
    plugin chooses, and explain's JSON carries it; a profile on NCCL's own tuner says none of it."""
    words = "its platform's tuner plugin choosing"
    for profile, said in (("gcp-a3-mega", True), ("dgx-h100", False)):
        r = runner.invoke(app, ["comm", "-p", profile, "-k", "16", "-s", "1MiB"], env={"COLUMNS": "400"})
        assert r.exit_code == 0, r.output
        assert (words in r.stdout) is said
        r = runner.invoke(app, ["explain", "-p", profile, "-m", "bert-base", "-k", "16", "-f", "json"])
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["nccl_tuner"] == ("fastest" if said else "nccl")
        r = runner.invoke(app, ["explain", "-p", profile, "-m", "bert-base", "-k", "16"], env={"COLUMNS": "400"})
        assert ("the platform's tuner plugin replaces NCCL's tuner" in r.stdout) is said
