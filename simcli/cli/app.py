"""The typer application: options in, one error-to-exit-code map, render calls out.

Exit codes (as httpie's ExitStatus): 0 ok, 1 error, 2 bad input or usage, 130 Ctrl-C.
Sub-command groups (bench, plot, calibrate, ...) live in sibling modules and
import their heavy dependencies (torch, matplotlib, pandas) inside the command.
"""

from __future__ import annotations

import functools
import sys
from typing import Annotated, Any, Callable, Optional, TypeVar

import typer

from .. import __version__
from ..model import InputError, SimcliError
from . import options as o

F = TypeVar("F", bound=Callable[..., Any])
CONTEXT = {"help_option_names": ["-h", "--help"]}


class _State:
    debug = False


def handle_errors(fn: F) -> F:
    """The one place where simcli's errors become exit codes and one line on stderr."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SimcliError as e:
            if _State.debug:
                raise
            typer.echo(f"simcli: error: {e}", err=True)
            raise typer.Exit(e.exit_code) from None
        except KeyboardInterrupt:
            typer.echo("simcli: interrupted", err=True)
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


app = typer.Typer(
    name="simcli",
    help="Simulate data-parallel training speed: step time, all-reduce cost and speedup over k devices.",
    epilog="Example: simcli speedup --devices 1..64 --profile dgx-h100 --model resnet50",
    context_settings=CONTEXT,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
profiles_app = typer.Typer(help="List, show and validate hardware profiles.", context_settings=CONTEXT,
                           no_args_is_help=True)
models_app = typer.Typer(help="Built-in workloads.", context_settings=CONTEXT, no_args_is_help=True)
app.add_typer(profiles_app, name="profiles")
app.add_typer(models_app, name="models")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"simcli {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True,
                                                    help="Print the version and exit.")] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show a traceback on errors.")] = False,
) -> None:
    _State.debug = debug


def show(renderable: object, output: str | None, force: bool) -> None:
    """Print a table to the terminal, or its plain text to ``output``."""
    from ..render import console, render_text

    if output:
        emit(render_text(renderable), output, force)
    else:
        console.print(renderable)


def emit(text: str, output: str | None, force: bool) -> None:
    """Print ``text`` to stdout, or write it atomically to ``output``."""
    if output:
        from ..output import write_atomic

        p = write_atomic(output, text, force=force)
        typer.echo(f"wrote {p}", err=True)
    else:
        sys.stdout.write(text)


# --------------------------------------------------------------------------- speedup


@app.command(context_settings=CONTEXT)
@handle_errors
def speedup(
    devices: o.Devices = "1..64:x2",
    profile: o.Profile = None,
    model: o.Model = None,
    params: o.Params = None,
    flops_per_sample: o.FlopsPerSample = None,
    compute_time: o.ComputeTime = None,
    workload: o.WorkloadFile = None,
    seq_len: o.SeqLen = None,
    batch_per_device: o.BatchPerDevice = None,
    global_batch: o.GlobalBatch = None,
    dtype: o.Dtype = None,
    grad_dtype: o.GradDtype = "fp32",
    mfu: o.Mfu = None,
    algorithm: o.Algorithm = "ring",
    overlap: o.Overlap = "buckets",
    bucket_mb: o.BucketMb = 25.0,
    accum: o.Accum = 1,
    explain: o.Explain = False,
    format: o.FormatOpt = o.Format.table,
    output: o.Output = None,
    force: o.Force = False,
    rows: o.Rows = 40,
    plot: o.PlotFile = None,
    dpi: o.Dpi = o.DPI,
    width: o.Width = o.WIDTH,
    height: o.Height = None,
    threshold: o.Threshold = o.THRESHOLD,
) -> None:
    """Predict step time, speedup S(k) and efficiency E(k) = S(k)/k for each device count k.

    Comma-separated --profile, --model or --algorithm values give one result (and one line) per combination.
    """
    from ..engine import simulate
    from ..ranges import parse_devices

    size = o.check_outputs(output, force, plot, dpi, width, height, threshold)
    k = parse_devices(devices)
    scs = o.build_scenarios(profile=profile, model=model, params=params, flops_per_sample=flops_per_sample,
                            compute_time=compute_time, workload=workload, seq_len=seq_len,
                            batch_per_device=batch_per_device, global_batch=global_batch, dtype=dtype,
                            grad_dtype=grad_dtype, mfu=mfu, algorithm=algorithm, overlap=overlap,
                            bucket_mb=bucket_mb, accum=accum)
    results = [simulate(sc, k) for sc in scs]
    if explain:  # every term for the largest k of each scenario
        from ..explain import explain as explain_terms

        terms = [explain_terms(sc, int(k.max())) for sc in scs]
    if plot:
        from .plot import draw_speedup

        draw_speedup(results, plot, force, size, threshold)
    if format is o.Format.table:
        from rich.console import Group
        from rich.text import Text

        from .views import speedup_table

        parts = [x for res in results for x in (speedup_table(res, rows), Text(""))][:-1]
        if explain:
            from .algorithms import explain_view

            parts += [x for d in terms for x in (Text(""), explain_view(d))]
        show(Group(*parts), output, force)
        return
    from ..output import to_csv, to_json
    from .plot import speedup_records

    recs = speedup_records(results)
    if not explain:
        text = to_json(recs) if format is o.Format.json else to_csv(recs)
    elif format is o.Format.json:
        text = to_json({"records": recs, "explain": terms})
    else:
        from .algorithms import _flat_terms

        text = to_csv(recs, comments=[f"explain k={d['devices']}: {r['term']} = {r['value']}"
                                      for d in terms for r in _flat_terms(d)])
    emit(text, output, force)


# --------------------------------------------------------------------------- comm


@app.command(context_settings=CONTEXT)
@handle_errors
def comm(
    devices: o.Devices = "2..64:x2",
    size: Annotated[str, typer.Option("--size", "-s", help="Message sizes with units: '1KiB..1GiB:x4', "
                                      "'32MiB,1GiB'.")] = "1KiB..1GiB:x4",
    profile: o.Profile = None,
    algorithm: o.Algorithm = "ring",
    dtype: Annotated[str, typer.Option("--dtype", help="Element type (sets nccl-tests' count column).")] = "fp32",
    format: o.FormatOpt = o.Format.table,
    output: o.Output = None,
    force: o.Force = False,
    rows: o.Rows = 60,
    plot: o.PlotFile = None,
    dpi: o.Dpi = o.DPI,
    width: o.Width = o.WIDTH,
    height: o.Height = None,
) -> None:
    """Predicted all-reduce time, algbw and busbw per (k, message size), in nccl-tests' terms."""
    from ..comm import comm_grid
    from ..profiles import resolve_profile
    from ..ranges import parse_devices, parse_sizes

    fig_size = o.check_outputs(output, force, plot, dpi, width, height)
    k = parse_devices(devices)
    n = parse_sizes(size)
    prof = resolve_profile(profile)
    recs = comm_grid(prof, k, n, algorithm=algorithm, dtype=dtype)
    if plot:
        from .plot import draw_comm

        draw_comm(recs, prof, algorithm, dtype, plot, force, fig_size)
    if format is o.Format.table:
        from .views import comm_table

        show(comm_table(prof, recs, algorithm, rows), output, force)
        return
    from ..output import to_csv, to_json

    emit(to_json(recs) if format is o.Format.json else to_csv(recs), output, force)


