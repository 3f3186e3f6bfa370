"""`simcli plot`: pictures of scaling curves, time breakdowns, all-reduce costs; redraw of saved tables.

Also the helpers behind ``--plot FILE`` on ``simcli speedup`` and ``simcli comm``. Saved tables are read
and recognised by :mod:`simcli.io.tables`; figures are built by :mod:`simcli.plot.figures`. matplotlib and pandas are
imported inside the functions that draw, never at import time: this module is loaded by every ``simcli``
start-up to register the group.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Mapping, Optional, Sequence

import numpy as np
import typer
from typer.core import TyperGroup

from ..base.ranges import parse_devices, parse_sizes
from ..base.types import InputError
from ..comm import collectives, topology
from ..comm.collectives import default_algorithm
from ..comm.specs import COLLECTIVES
from ..io import tables as T
from ..io.profiles import resolve_profile, with_nccl_version
from ..io.workloads import presets
from ..step.engine import memory_fit, simulate
from . import options as o
from .common import done as _done
from .common import examples, handle_errors, new_app, warn_mfu_fallback
from .progress import progress

if TYPE_CHECKING:  # pragma: no cover
    from ..plot.figures import FigSize
    from ..step.engine import Result, Scenario


class _PlotGroup(TyperGroup):
    """A group whose first argument may be a file instead of a command: ``simcli plot FILE.csv``."""

    def resolve_command(self, ctx, args):  # noqa: ANN001, ANN201 - click's signature
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            return "file", self.commands["file"], list(args)
        return super().resolve_command(ctx, args)


app = new_app(
    cls=_PlotGroup,
    help="Draw pictures (PNG, SVG or PDF by the file's suffix): speedup curves, time breakdowns, all-reduce "
    "time and busbw, the fastest algorithm per (k, size). 'simcli plot FILE.csv|FILE.json' redraws a table "
    "that simcli wrote with --format csv|json.",
    epilog=examples("simcli plot speedup -k 1..64:x2 -p dgx-a100,dgx-h100 -o speedup.png", "simcli plot speedup.csv"),
    no_args_is_help=True,
)

PictureOut = Annotated[
    str,
    o.option(
        "--output",
        "-o",
        help="Picture file to write: .png, .svg or .pdf (atomically; refuses to overwrite without --force).",
    ),
]


def _scenario_tweak(noun: str) -> o.Tweak:
    """plot speedup/breakdown: --profile, --model and --algorithm draw one line (or panel) per value."""
    return o.tweak(
        profile=Annotated[
            Optional[str],
            o.option(
                "--profile", "-p", help=f"Built-in profile name or path; several comma-separated draw one {noun} each."
            ),
        ],
        model=Annotated[
            Optional[str],
            o.option("--model", "-m", help=f"Built-in model; several comma-separated draw one {noun} each."),
        ],
        algorithm=Annotated[
            Optional[str],
            o.option(
                "--algorithm",
                "-a",
                help=f"Collective algorithm (nccl, ring, tree, nvls, ..., auto) [default: nccl on NCCL profiles, "
                f"else ring]; several comma-separated draw one {noun} each.",
            ),
        ],
    )


class Kind(str, enum.Enum):
    auto = "auto"
    speedup = "speedup"
    breakdown = "breakdown"
    comm = "comm"
    step = "step"


# --------------------------------------------------------------------------- helpers used by app.py too


def _batch_text(sc: "Scenario") -> str:
    return (
        f"global batch {sc.batch} split over k (strong scaling)"
        if sc.strong
        else f"batch {sc.batch}/device (weak scaling)"
    )


def _extras(sc: "Scenario") -> list[str]:
    """The devices' speed spread, when the scenario has one (what is communicated: views.communicated)."""
    if sc.device_spread:
        return [f"each step waits for the slowest of k (speed spread {sc.device_spread:.3g})"]
    return []


def series_labels(scenarios: Sequence["Scenario"]) -> list[str]:
    """A legend label per scenario: the values that differ between them (profile, model, algorithm, batch)."""
    vary = o.varying(list(scenarios))
    batches = {_batch_text(sc) for sc in scenarios}
    labels = []
    for sc in scenarios:
        tags = o.scenario_tags(sc)
        parts = [tags[k] for k in vary]
        if len(batches) > 1:
            parts.append(f"b={sc.batch}")
        labels.append(" · ".join(parts) or sc.profile.name)
    return labels


