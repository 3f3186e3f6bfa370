"""Tables that fit the terminal (simcli.io.render.FitTable) and the header block that wraps at word boundaries."""

from __future__ import annotations

import os

import pytest

from simcli.io.render import Column, Wide, render_text, table

#: the columns that are the answer: never left out, never cut
ANSWER = ("k", "step ms", "S(k)", "E(k)", "samples/s")


def _cli(width: int, *args: str):
    """simcli in this process (CliRunner) with COLUMNS=width, as a user's terminal of that width; the result."""
    from typer.testing import CliRunner

    from simcli.cli import app

    return CliRunner().invoke(app, list(args), env={"COLUMNS": str(width)})


def _run(width: int, *args: str) -> str:
    r = _cli(width, "speedup", "--devices", "1..64:x2", *args)
    assert r.exit_code == 0, r.output
    return r.stdout


def _table(text: str) -> tuple[list[str], list[list[str]]]:
    """(headers, rows) of the first table in ``text``: the line with '┃' and the lines with '│' below it."""
    lines = text.splitlines()
    h = next(i for i, line in enumerate(lines) if "┃" in line)
    heads = [c.strip() for c in lines[h].split("┃")]
    rows = []
    for line in lines[h + 2 :]:
        if "│" not in line:
            break
        rows.append([c.strip() for c in line.split("│")])
    return heads, rows


@pytest.mark.parametrize("width", [80, 100, 140])
def test_speedup_table_keeps_the_answer_whole_at_every_width(width):
    text = _run(width)
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width
    heads, rows = _table(text)
    assert len(rows) == 7  # 1, 2, 4, ..., 64
    for name in ANSWER:
        assert name in heads, (width, heads)
        j = heads.index(name)
        cells = [r[j] for r in rows]
        assert all(c and "…" not in c for c in cells), (width, name, cells)
    assert [r[heads.index("k")] for r in rows] == ["1", "2", "4", "8", "16", "32", "64"]
    assert all(float(r[heads.index("E(k)")]) <= 1 for r in rows)
    if width == 140:  # every column but the samples/s band fits (headers shortened): only that band left out
        assert "bn GB/s" in heads and "proto" in heads and "E band" in heads
        assert "left out to fit 140 columns: samples/s band (" in text
    else:  # what is left out is named in one note that says how to see it
        note = text[text.index("left out to fit") :]
        assert f"left out to fit {width} columns" in note and "--wide" in note and "-f csv" in note


def test_header_block_wraps_at_word_boundaries_under_its_text():
    text = _run(80)
    head = text[: text.index("┃")].splitlines()
    spread = next(i for i, line in enumerate(head) if line.startswith("devices"))
    # the wrapped part of a line starts under the text (10 columns in), with a whole word
    assert head[spread + 1].startswith(" " * 10) and not head[spread + 1][10].isspace()
    assert head[spread].rstrip()[-1] != "-"
    words = " ".join(head[spread : spread + 4]).split()
    assert "E[max" in words and "normals]" in words  # rich markup characters survive


def test_wide_shows_every_column_at_80():
    text = _run(80, "--wide")
    heads, rows = _table(text)
    assert {"bottleneck GB/s", "bottleneck", "algorithm", "proto"} <= set(heads)
    assert "left out" not in text


def _recs(n: int = 3) -> list[dict]:
    return [{"a": i, "b": "x" * 20, "c": "y" * 30} for i in range(n)]


def test_fit_table_drops_the_highest_priority_number_first_and_never_priority_zero():
    cols = [Column("a", "a"), Column("b", "b", priority=1), Column("c", "c", priority=2)]
    t = table(_recs(), cols)
    assert t.fit(200) == ([0, 1, 2], False, [])
    assert t.fit(30) == ([0, 1], False, ["c"])
    assert t.fit(5) == ([0], False, ["b", "c"])
    out = render_text(t, width=30)
    assert "c" not in out.split("left out")[0].split("\n")[0] and "left out to fit 30 columns: c" in out


