"""`simcli calibrate` (fit a profile to measurements) and `simcli validate` (hold a profile to them)."""

from __future__ import annotations

import enum
import math
import sys
from typing import Annotated, Any, Optional

import typer

from ..base.types import InputError
from ..base.units import sig4
from . import options as o
from .common import answer, handle_errors, new_app, warn

app = new_app()  # `calibrate` and `validate`, top-level commands


class Loss(str, enum.Enum):
    huber = "huber"
    linear = "linear"


class Overlap(str, enum.Enum):
    none = "none"
    buckets = "buckets"
    auto = "auto"


class CalFormat(str, enum.Enum):
    table = "table"
    json = "json"


Where = Annotated[
    Optional[list[str]],
    typer.Option(
        "--where",
        help="Keep only rows whose COLUMN equals VALUE (COLUMN=VALUE, repeatable), e.g. --where system=nd-h100-v5; "
        "FILE:COLUMN=VALUE keeps rows of that file only.",
    ),
]
MinSize = Annotated[
    str, typer.Option("--min-size", help="Leave out all-reduce rows smaller than this (bytes, units allowed: '64MiB').")
]
MaxSize = Annotated[
    Optional[str], typer.Option("--max-size", help="Leave out all-reduce rows larger than this (bytes, units allowed).")
]


_size = o.parse_bytes


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


# --------------------------------------------------------------------------- the profile measurements belong to

#: the profile each backend's measurements default to, as bench step picks its prediction profile: gloo runs
#: on this host's CPU cores (cpu-loopback); nccl could be any GPU system, so it needs --profile
BACKEND_PROFILES = {"gloo": "cpu-loopback"}

MeasuredProfile = Annotated[
    Optional[str],
    typer.Option(
        "--profile",
        "-p",
        help="Built-in profile name or path "
        "to a YAML profile [default: from the file's backend: "
        "cpu-loopback for gloo; nccl and unknown backends need "
        "--profile].",
    ),
]


def _backend_of(m) -> str | None:
    for c in m.comments:
        if c.startswith("backend:"):
            return c.split(":", 1)[1].strip() or None
    if "backend" in m.header:
        found = {b for b in m.text("backend") if b}
        if len(found) == 1:
            return found.pop()
    return None


def profile_for_measurements(profile: str | None, measured: list) -> Any:
    """--profile, or the profile the measurements' backend implies; refused with a hint when it cannot tell."""
    from ..io.profiles import resolve_profile

    if profile is not None:
        return resolve_profile(profile)
    backends = {b for b in (_backend_of(m) for m in measured)}
    paths = ", ".join(m.path for m in measured)
    if len(backends) == 1 and None not in backends:
        (backend,) = backends
        if backend in BACKEND_PROFILES:
            name = BACKEND_PROFILES[backend]
            typer.echo(f"simcli: --profile {name} (the measurements' backend is {backend})", err=True)
            return resolve_profile(name)
        raise InputError(
            f"--profile: {paths} was measured with {backend}, on hardware simcli cannot tell from the "
            "file; give --profile (for example dgx-a100, dgx-h100; see 'simcli profiles list')"
        )
    raise InputError(
        f"--profile: {paths} does not say which backend measured it; give --profile (the hardware "
        "the measurements were taken on; see 'simcli profiles list')"
    )


# --------------------------------------------------------------------------- calibrate


def _scaling_scenario(run: o.ScenarioOptions, m, profile: str, algorithm: str | None):
    """The training run a scaling table measured, as a Scenario: the run's options, the file's batch column."""
    if run.model is None and run.params is None and run.workload is None:
        raise InputError(
            f"--model: {m.path} is a scaling table, which does not say what was trained; give --model, "
            "--params (with --compute-time or --flops-per-sample) or --workload"
        )
    changes: dict[str, Any] = {"profile": profile, "algorithm": algorithm or run.algorithm}
    if "batch_per_device" in m.header and run.batch_per_device is None and run.global_batch is None:
        b = sorted({int(x) for x in m.number("batch_per_device", integer=True).tolist()})
        if len(b) != 1:
            raise InputError(
                f"{m.path}: batch_per_device takes {len(b)} values ({', '.join(map(str, b))}); the spread is "
                "fitted on one weak-scaling run: keep one batch with --where batch_per_device=N"
            )
        changes["batch_per_device"] = b[0]
    return run.replace(**changes).build()


