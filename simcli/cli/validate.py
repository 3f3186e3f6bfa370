"""`simcli validate`: hold a profile's predictions to measurements, row by row, or a traced step term by term."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer
from rich.console import Group
from rich.text import Text

from ..base.units import fmt_bytes, sig4
from ..checks.validate import validate as run_validation
from ..io import rules
from ..io.files import check_output_path
from ..io.measured.live import detect, read_live
from ..io.measured.table import filter_rows, live_measured, read_measurements, scope_where
from ..io.render import Column, table, time_unit
from ..io.workloads import build_workload
from . import options as o
from .common import answer, examples, handle_errors, new_app
from .measured import (
    MeasuredProfile,
    RowOptions,
    held_profile,
    pct,
    profile_for_measurements,
)
from .progress import progress

app = new_app()  # `validate`, a top-level command


#: validate's --overlap: DDP's buckets or none, as everywhere, and "auto" (its default) that reads each row
ValidateOverlap = Annotated[
    str,
    o.option(
        "--overlap",
        help="Step and scaling files: how communication hides behind backward, 'buckets' (DDP's) or 'none'; "
        "auto: buckets for scaling tables and for step rows whose mode is ddp, none for other step rows.",
    ),
]
MeasuredModel = Annotated[
    Optional[str],
    o.option(
        "--model",
        "-m",
        help="Built-in model the measurements trained (step files without a params column, scaling tables, "
        "traces; see 'simcli models list').",
    ),
]


@app.command(
    epilog=examples(
        "simcli validate run1.csv -p cpu-loopback",
        "simcli validate all_reduce_perf.txt -p dgx-a100 --min-size 64MiB",
    )
)
@handle_errors
def validate(
    results: Annotated[
        str,
        typer.Argument(
            metavar="FILE",
            help="Measurements: a 'bench allreduce', 'bench import' or "
            "'bench step' CSV, or a published table (see validation/published).",
        ),
    ],
    run: Annotated[
        o.ScenarioOptions,
        o.tweak(profile=MeasuredProfile, model=MeasuredModel, overlap=ValidateOverlap, defaults={"overlap": "auto"}),
    ] = o.ScenarioOptions(),
    select: RowOptions = RowOptions(),
    max_error: Annotated[
        Optional[str],
        o.option(
            "--max-error",
            help="Exit 1 when the median absolute error of the main metric is above this ('15%' or 0.15).",
        ),
    ] = None,
    plot: Annotated[
        Optional[str],
        o.option(
            "--plot",
            help="Draw measured markers over predicted lines "
            "into this file (.png, .svg, .pdf; as 'simcli plot' draws a "
            "saved validate table).",
        ),
    ] = None,
    out: o.OutputOptions = o.OutputOptions(),
) -> None:
    """Compare a profile's predictions with measurements: error per row, median and max error per k and size."""

    profile = run.profile
    if out.output:
        check_output_path(out.output, out.force, inputs=[results, profile])
    if plot:
        check_output_path(plot, out.force, "--plot", inputs=[results, profile])
    fig_size = o.picture_size(plot, out.force, o.DPI, width=o.WIDTH, height=None) if plot else None
    limit = _max_error(max_error)
    fields = run.scenario_fields()  # every scenario option, checked before any work
    ct = fields["compute_time_s"]
    wl = None
    if run.model is not None or run.params is not None or run.workload is not None:
        fps = run.flops_per_sample
        if run.params is not None and ct is None and fps is None:
            fps = 6.0 * run.params  # dense layers: 2N forward + 4N backward
        wl = build_workload(
            model=run.model,
            params=run.params,
            flops_per_sample=fps,
            workload_file=run.workload,
            seq_len=run.seq_len,
            compute_time=ct,
        )

    if wl is not None and detect(results) == "kineto":  # a traced step, term by term (issue 23)
        _validate_trace(results, profile, wl, fields=fields, out=out, limit=limit, nccl_version=run.nccl_version)
        return
    measured = read_measurements(results)
    prof = held_profile(profile, [measured], run.nccl_version)
    every, scoped = scope_where(select.where or [], [str(results)])
    lo, hi = select.sizes()
    m = filter_rows(measured, every + scoped[str(results)], lo, max_size=hi)

    with progress(f"validate: predicting {len(m)} rows of {results}"):
        v = run_validation(m, prof, workload=wl, scenario=fields)
    for note in v.notes:
        typer.echo(f"simcli: note: {note}", err=True)
    answer(
        out,
        lambda: _validate_view(v, out.rows),
        lambda: {
            "file": v.path,
            "kind": v.kind,
            "profile": v.profile,
            "primary_metric": v.primary,
            "rows": v.records,
            "summary": v.summary,
            "notes": list(v.notes),
        },
        rows=lambda: (v.records, [f"simcli validate {v.path} --profile {v.profile}"]),
    )
    if plot and fig_size is not None:
        from ..plot import figures as P  # heavy

        with progress(f"drawing {plot}"):
            fig = P.validation_figure([dict(r) for r in v.records], Path(v.path).name, o.THRESHOLD, size=fig_size)
            saved = P.save_figure(fig, plot, out.force, option="--plot")
        typer.echo(f"wrote {saved}", err=True)
    med = v.median_error()
    if limit is not None and med is not None and med > limit:
        typer.echo(
            f"simcli: error: median error of {v.primary} is {100 * med:.1f}%, above --max-error {100 * limit:g}%",
            err=True,
        )
        raise typer.Exit(1)


