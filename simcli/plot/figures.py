"""Figures: speedup and efficiency curves, time breakdowns, all-reduce time and busbw, algorithm maps.

matplotlib is imported here and nowhere else (``simcli validate --plot`` draws with this module too),
and this module is imported only
when a picture is asked for (``--plot FILE`` or ``simcli plot``), so
``simcli --help`` and ``simcli speedup`` never pay for it. Figures are built as
bare :class:`matplotlib.figure.Figure` objects on the Agg canvas: no display,
no pyplot global state.

Every figure is drawn from the records that ``--format json`` prints
(:meth:`simcli.step.engine.Result.records`, :func:`simcli.comm.grid.comm_grid`), in SI,
so the numbers behind a line are the numbers in the table; only the axes pick
human units (µs/ms, KiB/MiB/GiB).
"""

from __future__ import annotations

import io
import math
import os
import textwrap
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from ..base.types import InputError
from ..base.units import fmt_bytes, fmt_count, fmt_time
from ..io.files import write_atomic
from ..io.render import time_unit
from ..io.tables import validation_series
from ..step import strategies

__all__ = [
    "FORMATS",
    "FigSize",
    "Series",
    "picture_format",
    "check_figsize",
    "is_geometric",
    "threshold_crossing",
    "speedup_figure",
    "breakdown_figure",
    "comm_figure",
    "algorithm_map_figure",
    "step_figure",
    "validation_figure",
    "save_figure",
    "figure_bytes",
]

#: picture formats by file suffix
FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
#: ideal-line and threshold styling
_IDEAL = dict(color="0.45", linestyle="--", linewidth=1.2)
_THRESH = dict(color="0.35", linestyle=":", linewidth=1.0)
#: at most this many points per line get markers; denser lines are drawn plain
_MARKER_MAX = 40
#: at most this many category labels on a bar axis
_MAX_TICKLABELS = 16
#: more points than this per panel are drawn as filled steps rather than separate bars
_MAX_BARS = 200


@dataclass(frozen=True)
class FigSize:
    """Picture size: inches and dots per inch (a PNG is width·dpi by height·dpi pixels)."""

    width: float = 10.0
    height: float | None = None  #: None = the figure's own default
    dpi: int = 150

    def inches(self, default_height: float) -> tuple[float, float]:
        return self.width, self.height if self.height is not None else default_height


@dataclass(frozen=True)
class Series:
    """One line (or one panel of bars): a legend label and the records behind it."""

    label: str
    records: Sequence[Mapping[str, Any]]
    #: measured points drawn as markers over the line (same record keys)
    measured: Sequence[Mapping[str, Any]] = field(default_factory=tuple)
    #: the legend label of the measured markers [default: the label and 'measured']
    measured_label: str | None = None
    #: device counts at which this configuration does not fit the device's memory: drawn greyed and labelled
    no_fit: Sequence[float] = field(default_factory=tuple)
    #: the device's memory in bytes (named in the label of what does not fit)
    capacity_bytes: float | None = None


# --------------------------------------------------------------------------- checks


def picture_format(path: str | os.PathLike[str], option: str = "--plot") -> str:
    """The matplotlib format for ``path``'s suffix (png, svg, pdf), or an InputError naming the fix."""
    suffix = os.path.splitext(str(path))[1].lower()
    fmt = FORMATS.get(suffix)
    if fmt is None:
        raise InputError(f"{option}: {str(path)!r} has suffix {suffix or '(none)'!r}; name a .png, .svg or .pdf file")
    return fmt


def check_figsize(size: FigSize) -> FigSize:
    """Refuse sizes that are not positive or would make an absurd picture (over 100 megapixels)."""
    for name, v, lo, hi in (
        ("--width", size.width, 1.0, 100.0),
        ("--height", size.height, 1.0, 100.0),
        ("--dpi", size.dpi, 10, 1200),
    ):
        if v is None:
            continue
        if not (isinstance(v, (int, float)) and math.isfinite(v) and lo <= v <= hi):
            unit = "dots per inch" if name == "--dpi" else "inches"
            raise InputError(f"{name}: {v!r} is out of range; give {lo:g} to {hi:g} {unit}")
    h = size.height if size.height is not None else 12.0
    if size.width * h * size.dpi**2 > 100e6:
        raise InputError(
            f"--dpi: {size.width:g} x {h:g} in at {size.dpi} dpi is over 100 megapixels; lower --dpi or the size"
        )
    return size


# --------------------------------------------------------------------------- helpers


