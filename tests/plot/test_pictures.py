"""What every picture promises (issue 39 item 8), held on the figure objects (matplotlib Agg, rendered in memory):

* each panel has data or is left out (a bench step table without samples/s has no throughput panel);
* an axis of cost or time starts at zero, or its label says it does not (a log scale, or "not 0");
* every labelled axis names its unit in parentheses (samples/s, x, fraction, count, bytes, ms, days, ...);
* titles, axis labels, legends and notes do not overlap one another and stay inside the picture;
* a long title wraps instead of running off.

The pictures are the ones the issue names: `simcli plot` of a bench step table (measurements/), `plan best
--plot`, `plot speedup`, and the others drawn the same way (breakdown, comm, algorithms).
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from simcli.cli.app import app  # noqa: E402
from simcli.plot import figures as P  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
STEP_CSV = ROOT / "measurements" / "gloo-step-mlp8x1024-cpu.csv"
UNIT = re.compile(r"\(.+\)$", re.S)


def _draw(runner, figs, *args) -> object:
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output
    return figs[-1]


def _labelled_axes(fig):
    """(axis, label) of every visible labelled x and y axis of the figure."""
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            text = axis.get_label().get_text()
            if text and axis.get_label().get_visible():
                yield ax, axis, text


def _boxes(fig):
    """(name, window extent) of the texts that must not overlap: titles, axis labels, legends, notes."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    out = []
    if fig._suptitle is not None and fig._suptitle.get_text():
        out.append(("suptitle", fig._suptitle.get_window_extent(r)))
    for i, ax in enumerate(fig.axes):
        for loc in ("left", "center", "right"):
            t = ax.get_title(loc=loc)
            if t:
                out.append(
                    (
                        f"axes {i} title",
                        getattr(
                            ax, {"left": "_left_title", "center": "title", "right": "_right_title"}[loc]
                        ).get_window_extent(r),
                    )
                )
        for axis, name in ((ax.xaxis, "xlabel"), (ax.yaxis, "ylabel")):
            if axis.get_label().get_text():
                out.append((f"axes {i} {name}", axis.get_label().get_window_extent(r)))
        if ax.get_legend() is not None:
            out.append((f"axes {i} legend", ax.get_legend().get_window_extent(r)))
        for t in ax.texts:
            if t.get_text():
                out.append((f"axes {i} note {t.get_text()[:20]!r}", t.get_window_extent(r)))
    return out


def assert_picture_rules(fig):
    # units on every labelled axis
    for _, _, text in _labelled_axes(fig):
        assert UNIT.search(text), f"axis label without a unit: {text!r}"
    # every panel has data: a line or collection with finite points, or bars
    for ax in fig.axes:
        finite = any(np.isfinite(np.asarray(ln.get_ydata(), float)).any() for ln in ax.lines if len(ln.get_xdata()))
        assert finite or ax.collections or ax.patches or ax.images, f"an empty panel: {ax.get_ylabel()!r}"
    # nothing overlaps, nothing runs off the picture
    boxes = _boxes(fig)
    fb = fig.bbox
    for name, b in boxes:
        assert b.x0 >= fb.x0 - 1 and b.x1 <= fb.x1 + 1 and b.y0 >= fb.y0 - 1 and b.y1 <= fb.y1 + 1, (
            f"{name} runs off the picture: {b} outside {fb}"
        )
    for (n1, b1), (n2, b2) in itertools.combinations(boxes, 2):
        assert not b1.overlaps(b2), f"{n1} overlaps {n2}"


def _time_or_cost_axis_honest(ax, axis, label):
    """A time or cost axis starts at zero, or its label says it does not (log scale, or 'not 0')."""
    lo = (ax.get_ylim() if axis is ax.yaxis else ax.get_xlim())[0]
    scale = axis.get_scale()
    assert lo == 0 or "log" in label or "not 0" in label, f"{label!r} starts at {lo} and does not say so"
    if scale == "log":
        assert "log" in label, label


TIME_OR_COST = re.compile(r"time|cost|device-hours|device-seconds|throughput")


# --------------------------------------------------------------------------- the pictures the issue names


