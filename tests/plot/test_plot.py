"""Pictures: the data behind each figure equals `--format json`, files are valid, errors exit 2.

Figures are captured by wrapping :func:`simcli.plot.figures.save_figure`, so every test
drives the real command line and then reads the lines, bars and images that
were drawn.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcli.base.ranges import parse_devices
from simcli.comm.grid import comm_grid
from simcli.io.profiles import resolve_profile
from simcli.plot import figures as P

from conftest import run

A = """\
name: t-a
description: test A
sources: [test]
device:
  name: devA
  peak_flops: {bf16: 312 TFLOP/s}
  mfu: 0.5
network:
  - {name: nvlink, size: 8, bandwidth: 300 GB/s, latency: 3 us, efficiency: 0.8}
  - {name: ib, bandwidth: 200 Gb/s, latency: 8 us, efficiency: 0.8}
"""
B = (
    A.replace("t-a", "t-b")
    .replace("devA", "devB")
    .replace("312 TFLOP/s", "989 TFLOP/s")
    .replace("200 Gb/s", "400 Gb/s")
)


@pytest.fixture
def profs(tmp_path):
    out = []
    for name, text in (("t-a", A), ("t-b", B)):
        f = tmp_path / f"{name}.yaml"
        f.write_text(text)
        out.append(str(f))
    return out


def ok(result):
    assert result.exit_code == 0, result.output
    return result


def lines_by_label(ax):
    return {ln.get_label(): ln for ln in ax.get_lines()}


# --------------------------------------------------------------------------- data behind the figures


def test_speedup_lines_equal_json_for_two_profiles(runner, figs, profs, tmp_path):
    out = tmp_path / "s.png"
    args = ["speedup", "-k", "1..64:x2", "-p", ",".join(profs), "-m", "resnet50"]
    recs = json.loads(ok(run(runner, *args, "-f", "json", "--plot", out)).stdout)
    assert out.stat().st_size > 0
    (fig,) = figs
    ax_t, ax_s, ax_e = fig.axes  # several lines: a throughput panel on top, so a faster system looks faster
    t_lines, s_lines, e_lines = ax_t.get_lines(), ax_s.get_lines(), ax_e.get_lines()
    for name in ("t-a", "t-b"):
        mine = [r for r in recs if r["profile"] == name]
        assert [r["devices"] for r in mine] == [1, 2, 4, 8, 16, 32, 64]
        (t_line,) = [ln for ln in t_lines if ln.get_label().startswith(name + " (")]
        (s_line,) = [ln for ln in s_lines if ln.get_label() == "_" + name]
        (e_line,) = [ln for ln in e_lines if ln.get_label() == "_" + name]
        assert list(t_line.get_ydata()) == [r["samples_per_s"] for r in mine]
        assert list(s_line.get_xdata()) == [r["devices"] for r in mine]
        assert list(s_line.get_ydata()) == [r["speedup"] for r in mine]
        assert list(e_line.get_ydata()) == [r["efficiency"] for r in mine]
    ideal = lines_by_label(ax_s)["ideal S = k"]
    assert list(ideal.get_xdata()) == list(ideal.get_ydata()) == [1, 2, 4, 8, 16, 32, 64]
    assert ax_s.get_xscale() == "log" and ax_t.get_yscale() == "log"  # geometric range
    # the gain of the second line over the first at the largest k is named in its legend entry (not written beside
    # the line, where it covered the line)
    gain = recs[-1]["samples_per_s"] / [r for r in recs if r["profile"] == "t-a"][-1]["samples_per_s"]
    assert not ax_t.texts
    names = [t.get_text().replace("\n", " ") for t in ax_t.get_legend().get_texts()]
    assert any(f"x{gain:.2f} over t-a at k = 64" in x for x in names), names
    title = ax_t.get_title(loc="left").replace("\n", " ")  # wrapped to the figure's width
    assert "resnet50" in title and "t-a vs t-b" in title and "batch 128/device" in title and "nccl" in title
    assert "DDP: fp32 gradients all-reduced with nccl in 25 MiB buckets during backward" in title


def test_titles_name_the_strategy_simulated_and_what_does_not_fit_is_greyed(runner, figs, tmp_path):
    """--strategy ddp,fsdp for a 7B model on 80 GB: the title says what each strategy communicates; DDP does not
    fit at any k, so its line is greyed and dashed and the legend says so; FSDP's line is drawn as usual."""
    args = ["plot", "speedup", "-p", "dgx-h100", "-m", "llama2-7b", "--strategy", "ddp,fsdp", "-k", "8..64:x2"]
    ok(run(runner, *args, "-o", tmp_path / "f.png"))
    (fig,) = figs
    ax_t = fig.axes[0]
    title = ax_t.get_title(loc="left").replace("\n", " ")
    assert "DDP: fp32 gradients all-reduced" in title and "FSDP over k: bf16 parameters all-gathered" in title
    labels = [ln.get_label() for ln in ax_t.get_lines()]
    assert "ddp: does not fit in 80 GB at every k (8..64) (greyed)" in labels
    assert any(label.startswith("fsdp (E ≥ 0.8") for label in labels)
    (grey,) = [ln for ln in ax_t.get_lines() if "does not fit" in ln.get_label()]
    assert grey.get_color() == "0.62" and grey.get_linestyle() == "--"
    assert "does not fit" in [t.get_text() for t in ax_t.texts]
    # the fitting part of DDP's line is empty: nothing of it is drawn as if it ran
    (ddp,) = [ln for ln in ax_t.get_lines() if ln.get_label() == "_ddp"]
    assert np.isnan(np.asarray(ddp.get_ydata(), dtype=float)).all()
    # one profile, fsdp alone: the title names FSDP, not DDP's buckets
    figs.clear()
    ok(run(runner, *args[:-4], "--strategy", "fsdp", "-k", "8..64:x2", "-o", tmp_path / "g.png"))
    title = figs[0].axes[0].get_title(loc="left")
    assert "FSDP" in title and "all-reduced" not in title and "MiB buckets" not in title