def scenario_title(scenarios: Sequence["Scenario"], what: str) -> str:
    """Two-line title: what is drawn and the inputs all lines share (profile, model, batch, algorithm)."""
    sc = scenarios[0]
    models = list(dict.fromkeys(s.workload.name for s in scenarios))
    profiles = list(dict.fromkeys(s.profile.name for s in scenarios))
    head = [
        what,
        " vs ".join(models) + (f" (seq {sc.workload.seq_len})" if len(models) == 1 and sc.workload.seq_len else ""),
    ]
    head.append(
        "on " + (" vs ".join(profiles) if len(profiles) > 1 else f"{sc.profile.name} ({sc.profile.device.name})")
    )
    second = []
    if len({_batch_text(s) for s in scenarios}) == 1:
        second.append(_batch_text(sc))
    else:
        second.append("each model's default batch" if not sc.strong else "batch per line")
    from .views import communicated  # lazy

    said = list(dict.fromkeys(communicated(s, sizes=False) for s in scenarios))
    second.append(" vs ".join(said))
    second += _extras(sc)
    return " ".join(head) + "\n" + "; ".join(second)


def scenario_series(results: Sequence["Result"], labels: Sequence[str] | None = None) -> list[Any]:
    """One :class:`simcli.plot.figures.Series` per result, with the k at which it does not fit the device's memory."""
    from ..plot import figures as P  # heavy

    out = []
    for label, r in zip(labels or series_labels([r.scenario for r in results]), results):
        fit = memory_fit(r.scenario, r.devices)
        out.append(
            P.Series(
                label,
                r.records(),
                no_fit=fit["devices"] if fit else (),
                capacity_bytes=r.scenario.profile.device.memory_bytes,
            )
        )
    return out


def draw_speedup(
    results: Sequence["Result"],
    path: str,
    force: bool,
    *,
    size: "FigSize",
    threshold: float,
    kind: str = "speedup",
    labels: Sequence[str] | None = None,
    title: str | None = None,
) -> None:
    """Draw speedup+efficiency (``kind='speedup'``; several results add a throughput panel) or the time breakdown
    of ``results`` into ``path``. ``labels``/``title``: the legend and title [default: from the scenarios]."""
    from ..plot import figures as P  # heavy

    scs = [r.scenario for r in results]
    series = scenario_series(results, labels)
    if kind == "breakdown":
        fig = P.breakdown_figure(series, title or scenario_title(scs, "Time per step:"), size)
    else:
        what = (
            "Throughput, speedup S(k) and efficiency E(k):" if len(series) > 1 else "Speedup S(k) and efficiency E(k):"
        )
        fig = P.speedup_figure(series, title or scenario_title(scs, what), threshold, size=size)
    _done(P.save_figure(fig, path, force))


def comm_title(profile: Any, algorithm: str, dtype: str, *, collective: str = "all_reduce") -> str:
    name = collective.replace("_", "-").capitalize()
    return (
        f"{name} ({algorithm}, {dtype}) on {profile.name} ({profile.device.name}): time and busbw\n"
        f"busbw = size/time · {COLLECTIVES[collective].busbw} (nccl-tests); GB/s = 1e9 B/s"
    )


def draw_comm(
    records: Sequence[Mapping[str, Any]],
    profile: Any,
    algorithm: str,
    *,
    dtype: str,
    path: str,
    force: bool,
    size: "FigSize",
    collective: str = "all_reduce",
) -> None:
    from ..plot import figures as P  # heavy

    title = comm_title(profile, algorithm, dtype, collective=collective)
    _done(P.save_figure(P.comm_figure(records, title, size), path, force))


def draw_algorithm_map(
    profile: Any,
    devices: Any,
    sizes: Any,
    *,
    names: Sequence[str],
    winner: Any,
    path: str,
    force: bool,
    size: "FigSize",
) -> None:
    """The fastest algorithm per (k, size) as a heatmap (``winner[i, j]`` indexes ``names``)."""
    from ..plot import figures as P  # heavy

    title = (
        f"Fastest all-reduce algorithm per (k, size) on {profile.name} ({profile.device.name})\n"
        f"compared: {', '.join(names)}"
    )
    _done(
        P.save_figure(P.algorithm_map_figure(devices, sizes, names, winner=winner, title=title, size=size), path, force)
    )