# --------------------------------------------------------------------------- profiles and models


@profiles_app.command("list", context_settings=CONTEXT)
@handle_errors
def profiles_list(format: o.FormatOpt = o.Format.table) -> None:
    """Every profile --profile can find: name, device, devices per node, where it comes from."""
    from ..profiles import list_profiles, load_profile

    recs = []
    for e in list_profiles():
        try:
            p = load_profile(e.path, origin=e.origin)
            recs.append({"name": e.name, "device": p.device.name, "devices_per_node": p.node_size,
                         "tiers": len(p.network), "origin": e.origin, "path": e.path, "error": None})
        except InputError as err:
            recs.append({"name": e.name, "device": None, "devices_per_node": None, "tiers": None,
                         "origin": e.origin, "path": e.path, "error": str(err)})
    if format is not o.Format.table:
        from ..output import to_csv, to_json

        sys.stdout.write(to_json(recs) if format is o.Format.json else to_csv(recs))
        return
    from ..render import Column, print_table, table

    print_table(table(recs, [Column("name", "name", justify="left"),
                             Column("device", lambda r: r["device"] or f"invalid: {r['error']}", justify="left"),
                             Column("devices/node", "devices_per_node"),
                             Column("tiers", "tiers"),
                             Column("source", lambda r: "built-in" if r["origin"] == "built-in" else r["path"],
                                    justify="left")]))