def test_plan_header_names_the_strategy(runner):
    r = ok(
        run(
            runner,
            *"plan max-devices --min-efficiency 0.9 -m llama2-7b --strategy fsdp -k 8..64:x2".split(),
        )
    )
    head = r.stdout.split("answer")[0]
    assert "FSDP over k" in head and "all-reduced" not in head and "MiB buckets" not in head


def test_threshold_crossing_is_marked_where_json_says(runner, figs, profs, tmp_path):
    recs = json.loads(
        ok(
            run(
                runner,
                *"speedup -k 1..64 -p".split(),
                profs[0],
                *"-m gpt2 -f json --plot".split(),
                tmp_path / "s.svg",
                "--threshold",
                "0.9",
            )
        ).stdout
    )
    first = next(r["devices"] for r in recs if r["efficiency"] < 0.9)
    (fig,) = figs
    ax_s, ax_e = fig.axes
    (label,) = [ln.get_label() for ln in ax_s.get_lines() if ln.get_label().startswith("t-a")]
    assert label.endswith(f"E < 0.9 from k = {first})")
    marks = [ln for ln in ax_e.get_lines() if ln.get_label() == "_crossing" and ln.get_marker() == "o"]
    assert [(m.get_xdata()[0], m.get_ydata()[0]) for m in marks] == [
        (first, next(r["efficiency"] for r in recs if r["devices"] == first))
    ]
    assert ax_s.get_xscale() == "linear"  # 1..64 is evenly spaced
    assert lines_by_label(ax_e)["threshold E = 0.9"].get_ydata()[0] == 0.9


def test_comm_lines_equal_json(runner, figs, profs, tmp_path):
    recs = json.loads(
        ok(
            run(
                runner,
                "comm",
                "-p",
                profs[0],
                *"-k 2..16:x2 -s 1KiB..1GiB:x4 -f json --plot".split(),
                tmp_path / "c.pdf",
            )
        ).stdout
    )
    (fig,) = figs
    ax_t, ax_b = fig.axes
    for k in (2, 4, 8, 16):
        mine = [r for r in recs if r["devices"] == k]
        t, b = lines_by_label(ax_t)[f"k = {k}"], lines_by_label(ax_b)[f"k = {k}"]
        assert list(t.get_xdata()) == [r["bytes"] for r in mine]
        assert list(t.get_ydata()) == [r["time_s"] for r in mine]
        assert list(b.get_ydata()) == [r["busbw_GBps"] for r in mine]
    assert ax_t.get_xscale() == ax_t.get_yscale() == "log"
    labels = [lab.get_text() for lab in ax_t.get_xticklabels()]
    assert any(s.endswith("KiB") for s in labels) and any(s.endswith("MiB") for s in labels)


