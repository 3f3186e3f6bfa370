"""`simcli calibrate`: fit a profile to measurements (a bench allreduce CSV, a bench step CSV, a scaling table,
a profiler trace or an Inspector log) and write it."""

from __future__ import annotations

import datetime
import enum
import platform
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Group
from rich.text import Text

from ..base.types import InputError
from ..base.units import fmt_rate, fmt_time
from ..base.units import fmt_time as ft
from ..fits.calibration import CalibrationOptions, calibrate_profile
from ..io.files import check_output_path, write_atomic
from ..io.formats import to_json
from ..io.measured.live import detect, read_live
from ..io.measured.table import (
    filter_present,
    filter_rows,
    live_measured,
    read_measurements,
    scope_where,
    trace_step_measured,
)
from ..io.profiles import load_profile, resolve_profile
from ..io.render import Column, console, table
from ..step.update import bytes_per_param
from . import options as o
from .common import examples, handle_errors, new_app, warn
from .measured import (
    BACKEND_PROFILES,
    MeasuredProfile,
    RowOptions,
    held_profile,
    pct,
    r2_cell,
)
from .progress import progress

app = new_app()  # `calibrate`, a top-level command


class Loss(str, enum.Enum):
    huber = "huber"
    linear = "linear"


class CalFormat(str, enum.Enum):
    table = "table"
    json = "json"


# --------------------------------------------------------------------------- calibrate


def _scaling_scenario(run: o.ScenarioOptions, m, profile: str, *, algorithm: str | None):
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


@app.command(epilog=examples("simcli calibrate run1.csv --profile cpu-loopback --output my-host.yaml"))
@handle_errors
def calibrate(
    files: Annotated[
        list[str],
        typer.Argument(
            metavar="FILE...",
            help="Measurement CSVs, told apart by header: a 'bench allreduce' (or 'bench import') file, a "
            "'bench step' file, and a scaling table of a training run: (devices, speedup), from which the "
            "devices' speed spread is fitted, or (devices, samples_per_s, accum), from which the spread and the "
            "per-update time are fitted together (the run's scenario: --model or --params, --compute-time, "
            "--strategy, --optimizer, ...; see docs/calibration.md).",
        ),
    ],
    output: Annotated[
        str,
        o.option(
            "--output",
            "-o",
            help="Write the calibrated profile (YAML) here, atomically; refuses to overwrite without --force.",
        ),
    ],
    profile: MeasuredProfile = None,
    tier: Annotated[
        Optional[str],
        o.option(
            "--tier",
            help="Fit every all-reduce row to this network tier "
            "[default: each row to the outermost tier its ring spans].",
        ),
    ] = None,
    holdout: Annotated[
        float,
        o.option("--holdout", help="Fraction of the points held out of the fit and reported separately (0 <= x < 1)."),
    ] = 0.25,
    seed: Annotated[int, o.option("--seed", help="Seed of the random hold-out split.")] = 0,
    select: RowOptions = RowOptions(),
    algorithm: o.Algorithm = None,
    loss: Annotated[
        Loss,
        o.option("--loss", help="huber: robust (outliers down-weighted, IRLS); linear: plain weighted least squares."),
    ] = Loss.huber,
    name: Annotated[
        Optional[str], o.option("--name", help="Name of the new profile [default: the output file's stem].")
    ] = None,
    format: Annotated[
        CalFormat, o.option("--format", "-f", help="table, or json (the fit report only, to stdout).")
    ] = CalFormat.table,
    force: o.Force = False,
    run: Annotated[
        o.ScenarioOptions, o.tweak(omit=["profile", "algorithm", "spread", "update_time", "nccl_version"])
    ] = o.ScenarioOptions(),
) -> None:
    """Fit a profile's latency and bandwidth (compute rate, device spread) to measurements; write the profile."""

    check_output_path(output, force, inputs=[*files, profile])  # never write the profile over an input
    if not 1 <= len(files) <= 3:
        raise InputError(
            "calibrate: give at most one 'bench allreduce' CSV, one 'bench step' CSV and one scaling table"
        )
    comm_m, step_m, scale_m, live_run, where = _inputs(files, select.where, run, profile=profile)
    scaling = None
    if scale_m is not None:
        if profile is None:
            raise InputError(
                f"--profile: {scale_m.path} is a scaling table; give the profile of the hardware it ran on"
            )
        scaling = (scale_m, _scaling_scenario(run, scale_m, profile, algorithm=algorithm))
    elif run.given() and live_run is None:
        raise InputError(
            f"--{next(iter(run.given())).replace('_', '-')}: the run's options describe a scaling table's "
            "training run; give one (devices, speedup) or leave them out"
        )
    measured = [m for m in (comm_m, step_m, scale_m) if m is not None]
    if profile is None and not measured and live_run is not None:  # a trace with no all-reduce: its own backend
        profile = BACKEND_PROFILES.get(live_run[1].get("backend") or "")
        if profile is None:
            raise InputError(f"--profile: {live_run[1]['file']} does not say which hardware it ran on; give --profile")
        typer.echo(f"simcli: --profile {profile} (the trace's backend is {live_run[1]['backend']})", err=True)
    base = held_profile(profile, measured)

    fits = ", ".join(
        x for x, m in (("network", comm_m), ("compute", step_m), ("device spread", scale_m)) if m is not None
    )
    lo, hi = select.sizes()
    with progress(f"calibrate: fitting {fits}"):
        opts = CalibrationOptions(
            name=name or Path(output).stem,
            now=datetime.datetime.now(datetime.timezone.utc),
            host=platform.node() or "unknown",
            tier=tier,
            holdout=holdout,
            seed=seed,
            min_size=lo,
            max_size=hi,
            where=tuple(where or ()),
            algorithm=algorithm,
            loss=loss.value,
        )
        report = calibrate_profile(
            base,
            comm_m,
            step_m,
            opts=opts,
            scaling=scaling,
            run=None if live_run is None else live_run[1],
        )
    text = report["yaml"]

    p = write_atomic(output, text, force=force)
    load_profile(p)  # validate what was written
    for w in report["warnings"]:
        warn(w)
    if format is CalFormat.json:
        sys.stdout.write(to_json({k: v for k, v in report.items() if k not in ("yaml", "profile")}))
    else:
        console.print(_calibrate_view(report))
    typer.echo(f"wrote {p} (checked: it loads as a valid profile)", err=True)