@app.command()
@handle_errors
def calibrate(
    files: Annotated[
        list[str],
        typer.Argument(
            help="Measurement CSVs, told apart by header: a 'bench allreduce' (or 'bench import') file, a "
            "'bench step' file, and a scaling table (devices, speedup) of a training run, from which the "
            "devices' speed spread is fitted (the run's scenario: --model or --params, --compute-time, "
            "--strategy, ...; see docs/calibration.md)."
        ),
    ],
    output: Annotated[
        str,
        typer.Option(
            "--output",
            "-o",
            help="Write the calibrated profile (YAML) here, atomically; refuses to overwrite without --force.",
        ),
    ],
    profile: MeasuredProfile = None,
    tier: Annotated[
        Optional[str],
        typer.Option(
            "--tier",
            help="Fit every all-reduce row to this network tier "
            "[default: each row to the outermost tier its ring spans].",
        ),
    ] = None,
    holdout: Annotated[
        float,
        typer.Option(
            "--holdout", help="Fraction of the points held out of the fit and reported separately (0 <= x < 1)."
        ),
    ] = 0.25,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random hold-out split.")] = 0,
    min_size: MinSize = "0",
    max_size: MaxSize = None,
    where: Where = None,
    algorithm: o.Algorithm = None,
    loss: Annotated[
        Loss,
        typer.Option(
            "--loss", help="huber: robust (outliers down-weighted, IRLS); linear: plain weighted least squares."
        ),
    ] = Loss.huber,
    name: Annotated[
        Optional[str], typer.Option("--name", help="Name of the new profile [default: the output file's stem].")
    ] = None,
    format: Annotated[
        CalFormat, typer.Option("--format", "-f", help="table, or json (the fit report only, to stdout).")
    ] = CalFormat.table,
    force: o.Force = False,
    run: Annotated[o.ScenarioOptions, o.tweak(omit=["profile", "algorithm", "spread"])] = o.ScenarioOptions(),
) -> None:
    """Fit a profile's latency and bandwidth (compute rate, device spread) to measurements; write the profile.

    Example: simcli calibrate run1.csv --profile cpu-loopback --output my-host.yaml
    """
    import datetime
    import platform
    from pathlib import Path

    from ..answers.calibration import calibrate_profile
    from ..answers.validate import filter_present, filter_rows, read_measurements, scope_where
    from ..io.output import check_output_path

    check_output_path(output, force, inputs=[*files, profile])  # never write the profile over an input
    if not 1 <= len(files) <= 3:
        raise InputError(
            "calibrate: give at most one 'bench allreduce' CSV, one 'bench step' CSV and one scaling table"
        )
    where, scoped = scope_where(where or [], [str(f) for f in files])
    comm_m = step_m = scale_m = None
    live_run = None  # a profiler trace or Inspector log: a live job's own measurements (issue 23)
    from ..bench.live import detect

    for f in files:
        kind = detect(f)
        if kind is not None:
            if live_run is not None:
                raise InputError(f"{f}: a second trace or Inspector log; give one run (a directory holds its ranks)")
            live_run, comm_m, step_m = _live_inputs(f, kind, run, profile, comm_m, step_m)
            continue
        m = read_measurements(f)
        if scoped[str(f)]:  # FILE:COLUMN=VALUE: this file's rows only (its column must exist)
            m = filter_rows(m, scoped[str(f)])
        if m.kind == "allreduce":
            if comm_m is not None:
                raise InputError(f"{f}: a second all-reduce file; concatenate the runs into one CSV")
            comm_m = m
        elif m.kind == "step":
            if step_m is not None:
                raise InputError(f"{f}: a second step file; give one 'bench step' CSV")
            step_m = m
        else:
            if scale_m is not None:
                raise InputError(f"{f}: a second scaling table; give one (one run's device counts)")
            # --where COLUMN=VALUE keeps scaling rows too, for the columns the table has
            scale_m = filter_present(m, where or [])
    scaling = None
    if scale_m is not None:
        if profile is None:
            raise InputError(
                f"--profile: {scale_m.path} is a scaling table; give the profile of the hardware it ran on"
            )
        scaling = (scale_m, _scaling_scenario(run, scale_m, profile, algorithm))
    elif run.given() and live_run is None:
        raise InputError(
            f"--{next(iter(run.given())).replace('_', '-')}: the run's options describe a scaling table's "
            "training run; give one (devices, speedup) or leave them out"
        )
    measured = [m for m in (comm_m, step_m, scale_m) if m is not None]
    base = profile_for_measurements(profile, measured)
    from .progress import progress

    fits = ", ".join(
        x for x, m in (("network", comm_m), ("compute", step_m), ("device spread", scale_m)) if m is not None
    )
    with progress(f"calibrate: fitting {fits}"):
        report = calibrate_profile(
            base,
            comm_m,
            step_m,
            tier=tier,
            holdout=holdout,
            seed=seed,
            min_size=_size(min_size, "--min-size") or 0.0,
            max_size=_size(max_size, "--max-size"),
            where=where or [],
            algorithm=algorithm,
            loss=loss.value,
            name=name or Path(output).stem,
            now=datetime.datetime.now(datetime.timezone.utc),
            host=platform.node() or "unknown",
            scaling=scaling,
            run=None if live_run is None else live_run[1],
        )
    text = report["yaml"]
    from ..io.output import write_atomic
    from ..io.profiles import load_profile

    p = write_atomic(output, text, force=force)
    load_profile(p)  # validate what was written
    for w in report["warnings"]:
        warn(w)
    if format is CalFormat.json:
        from ..io.output import to_json

        sys.stdout.write(to_json({k: v for k, v in report.items() if k not in ("yaml", "profile")}))
    else:
        from ..io.render import console

        console.print(_calibrate_view(report))
    typer.echo(f"wrote {p} (checked: it loads as a valid profile)", err=True)