def test_bench_step_picture_from_a_measured_table(runner, figs, tmp_path):
    fig = _draw(runner, figs, "plot", STEP_CSV, "-p", "cpu-loopback", "-o", tmp_path / "step.png")
    assert len(fig.axes) == 3  # throughput (measured samples/s and the model's), speedup, efficiency
    assert_picture_rules(fig)
    ax_t, ax_s, ax_e = fig.axes
    # the throughput panel has the measured samples/s: k x batch / t_step of each row
    marks = [ln for ln in ax_t.lines if ln.get_marker() == "x"]
    assert marks and all(np.isfinite(np.asarray(m.get_ydata(), float)).all() for m in marks)
    # the legend's E notes say whose E they are: the measured markers' own, the lines' marked 'line:'
    names = [t.get_text().replace("\n", " ") for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    measured = [x for x in names if x.startswith("measured")]
    assert measured and all("E < 0.8 from k = 2" in x for x in measured)  # the file: E 0.35-0.41 at k = 2
    assert all("line: E" in x for x in names if x.startswith("model"))
    # the title names the model once (the table's own mlp, by its parameters), the legend the mode
    assert "8.397e+06 params" in ax_t.get_title(loc="left")
    for ax, axis, label in _labelled_axes(fig):
        if TIME_OR_COST.search(label):
            _time_or_cost_axis_honest(ax, axis, label)


def test_bench_step_picture_without_samples_per_s_leaves_the_throughput_panel_out(runner, figs, tmp_path):
    """The issue's empty panel: a table with two modes but no batch (so no samples/s) and no --profile."""
    f = tmp_path / "step.csv"
    f.write_text(
        "# simcli bench step\n"
        "world_size,backend,mode,t_step_s,speedup,efficiency,predicted_speedup,predicted_efficiency\n"
        "1,gloo,flat,0.10,1.0,1.0,1.0,1.0\n2,gloo,flat,0.12,1.6,0.8,1.9,0.95\n"
        "1,gloo,ddp,0.10,1.0,1.0,1.0,1.0\n2,gloo,ddp,0.11,1.8,0.9,1.9,0.95\n"
    )
    fig = _draw(runner, figs, "plot", f, "-o", tmp_path / "step.png")
    assert len(fig.axes) == 2  # speedup and efficiency; no empty throughput panel
    assert_picture_rules(fig)


def test_plan_best_picture(runner, figs, tmp_path):
    args = ["plan", "best", "-m", "llama2-7b", "-p", "dgx-h100", "--global-batch", "4Mi-tokens", "--tokens", "2e12"]
    args += ["--devices", "64..2048:x2", "--strategy", "ddp,zero1,zero2,fsdp,hsdp", "--price-per-device-hour", "2.5"]
    fig = _draw(runner, figs, *args, "--objective", "cost", "--plot", tmp_path / "plan.png")
    assert_picture_rules(fig)
    (ax,) = fig.axes
    y = ax.get_ylabel()
    assert y.startswith("cost\n(price per device-hour x device-hours")
    lo = ax.get_ylim()[0]
    assert lo > 0 and "not 0" in y  # zoomed on the configurations, and said so
    assert ax.get_xlabel() == "time to train (days, log scale)"
    # the answer and the runner-up are named in the legend, not written over the points
    assert not ax.texts
    names = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(x.startswith("answer: fsdp, k = 64") for x in names)
    assert any(x.startswith("runner-up: ") for x in names)


def test_speedup_picture(runner, figs, tmp_path):
    args = ["plot", "speedup", "-k", "1..512:x2", "-p", "l40s-pcie,dgx-h100", "-m", "gpt2-xl", "--dpi", "100"]
    fig = _draw(runner, figs, *args, "-o", tmp_path / "s.png")
    assert len(fig.axes) == 3
    assert_picture_rules(fig)
    ax_t = fig.axes[0]
    assert ax_t.get_ylabel() == "throughput\n(samples/s, log scale)"
    # the title is wrapped: several lines, each inside the picture (assert_picture_rules), none very long
    title = ax_t.get_title(loc="left")
    assert title.count("\n") >= 1 and max(len(x) for x in title.split("\n")) < 110


@pytest.mark.parametrize(
    "args",
    [
        ["plot", "breakdown", "-k", "1..64:x2", "-p", "dgx-h100", "-m", "bert-large"],
        ["plot", "comm", "-p", "dgx-a100", "-k", "2..16:x2", "--size", "32KiB..1GiB:x4"],
        ["plot", "algorithms", "-p", "dgx-h100"],
        ["plot", "speedup", "-k", "1..16", "-p", "dgx-a100", "-m", "resnet50"],  # one line, linear k
        # what does not fit is greyed and annotated; the longest title of the docs' pictures
        ["plot", "speedup", "-k", "8..512:x2", "-p", "dgx-h100", "-m", "llama2-7b", "--strategy", "ddp,fsdp"],
    ],
    ids=["breakdown", "comm", "algorithms", "speedup-linear", "speedup-no-fit"],
)
def test_the_other_pictures_keep_the_same_rules(runner, figs, tmp_path, args):
    fig = _draw(runner, figs, *args, "-o", tmp_path / "x.png")
    assert_picture_rules(fig)
    for ax, axis, label in _labelled_axes(fig):
        if TIME_OR_COST.search(label):
            _time_or_cost_axis_honest(ax, axis, label)


# --------------------------------------------------------------------------- the rules on their own


def test_a_long_title_wraps_inside_the_picture():
    recs = [{"devices": k, "speedup": k * 0.9, "efficiency": 0.9, "samples_per_s": 100.0 * k} for k in (1, 2, 4, 8)]
    title = "a very long title " * 12 + "/a/path/without/any/space/" * 6
    for size in (P.FigSize(), P.FigSize(width=5.0)):
        fig = P.speedup_figure([P.Series("x", recs), P.Series("y", recs)], title, 0.8, size=size)
        shown = fig.axes[0].get_title(loc="left")
        assert shown.count("\n") >= 2
        assert shown.replace("\n", "").replace(" ", "") == title.replace(" ", "")  # nothing dropped
        assert_picture_rules(fig)


def test_a_panel_without_data_is_left_out():
    recs = [{"devices": k, "speedup": k * 0.9, "efficiency": 0.9} for k in (1, 2, 4)]
    fig = P.speedup_figure([P.Series("a", recs), P.Series("b", recs)], "t", 0.8, throughput=True)
    assert len(fig.axes) == 2  # asked for, but nothing to draw in it
    with_tp = [{**r, "samples_per_s": 10.0 * r["devices"]} for r in recs]
    fig = P.speedup_figure([P.Series("a", with_tp), P.Series("b", recs)], "t", 0.8)
    assert len(fig.axes) == 3


def test_step_time_picture_from_zero_in_one_unit():
    meas = [{"world_size": k, "t_step_s": 0.002 + 0.0001 * k} for k in (1, 2, 4)]
    fig = P.step_figure(meas, "world_size", "t_step_s", title="steps", model=())
    (ax,) = fig.axes
    assert ax.get_ylabel() == "time per step (ms)" and ax.get_ylim()[0] == 0
    (m,) = ax.lines
    assert list(m.get_ydata()) == pytest.approx([2.1, 2.2, 2.4])  # in the label's unit
    assert_picture_rules(fig)