# --------------------------------------------------------------------------- plot speedup / breakdown


def _speedup_like(
    kind: str, output: str, devices: str, *, scn: o.ScenarioOptions, force: bool, pic: o.PictureOptions
) -> None:
    size = pic.size(output, force, option="--output")
    k = parse_devices(devices)
    with progress(f"drawing {output}"):
        scs = scn.build_all()
        warn_mfu_fallback(scs)
        runs = [simulate(sc, k) for sc in scs]
        if kind == "speedup":  # the speedup figure shades each line's band (simcli.step.band)
            from ..step.band import banded  # lazy

            runs = [banded(r) for r in runs]
        draw_speedup(runs, output, force, size=size, threshold=pic.threshold, kind=kind)


def _speedup_like_command(kind: str, *, noun: str, omit: list[str], example: str, doc: str) -> None:
    """Register `simcli plot KIND` (speedup, breakdown): :func:`_speedup_like` over --devices, the scenario options
    worded for one ``noun`` per scenario (line, panel), without the picture options in ``omit``."""

    def command(  # keyword-only past the argument, as typer passes the options
        output: PictureOut,
        *,
        devices: o.Devices = "1..64:x2",
        scn: o.ScenarioOptions = o.ScenarioOptions(),
        force: o.Force = False,
        pic: o.PictureOptions = o.PictureOptions(),
    ) -> None:
        _speedup_like(kind, output, devices, scn=scn, force=force, pic=pic)

    command.__annotations__.update(  # what typer reads: the groups as this command words them
        scn=Annotated[o.ScenarioOptions, _scenario_tweak(noun)], pic=Annotated[o.PictureOptions, o.tweak(omit=omit)]
    )
    command.__name__ = command.__qualname__ = f"plot_{kind}"
    command.__doc__ = doc
    app.command(kind, epilog=examples(example))(handle_errors(command))


_speedup_like_command(
    "speedup",
    noun="line",
    omit=["plot"],
    example="simcli plot speedup -k 1..64:x2 -p dgx-a100,dgx-h100 -o speedup.png",
    doc="Speedup S(k) against k with the ideal S = k, efficiency E(k) below, the threshold crossing marked.",
)
_speedup_like_command(
    "breakdown",
    noun="panel",
    omit=["plot", "threshold"],
    example="simcli plot breakdown -k 8..512:x2 -m bert-large -o breakdown.png",
    doc="Stacked bars per k: compute, hidden and exposed communication (compute and communication without overlap).",
)


# --------------------------------------------------------------------------- plot comm / algorithms


@app.command("comm", epilog=examples("simcli plot comm -k 8,64 -s 1KiB..1GiB:x4 -o comm.png"))
@handle_errors
def plot_comm(
    output: PictureOut,
    co: o.CommOptions = o.CommOptions(),
    force: o.Force = False,
    pic: Annotated[o.PictureOptions, o.tweak(omit=["plot", "threshold"])] = o.PictureOptions(),
) -> None:
    """A collective's time and busbw against message size, one line per k, log axes (as nccl-tests reads)."""
    from ..comm.grid import comm_grid  # lazy

    fs = pic.size(output, force, option="--output", threshold=False)
    k, n = co.grid()
    prof = with_nccl_version(resolve_profile(co.profile), co.nccl_version)
    algorithm = co.algorithm or default_algorithm(prof)

    with progress(f"drawing {output}"):
        recs = comm_grid(
            prof, k, n, algorithm=algorithm, message_dtype=co.dtype, collective=co.collective, protocol=co.protocol
        )
        draw_comm(recs, prof, algorithm, dtype=co.dtype, path=output, force=force, size=fs, collective=co.collective)