@profiles_app.command("show", context_settings=CONTEXT)
@handle_errors
def profiles_show(
    profile: Annotated[str, typer.Argument(help="Profile name or path.")],
    format: o.FormatOpt = o.Format.table,
) -> None:
    """Every value of one profile, with units."""
    from ..profiles import describe, profile_to_dict, resolve_profile

    p = resolve_profile(profile)
    if format is o.Format.table:
        from ..render import kv_table, print_table

        print_table(kv_table(describe(p), title=f"profile {p.name}"))
        return
    from ..output import to_csv, to_json

    if format is o.Format.json:
        sys.stdout.write(to_json(profile_to_dict(p)))
    else:
        sys.stdout.write(to_csv([{"field": k, "value": v} for k, v in describe(p)]))


@profiles_app.command("validate", context_settings=CONTEXT)
@handle_errors
def profiles_validate(files: Annotated[list[str], typer.Argument(help="Profile YAML files.")]) -> None:
    """Check profile files; every error names the file, the field and the value. Exit 2 if any is invalid."""
    from ..profiles import load_profile

    bad = 0
    for f in files:
        try:
            p = load_profile(f)
            typer.echo(f"{f}: ok ({p.name}: {p.device.name}, {len(p.network)} tier(s))")
        except InputError as e:
            bad += 1
            typer.echo(f"simcli: error: {e}", err=True)
    if bad:
        raise typer.Exit(2)


@models_app.command("list", context_settings=CONTEXT)
@handle_errors
def models_list(format: o.FormatOpt = o.Format.table) -> None:
    """Built-in models: parameters, training FLOPs per sample, default batch and source."""
    from ..workloads import presets

    recs = []
    for m in presets().values():
        recs.append({"name": m.name, "kind": m.kind, "params": m.params, "seq_len": m.seq_len,
                     "flops_per_sample": m.flops_per_sample(), "batch_per_device": m.batch_per_device,
                     "description": m.description, "source": "; ".join(m.sources)})
    if format is not o.Format.table:
        from ..output import to_csv, to_json

        sys.stdout.write(to_json(recs) if format is o.Format.json else to_csv(recs))
        return
    from ..render import Column, print_table, table
    from ..units import fmt_count

    print_table(table(recs, [Column("name", "name", justify="left"), Column("kind", "kind", justify="left"),
                             Column("params", "params", fmt_count), Column("seq", "seq_len"),
                             Column("train FLOP/sample", "flops_per_sample", lambda v: fmt_count(v) + "FLOP"),
                             Column("batch/device", "batch_per_device"),
                             Column("description", "description", justify="left")],
                      caption="Training FLOPs = 3 x forward (CNNs: forward = 2 x MACs); transformers 6·N·seq_len."))


# Commands defined in sibling modules are registered here, one import line each: a module
# either decorates with @app.command() or defines a typer group and calls app.add_typer.
# Their heavy imports (torch, matplotlib, pandas) stay inside the command functions.
# --- sub-apps ---
from . import algorithms as _algorithms  # noqa: E402,F401
from . import bench as _bench  # noqa: E402,F401
from . import plan as _plan  # noqa: E402,F401
from . import calibrate as _calibrate  # noqa: E402,F401
from . import plot as _plot  # noqa: E402,F401


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover - typer maps most of these already
        typer.echo("simcli: interrupted", err=True)
        sys.exit(130)