def test_breakdown_bars_add_up_to_the_step_time(runner, figs, profs, tmp_path):
    recs = json.loads(ok(run(runner, "speedup", "-k", "1..32:x2", "-p", profs[1], "-f", "json")).stdout)
    ok(run(runner, "plot", "breakdown", "-k", "1..32:x2", "-p", profs[1], "-o", tmp_path / "b.png"))
    (fig,) = figs
    ax = fig.axes[0]
    unit = {"ms": 1e-3, "µs": 1e-6, "s": 1.0}[ax.get_ylabel().split("(")[1].rstrip(")")]
    bars = {c.get_label(): np.array([p.get_height() * unit for p in c.patches]) for c in ax.containers}
    np.testing.assert_allclose(sum(bars.values()), [r["t_step_s"] for r in recs], rtol=1e-12)
    upd = ["optimizer step"] if recs[0].get("t_update_s") is not None else []  # once per update (issue 22)
    if upd:
        np.testing.assert_allclose(bars["optimizer step"], [r["t_update_s"] for r in recs], rtol=1e-12, atol=1e-15)
    if recs[0].get("t_comm_exposed_s") is None:  # no overlap model: compute + communication
        assert list(bars) == ["compute", "communication", *upd]
        np.testing.assert_allclose(bars["communication"], [r["t_comm_s"] for r in recs], rtol=1e-12)
    else:
        assert list(bars) == ["compute", "compute ‖ hidden communication", "exposed communication", *upd]
        np.testing.assert_allclose(
            bars["exposed communication"], [r["t_comm_exposed_s"] for r in recs], rtol=1e-12, atol=1e-15
        )
        np.testing.assert_allclose(
            bars["compute"] + bars["compute ‖ hidden communication"], [r["t_compute_s"] for r in recs], rtol=1e-12
        )


def test_breakdown_with_overlap_splits_hidden_and_exposed():
    recs = [
        {"devices": k, "t_compute_s": 0.1, "t_comm_s": c, "t_comm_exposed_s": e, "t_step_s": 0.1 + e}
        for k, c, e in ((1, 0.0, 0.0), (8, 0.05, 0.01), (64, 0.2, 0.12))
    ]
    parts = P.breakdown_parts(recs)
    assert list(parts) == ["compute", "compute ‖ hidden communication", "exposed communication"]
    np.testing.assert_allclose(sum(parts.values()), [r["t_step_s"] for r in recs])
    np.testing.assert_allclose(parts["compute ‖ hidden communication"], [0.0, 0.04, 0.08])
    fig = P.breakdown_figure([P.Series("x", recs)], "t")
    assert len(fig.axes[0].containers) == 3


def test_algorithm_map_is_the_argmin(runner, figs, profs, tmp_path):
    ok(
        run(
            runner,
            "plot",
            "algorithms",
            "-p",
            profs[0],
            *"-k 2..64:x2 -s 1KiB..1GiB:x8 -o".split(),
            tmp_path / "a.png",
        )
    )
    (fig,) = figs
    from simcli.comm import collectives, registry

    prof = resolve_profile(profs[0])
    k, n = parse_devices("2..64:x2"), np.array([2.0**10 * 8**i for i in range(7)])
    names = list(registry.ALGORITHMS)
    times = np.stack([collectives.allreduce(a, prof.network, k[:, None], nbytes=n[None, :]).time for a in names])
    np.testing.assert_array_equal(np.asarray(fig.axes[0].images[0].get_array()), np.argmin(times, axis=0))


def test_algorithms_plot_matches_its_json_and_redraws(runner, figs, profs, tmp_path):
    table = tmp_path / "a.json"
    ok(
        run(
            runner,
            "algorithms",
            "-p",
            profs[1],
            *"-k 2..256:x2 -s 1KiB..1GiB:x4 -f json -o".split(),
            table,
            "--plot",
            tmp_path / "a.png",
        )
    )
    ok(run(runner, "plot", table, "-o", tmp_path / "again.png"))
    grid = json.loads(table.read_text())["grid"]
    ks, ns = sorted({r["devices"] for r in grid}), sorted({r["bytes"] for r in grid})
    for fig in figs:
        names = [t.get_text().split(" (never")[0] for t in fig.axes[0].get_legend().get_texts()]
        img = np.asarray(fig.axes[0].images[0].get_array())
        for r in grid:
            assert names[img[ks.index(r["devices"]), ns.index(r["bytes"])]] == r["fastest"]