@app.command("algorithms", epilog=examples("simcli plot algorithms -p dgx-h100 -o algorithms.png"))
@handle_errors
def plot_algorithms(
    output: PictureOut,
    devices: o.Devices = "2..1024:x2",
    size: o.Size = "1KiB..4GiB:x4",
    profile: o.Profile = None,
    algorithm: Annotated[
        Optional[str],
        o.option(
            "--algorithm", "-a", help="Algorithms to compare, comma-separated [default: every one simcli models]."
        ),
    ] = None,
    force: o.Force = False,
    pic: Annotated[o.PictureOptions, o.tweak(omit=["plot", "threshold"])] = o.PictureOptions(),
) -> None:
    """Heatmap of the fastest all-reduce algorithm per (k, message size)."""

    fs = pic.size(output, force, option="--output", threshold=False)
    k, n = parse_devices(devices), parse_sizes(size)
    prof = resolve_profile(profile)
    names = [a for a in o.split_list(algorithm, "--algorithm") if a] or list(o.TEXTBOOK_NAMES)
    topology.check_devices(prof.network, k)

    with progress(f"drawing {output}"):
        times = np.stack(
            [
                collectives.allreduce(
                    a, prof.network, k[:, None], nbytes=n[None, :], reduce_Bps=prof.device.reduce_Bps
                ).time
                for a in names
            ]
        )
        draw_algorithm_map(prof, k, n, names=names, winner=np.argmin(times, axis=0), path=output, force=force, size=fs)


# --------------------------------------------------------------------------- redraw a saved table


@app.command("file", epilog=examples("simcli plot file speedup.csv -o speedup.png"))
@handle_errors
def plot_file(
    file: Annotated[
        str,
        typer.Argument(metavar="FILE", help="A table simcli wrote with --format csv or json (speedup, comm, bench)."),
    ],
    output: Annotated[
        Optional[str],
        o.option("--output", "-o", help="Picture file: .png, .svg or .pdf [default: FILE with .png]."),
    ] = None,
    kind: Annotated[
        Kind,
        o.option(
            "--kind",
            help="What to draw; auto picks from the columns (speedup tables can also be drawn as a breakdown).",
        ),
    ] = Kind.auto,
    profile: Annotated[
        Optional[str],
        o.option("--profile", "-p", help="Overlay this profile's model lines on measured data (bench tables)."),
    ] = None,
    model: o.Model = None,
    batch_per_device: o.BatchPerDevice = None,
    global_batch: o.GlobalBatch = None,
    algorithm: o.Algorithm = "ring",
    force: o.Force = False,
    pic: Annotated[o.PictureOptions, o.tweak(omit=["plot"])] = o.PictureOptions(),
) -> None:
    """Redraw a saved table: speedup curves or a breakdown, comm time/busbw, measured points over the model."""
    out = output or str(Path(file).with_suffix(".png"))
    fs = pic.size(out, force, option="--output")
    threshold = pic.threshold
    recs = T.read_table(file)
    if not recs:
        raise InputError(f"{file}: the table has no rows")
    found = T.detect_kind(recs, file)
    want = found if kind is Kind.auto else kind.value
    ok = {"speedup": {"speedup", "step"}, "breakdown": {"speedup"}, "comm": {"comm", "bench"}, "step": {"step"}}
    if kind is not Kind.auto and found not in ok[want] and found != "validation":
        raise InputError(f"--kind: {file} holds a {found} table; it cannot be drawn as {want}")

    with progress(f"drawing {out}"):
        saved = _redraw(
            recs,
            file,
            found,
            want=want,
            out=out,
            force=force,
            fs=fs,
            threshold=threshold,
            kind=kind,
            profile=profile,
            model=model,
            batch_per_device=batch_per_device,
            global_batch=global_batch,
            algorithm=algorithm,
        )
    _done(saved)