def test_fit_table_shortens_headers_before_leaving_out():
    cols = [Column("a long header", "a", short="a"), Column("b", "b", priority=1)]
    t = table(_recs(), cols)
    # long: 13 + 3 + 20 = 36; short: 1 + 3 + 20 = 24
    assert t.fit(36) == ([0, 1], False, [])
    assert t.fit(30) == ([0, 1], True, [])
    assert t.fit(20)[2] == ["b"]


def test_wide_draws_past_the_width():
    cols = [Column("a", "a"), Column("b", "b", priority=1), Column("c", "c", priority=2)]
    out = render_text(Wide(table(_recs(), cols)), width=30)
    assert "y" * 30 in out and "left out" not in out


def test_comm_table_keeps_time_and_busbw_whole_at_80():
    r = _cli(80, "comm", "--devices", "2..64:x2", "--size", "1KiB..1GiB:x4")
    assert r.exit_code == 0, r.output
    assert max(len(line.rstrip()) for line in r.stdout.splitlines()) <= 80
    heads, rows = _table(r.stdout)
    for name in ("k", "size", "busbw GB/s"):
        assert all("…" not in row[heads.index(name)] for row in rows if not row[0].startswith("…"))
    assert any(h.startswith("time ") for h in heads) and "left out to fit 80 columns" in r.stdout


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize(
    "args, answer",
    [
        (
            ["validate", f"{ROOT}/validation/published/nccl-allreduce-8xA100-nvswitch.csv", "-p", "dgx-a100"],
            ("k", "size", "meas µs", "pred µs", "error"),
        ),
        (
            ["validate", f"{ROOT}/measurements/kineto-ddp-gloo-cpu", "-p", "cpu-loopback", "--params", "786432"]
            + ["--flops-per-sample", "4718592", "--batch-per-device", "64"],
            ("term", "meas ms", "pred ms", "error"),
        ),
        (["compare", "-p", "dgx-a100,dgx-h100", "-k", "8..64:x2", "--strategy", "ddp,fsdp"], ("k", "S(k)", "E(k)")),
        (["models", "list"], ("name", "params")),
        (["profiles", "list"], ("name", "device")),
    ],
)
def test_other_tables_keep_their_answer_whole_at_80(args, answer):
    """validate (a measured table and a traced step), compare, models list and profiles list at 80 columns: no line
    wider, and the answer's columns present and uncut in every row."""
    r = _cli(80, *args)
    assert r.exit_code == 0, r.output
    assert max(len(line.rstrip()) for line in r.stdout.splitlines()) <= 80
    heads, rows = _table(r.stdout)
    assert rows
    for name in answer:
        assert name in heads, (args, heads)
        j = heads.index(name)
        assert all(row[j] and "…" not in row[j] for row in rows), (args, name)


# --------------------------------------------------------------------------- every table at 80 columns (issue 39)

#: (command, the key columns that carry the answer (a header, or 'a|b' for a header and its short form), text the
#: rows must show whole, the columns left out at 80 in the order the line names them)
NARROW = [
    (
        "explain -k 64",
        ["tier", "latency term|latency", "bandwidth term|bandwidth"],
        ["nvlink", "infiniband"],
        ["link B"],
    ),
    (
        "plan best -m gpt2 -p dgx-h100 --global-batch 512 --tokens 1e10 --devices 8..64:x2 --strategy ddp,fsdp "
        "--price-per-device-hour 2.5",
        ["strategy", "k", "samples/s", "days", "cost"],
        ["answer"],
        ["mem GB", "device-h"],
    ),
    (
        "plan max-devices --min-efficiency 0.9 --profile dgx-h100 --model llama2-7b --algorithm auto --partial-nodes",
        ["from k", "to k", "E crosses", "E(to k)"],
        ["falls below", "rises to"],
        [],
    ),
    (
        "plan time-to-train --model gpt2 --tokens 1e10 --profile dgx-h100 --devices 8..64:x2 "
        "--price-per-device-hour 2.5",
        ["k", "E(k)", "time", "cost"],
        ["cheapest", "fastest"],
        [],
    ),
    ("compare -p dgx-h100,dgx-a100 -k 8,64", ["k", "profile", "step ms", "S(k)", "gain"], ["dgx-a100"], ["comm ms"]),
    (
        "check validation/published/nccl-allreduce-16xH100-2node-ib400x8.csv -p dgx-h100",
        ["k", "size", "meas/exp", "verdict"],
        ["16 GiB", "OK"],
        ["busbw expected GB/s", "limiting tier", "NCCL's choice"],
    ),
    (
        "validate validation/published/nccl-allreduce-8xA100-nvswitch.csv --profile dgx-a100",
        ["k", "size", "measured µs|meas µs", "predicted µs|pred µs", "error", "group"],
        ["16 GiB"],
        [],
    ),
    (
        "validate measurements/kineto-ddp-gloo-cpu -p cpu-loopback --params 786432 --batch-per-device 64",
        ["term", "error", "collective", "time ms", "exposed ms"],
        ["exposed communication", "all_reduce"],
        [],
    ),
    ("algorithms", ["size \\ k", "2", "1024", "k", "crossover size", "fastest changes"], ["nvlst"], ["k = 512"]),
    ("profiles show dgx-h100", [], ["network[0].name", "nvlink", "nccl.version", "2.29.7"], []),
]