def _live_inputs(f: str, kind: str, run: o.ScenarioOptions, profile: str | None, comm_m, step_m):
    """A trace's or Inspector log's all-reduces (the comm file), a trace's steps (the step file, when the run's
    model is given) and what the run measured beyond both (per-update time, spread across ranks)."""
    from ..answers.validate import live_measured, trace_step_measured
    from ..bench.live import read_live

    if comm_m is not None:
        raise InputError(f"{f}: an all-reduce file was given too; give the trace (or log) or the CSV, not both")
    live = read_live(f, kind)
    ar = [r for r in live.rows if r["collective"] == "all_reduce" and r["world_size"] > 1]
    info: dict[str, Any] = {"file": f, "kind": kind, "warnings": []}
    points = {(r["world_size"], r["bytes"]) for r in ar}
    if len(points) == 1:  # latency and bandwidth cannot be told apart from one point
        ((k1, n1),) = points
        info["warnings"].append(
            f"{f}: its all-reduces are of one size ({n1} B at k = {k1}): latency and bandwidth cannot be told "
            "apart from one point, so the tiers are kept; 'simcli validate' holds them against it"
        )
        ar = []
    comm = live_measured(live, "all_reduce") if ar else None
    spreads = [r["rank_spread"] for r in ar if r.get("rank_spread") is not None]
    if spreads:
        import statistics

        info["collective_rank_spread"] = float(statistics.median(spreads))
    if comm is None and not points:
        info["warnings"].append(f"{f}: no all-reduce between two or more ranks: the tiers are kept")
    if kind != "kineto":
        return (kind, info), comm, step_m
    from ..bench.kineto import step_summary

    summ = step_summary(live.traces)
    info.update(
        {
            "ranks": summ["ranks"],
            "steps": summ["steps"],
            "update_s": summ["optimizer_s"],
            "update_note": "measured per update (Optimizer.step + zero_grad) in the slowest rank's median step; "
            "not written into the profile: the engine has no per-update term (t_update_s) yet",
            "rank_compute_s": summ["rank_compute_s"],
            "rank_spread": summ["rank_spread"],
            "exposed_s": summ["exposed_s"],
            "other_s": summ["other_s"],
        }
    )
    if run.model is None and run.params is None and run.workload is None:
        info["warnings"].append(
            f"{f}: the trace's compute is not fitted: give the run's model (--model, or --params with "
            "--flops-per-sample, and --batch-per-device) for the MFU"
        )
        return (kind, info), comm, step_m
    if step_m is not None:
        raise InputError(f"{f}: a 'bench step' file was given too; give the trace or the step CSV, not both")
    from ..io.profiles import resolve_profile

    base = profile or BACKEND_PROFILES.get(live.rows[0]["backend"])
    sc = run.replace(profile=base).build()
    wl = sc.workload
    if wl.flops_per_sample is None:
        info["warnings"].append(f"{f}: the workload has no FLOPs per sample (--compute-time): no MFU to fit")
        return (kind, info), comm, step_m
    dtype = run.dtype or (resolve_profile(base).device.default_dtype() if base else "fp32")
    step = trace_step_measured(live, float(wl.flops_per_sample), float(wl.params), int(sc.batch), dtype)
    return (kind, info), comm, step