def _validate_trace(path, profile, wl, *, fields, out, limit, nccl_version=None) -> None:
    """simcli validate TRACE --model M: the traced step term by term (simcli.checks.trace_validate)."""
    from ..checks.trace_validate import validate_trace  # lazy
    from ..io.measured.kineto import step_summary  # lazy

    live = read_live(path, "kineto")
    prof = profile_for_measurements(profile, [live_measured_any(live)], nccl_version)
    t0 = live.traces[0]
    backend = t0.backend or ("nccl" if t0.device == "gpu" else "gloo")
    rules.hardware(path, prof, backend=backend, devices=[d for t in live.traces for d in t.devices])
    rules.strategy(
        path, fields.get("strategy"), {b["collective"] for t in live.traces for s in t.steps for b in s.buckets}
    )
    v = validate_trace(step_summary(live.traces), prof, wl, scenario=fields, path=path)
    for note in v["notes"]:
        typer.echo(f"simcli: note: {note}", err=True)
    answer(
        out,
        lambda: _trace_view(v),
        lambda: v,
        rows=lambda: (v["terms"], [f"simcli validate {path} --profile {prof.name} (a traced step)"]),
    )
    worst = next(t for t in v["terms"] if t["term"] == v["differs_most"])
    if limit is not None and worst["error"] is not None and abs(worst["error"]) > limit:
        typer.echo(
            f"simcli: error: {worst['term']} differs by {100 * worst['error']:+.1f}%, above --max-error "
            f"{100 * limit:g}%",
            err=True,
        )
        raise typer.Exit(1)


def live_measured_any(live):
    return live_measured(live, None)


def _trace_view(v: dict[str, Any]):
    f, unit = time_unit([t["measured_s"] for t in v["terms"] if t["term"] == "step"])

    def ms(x: float | None) -> str:
        return "-" if x is None else sig4(x / f)

    head = Text(
        f"{v['file']}: {v['steps']} step(s) of {v['ranks']} rank(s), k = {v['devices']}, against profile "
        f"{v['profile']}; batch {v['batch_per_device']} per device, DDP buckets of {v['bucket_mb']:g} MiB (the "
        f"trace's), gradient {fmt_bytes(v['gradient_bytes_measured'])} all-reduced a step (model: "
        f"{fmt_bytes(v['gradient_bytes_predicted'])} {v['grad_dtype']}); measured: {v['step']}, the slowest "
        "rank's median step"
    )
    rows = [
        {
            **t,
            "pred": ms(t["predicted_s"]) if t["modelled"] else "- (no term: 0)",
            "err": "-" if t["error"] is None or not t["modelled"] else f"{100 * t['error']:+.1f}%",
        }
        for t in v["terms"]
    ]
    terms = table(
        rows,
        [
            Column("term", "term", justify="left"),
            Column(f"measured {unit}", "measured_s", ms, short=f"meas {unit}"),
            Column(f"predicted {unit}", "pred", justify="right", short=f"pred {unit}"),
            Column(f"predicted - measured {unit}", "difference_s", lambda x: f"{x / f:+.4g}", priority=2, short="diff"),
            Column("error", "err", justify="right"),
        ],
        title="the step, term by term",
        caption="; ".join(f"{t['term']}: {t['note']}" for t in v["terms"] if t.get("note")) or None,
    )
    bk = table(
        [{**b, "i": i} for i, b in enumerate(v["buckets"])],
        [
            Column("#", "i"),
            Column("collective", "collective", justify="left"),
            Column("size", "bytes", fmt_bytes),
            Column("dtype", "dtype", justify="left", priority=4),
            Column(f"starts at {unit}", "start_s", ms, priority=3, short=f"at {unit}"),
            Column(f"time {unit}", "time_s", ms),
            Column(f"hidden {unit}", "hidden_s", ms, priority=2),
            Column(f"exposed {unit}", "exposed_s", ms),
        ],
        title="the step's collectives (measured; hidden = overlapped by compute)",
    )
    worst = next(t for t in v["terms"] if t["term"] == v["differs_most"])
    tail = Text(
        f"differs most: {worst['term']}, predicted {'-' if not worst['modelled'] else ms(worst['predicted_s'])} "
        f"vs measured {ms(worst['measured_s'])} {unit} ({worst['difference_s'] / f:+.4g} {unit} of the step)"
        + ("" if v["rank_spread"] is None else f"; compute spread across ranks {100 * v['rank_spread']:.1f}%")
    )
    return Group(head, terms, bk, tail)