def is_geometric(values: Sequence[float] | np.ndarray) -> bool:
    """True when points are spaced more evenly on a log axis than on a linear one ('1..64:x2', sizes).

    Two points count as geometric when they differ by a factor of 4 or more.
    """
    v = np.unique(np.asarray(values, dtype=float))
    v = v[v > 0]
    if v.size < 2:
        return False
    if v.size == 2:
        return bool(v[1] / v[0] >= 4)
    lin, log = np.diff(v), np.diff(np.log(v))
    spread = lambda d: float(np.std(d) / np.mean(d))  # noqa: E731 - coefficient of variation of the steps
    return spread(log) < spread(lin)


def threshold_crossing(devices: Iterable[float], efficiency: Iterable[float | None], threshold: float) -> int | None:
    """Index of the first k whose efficiency E(k) is below ``threshold``, or None if none is."""
    for i, e in enumerate(efficiency):
        if e is not None and e == e and e < threshold:
            return i
    return None


def _column(records: Sequence[Mapping[str, Any]], key: str) -> np.ndarray:
    return np.array([np.nan if r.get(key) is None else float(r[key]) for r in records], dtype=float)


def _k_formatter(v: float, _pos: Any = None) -> str:
    return f"{v:,.0f}" if v >= 1 else f"{v:g}"


def _size_formatter(v: float, _pos: Any = None) -> str:
    return fmt_bytes(v) if v > 0 else "0"


def _time_formatter(v: float, _pos: Any = None) -> str:
    return fmt_time(v) if v > 0 else "0"


def _log2_axis(axis: Any, formatter: Any) -> None:
    """Base-2 log axis, at most ~10 major ticks, labels by ``formatter``, no minor labels."""
    axis.set_major_locator(LogLocator(base=2, numticks=10))
    axis.set_major_formatter(FuncFormatter(formatter))
    axis.set_minor_formatter(NullFormatter())


def _colors(n: int) -> list[Any]:
    from matplotlib import colormaps  # heavy

    if n <= 10:
        return [colormaps["tab10"](i) for i in range(n)]
    cmap = colormaps["viridis"]
    return [cmap(x) for x in np.linspace(0.0, 0.92, n)]


def _marker(n: int) -> str | None:
    return "o" if n <= _MARKER_MAX else None


def _wrap(text: str, fig: Figure, fontsize: float, *, share: float = 0.88) -> str:
    """Wrap each title line to ``share`` of the figure's width (an axes' title starts at the axes' left edge, past
    the y labels), at about 0.57 em per character (DejaVu Sans' average on simcli's titles is under that), so no
    title runs off (tests/plot/test_pictures.py renders long ones); a word longer than a line (a path) is broken."""

    chars = max(20, int(share * fig.get_figwidth() * 72 / (fontsize * 0.57)))
    return "\n".join(textwrap.fill(line, chars, break_on_hyphens=False) for line in text.split("\n"))


def _legend_label(text: str, fig: Figure, fontsize: float = 8, *, share: float = 0.6) -> str:
    """A legend entry wrapped to ``share`` of the figure's width, so a long one neither runs off the picture nor
    squeezes the axes to nothing (constrained layout makes room for the legend)."""

    if text.startswith("_"):  # matplotlib's "no legend entry"
        return text
    chars = max(20, int(share * fig.get_figwidth() * 72 / (fontsize * 0.6)))
    return textwrap.fill(text, chars, break_on_hyphens=False, subsequent_indent="  ")


def _legend(ax: Any, fig: Figure, fontsize: float = 8, **kw: Any) -> Any:
    """``ax.legend`` with every label wrapped (:func:`_legend_label`)."""
    handles, labels = ax.get_legend_handles_labels()
    return ax.legend(handles, [_legend_label(x, fig, fontsize) for x in labels], fontsize=fontsize, **kw)


def _axis_label(text: str, limit: int = 28) -> str:
    """A long axis label on two lines, the quantity above its unit: '(unit ...)' goes to the second line, so a y
    label is never taller than its panel (nor runs into the next panel's)."""
    if len(text) <= limit or " (" not in text:
        return text
    head, _, unit = text.partition(" (")
    return f"{head}\n({unit}"


def _has_data(records: Sequence[Mapping[str, Any]], key: str) -> bool:
    return bool(records) and bool(np.isfinite(_column(records, key)).any())