def _calibrate_view(report: dict[str, Any]):
    from rich.console import Group
    from rich.text import Text

    from ..base.units import fmt_rate, fmt_time
    from ..io.render import Column, table

    parts: list[Any] = [Text(f"profile {report['name']}: calibrated from {report['base']}")]
    rows = []
    for r in report["tiers"]:
        lat, bw = r["latency"], r["bandwidth"]
        rows.append(
            {
                "tier": r["tier"],
                "param": "latency α",
                "before": fmt_time(lat["before_s"]),
                "after": fmt_time(lat["after_s"]),
                "se": ("± " + fmt_time(lat["se_s"]))
                if lat["identified"] and lat["se_s"] is not None
                else ("kept: not identified" if not lat["identified"] else "-"),
            }
        )
        rows.append(
            {
                "tier": r["tier"],
                "param": "bandwidth B·eff",
                "before": fmt_rate(bw["before_Bps"]),
                "after": fmt_rate(bw["after_Bps"]),
                "se": ("± " + fmt_rate(bw["se_Bps"]))
                if bw["identified"] and bw["se_Bps"] is not None
                else ("kept: not identified" if not bw["identified"] else "-"),
            }
        )
    st = report["step"]
    if st is not None:
        rows.append(
            {
                "tier": "device",
                "param": "seconds/sample",
                "before": "-",
                "after": f"{st['seconds_per_sample']:.4g} s",
                "se": f"± {st['seconds_per_sample_se']:.2g} s" if st["seconds_per_sample_se"] else "-",
            }
        )
        mfu = st["mfu"]
        rows.append(
            {
                "tier": "device",
                "param": f"mfu ({st['peak_dtype']})",
                "before": f"{mfu['before']:.4g}",
                "after": f"{mfu['after']:.4g}"
                + ("" if mfu["fitted"] is not None and mfu["after"] == mfu["fitted"] else " (kept)"),
                "se": f"± {mfu['se']:.2g}" if mfu["se"] else "-",
            }
        )
        for d in st.get("by_dtype") or []:  # bench step --dtype files: mfu_by_dtype and the backward fraction
            rows.append(
                {
                    "tier": "device",
                    "param": f"mfu_by_dtype.{d['dtype']}",
                    "before": "-" if d["mfu_before"] is None else f"{d['mfu_before']:.4g}",
                    "after": "-" if d["mfu"] is None else f"{d['mfu']:.4g}" + ("" if d["written"] else " (kept)"),
                    "se": f"± {d['mfu_se']:.2g}" if d["mfu_se"] else "-",
                }
            )
            if d["backward_fraction"] is not None:
                rows.append(
                    {
                        "tier": "device",
                        "param": f"backward fraction ({d['dtype']})",
                        "before": "-",
                        "after": f"{d['backward_fraction']:.3f}",
                        "se": f"± {d['backward_fraction_se']:.2g}" if d["backward_fraction_se"] else "-",
                    }
                )
        rows.append(
            {
                "tier": "step",
                "param": "overlap fraction",
                "before": "-",
                "after": "-" if st["overlap"] is None else f"{st['overlap']:.3f}",
                "se": f"± {st['overlap_se']:.2g}" if st["overlap_se"] else "-",
            }
        )
    sp = report.get("spread")
    if sp is not None:
        rows.append(
            {
                "tier": "device",
                "param": "speed spread σ",
                "before": "-" if not sp["before"] else f"{sp['before']:.4g}",
                "after": f"{sp['after']:.4g}",
                "se": f"± {sp['se']:.2g}" if sp["se"] else "-",
            }
        )
    parts.append(
        table(
            rows,
            [
                Column("tier", "tier", justify="left"),
                Column("parameter", "param", justify="left"),
                Column("before", "before"),
                Column("after", "after"),
                Column("uncertainty (1 s.e.)", "se"),
            ],
            title="parameters",
        )
    )
    if report["tiers"]:
        q = []
        for r in report["tiers"]:
            qq = r["quality"]
            q.append(
                {
                    "tier": r["tier"],
                    "k": ",".join(str(x) for x in r["world_sizes"]),
                    "sizes": r["size_range"],
                    "n": r["points"],
                    "held": r["holdout_points"],
                    "r2": r2_cell(qq["r2_log_time"]),
                    "fmed": _pct(qq["median_rel_error_fit"]),
                    "fmax": _pct(qq["max_rel_error_fit"]),
                    "hmed": _pct(qq["median_rel_error_holdout"]),
                    "hmax": _pct(qq["max_rel_error_holdout"]),
                }
            )
        parts.append(
            table(
                q,
                [
                    Column("tier", "tier", justify="left"),
                    Column("k", "k"),
                    Column("sizes", "sizes", justify="left"),
                    Column("points", "n"),
                    Column("held out", "held"),
                    Column("R² (log t)", "r2"),
                    Column("fit median", "fmed"),
                    Column("fit max", "fmax"),
                    Column("held-out median", "hmed"),
                    Column("held-out max", "hmax"),
                ],
                title="fit quality (relative error of the all-reduce time)",
                caption=(
                    report.get("method") or "t = 2(k-1)·α + 2(k-1)/k · n/B, weighted least squares on relative error"
                ),
            )
        )
    lr = report.get("run")
    if lr is not None:
        from ..base.units import fmt_time as ft

        items = []
        if lr.get("update_s") is not None:
            items.append(("per-update time (optimizer)", ft(lr["update_s"]), lr["update_note"]))
        if lr.get("rank_spread") is not None:
            items.append(
                (
                    "compute spread across ranks (sd/mean)",
                    f"{100 * lr['rank_spread']:.2f}%",
                    f"T_compute per rank {', '.join(ft(x) for x in lr['rank_compute_s'])}; {lr['ranks']} ranks are "
                    "too few to fit device.spread (it is not written; a scaling table fits it)",
                )
            )
        if lr.get("collective_rank_spread") is not None:
            items.append(
                (
                    "collective spread across ranks",
                    f"{100 * lr['collective_rank_spread']:.1f}%",
                    "median over all-reduces of (slowest - fastest rank) / slowest",
                )
            )
        if lr.get("exposed_s") is not None:
            items.append(("exposed communication per step", ft(lr["exposed_s"]), "measured, not fitted"))
        if items:
            parts.append(
                table(
                    [{"what": a, "value": b, "note": c} for a, b, c in items],
                    [
                        Column("measured in the run", "what", justify="left"),
                        Column("value", "value"),
                        Column("", "note", justify="left"),
                    ],
                    title=f"{lr['file']} ({'profiler trace' if lr['kind'] == 'kineto' else 'NCCL Inspector'})",
                )
            )
    if sp is not None:
        parts.append(
            table(
                [
                    {
                        "k": r["devices"],
                        "meas": f"{r['measured']:.4f}",
                        "before": f"{r['predicted_before']:.4f}",
                        "after": f"{r['predicted_after']:.4f}",
                        "err": f"{r['predicted_after'] / r['measured'] - 1:+.1%}",
                    }
                    for r in sp["per_row"]
                ],
                [
                    Column("k", "k"),
                    Column(f"measured ÷ k = {sp['k0']}", "meas"),
                    Column("predicted, no spread", "before"),
                    Column("predicted, fitted spread", "after"),
                    Column("error", "err"),
                ],
                title=f"fit quality (per-device throughput relative to k = {sp['k0']}, {sp['file']})",
                caption=(
                    f"median |error| {_pct(sp['median_rel_error_before'])} without a spread, "
                    f"{_pct(sp['median_rel_error_after'])} with it; T_compute x (1 + σ·m_k), simcli.step.straggler"
                ),
            )
        )
    return Group(*parts)