def _max_error(value: str | None) -> float | None:
    return o.parse_fraction(value, "--max-error", "'15%' or 0.15")


def _in_unit(f: float) -> Callable[[float], str]:
    """A cell format: four significant digits of x / f (a time in its column's unit)."""
    return lambda x: sig4(x / f)


def _validate_view(v, max_rows: int):
    parts: list[Any] = [
        Text(f"{v.path} ({v.kind}) against profile {v.profile}; error = (predicted - measured) / measured")
    ]
    for metric in sorted(v.summary, key=lambda x: x != v.primary):  # the main metric first
        s = v.summary[metric]
        rs = [r for r in v.records if r["metric"] == metric]
        fmt: Callable[[float], str]
        if metric == "time_s":
            f, unit = time_unit([r["measured"] for r in rs])
            fmt = _in_unit(f)
            label = f"time {unit}"
        elif metric == "t_step_s":
            f, unit = time_unit([r["measured"] for r in rs])
            fmt = _in_unit(f)
            label = f"T_step {unit}"
        else:
            fmt = lambda x: f"{x:.4g}"  # noqa: E731
            label = {"speedup": "S(k)", "samples_per_s": "samples/s"}.get(metric, metric)
        # k, size, measured, predicted and the error are the answer (never left out on a narrow terminal)
        cols = [Column("k", "devices")]
        if rs and rs[0]["bytes"] is not None:
            cols.append(Column("size", "bytes", fmt_bytes))
        if any("mode" in r for r in rs):
            cols.append(Column("mode", "mode", justify="left", priority=4))
        if any("dtype" in r for r in rs):
            cols.append(Column("dtype", "dtype", justify="left", priority=5))
        cols += [
            Column(f"measured {label}", "measured", fmt, short=f"meas {label.split()[-1]}"),
            Column(f"predicted {label}", "predicted", fmt, short=f"pred {label.split()[-1]}"),
            Column("error", "error", lambda e: f"{100 * e:+.1f}%"),
        ]
        if metric == "time_s":
            cols += [
                Column("busbw meas GB/s", "busbw_measured_GBps", lambda x: f"{x:.4g}", priority=2, short="bus m"),
                Column("busbw pred GB/s", "busbw_predicted_GBps", lambda x: f"{x:.4g}", priority=3, short="bus p"),
            ]
        parts.append(table(rs, cols, title=f"{metric}: per row", max_rows=max_rows))
        summ = [{"group": "all", **s["overall"]}]
        summ += [{"group": f"k = {k}", **st} for k, st in s["by_devices"].items()]
        summ += [{"group": dec, **st} for dec, st in s.get("by_size_decade", {}).items()]
        summ += [{"group": band, **st} for band, st in s.get("by_size_band", {}).items()]
        scols = [
            Column("group", "group", justify="left"),
            Column("rows", "n", priority=3, short="n"),
            Column("median |err|", "mdape", pct, short="med |err|"),
            Column("mean |err|", "mean_ape", pct, priority=4, short="mean"),
            Column("max |err|", "max_ape", pct, short="max"),
            Column("median err (bias)", "bias", lambda e: f"{100 * e:+.1f}%", priority=2, short="bias"),
        ]
        if "busbw_mdape" in s["overall"]:
            scols += [
                Column("busbw median |err|", "busbw_mdape", pct, priority=5, short="bus med"),
                Column("busbw max |err|", "busbw_max_ape", pct, priority=6, short="bus max"),
            ]
        parts.append(
            table(
                summ, scols, title=f"{metric}: summary" + (" (main metric, --max-error)" if metric == v.primary else "")
            )
        )
    return Group(*parts)