def _new_figure(size: FigSize, default_height: float) -> Figure:
    fig = Figure(figsize=size.inches(default_height), dpi=size.dpi, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


# --------------------------------------------------------------------------- speedup


def _split_fit(k: np.ndarray, y: np.ndarray, no_fit: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(y where it fits, y where it does not), NaN elsewhere; the boundary point is in both so the line joins."""
    bad = np.isin(k, np.asarray(list(no_fit), dtype=float))
    near = bad | np.concatenate([bad[1:], [False]]) | np.concatenate([[False], bad[:-1]])
    return np.where(~bad, y, np.nan), np.where(near & bad.any(), y, np.nan)


#: what does not fit in memory: greyed, dashed, crossed
_NO_FIT = dict(color="0.62", linestyle=(0, (4, 2)), linewidth=1.6, marker="x", markersize=6)


#: the ring on the point where a line's E(k) first falls below the threshold
_RING = dict(linestyle="none", marker="o", markersize=9, markerfacecolor="none", markeredgewidth=1.8)


def _efficiency_note(
    k: np.ndarray, eff: np.ndarray, fits: np.ndarray, *, threshold: float, measured: bool
) -> tuple[int | None, str]:
    """The first k (its index) where E(k) < ``threshold`` among the k that fit, and the legend's note on it."""
    i = threshold_crossing(k[fits], eff[fits], threshold) if fits.any() else None
    if i is not None:
        i = int(np.flatnonzero(fits)[i])
        note = f"E < {threshold:g} from k = {k[i]:,.0f}"
    else:
        note = f"E ≥ {threshold:g} up to k = {k[fits][-1]:,.0f}" if fits.any() else ""
    if measured and note:  # the line's E, not the markers': say whose (the markers get their own below)
        note = f"line: {note}"
    return i, note


def _draw_line(panels: list, s: Series, k: np.ndarray, *, color: Any, fits: np.ndarray, label: str) -> None:
    """One series on each panel: its band (shaded), its line and the k where it does not fit (greyed, dashed)."""
    mk, last = _marker(len(k)), len(panels) - 1
    band = f"{s.label}: band (comm p10-p90, σ's range)"  # how sure (simcli.step.band), shaded behind the line
    for j, (ax, y, key) in enumerate(panels):  # the line is named in the first panel it is drawn on
        if _has_data(s.records, f"{key}_lo"):
            lo, hi = _column(s.records, f"{key}_lo"), _column(s.records, f"{key}_hi")
            ax.fill_between(k, lo, hi, color=color, alpha=0.15, linewidth=0, label=band if j == last else "_")
        ok, bad = _split_fit(k, y, s.no_fit)
        name = label if j == 0 and fits.any() else f"_{s.label}"
        ax.plot(k, ok, color=color, marker=mk, markersize=4, linewidth=1.8, label=name)
        if not fits.all():
            cap = f" in {fmt_bytes(s.capacity_bytes, binary=False)}" if s.capacity_bytes else ""
            where = f"every k ({_k_range(k)[4:]})" if not fits.any() else _k_range(k[~fits])
            nofit = f"{s.label}: does not fit{cap} at {where} (greyed)" if j == 0 else "_nofit"
            ax.plot(k, bad, label=nofit, **_NO_FIT)
            x0 = float(k[~fits][0])
            y0 = float(y[~fits][0])
            ax.annotate("does not fit", (x0, y0), xytext=(4, 6), textcoords="offset points", fontsize=7, color="0.4")


def _draw_measured(s: Series, color: Any, threshold: float, *, axes: tuple, line_tp: bool) -> None:
    """A series' measured points, crosses in the line's colour, named with their own threshold note."""
    ax_t, ax_s, ax_e = axes
    mk_k = _column(s.measured, "devices")
    im = threshold_crossing(mk_k, _column(s.measured, "efficiency"), threshold)
    m_note = f"E < {threshold:g} from k = {mk_k[im]:,.0f}" if im is not None else None
    m_note = m_note or f"E ≥ {threshold:g} up to k = {np.nanmax(mk_k):,.0f}"
    m_label = f"{s.measured_label or s.label + ' measured'} ({m_note})"
    marks = [(ax_s, "speedup", m_label), (ax_e, "efficiency", "_measured")]
    if ax_t is not None and _has_data(s.measured, "samples_per_s"):
        marks.append((ax_t, "samples_per_s", "_measured" if line_tp else m_label))
    for ax, key, label in marks:
        ax.plot(mk_k, _column(s.measured, key), linestyle="none", marker="x", color=color, markersize=7, label=label)


def _speedup_axes(fig: Figure, title: str, threshold: float, *, axes: tuple, all_k: np.ndarray, e_top: float) -> None:
    """The panels' ideal and threshold lines, scales (log 2 where k is geometric), titles and legends."""
    ax_t, ax_s, ax_e = axes
    geometric = is_geometric(all_k)
    ax_s.plot(all_k, all_k, label="ideal S = k", **_IDEAL)
    ax_e.axhline(threshold, label=f"threshold E = {threshold:g}", **_THRESH)
    if geometric:
        ax_s.set_xscale("log", base=2)
        ax_s.set_yscale("log", base=2)
        _log2_axis(ax_s.xaxis, _k_formatter)
        _log2_axis(ax_s.yaxis, _k_formatter)
    else:
        ax_s.xaxis.set_major_locator(MaxNLocator(12, integer=True))
        ax_s.xaxis.set_major_formatter(FuncFormatter(_k_formatter))
        ax_s.set_ylim(bottom=0)
    if ax_t is not None:  # the throughput panel: the top one, with the title
        if geometric:
            ax_t.set_yscale("log")
        else:
            ax_t.set_ylim(bottom=0)
        ax_t.yaxis.set_major_formatter(FuncFormatter(_rate_formatter))
        lo, hi = ax_t.get_ylim()
        if geometric and lo > 0 and hi / lo < 10:  # under a decade has at most one major tick: name the minor ones
            ax_t.yaxis.set_minor_formatter(FuncFormatter(_rate_formatter))
        else:
            ax_t.yaxis.set_minor_formatter(NullFormatter())
        ax_t.set_ylabel(_axis_label("throughput (samples/s" + (", log scale)" if geometric else ")")))
        _legend(ax_t, fig, loc="upper left", framealpha=0.9)
        ax_t.set_title(_wrap(title, fig, 11), fontsize=11, loc="left")
    else:
        ax_s.set_title(_wrap(title, fig, 11), fontsize=11, loc="left")
    _legend(ax_s, fig, loc="upper left", framealpha=0.9)  # with a throughput panel: what it does not name
    ax_e.set_ylim(0.0, e_top)
    # several lines: each S(k) is relative to its own line's k = 1 (the throughput panel compares them)
    own = ", each line's own k = 1" if ax_t is not None else ""
    ax_s.set_ylabel(_axis_label("speedup S(k) (x" + own + (", log 2)" if geometric else ")")))
    ax_e.set_ylabel(_axis_label("efficiency E(k) = S(k)/k (fraction)"))
    ax_e.set_xlabel("devices k (count" + (", log 2)" if geometric else ")"))
    _legend(ax_e, fig, loc="best", framealpha=0.9)  # the threshold only; lines are named above
    for ax in (ax_s, ax_e, *([ax_t] if ax_t is not None else [])):
        ax.grid(True, which="major", alpha=0.3)


def speedup_figure(
    series: Sequence[Series],
    title: str,
    threshold: float = 0.8,
    *,
    size: FigSize = FigSize(),
    throughput: bool | None = None,
) -> Figure:
    """Speedup S(k) against k with the ideal line S = k, efficiency E(k) below; one line per series.

    The first k where E(k) < ``threshold`` is marked on both panels with a dotted vertical line and named in the
    legend. The x axis is log 2 when the device counts are geometric (then S is log 2 too, so S = k is a diagonal).

    ``throughput`` (default: when there are several series) adds a third panel, samples/s against k, so a
    faster system looks faster: S(k) and E(k) are relative to each line's own one device. The k at which a
    series does not fit in memory (``Series.no_fit``) are drawn greyed and dashed, and named in the legend.
    """
    if not series:
        raise InputError("nothing to draw: no records")
    # a panel only with data: no throughput panel where no line or marker has samples/s (a bench step table's
    # predicted_* columns, a validation's speedups)
    has_tp = any(_has_data(s.records, "samples_per_s") or _has_data(s.measured, "samples_per_s") for s in series)
    throughput = has_tp and (len(series) > 1 if throughput is None else throughput)
    fig = _new_figure(size, 10.0 if throughput else 7.5)
    if throughput:
        ax_t, ax_s, ax_e = fig.subplots(3, 1, sharex=True, height_ratios=[3, 3, 2])
    else:
        ax_s, ax_e = fig.subplots(2, 1, sharex=True, height_ratios=[3, 2])
        ax_t = None
    all_k = np.unique(np.concatenate([_column(s.records, "devices") for s in series]))
    first_tp: np.ndarray | None = None
    first_label = ""
    for s, color in zip(series, _colors(len(series))):
        k = _column(s.records, "devices")
        sp = _column(s.records, "speedup")
        eff = _column(s.records, "efficiency")
        fits = ~np.isin(k, np.asarray(list(s.no_fit), dtype=float))
        i, note = _efficiency_note(k, eff, fits, threshold=threshold, measured=bool(s.measured))
        gain = ""
        if ax_t is not None:  # the gain over the first line at the largest k where both fit, in the legend
            tp_fit = np.where(fits, _column(s.records, "samples_per_s"), np.nan)
            if first_tp is None:
                first_tp, first_label = tp_fit, s.label
            elif len(tp_fit) == len(first_tp) and np.isfinite([tp_fit[-1], first_tp[-1]]).all() and first_tp[-1] > 0:
                gain = f"; x{tp_fit[-1] / first_tp[-1]:.2f} over {first_label} at k = {k[-1]:,.0f}"
        panels = [(ax_s, sp, "speedup"), (ax_e, eff, "efficiency")]
        line_tp = ax_t is not None and _has_data(s.records, "samples_per_s")
        if line_tp:
            panels.insert(0, (ax_t, _column(s.records, "samples_per_s"), "samples_per_s"))
        _draw_line(panels, s, k, color=color, fits=fits, label=f"{s.label} ({note}{gain})")
        for ax, y in ((ax_s, sp[i]), (ax_e, eff[i])) if i is not None else ():  # the crossing: a line and a ring
            ax.axvline(k[i], color=color, linestyle=":", linewidth=1.0, label="_crossing")
            ax.plot([k[i]], [y], markeredgecolor=color, label="_crossing", **_RING)
        if s.measured:
            _draw_measured(s, color, threshold, axes=(ax_t, ax_s, ax_e), line_tp=line_tp)
    effs = [_column(s.records, c) for s in series for c in ("efficiency", "efficiency_hi") if _has_data(s.records, c)]
    top = max(1.05, float(np.nanmax(np.concatenate(effs))) * 1.05)
    _speedup_axes(fig, title, threshold, axes=(ax_t, ax_s, ax_e), all_k=all_k, e_top=top)
    return fig


def _k_range(k: np.ndarray) -> str:
    return f"k = {k[0]:,.0f}" if len(k) == 1 else f"k = {k[0]:,.0f}..{k[-1]:,.0f}"


def _rate_formatter(v: float, _pos: Any = None) -> str:
    """Samples per second on an axis: 1,200, 45k, 3.2M."""
    for f, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= f:
            return f"{v / f:g}{unit}"
    return f"{v:g}"


# --------------------------------------------------------------------------- breakdown


def breakdown_parts(records: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """Stacked segments of each step, in seconds; they add up to T_step.

    With the overlap model's ``t_comm_exposed_s``: compute alone, compute that
    hides communication (T_comm − exposed), exposed communication. Without it:
    compute and communication. Records with ``t_update_s`` (simcli.step.update)
    add the optimizer step, once per optimizer step, on top.
    """
    compute = _column(records, "t_compute_s")
    comm = _column(records, "t_comm_s")
    upd = (
        {"optimizer step": _column(records, "t_update_s")}
        if records and all(r.get("t_update_s") is not None for r in records)
        else {}
    )
    if records and all(r.get("t_comm_exposed_s") is not None for r in records):
        exposed = _column(records, "t_comm_exposed_s")
        hidden = np.clip(comm - exposed, 0.0, None)
        parts = {
            "compute": compute - hidden,
            "compute ‖ hidden communication": hidden,
            "exposed communication": exposed,
        }
        return {**parts, **upd}
    return {"compute": compute, "communication": comm, **upd}


_PART_COLORS = {
    "compute": "#4C72B0",
    "compute ‖ hidden communication": "#8FB8DE",
    "exposed communication": "#DD8452",
    "communication": "#DD8452",
    "optimizer step": "#55A868",
}


def breakdown_figure(series: Sequence[Series], title: str, size: FigSize = FigSize()) -> Figure:
    """Stacked bars per k: where each step's time goes (one panel per series)."""
    if not series:
        raise InputError("nothing to draw: no records")

    n = len(series)
    fig = _new_figure(size, min(3.2 + 2.6 * n, 14.0))
    axes = fig.subplots(n, 1, squeeze=False, sharey=True)[:, 0]
    steps = np.concatenate([_column(s.records, "t_step_s") for s in series])
    f, unit = time_unit(steps)
    for i, (ax, s) in enumerate(zip(axes, series)):
        k = _column(s.records, "devices")
        step = np.diff(k)
        even = len(k) > 1 and not is_geometric(k) and bool(np.all(step == step[0]))
        # an evenly spaced range ('1..64') gets a numeric axis with round ticks; others one slot per k
        pos = k if even else np.arange(len(k), dtype=float)
        slot = float(step[0]) if even else 1.0
        bottom = np.zeros(len(k))
        dense = len(k) > _MAX_BARS
        edges = np.append(pos - slot / 2, pos[-1] + slot / 2)
        for name, part in breakdown_parts(s.records).items():
            if dense:  # one filled step outline per part: the same picture as touching bars, drawn at once
                ax.stairs(
                    bottom + part / f,
                    edges,
                    baseline=bottom,
                    fill=True,
                    label=name,
                    color=_PART_COLORS[name],
                    linewidth=0,
                )
            else:
                ax.bar(
                    pos, part / f, width=0.8 * slot, bottom=bottom, label=name, color=_PART_COLORS[name], linewidth=0
                )
            bottom = bottom + part / f
        if even:
            ax.xaxis.set_major_locator(MaxNLocator(_MAX_TICKLABELS, integer=True))
            ax.xaxis.set_major_formatter(FuncFormatter(_k_formatter))
        else:
            stride = max(1, math.ceil(len(k) / _MAX_TICKLABELS))
            ax.set_xticks(pos[::stride], [_k_formatter(x) for x in k[::stride]])
        ax.set_xlim(pos[0] - 0.6 * slot, pos[-1] + 0.6 * slot)
        ax.set_ylabel(f"time per step ({unit})")
        ax.set_title(_wrap(s.label if n > 1 else title, fig, 11), fontsize=10 if n > 1 else 11, loc="left")
        ax.grid(True, axis="y", alpha=0.3)
        if i == 0:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    axes[-1].set_xlabel("devices k (count)")
    if n > 1:
        fig.suptitle(_wrap(title, fig, 11), fontsize=11)
    return fig


# --------------------------------------------------------------------------- comm


def _group(records: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> dict[tuple, list[Mapping[str, Any]]]:
    out: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in records:
        out.setdefault(tuple(r.get(k) for k in keys), []).append(r)
    return out


def _varying(records: Sequence[Mapping[str, Any]], keys: Iterable[str]) -> list[str]:
    return [k for k in keys if len({r.get(k) for r in records}) > 1]


def comm_figure(
    records: Sequence[Mapping[str, Any]],
    title: str,
    size: FigSize = FigSize(),
    *,
    measured: Sequence[Mapping[str, Any]] = (),
    k_key: str = "devices",
) -> Figure:
    """All-reduce time (log-log) and busbw (log x) against message size, one line per k.

    ``records`` are :func:`simcli.comm.grid.comm_grid` records (model lines);
    ``measured`` (optional) are measured points with ``k_key``, ``bytes``,
    ``time_s`` and ``busbw_GBps``, drawn as markers in the colour of the model's
    line for the same k. Lines for k = 1 (no communication) are left out.
    """
    recs = [r for r in records if (r.get(k_key) or 0) >= 2]
    meas = [r for r in measured if (r.get(k_key) or 0) >= 2]
    if not recs and not meas:
        raise InputError("nothing to draw: all-reduce needs at least 2 devices")
    fig = _new_figure(size, 5.5)
    ax_t, ax_b = fig.subplots(1, 2)
    extra = _varying(recs, ("profile",))
    groups = _group(recs, [k_key] + extra)
    # the per-row "algorithm" is what NCCL or auto chose for that size; it is a series of its own only when one
    # (k, profile) holds a size twice (several --algorithm values redrawn from one table)
    if any(len({r.get("bytes") for r in rs}) < len(rs) for rs in groups.values()):
        extra = _varying(recs, ("profile", "algorithm"))
        groups = _group(recs, [k_key] + extra)
    mgroups = _group(meas, [k_key])
    ks = sorted({key[0] for key in groups} | {key[0] for key in mgroups})
    color_of = dict(zip(ks, _colors(len(ks))))
    styles = ["-", "--", "-.", ":"]
    style_of = {v: styles[i % len(styles)] for i, v in enumerate(sorted({key[1:] for key in groups}, key=str))}
    for key, rs in groups.items():
        rs = sorted(rs, key=lambda r: r["bytes"])
        n = _column(rs, "bytes")
        label = f"k = {key[0]:,}" + "".join(f", {v}" for v in key[1:])
        kw = dict(
            color=color_of[key[0]], linestyle=style_of[key[1:]], marker=_marker(len(n)), markersize=3, linewidth=1.6
        )
        ax_t.plot(n, _column(rs, "time_s"), label=label, **kw)
        ax_b.plot(n, _column(rs, "busbw_GBps"), label=label, **kw)
    for (k,), rs in mgroups.items():
        rs = sorted(rs, key=lambda r: r["bytes"])
        n = _column(rs, "bytes")
        kw = dict(color=color_of[k], linestyle="none", marker="x", markersize=7, markeredgewidth=1.6)
        ax_t.plot(n, _column(rs, "time_s"), label=f"k = {k:,} measured", **kw)
        ax_b.plot(n, _column(rs, "busbw_GBps"), label=f"k = {k:,} measured", **kw)
    for ax in (ax_t, ax_b):
        ax.set_xscale("log", base=2)
        _log2_axis(ax.xaxis, _size_formatter)
        ax.set_xlabel("message size (bytes, log 2)")
        ax.grid(True, which="major", alpha=0.3)
        ax.tick_params(axis="x", labelrotation=30)
    ax_t.set_yscale("log")
    ax_t.yaxis.set_major_formatter(FuncFormatter(_time_formatter))
    ax_t.set_ylabel(_axis_label("time (s, log scale: each tick names its unit)"))
    ax_b.set_ylabel("busbw (GB/s, 1 GB = 1e9 B)")
    ax_b.set_ylim(bottom=0)
    ncol = 1 if len(groups) + len(mgroups) <= 8 else 2
    ax_t.legend(loc="upper left", fontsize=7, ncol=ncol, framealpha=0.9)
    fig.suptitle(_wrap(title, fig, 11), fontsize=11)
    return fig


# --------------------------------------------------------------------------- algorithm map


def algorithm_map_figure(
    devices: Sequence[int],
    sizes: Sequence[float],
    names: Sequence[str],
    *,
    winner: np.ndarray,
    title: str,
    size: FigSize = FigSize(),
) -> Figure:
    """Heatmap of the fastest algorithm per (k, message size): ``winner[i, j]`` indexes ``names``."""
    from matplotlib.colors import BoundaryNorm, ListedColormap  # heavy

    fig = _new_figure(size, 6.0)
    ax = fig.subplots()
    colors = _colors(max(len(names), 1))
    cmap = ListedColormap(colors[: len(names)])
    norm = BoundaryNorm(np.arange(len(names) + 1) - 0.5, len(names))
    ax.imshow(np.asarray(winner), cmap=cmap, norm=norm, aspect="auto", origin="lower", interpolation="nearest")
    sstride = max(1, math.ceil(len(sizes) / 12))
    kstride = max(1, math.ceil(len(devices) / 16))
    ax.set_xticks(np.arange(len(sizes))[::sstride], [fmt_bytes(s) for s in list(sizes)[::sstride]], rotation=30)
    ax.set_yticks(np.arange(len(devices))[::kstride], [_k_formatter(k) for k in list(devices)[::kstride]])
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("devices k (count)")
    ax.set_title(_wrap(title, fig, 11), fontsize=11, loc="left")
    won = set(np.unique(np.asarray(winner)).tolist())
    ax.legend(
        handles=[
            Patch(color=c, label=nm if i in won else f"{nm} (never fastest here)")
            for i, (c, nm) in enumerate(zip(colors, names))
        ],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=8,
        title="fastest",
    )
    return fig


# --------------------------------------------------------------------------- measured step times


def step_figure(
    measured: Sequence[Mapping[str, Any]],
    k_key: str,
    t_key: str,
    *,
    title: str,
    model: Sequence[Mapping[str, Any]] = (),
    size: FigSize = FigSize(),
) -> Figure:
    """Measured step time per k as markers, with the model's T_step line when ``model`` records are given; the
    time axis in one unit (the table's median magnitude, as the terminal tables pick it) from zero."""

    fig = _new_figure(size, 5.5)
    ax = fig.subplots()
    k = _column(measured, k_key)
    t = _column(measured, t_key)
    f, unit = time_unit(t)
    t = t / f
    order = np.argsort(k)
    ax.plot(
        k[order],
        t[order],
        linestyle="none",
        marker="x",
        markersize=8,
        markeredgewidth=1.6,
        color="C3",
        label="measured",
    )
    if model:
        ax.plot(
            _column(model, "devices"),
            _column(model, "t_step_s") / f,
            color="C0",
            marker=_marker(len(model)),
            markersize=4,
            label="model T_step",
        )
        tc = _column(model, "t_compute_s")
        if np.isfinite(tc).any():
            ax.plot(_column(model, "devices"), tc / f, color="C0", linestyle=":", label="model T_compute")
    allk = np.concatenate([k, _column(model, "devices")]) if model else k
    geometric = is_geometric(allk)
    if geometric:
        ax.set_xscale("log", base=2)
        _log2_axis(ax.xaxis, _k_formatter)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("devices k (count" + (", log 2)" if geometric else ")"))
    ax.set_ylabel(f"time per step ({unit})")
    ax.set_title(_wrap(title, fig, 11), fontsize=11, loc="left")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    return fig


# --------------------------------------------------------------------------- writing


def validation_figure(
    records: list[dict[str, Any]], name: str, threshold: float = 0.8, *, size: FigSize = FigSize()
) -> Figure:
    """`simcli validate` records (metric, devices, [bytes,] predicted, measured): measured markers over the
    predicted lines (all-reduce time and busbw, speedup, or step time, by the main metric)."""

    v = validation_series(records, name)
    title = f"Measured (x markers) against predicted (lines), {v['metric']}: {name}"
    if v["kind"] == "comm":
        return comm_figure(v["line"], title, size, measured=v["measured"])
    if v["kind"] == "speedup":
        return speedup_figure([Series("predicted", v["line"], measured=v["measured"])], title, threshold, size=size)
    return step_figure(v["measured"], v["k_key"], "t_step_s", title=title, model=v["line"], size=size)


def figure_bytes(fig: Figure, fmt: str, dpi: int | None = None) -> bytes:
    """Render ``fig`` to PNG/SVG/PDF bytes in memory (no date stamp in SVG/PDF, so output is reproducible)."""
    buf = io.BytesIO()
    metadata = {"Date": None} if fmt in ("svg", "pdf") else None
    if fmt == "pdf":
        metadata = {"CreationDate": None, "ModDate": None}
    fig.savefig(buf, format=fmt, dpi=dpi or fig.dpi, metadata=metadata)
    return buf.getvalue()


def save_figure(fig: Figure, path: str | os.PathLike[str], force: bool = False, *, option: str = "--plot") -> str:
    """Render in memory, then write atomically (never a half-written picture; no clobbering without force)."""

    data = figure_bytes(fig, picture_format(path, option))
    return str(write_atomic(path, data, force=force, option=option))


def frontier_figure(ans: Any, title: str, size: FigSize = FigSize()) -> Figure:
    """`plan best`: every kept configuration as a point (time against cost, one colour per strategy), the
    frontier as a line, the answer and the runner-up marked. Time and cost are per run when the run's length is
    given (days; cost, or device-hours without a price), else per optimizer step (s; device-seconds)."""
    fig = _new_figure(size, 6.0)
    ax = fig.add_subplot(1, 1, 1)
    t = ans.table
    ok = t["reason"] == ""
    per_run = ans.samples is not None

    def xy(rows: Any, i: Any = None) -> tuple[Any, Any]:
        get = (lambda c: np.asarray(rows[c], dtype=float)[i]) if i is not None else (lambda c: rows[c])
        x = get("days") if per_run else get("t_step_s")
        if per_run:
            y = get("cost") if ans.price is not None else get("device_hours")
        else:
            y = get("devices") * get("t_step_s")
        return x, y

    # one colour per strategy that has a point, one marker per strategy row (simcli.step.strategies), in its order
    rows = [s for s in strategies.STRATEGY_SPECS if np.any(ok & (t["strategy"] == s.name))]
    for s, c in zip(rows, _colors(len(rows))):
        i = np.flatnonzero(ok & (t["strategy"] == s.name))
        x, y = xy(t, i)
        ax.scatter(x, y, s=22, color=c, alpha=0.7, marker=s.marker, label=f"{s.name} ({i.size} fit)")
    fx = [xy(r)[0] for r in ans.frontier]
    fy = [xy(r)[1] for r in ans.frontier]
    ax.plot(fx, fy, "-", color="black", linewidth=1.2, label=f"frontier ({len(fx)})", zorder=3)
    ax.scatter(fx, fy, s=22, facecolors="none", edgecolors="black", zorder=4)
    a = ans.answer
    ax_, ay = xy(a)
    # what the answer and the runner-up are goes in the legend, never beside the points (where it would cover them
    # and each other: the runner-up is often the answer's neighbour)
    label = f"answer: {a['strategy']}, k = {a['devices']}, micro-batch {a['batch_per_device']} x accum {a['accum']}"
    ax.scatter([ax_], [ay], marker="*", s=260, color="crimson", zorder=5, label=label)
    if ans.runner_up is not None:  # drawn over the answer (it is often its neighbour) and named
        r = ans.runner_up
        rx, ry = xy(r)
        label = (
            f"runner-up: {r['strategy']}, k = {r['devices']}, micro-batch {r['batch_per_device']} x accum {r['accum']}"
        )
        ax.scatter(
            [rx],
            [ry],
            label=label,
            marker="D",
            s=90,
            facecolors="none",
            edgecolors="darkorange",
            linewidths=2,
            zorder=6,
        )
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _p: f"{v:g}" if f"{v:g}"[0] in "235" else ""))
    ax.yaxis.set_major_locator(MaxNLocator(nbins=8, steps=[1, 2, 5, 10]))  # round ticks: fmt_count shows them
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: fmt_count(v)))
    ax.set_xlabel("time to train (days, log scale)" if per_run else "step time (s, log scale)")
    what = "device-seconds per optimizer step (device x s"
    if per_run:
        what = "cost (price per device-hour x device-hours" if ans.price is not None else "device-hours (device x h"
    # the cost axis is zoomed on the configurations (they differ by a few percent): it says where it starts
    lo = ax.get_ylim()[0]
    ax.set_ylabel(_axis_label(what + (f"; axis from {fmt_count(lo)}, not 0)" if lo > 0 else ")"), 40))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(_wrap(title, fig, 11), fontsize=11)
    return fig