def _inputs(files: list[str], where: list[str] | None, run: Any, *, profile: str | None) -> tuple[Any, ...]:
    """(all-reduce, step, scaling table, live run, the --where left once FILE:COLUMN=VALUE is taken per file) of
    the files: at most one of each kind; on a scaling table --where keeps the columns it has."""

    where, scoped = scope_where(where or [], [str(f) for f in files])
    comm_m = step_m = scale_m = None
    live_run = None  # a profiler trace or Inspector log: a live job's own measurements (issue 23)
    for f in files:
        kind = detect(f)
        if kind is not None:
            if live_run is not None:
                raise InputError(f"{f}: a second trace or Inspector log; give one run (a directory holds its ranks)")
            live_run, comm_m, step_m = _live_inputs(f, kind, run, profile=profile, comm_m=comm_m, step_m=step_m)
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
    return comm_m, step_m, scale_m, live_run, where


def _live_inputs(f: str, kind: str, run: o.ScenarioOptions, *, profile: str | None, comm_m, step_m):
    """A trace's or Inspector log's all-reduces (the comm file), a trace's steps (the step file, when the run's
    model is given) and what the run measured beyond both (per-update time, spread across ranks)."""

    if comm_m is not None:
        raise InputError(f"{f}: an all-reduce file was given too; give the trace (or log) or the CSV, not both")
    live = read_live(f, kind)
    ar = [r for r in live.rows if r["collective"] == "all_reduce" and r["world_size"] > 1]
    info: dict[str, Any] = {
        "file": f,
        "kind": kind,
        "warnings": [],
        "backend": live.rows[0]["backend"] if live.rows else None,
    }
    # one row per (k, size): a DDP trace's buckets give one or two sizes (the last bucket is smaller), and the fit
    # takes what they can pin (simcli.fits.fitting: one size fits one parameter, and says which)
    comm = live_measured(live, "all_reduce") if ar else None
    spreads = [r["rank_spread"] for r in ar if r.get("rank_spread") is not None]
    if spreads:
        import statistics  # lazy

        info["collective_rank_spread"] = float(statistics.median(spreads))
    if comm is None:
        info["warnings"].append(f"{f}: no all-reduce between two or more ranks: the tiers are kept")
    if kind != "kineto":
        return (kind, info), comm, step_m
    from ..io.measured.kineto import step_summary  # lazy

    summ = step_summary(live.traces)
    info.update(
        {
            "ranks": summ["ranks"],
            "steps": summ["steps"],
            "update_s": summ["optimizer_s"],
            "update_note": "measured per update (Optimizer.step + zero_grad) in the slowest rank's median step; with "
            "the run's model it fits device.update_bandwidth (--optimizer names what the run's step moves)",
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

    base = profile or BACKEND_PROFILES.get(live.rows[0]["backend"])
    sc = run.replace(profile=base).build()
    wl = sc.workload
    if wl.flops_per_sample is None:
        info["warnings"].append(f"{f}: the workload has no FLOPs per sample (--compute-time): no MFU to fit")
        return (kind, info), comm, step_m
    dtype = run.dtype or (resolve_profile(base).device.default_dtype() if base else "fp32")

    per = bytes_per_param(sc.optimizer, sc.update_extras)
    step = trace_step_measured(
        live, float(wl.flops_per_sample), float(wl.params), batch=int(sc.batch), dtype=dtype, update_bytes_per_param=per
    )
    return (kind, info), comm, step


def _calibrate_view(report: dict[str, Any]):
    parts: list[Any] = [Text(f"profile {report['name']}: calibrated from {report['base']}")]
    rows = []
    for r in report["tiers"]:
        for param, d, unit, fmt in (
            ("latency α", r["latency"], "s", fmt_time),
            ("bandwidth B·eff", r["bandwidth"], "Bps", fmt_rate),
        ):
            se = d[f"se_{unit}"]
            shown_se = ("± " + fmt(se)) if d["identified"] and se is not None else "-"
            rows.append(
                {
                    "tier": r["tier"],
                    "param": param,
                    "before": fmt(d[f"before_{unit}"]),
                    "after": fmt(d[f"after_{unit}"]),
                    "se": shown_se if d["identified"] else "kept: not identified",
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
    up = (st or {}).get("update")
    if up is not None:
        rows.append(
            {
                "tier": "device",
                "param": "update bandwidth",
                "before": fmt_rate(up["before"]) if up["before"] else "-",
                "after": fmt_rate(up["after"]),
                "se": f"± {fmt_rate(up['se'])}" if up["se"] else "-",
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
        if sp.get("update_s") is not None:  # a (k, samples/s, accum) table: the per-update time with σ
            bw = sp["update_bandwidth_Bps"]
            rows.append(
                {
                    "tier": "device",
                    "param": f"per-update time at k = {sp['k0']}",
                    "before": "-",
                    "after": fmt_time(sp["update_s"]) + (f" ({fmt_rate(bw)} update bandwidth)" if bw else ""),
                    "se": (f"± {fmt_time(sp['update_se'])}" if sp["update_se"] is not None else "-")
                    + (f", corr {sp['correlation']:+.2f}" if sp["correlation"] is not None else "")
                    + ("" if sp["separable"] else " (not told apart from σ)"),
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
                    "fmed": pct(qq["median_rel_error_fit"]),
                    "fmax": pct(qq["max_rel_error_fit"]),
                    "hmed": pct(qq["median_rel_error_holdout"]),
                    "hmax": pct(qq["max_rel_error_holdout"]),
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
        parts.append(_fit_quality_table(sp))
    return Group(*parts)


def _fit_quality_table(sp: dict[str, Any]):
    """A scaling table's rows beside simcli's prediction without and with what was fitted: the spread alone (the
    per-device throughput relative to k0), or the spread and the per-update time together (samples/s, each row's
    accumulation)."""

    both = sp.get("update_s") is not None
    fmt = "{:,.1f}" if both else "{:.4f}"
    rows = [
        {
            "k": r["devices"],
            "m": r.get("accum"),
            "meas": fmt.format(r["measured"]),
            "before": fmt.format(r["predicted_before"]),
            "after": fmt.format(r["predicted_after"]),
            "err": f"{r['predicted_after'] / r['measured'] - 1:+.1%}",
        }
        for r in sp["per_row"]
    ]
    cols = [Column("k", "k"), *([Column("accum", "m")] if both else [])]
    cols += [
        Column("measured samples/s" if both else f"measured ÷ k = {sp['k0']}", "meas"),
        Column("predicted, no spread or update" if both else "predicted, no spread", "before"),
        Column("predicted, fitted" if both else "predicted, fitted spread", "after"),
        Column("error", "err"),
    ]
    fitted = (
        "the spread and the per-update time (simcli.fits.fit_update)"
        if both
        else "it; T_compute x (1 + σ·m_k), simcli.step.straggler"
    )
    return table(
        rows,
        cols,
        title=(
            f"fit quality ({sp['file']}; the micro-step solved at k = {sp['k0']})"
            if both
            else f"fit quality (per-device throughput relative to k = {sp['k0']}, {sp['file']})"
        ),
        caption=(
            f"median |error| {pct(sp['median_rel_error_before'])} without"
            + (", " if both else " a spread, ")
            + f"{pct(sp['median_rel_error_after'])} with {fitted}"
        ),
    )