# --------------------------------------------------------------------------- redraw saved tables


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_redraw_speedup_table(runner, figs, profs, tmp_path, fmt):
    table = tmp_path / f"s.{fmt}"
    ok(run(runner, "speedup", "-k", "1..16", "-p", ",".join(profs), "-f", fmt, "-o", table))
    ok(run(runner, "plot", table, "-o", tmp_path / "r.svg"))  # the shorthand
    ok(run(runner, "plot", "file", table, "--kind", "breakdown"))  # default name: s.png next to it
    assert (tmp_path / "s.png").exists()
    recs = json.loads(ok(run(runner, "speedup", "-k", "1..16", "-p", ",".join(profs), "-f", "json")).stdout)
    speed, breakdown = figs
    line = lines_by_label(speed.axes[0])  # two profiles: the throughput panel first, then S(k)
    mine = [r for r in recs if r["profile"] == "t-b"]
    (key,) = [k for k in line if k.startswith("t-b (")]
    assert list(line[key].get_ydata()) == [r["samples_per_s"] for r in mine]
    assert list(lines_by_label(speed.axes[1])["_t-b"].get_ydata()) == [r["speedup"] for r in mine]
    assert len(breakdown.axes) == 2  # one panel per profile


def test_redraw_bench_allreduce_with_model_overlay(runner, figs, profs, tmp_path):
    prof = resolve_profile(profs[0])
    rows = ["collective,backend,world_size,bytes,dtype,iters,time_s,time_p10_s,time_p90_s,algbw_GBps,busbw_GBps"]
    measured = {}
    for k in (2, 4):
        for n in (1024, 1 << 20):
            t = 1e-5 * k + n / 5e9
            measured[(k, n)] = t
            rows.append(
                f"all_reduce,gloo,{k},{n},fp32,20,{t!r},{t!r},{t!r},{n / t / 1e9!r},{n / t / 1e9 * 2 * (k - 1) / k!r}"
            )
    f = tmp_path / "bench.csv"
    f.write_text("# simcli bench allreduce\n# backend: gloo\n" + "\n".join(rows) + "\n")
    ok(run(runner, "plot", f, "-p", profs[0], "-o", tmp_path / "b.svg"))
    (fig,) = figs
    lines = lines_by_label(fig.axes[0])
    for k in (2, 4):
        m = lines[f"k = {k} measured"]
        assert m.get_linestyle() == "None" and m.get_marker() == "x"
        assert list(m.get_ydata()) == [measured[(k, 1024)], measured[(k, 1 << 20)]]
        model = comm_grid(
            prof, np.array([k]), np.array([1024.0, 2.0**20]), algorithm=None, message_dtype="fp32", protocol=None
        )
        assert list(lines[f"k = {k}"].get_ydata()) == [r["time_s"] for r in model]


def test_redraw_bench_step_draws_measured_over_predicted(runner, figs, tmp_path):
    f = tmp_path / "step.csv"
    f.write_text(
        textwrap.dedent("""\
        # simcli bench step
        world_size,backend,mode,t_step_s,speedup,efficiency,predicted_speedup,predicted_efficiency
        1,gloo,ddp,0.10,1.0,1.0,1.0,1.0
        2,gloo,ddp,0.11,1.8,0.9,1.9,0.95
        4,gloo,ddp,0.14,2.9,0.725,3.2,0.8
        """)
    )
    ok(run(runner, "plot", f, "-o", tmp_path / "step.png"))
    (fig,) = figs
    lines = lines_by_label(fig.axes[0])
    # markers are 'measured' with their own E (the line's note is the line's: no legend contradicts the markers)
    (meas,) = [v for k, v in lines.items() if k.startswith("measured (")]
    assert meas.get_label() == "measured (E < 0.8 from k = 4)"
    assert list(meas.get_ydata()) == [1.0, 1.8, 2.9]
    (pred,) = [v for k, v in lines.items() if k.startswith("predicted (the table's predicted_* columns) (")]
    assert pred.get_label().endswith("(line: E ≥ 0.8 up to k = 4)")
    assert list(pred.get_ydata()) == [1.0, 1.9, 3.2]


# --------------------------------------------------------------------------- files


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_png_svg_pdf_files_have_the_asked_size(runner, profs, tmp_path):
    base = ["plot", "speedup", "-k", "1..8", "-p", profs[0], "--width", "6", "--height", "4"]
    ok(run(runner, *base, "--dpi", "50", "-o", tmp_path / "s.png"))
    assert png_size((tmp_path / "s.png").read_bytes()) == (300, 200)
    ok(run(runner, *base, "-o", tmp_path / "s.svg"))
    svg = (tmp_path / "s.svg").read_text()
    assert svg.startswith("<?xml") and 'width="432pt" height="288pt"' in svg and svg.rstrip().endswith("</svg>")
    ok(run(runner, *base, "-o", tmp_path / "s.pdf"))
    pdf = (tmp_path / "s.pdf").read_bytes()
    assert pdf.startswith(b"%PDF-") and b"/MediaBox [ 0 0 432 288 ]" in pdf and pdf.rstrip().endswith(b"%%EOF")


