"""`simcli plan measure` (simcli.decisions.measure, simcli.cli.plan_measure): the counts it plans, the commands that
measure them (parsed by the CLI's own parser, never run), the sizes the step sends, the JSON records, the ranking,
a plan with no cross-node run, and bad input."""

from __future__ import annotations

import json
import shlex

import numpy as np
import pytest
import typer

from simcli.cli import app

FSDP = ["plan", "measure", "-p", "dgx-h100", "-m", "llama2-7b", "--strategy", "fsdp", "-k", "8..1024:x2"]
FIELDS = {"rank", "what", "devices", "nodes", "where", "sizes", "command", "alternative", "pins", "narrows", "why"}

ONE_TIER = """\
name: one
description: one node
sources: [test]
device: {name: D, peak_flops: {bf16: 100 TFLOP/s}, mfu: 0.5, memory: 80 GB}
network:
  - {name: nvlink, size: 8, bandwidth: 300 GB/s, latency: 3 us}
"""


def _json(runner, args):
    r = runner.invoke(app, [*args, "-f", "json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _parse(argv: list[str]):
    """Parse a simcli command line down to its command without running it (a usage error raises)."""
    root = typer.main.get_command(app)
    cmd, ctx = root, root.make_context("simcli", list(argv))
    while hasattr(cmd, "commands"):
        rest = [*getattr(ctx, "_protected_args", getattr(ctx, "protected_args", [])), *ctx.args]
        name, cmd, args = cmd.resolve_command(ctx, rest)
        ctx = cmd.make_context(name, args, parent=ctx)
    return cmd, ctx.params


def _simcli_argv(command: str) -> list[str] | None:
    """The simcli arguments of a command line: `simcli ...` or `torchrun ... -m simcli ...` (None: another tool)."""
    words = shlex.split(command.split("|")[0])
    if words[0] == "simcli":
        return words[1:]
    if words[0] == "torchrun":
        i = words.index("-m")
        assert words[i + 1] == "simcli"
        nnodes = int(words[words.index("--nnodes") + 1])
        per = int(words[words.index("--nproc-per-node") + 1])
        return words[i + 2 :] + ["--__world", str(nnodes * per)]
    return None


@pytest.fixture(scope="module")
def fsdp():
    from typer.testing import CliRunner

    return _json(CliRunner(), FSDP)


def test_fsdp_plan_names_counts_inside_and_across_nodes_each_with_a_command(fsdp):
    ans = fsdp["answer"]
    assert all(set(m) >= FIELDS for m in ans)
    counts = {m["devices"] for m in ans}
    assert {8, 16}.issubset(counts) and len(counts) >= 2
    # the range reaches 128 nodes; the most planned is --max-nodes 8 (64 devices), and the note says why
    assert max(counts) == 64 and any("--max-nodes 8" in n for n in fsdp["notes"])
    assert sorted(m["rank"] for m in ans) == list(range(1, len(ans) + 1))
    assert [m["narrows"] for m in sorted(ans, key=lambda m: m["rank"])] == sorted(
        (m["narrows"] for m in ans), reverse=True
    )
    nccl = [m for m in ans if m["what"].startswith("nccl-tests")]
    assert {m["devices"] for m in nccl} == {8, 16, 64}
    for m in nccl:
        w = shlex.split(m["command"].split("|")[0])
        assert w[:3] == ["mpirun", "-np", str(m["devices"])] and "./build/all_reduce_perf" in w
        sweep = w[w.index("./build/all_reduce_perf") + 1 :]
        assert sweep == ["-b", "8", "-e", "8G", "-f", "2", "-g", "1"]
        assert ("--hostfile" in w) == (m["nodes"] > 1) and m["nodes"] == m["devices"] // 8
    steps = [m for m in ans if m["what"] == "simcli bench step"]
    assert {m["devices"] for m in steps} == {8, 16}


def test_every_simcli_command_parses_with_the_cli_parser(fsdp):
    seen = 0
    for m in fsdp["answer"]:
        for command in filter(None, (m["command"], m["alternative"])):
            argv = _simcli_argv(command)
            if argv is None:
                continue
            world = None
            if "--__world" in argv:
                world = int(argv[argv.index("--__world") + 1])
                argv = argv[: argv.index("--__world")]
                assert world == m["devices"]
            cmd, params = _parse(argv)
            seen += 1
            assert cmd.name in ("allreduce", "step")
            if world is None:  # spawned here: the world sizes say which k
                assert str(m["devices"]) in params["world_sizes"].split(",")
            assert params["backend"].value == "nccl"
    assert seen >= 4


def test_the_sizes_are_the_models_collectives(fsdp):
    """llama2-7b, 32 FSDP units: a unit's bf16 parameters all-gathered, its fp32 gradients reduce-scattered."""
    params, units = 6738415616, 32
    unit_ag, unit_rs = params / units * 2, params / units * 4
    for m in fsdp["answer"]:
        if not m["what"].startswith("nccl-tests"):
            continue
        model = {s["bytes"] for s in m["sizes"] if s["kind"] == "model"}
        assert model == {round(unit_ag), round(unit_rs)}
        size_arg = shlex.split(m["alternative"])[shlex.split(m["alternative"]).index("--size") + 1]
        from simcli.base.ranges import parse_sizes

        assert {round(unit_ag), round(unit_rs)} <= set(parse_sizes(size_arg).astype(np.int64).tolist())
        assert any(s["kind"] == "band" for s in m["sizes"])


def test_ddp_sizes_are_the_buckets(runner):
    d = _json(runner, ["plan", "measure", "-p", "dgx-h100", "-m", "gpt2", "-k", "8..64:x2"])
    m = next(m for m in d["answer"] if m["what"].startswith("nccl-tests"))
    model = sorted(s["bytes"] for s in m["sizes"] if s["kind"] == "model")
    grad = 124439808 * 4  # gpt2's fp32 gradient
    full = 25 * 2**20
    assert model == sorted({full, grad - (grad // full) * full})


def test_terms_add_up_and_the_comm_band_comes_from_the_published_runs(fsdp):
    t = {r["term"]: r for r in fsdp["terms"]}
    total = sum(r["seconds"] for r in t.values())
    assert total == pytest.approx(fsdp["t_step_s"], rel=1e-6)
    for r in t.values():
        assert r["t_step_lo_s"] <= fsdp["t_step_s"] * (1 + 1e-9) and r["t_step_hi_s"] >= fsdp["t_step_s"] * (1 - 1e-9)
    assert "p10-p90 of published runs" in t["exposed comm"]["band"]
    # the MFU band moves compute by 1/1.08..1/0.70 of itself; slower compute hides more of the communication
    grow = (t["compute"]["seconds"] + t["slowest of k"]["seconds"]) * (1 / 0.70 - 1)
    up = t["compute"]["t_step_hi_s"] - fsdp["t_step_s"]
    assert grow - t["exposed comm"]["seconds"] <= up <= grow * (1 + 1e-6)
    # ranked first: the run that pins the widest term (the MFU, here)
    first = min(fsdp["answer"], key=lambda m: m["rank"])
    assert first["what"] == "simcli bench step" and first["devices"] == 8


def test_mfu_band_is_what_the_published_h100_rows_give():
    """MFU_BAND's low end: torchtitan's Llama 3.1 8B on 8 H100s (6·N per token) against dgx-h100's 0.40."""
    import csv
    from pathlib import Path

    from simcli.decisions.measure import MFU_BAND

    path = Path(__file__).resolve().parents[2] / "validation/published/fsdp-torchtitan-h100.csv"
    rows = [r for r in csv.DictReader(line for line in path.open() if not line.startswith("#"))]
    r = next(r for r in rows if r["model"] == "8b" and r["k"] == "8")
    mfu = 6 * float(r["params"]) * float(r["tps_gpu"]) / 989.4e12
    assert mfu / 0.40 == pytest.approx(MFU_BAND[0], abs=0.01)


def test_knee_is_where_e_falls_fastest(fsdp):
    from simcli.io.profiles import resolve_profile
    from simcli.io.workloads import get_model
    from simcli.step.engine import Scenario, simulate

    w = get_model("llama2-7b").workload()
    sc = Scenario(profile=resolve_profile("dgx-h100"), workload=w, strategy="fsdp")
    k = 8 * 2 ** np.arange(8)
    e = simulate(sc, k).efficiency
    drop = (e[:-1] - e[1:]) / np.log2(k[1:] / k[:-1])
    j = int(np.argmax(drop))
    assert (fsdp["knee"]["from"], fsdp["knee"]["to"]) == (int(k[j]), int(k[j + 1]))
    assert fsdp["knee"]["bracket"][1] is None and "past the largest measured count (64)" in fsdp["knee"]["words"]


@pytest.mark.parametrize("where", ["profile", "range"])
def test_one_node_plans_no_cross_node_run(runner, tmp_path, where):
    if where == "profile":
        f = tmp_path / "one.yaml"
        f.write_text(ONE_TIER)
        args = ["plan", "measure", "-p", str(f), "-m", "gpt2", "-k", "1..8"]
    else:
        args = ["plan", "measure", "-p", "dgx-h100", "-m", "gpt2", "-k", "1..8"]
    d = _json(runner, args)
    assert {m["nodes"] for m in d["answer"]} == {1}
    assert all("mpirun" not in m["command"] or "--hostfile" not in m["command"] for m in d["answer"])
    assert all("torchrun" not in (m["command"] + (m["alternative"] or "")) for m in d["answer"])
    assert any("no cross-node run" in n for n in d["notes"])
    step = next(m for m in d["answer"] if m["what"] == "simcli bench step")
    assert any(p.startswith("σ") for p in step["pins"])  # k = 1 against k = 8 in the one node


def test_table_fits_80_columns_and_csv_has_one_row_per_measurement(runner):
    import csv
    import io

    r = runner.invoke(app, FSDP, env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    assert "measurements, ranked" in r.stdout and "mpirun -np 16 -N 8" in " ".join(r.stdout.split())
    c = runner.invoke(app, [*FSDP, "-f", "csv"])
    rows = list(csv.DictReader(io.StringIO(c.stdout)))
    assert len(rows) == 5 and {"what", "devices", "sizes", "command", "pins", "rank", "why"} <= set(rows[0])


def test_output_file(runner, tmp_path):
    f = tmp_path / "plan.json"
    r = runner.invoke(app, [*FSDP, "-f", "json", "-o", str(f)])
    assert r.exit_code == 0 and r.stdout == ""
    assert json.loads(f.read_text())["question"] == "measure"
    again = runner.invoke(app, [*FSDP, "-f", "json", "-o", str(f)])
    assert again.exit_code == 2


@pytest.mark.parametrize(
    "args, words",
    [
        (["-k", ""], "--devices"),
        (["-k", "8..1024:x2", "--strategy", "nope"], "--strategy"),
        (["-k", "8..1024:x2", "--max-nodes", "0"], "--max-nodes"),
        ([], "--devices"),
    ],
)
def test_bad_input_is_one_line_exit_2(runner, args, words):
    r = runner.invoke(app, ["plan", "measure", "-p", "dgx-h100", "-m", "llama2-7b", *args])
    assert r.exit_code == 2, r.output
    err = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(err) == 1 and words in err[0], r.stderr


def test_a_given_or_calibrated_mfu_has_no_band_and_drops_the_step_run():
    """--mfu (or an MFU calibrate fitted for the compute dtype) is taken as measured: the compute term's band is 0,
    and the one-node bench step no longer carries it."""
    from simcli.cli.plan_measure import step_model
    from simcli.decisions.measure import measure_plan
    from simcli.io.profiles import resolve_profile
    from simcli.io.workloads import get_model
    from simcli.step.engine import Scenario

    p = resolve_profile("dgx-h100")
    w = get_model("llama2-7b").workload()
    k = 8 * 2 ** np.arange(8)
    base = Scenario(profile=p, workload=w, strategy="fsdp")
    cal = Scenario(profile=p.replace(calibration={"step": {"by_dtype": {"bf16": {}}}}), workload=w, strategy="fsdp")
    given = base.replace(mfu=0.4)
    plans = [measure_plan(sc, k, step_model=step_model(sc)) for sc in (base, cal, given)]
    compute = [next(t for t in pl.terms if t["term"] == "compute") for pl in plans]
    assert compute[0]["narrows"] > 0.3 and compute[1]["narrows"] == 0 and compute[2]["narrows"] == 0
    assert plans[0].measurements[0].what == "simcli bench step"
    assert plans[1].measurements[0].what != "simcli bench step" or plans[1].measurements[0].devices != 8