# --------------------------------------------------------------------------- validate


def r2_cell(r2: float | None) -> str:
    """R² for the fit-quality table: 'undefined' where the points have no spread of times to explain (their R² is
    0/0, NaN), never 'nan'."""
    return f"{r2:.4f}" if r2 is not None and math.isfinite(r2) else "undefined"


@app.command()
@handle_errors
def validate(
    results: Annotated[
        str,
        typer.Argument(
            help="Measurements: a 'bench allreduce', 'bench import' or "
            "'bench step' CSV, or a published table (see validation/published)."
        ),
    ],
    profile: MeasuredProfile = None,
    model: o.Model = None,
    params: o.Params = None,
    flops_per_sample: o.FlopsPerSample = None,
    compute_time: o.ComputeTime = None,
    batch_per_device: o.BatchPerDevice = None,
    dtype: o.Dtype = None,
    grad_dtype: o.GradDtype = "fp32",
    algorithm: o.Algorithm = None,
    overlap: Annotated[
        Overlap,
        typer.Option(
            "--overlap",
            help="Step and scaling files: how communication hides "
            "behind backward; auto: buckets (DDP) for scaling tables and for "
            "step rows whose mode is ddp, none for other step rows.",
        ),
    ] = Overlap.auto,
    where: Where = None,
    min_size: MinSize = "0",
    max_size: MaxSize = None,
    max_error: Annotated[
        Optional[str],
        typer.Option(
            "--max-error",
            help="Exit 1 when the median absolute error of the main metric is above this ('15%' or 0.15).",
        ),
    ] = None,
    plot: Annotated[
        Optional[str],
        typer.Option(
            "--plot",
            help="Draw measured markers over predicted lines "
            "into this file (.png, .svg, .pdf; as 'simcli plot' draws a "
            "saved validate table).",
        ),
    ] = None,
    out: o.OutputOptions = o.OutputOptions(),
) -> None:
    """Compare a profile's predictions with measurements: error per row, median and max error per k and size.

    Example: simcli validate validation/published/nccl-allreduce-8xA100-nvswitch.csv --profile dgx-a100
    """
    from ..answers.validate import filter_rows, read_measurements, scope_where
    from ..answers.validate import validate as run_validation
    from ..io.output import check_output_path

    if out.output:
        check_output_path(out.output, out.force, inputs=[results, profile])
    if plot:
        check_output_path(plot, out.force, "--plot", inputs=[results, profile])
    fig_size = o.picture_size(plot, out.force, o.DPI, o.WIDTH, None) if plot else None
    limit = _max_error(max_error)
    ct = o.parse_time(compute_time, "--compute-time")
    wl = None
    if model is not None or params is not None:
        from ..io.workloads import build_workload

        if params is not None and ct is None:
            wl = build_workload(params=params, flops_per_sample=flops_per_sample or 6.0 * params)
        else:
            wl = build_workload(model=model, params=params, flops_per_sample=flops_per_sample, compute_time=ct)
    from ..bench.live import detect

    if wl is not None and detect(results) == "kineto":  # a traced step, term by term (issue 23)
        _validate_trace(results, profile, wl, batch_per_device, dtype, algorithm, ct, out, limit)
        return
    measured = read_measurements(results)
    prof = profile_for_measurements(profile, [measured])
    every, scoped = scope_where(where or [], [str(results)])
    m = filter_rows(
        measured, every + scoped[str(results)], _size(min_size, "--min-size") or 0.0, _size(max_size, "--max-size")
    )
    from .progress import progress

    with progress(f"validate: predicting {len(m)} rows of {results}"):
        v = run_validation(
            m,
            prof,
            workload=wl,
            compute_time_s=ct,
            overlap=overlap.value,
            grad_dtype=grad_dtype,
            algorithm=algorithm,
            dtype=dtype,
            batch=batch_per_device,
        )
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
        lambda: (v.records, [f"simcli validate {v.path} --profile {v.profile}"]),
    )
    if plot:
        from pathlib import Path

        from ..plot import figures as P

        with progress(f"drawing {plot}"):
            fig = P.validation_figure([dict(r) for r in v.records], Path(v.path).name, o.THRESHOLD, fig_size)
            saved = P.save_figure(fig, plot, out.force, option="--plot")
        typer.echo(f"wrote {saved}", err=True)
    med = v.median_error()
    if limit is not None and med is not None and med > limit:
        typer.echo(
            f"simcli: error: median error of {v.primary} is {100 * med:.1f}%, above --max-error {100 * limit:g}%",
            err=True,
        )
        raise typer.Exit(1)