def test_no_clobber_missing_directory_and_bad_values_exit_2(runner, profs, tmp_path):
    pic = tmp_path / "s.png"
    pic.write_bytes(b"keep")
    cases = [
        (["speedup", "-p", profs[0], "--plot", pic], "exists; pass --force"),
        (["comm", "-p", profs[0], "--plot", tmp_path / "nope" / "c.png"], "does not exist"),
        (["plot", "speedup", "-p", profs[0], "-o", tmp_path / "s.jpg"], "name a .png, .svg or .pdf"),
        (["plot", "speedup", "-p", profs[0], "-o", tmp_path / "x.png", "--dpi", "0"], "--dpi"),
        (["plot", "speedup", "-p", profs[0], "-o", tmp_path / "x.png", "--threshold", "1.5"], "--threshold"),
        (["plot", "speedup", "-p", profs[0], "-o", tmp_path / "x.png", "-m", "resnet50,"], "empty item"),
        (["plot", tmp_path / "missing.csv"], "no such file"),
        (["plot", tmp_path], "is a directory"),
    ]
    for args, msg in cases:
        r = run(runner, *args)
        assert r.exit_code == 2, (args, r.output)
        assert msg in r.stderr and "Traceback" not in r.output, (args, r.stderr)
    assert pic.read_bytes() == b"keep"
    ok(run(runner, "speedup", "-p", profs[0], "-k", "1..8", "--plot", pic, "--force"))
    assert png_size(pic.read_bytes()) == (1500, 1125)  # the defaults: 10 x 7.5 in at 150 dpi
    assert not list(tmp_path.glob(".*.tmp"))


def test_unreadable_tables_exit_2(runner, tmp_path):
    cases = {
        "bad.json": "{not json",
        "obj.json": '{"a": 1}',
        "cols.csv": "a,b\n1,2\n",
        "x.txt": "devices\n1\n",
        "empty.json": "[]",
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        r = run(runner, "plot", tmp_path / name, "-o", tmp_path / "o.png")
        assert r.exit_code == 2 and name in r.stderr, (name, r.output)


# --------------------------------------------------------------------------- readability and helpers


def _overlaps(labels) -> bool:
    boxes = [lab.get_window_extent() for lab in labels if lab.get_visible() and lab.get_text()]
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


@pytest.mark.parametrize("devices", ["1..64", "1..1024", "1..1024:x2"])
def test_no_overlapping_tick_labels(runner, figs, profs, tmp_path, devices):
    ok(run(runner, "plot", "speedup", "-k", devices, "-p", profs[0], "-o", tmp_path / "s.png"))
    ok(run(runner, "plot", "breakdown", "-k", devices, "-p", profs[0], "-o", tmp_path / "b.png"))
    for fig in figs:
        fig.canvas.draw()
        for ax in fig.axes:
            assert not _overlaps(ax.get_xticklabels()) and not _overlaps(ax.get_yticklabels())
            assert ax.get_ylabel()


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30), st.floats(0.05, 1.0))
@settings(max_examples=60, deadline=None)
def test_threshold_crossing_is_the_first_below(eff, threshold):
    i = P.threshold_crossing(range(1, len(eff) + 1), eff, threshold)
    if i is None:
        assert all(e >= threshold for e in eff)
    else:
        assert eff[i] < threshold and all(e >= threshold for e in eff[:i])


def test_geometric_ranges_get_a_log_axis():
    assert P.is_geometric(parse_devices("1..64:x2"))
    assert P.is_geometric(parse_devices("1..8,16..64:x2"))
    assert not P.is_geometric(parse_devices("1..64"))
    assert not P.is_geometric(parse_devices("8..64:+8"))


def test_help_and_speedup_do_not_import_matplotlib():
    code = (
        "import sys\nfrom typer.testing import CliRunner\nfrom simcli.cli import app\n"
        "r = CliRunner()\nassert r.invoke(app, ['--help']).exit_code == 0\n"
        "assert r.invoke(app, ['plot', '--help']).exit_code == 0\n"
        "assert r.invoke(app, ['speedup', '-k', '1..8', '-f', 'json']).exit_code == 0\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'pandas')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