def _heads(text: str) -> list[str]:
    return [c.strip() for line in text.splitlines() if "┃" in line for c in line.split("┃")]


@pytest.mark.parametrize("command, keys, shown, dropped", NARROW, ids=[c[0].split(" -")[0] for c in NARROW])
def test_every_table_fits_80_columns_keeps_its_key_columns_and_names_what_it_leaves_out(command, keys, shown, dropped):
    """Each command's tables at COLUMNS=80 (CliRunner, as a user's 80-column terminal): no line wider, the columns
    that carry the answer kept whole, and the columns left out named in the one line under the table; --wide shows
    them (simcli.io.render.FitTable)."""
    import shlex

    from typer.testing import CliRunner

    from simcli.cli import app

    r = CliRunner().invoke(app, shlex.split(command), env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    text = r.stdout
    assert max(len(line) for line in text.splitlines()) <= 80, text
    heads = _heads(text)
    for key in keys:
        assert any(k in heads for k in key.split("|")), (key, heads)
    flat = " ".join(text.split())  # the left-out line may wrap
    for cell in shown:
        assert cell in flat and "…" not in cell, cell
    if not dropped:
        assert "left out" not in text
        return
    assert f"left out to fit 80 columns: {', '.join(dropped)} (--wide shows every column" in flat
    assert not any(d in heads for d in dropped if not d.startswith("k = "))
    wide = CliRunner().invoke(app, [*shlex.split(command), "--wide"], env={"COLUMNS": "80"}).stdout
    assert "left out" not in wide
    for d in dropped:
        assert d.removeprefix("k = ") in _heads(wide), (d, _heads(wide))


def test_the_default_job_says_one_short_line_and_its_table_starts_on_the_first_screen():
    """`simcli speedup --devices 1..64` (default profile and model) on an 80x24 terminal: at most one stderr line of
    at most 160 characters (the details are in `explain`), and the table's header and first row within 24 rows."""
    import math

    from typer.testing import CliRunner

    from simcli.cli import app

    r = CliRunner().invoke(app, ["speedup", "--devices", "1..64"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    err = r.stderr.splitlines()
    assert len(err) <= 1 and all(len(line) <= 160 for line in err), err
    rows = sum(max(1, math.ceil(len(line) / 80)) for line in err)  # a terminal wraps the line
    out = r.stdout.splitlines()
    head = next(i for i, line in enumerate(out) if "┃" in line)
    assert rows + head + 3 <= 24, (rows, head)  # header, rule and the k = 1 row on the first screen
    assert out[head + 2].split("│")[0].strip() == "1"
    # the explanation is still there, in full, where it belongs
    k = err[0].split("'simcli explain -k ")[1].split("'")[0] if err else "9"
    d = CliRunner().invoke(app, ["explain", "-k", k, "-f", "json"]).stdout
    assert "NCCL_ALGO=" in d