def _redraw(
    recs,
    file,
    found,
    *,
    want,
    out,
    force,
    fs,
    threshold,
    kind,
    profile,
    model,
    batch_per_device,
    global_batch,
    algorithm,
) -> str:  # noqa: ANN001 - plot_file's own values
    """plot_file's figure of a saved table, written to ``out``; the path written."""
    from ..plot import figures as P  # heavy

    name = Path(file).name
    if found == "speedup":
        T.numeric(recs, ("speedup", "efficiency", "t_compute_s", "t_comm_s", "t_step_s", "t_comm_exposed_s"), file)
        keys = P._varying(recs, ("profile", "model"))
        groups = P._group(recs, keys)
        # the per-row "algorithm" is what NCCL or auto chose at that k; it names a series of its own only when
        # one (profile, model) holds several series (a device count given twice: --algorithm a,b)
        if any(len({r.get("devices") for r in rs}) < len(rs) for rs in groups.values()):
            keys = P._varying(recs, ("profile", "model", "algorithm"))
            groups = P._group(recs, keys)
        series = [P.Series(" · ".join(str(v) for v in key) or name, rs) for key, rs in groups.items()]
        if want == "breakdown":
            fig = P.breakdown_figure(series, f"Time per step: {name}", fs)
        else:
            fig = P.speedup_figure(series, f"Speedup S(k) and efficiency E(k): {name}", threshold, size=fs)
    elif found == "comm":
        T.numeric(recs, ("time_s", "busbw_GBps", "algbw_GBps"), file)
        fig = P.comm_figure(recs, f"All-reduce time and busbw: {name}\nbusbw = size/time · 2(k-1)/k (nccl-tests)", fs)
    elif found == "bench":
        fig = _bench_figure(recs, name, profile, algorithm=algorithm, fs=fs)
    elif found == "algorithms":
        fig = _algorithms_figure(recs, name, fs)
    elif found == "validation":
        fig = P.validation_figure(recs, name, threshold, size=fs)
    else:
        fig = _step_figure(
            recs,
            name,
            profile,
            model=model,
            batch_per_device=batch_per_device,
            global_batch=global_batch,
            algorithm=algorithm,
            fs=fs,
            threshold=threshold,
            kind="step-time" if kind is Kind.step else "auto",
        )
    return P.save_figure(fig, out, force, option="--output")


def _bench_figure(recs: list[dict[str, Any]], name: str, profile: str | None, *, algorithm: str, fs: "FigSize"):
    """Measured all-reduce points (markers) over the model's lines for the same world sizes and sizes."""

    from ..plot import figures as P  # heavy

    measured, backends = T.allreduce_measured(recs, name)
    model: list[dict[str, Any]] = []
    where = f"measured ({', '.join(backends) or 'bench'})"
    title = f"All-reduce {where}: {name}"
    if profile:
        from ..comm.grid import comm_grid  # lazy

        prof = resolve_profile(profile)
        ks = np.array(sorted({m["devices"] for m in measured if m["devices"] >= 2}), dtype=np.int64)
        ns = np.array(sorted({m["bytes"] for m in measured}), dtype=np.float64)
        if ks.size:
            model = comm_grid(prof, ks, ns, algorithm=algorithm, message_dtype="fp32", protocol=None)
        title += f"\nmarkers measured, lines: model of {prof.name} ({algorithm})"
    return P.comm_figure(model, title, fs, measured=measured)