def _validate_trace(path, profile, wl, batch, dtype, algorithm, ct, out, limit) -> None:
    """simcli validate TRACE --model M: the traced step term by term (simcli.answers.trace_validate)."""
    from ..answers.trace_validate import validate_trace
    from ..bench.kineto import step_summary
    from ..bench.live import read_live

    live = read_live(path, "kineto")
    prof = profile_for_measurements(profile, [live_measured_any(live)])
    v = validate_trace(
        step_summary(live.traces), prof, wl, batch=batch, dtype=dtype, algorithm=algorithm, compute_time_s=ct, path=path
    )
    for note in v["notes"]:
        typer.echo(f"simcli: note: {note}", err=True)
    answer(
        out,
        lambda: _trace_view(v),
        lambda: v,
        lambda: (v["terms"], [f"simcli validate {path} --profile {prof.name} (a traced step)"]),
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
    from ..answers.validate import live_measured

    return live_measured(live, None)


def _trace_view(v: dict[str, Any]):
    from rich.console import Group
    from rich.text import Text

    from ..base.units import fmt_bytes
    from ..io.render import Column, table, time_unit

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
            Column(f"measured {unit}", "measured_s", ms),
            Column(f"predicted {unit}", "pred", justify="right"),
            Column(f"predicted - measured {unit}", "difference_s", lambda x: f"{x / f:+.4g}"),
            Column("error", "err", justify="right"),
            Column("", "note", justify="left"),
        ],
        title="the step, term by term",
    )
    bk = table(
        [{**b, "i": i} for i, b in enumerate(v["buckets"])],
        [
            Column("#", "i"),
            Column("collective", "collective", justify="left"),
            Column("size", "bytes", fmt_bytes),
            Column("dtype", "dtype", justify="left"),
            Column(f"starts at {unit}", "start_s", ms),
            Column(f"time {unit}", "time_s", ms),
            Column(f"hidden {unit}", "hidden_s", ms),
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


def _validate_view(v, max_rows: int):
    from rich.console import Group
    from rich.text import Text

    from ..base.units import fmt_bytes
    from ..io.render import Column, table, time_unit

    parts: list[Any] = [
        Text(f"{v.path} ({v.kind}) against profile {v.profile}; error = (predicted - measured) / measured")
    ]
    for metric in sorted(v.summary, key=lambda x: x != v.primary):  # the main metric first
        s = v.summary[metric]
        rs = [r for r in v.records if r["metric"] == metric]
        if metric == "time_s":
            f, unit = time_unit([r["measured"] for r in rs])
            fmt = lambda x, f=f: sig4(x / f)  # noqa: E731
            label = f"time {unit}"
        elif metric == "t_step_s":
            f, unit = time_unit([r["measured"] for r in rs])
            fmt = lambda x, f=f: sig4(x / f)  # noqa: E731
            label = f"T_step {unit}"
        else:
            fmt = lambda x: f"{x:.4g}"  # noqa: E731
            label = {"speedup": "S(k)", "samples_per_s": "samples/s"}.get(metric, metric)
        cols = [Column("k", "devices")]
        if rs and rs[0]["bytes"] is not None:
            cols.append(Column("size", "bytes", fmt_bytes))
        if any("mode" in r for r in rs):
            cols.append(Column("mode", "mode", justify="left"))
        if any("dtype" in r for r in rs):
            cols.append(Column("dtype", "dtype", justify="left"))
        cols += [
            Column(f"measured {label}", "measured", fmt),
            Column(f"predicted {label}", "predicted", fmt),
            Column("error", "error", lambda e: f"{100 * e:+.1f}%"),
        ]
        if metric == "time_s":
            cols += [
                Column("busbw meas GB/s", "busbw_measured_GBps", lambda x: f"{x:.4g}"),
                Column("busbw pred GB/s", "busbw_predicted_GBps", lambda x: f"{x:.4g}"),
            ]
        parts.append(table(rs, cols, title=f"{metric}: per row", max_rows=max_rows))
        summ = [{"group": "all", **s["overall"]}]
        summ += [{"group": f"k = {k}", **st} for k, st in s["by_devices"].items()]
        summ += [{"group": dec, **st} for dec, st in s.get("by_size_decade", {}).items()]
        summ += [{"group": band, **st} for band, st in s.get("by_size_band", {}).items()]
        scols = [
            Column("group", "group", justify="left"),
            Column("rows", "n"),
            Column("median |err|", "mdape", _pct),
            Column("mean |err|", "mean_ape", _pct),
            Column("max |err|", "max_ape", _pct),
            Column("median err (bias)", "bias", lambda e: f"{100 * e:+.1f}%"),
        ]
        if "busbw_mdape" in s["overall"]:
            scols += [
                Column("busbw median |err|", "busbw_mdape", _pct),
                Column("busbw max |err|", "busbw_max_ape", _pct),
            ]
        parts.append(
            table(
                summ, scols, title=f"{metric}: summary" + (" (main metric, --max-error)" if metric == v.primary else "")
            )
        )
    return Group(*parts)