def _step_figure(
    recs: list[dict[str, Any]],
    name: str,
    profile: str | None,
    *,
    model: str | None,
    batch_per_device: int | None,
    global_batch: int | None,
    algorithm: str,
    fs: "FigSize",
    threshold: float = o.THRESHOLD,
    kind: str = "step",
):
    """A 'bench step' table: measured speedup/efficiency (or step time) per k as markers over the model's lines.

    The model's line comes from the table's own predicted_* columns when it has them, else from
    --profile (with --model / --batch-per-device, or the table's model and batch_per_device columns).
    """
    from ..plot import figures as P  # heavy

    cols = set(recs[0])
    k_key = "world_size" if "world_size" in cols else "devices"
    t_key = T.step_key(cols)
    assert t_key is not None  # a table detect_kind calls a step table has a step time
    T.numeric(
        recs,
        (
            t_key,
            "speedup",
            "efficiency",
            "predicted_speedup",
            "predicted_efficiency",
            "predicted_t_step_s",
            "t_compute_s",
            "t_comm_s",
        ),
        name,
    )
    modes = P._group(recs, P._varying(recs, ("mode", "backend")))
    model_recs: list[dict[str, Any]] = []
    model_by_mode: dict[str, list[dict[str, Any]]] = {}
    label = "model"
    if profile or model:
        first = recs[0]
        builtin = model or _builtin_model(first.get("model"))
        params = None if builtin else _float_or_none(first.get("params"))
        ks = sorted({int(r[k_key]) for r in recs})

        def scenario(overlap: str | None = None):
            given: dict[str, Any] = {"overlap": overlap} if overlap else {}
            return o.ScenarioOptions(
                profile=profile,
                model=builtin,
                # a toy model (bench step's mlp): its own parameters, 6N FLOPs per sample unless the table says
                params=params,
                flops_per_sample=(_float_or_none(first.get("flops_per_sample")) or 6.0 * params) if params else None,
                batch_per_device=batch_per_device or _int_or_none(first.get("batch_per_device")),
                global_batch=global_batch,
                algorithm=algorithm,
                **given,
            ).build()

        sc = scenario()
        model_recs = simulate(sc, ks).records()
        # each mode's line as that mode runs: ddp overlaps its buckets with backward, flat (and any other) does not
        for mode in {str(r.get("mode") or "") for r in recs} - {""}:
            model_by_mode[mode] = simulate(scenario("buckets" if mode == "ddp" else "none"), ks).records()
        label = f"model: {sc.workload.name} on {sc.profile.name}, {_batch_text(sc)}"
    measured_speedup = all(r.get("speedup") is not None and r.get("efficiency") is not None for r in recs)
    if measured_speedup and kind != "step-time":
        series = []
        for key, rs in modes.items():
            rs = sorted(rs, key=lambda r: r[k_key])
            meas = [
                {
                    "devices": r[k_key],
                    "speedup": r["speedup"],
                    "efficiency": r["efficiency"],
                    # samples/s of the whole job, for the throughput panel (weak scaling: k x batch per step)
                    "samples_per_s": _samples_per_s(r, k_key, t_key),
                }
                for r in rs
            ]
            tag = " · ".join(str(v) for v in key)
            mode = str(rs[0].get("mode") or "")
            if model_recs:
                line = model_by_mode.get(mode, model_recs)
            elif all(r.get("predicted_speedup") is not None for r in rs):
                line = [
                    {
                        "devices": r[k_key],
                        "speedup": r["predicted_speedup"],
                        "efficiency": r.get("predicted_efficiency"),
                    }
                    for r in rs
                ]
                label = "predicted (the table's predicted_* columns)"
            else:
                line, meas, label = meas, [], "measured"
            series.append(
                P.Series(
                    # with a model the title names it once; the legend names the mode
                    f"{'model' if model_recs else label}{' · ' + tag if tag else ''}",
                    line,
                    measured=meas,
                    measured_label=f"measured{' · ' + tag if tag else ''}",
                )
            )
        title = f"Speedup, measured (x markers) and model (lines): {name}" + (f"\nlines: {label}" if model_recs else "")
        return P.speedup_figure(series, title, threshold, size=fs)
    title = f"Time per step, measured: {name}" + (f"\nline: {label}" if model_recs else "")
    return P.step_figure(recs, k_key, t_key, title=title, model=model_recs, size=fs)


def _algorithms_figure(recs: list[dict[str, Any]], name: str, fs: "FigSize"):
    """`simcli algorithms` grid records (devices, bytes, fastest): the heatmap again."""

    from ..plot import figures as P  # heavy

    ks, ns, names, winner = T.algorithm_grid(recs, name)
    return P.algorithm_map_figure(
        ks, ns, names, winner=winner, title=f"Fastest all-reduce algorithm per (k, size): {name}", size=fs
    )


def _builtin_model(name: Any) -> str | None:
    """The table's model column when it names a built-in model (bench may use a toy model)."""

    return str(name) if name is not None and str(name) in presets() else None


def _float_or_none(v: Any) -> float | None:
    try:
        x = float(v) if v is not None and v != "" else None
    except (TypeError, ValueError):
        return None
    return x if x is not None and x > 0 and x == x else None


def _samples_per_s(r: Mapping[str, Any], k_key: str, t_key: str) -> float | None:
    """A bench step row's samples per second: world size x batch per device / step time (None if it cannot say)."""
    b, t = _float_or_none(r.get("batch_per_device")), _float_or_none(r.get(t_key))
    return None if b is None or t is None else float(r[k_key]) * b / t


def _int_or_none(v: Any) -> int | None:
    try:
        return int(float(v)) if v is not None else None
    except (TypeError, ValueError):
        return None
