"""`simcli bench`: real measurements with torch.distributed, and nccl-tests' output read in.

The options are parsed here (the worlds' as :class:`~simcli.cli.bench_options.WorldOptions`, the model's as
:class:`~simcli.cli.bench_options.ModelShapeOptions`); :mod:`simcli.bench.runs` runs the worlds and completes the
records; this module draws the progress bar and the tables. torch is imported only below :mod:`simcli.bench`
(an optional extra); without it a command prints one line naming ``pip install 'simcli[bench]'`` and exits 2.
"""

from __future__ import annotations

import datetime
import enum
import math
import sys
from typing import Annotated, Any, Callable, Optional

import typer

from ..base.ranges import parse_sizes
from ..base.types import InputError
from ..base.units import fmt_bytes, fmt_count, fmt_flops, sig4
from ..bench import models as bm
from ..bench import require_torch, runs
from ..io.files import check_output_path
from ..io.formats import to_csv, to_json
from ..io.measured.stats import DEFAULT_MAX_ITERS, DEFAULT_STAT, NOISY_SPREAD, STATS
from ..io.profiles import resolve_profile
from ..io.stdout import StdoutClosed, stdout_usable
from ..step.engine import MIN_BUCKET_MB
from . import bench_options as bo
from . import options as o
from .common import emit, examples, handle_errors, new_app
from .progress import progress

app = new_app(
    help="Measure all-reduce and training steps with torch.distributed; import nccl-tests output.",
    epilog=examples("simcli bench allreduce -k 1..4 -s 1KiB..64MiB:x4 -o run1.csv", "simcli bench step -k 1..4 -m mlp"),
    no_args_is_help=True,
)


#: the step's gradient all-reduce: flat, ddp, or both one after the other
class Mode(str, enum.Enum):
    flat = "flat"
    ddp = "ddp"
    both = "both"


#: which timings of nccl-tests output: out-of-place or in-place
class Placement(str, enum.Enum):
    out = "out"
    in_ = "in"


Stat = enum.Enum("Stat", o.enum_members(STATS), type=str)  # type: ignore[misc]  # members from the registry
#: the bench commands take only --format, --output and --force of the output options
_OUTPUT = ("rows", "wide")
_ALLREDUCE_OUTPUT = Annotated[
    Optional[str],
    o.option(
        "--output",
        "-o",
        help="Write the measurements here in the "
        "--format (csv for table); rows are added as they are "
        "measured, and the file is valid after each.",
    ),
]
_STEP_OUTPUT = Annotated[
    Optional[str], o.option("--output", "-o", help="CSV file; rows are appended as they are measured.")
]


# --------------------------------------------------------------------------- shared plumbing


def _run_worlds(
    task: str,
    sizes_k: list[int],
    tr: dict[str, Any] | None,
    *,
    backend: str,
    world: bo.WorldOptions,
    config: dict[str, Any],
    on_record: Callable[[dict], None],
    on_world_done: Callable[[int], None],
    records_per_world: int = 1,
) -> None:
    """:func:`simcli.bench.runs.run_worlds` with the command's worlds; on a terminal, a progress bar on stderr
    counts the records (``records_per_world`` per world) and names the world and the unit its slowest rank has
    reached (none under torchrun)."""
    kw: dict[str, Any] = dict(timeout=world.timeout, port=world.port, threads=world.threads)
    if tr is not None:
        runs.run_worlds(
            task, sizes_k, tr, backend=backend, config=config, **kw, on_record=on_record, on_world_done=on_world_done
        )
        return

    unit = str(config.get("progress_unit", "step"))
    with progress(f"bench {task}", total=len(sizes_k) * records_per_world) as bar:
        label = f"bench {task}"

        def start(i: int, k: int) -> None:
            nonlocal label
            label = f"bench {task}: world size {k} ({i + 1} of {len(sizes_k)})"
            with bar.suspend():
                typer.echo(f"simcli: world size {k}: {k} rank(s), {backend} on 127.0.0.1 ...", err=True)
            bar.update(description=label)

        def record(rec: dict) -> None:
            on_record(rec)
            bar.advance()

        def done(k: int) -> None:
            with bar.suspend():
                on_world_done(k)

        runs.run_worlds(
            task,
            sizes_k,
            tr,
            backend=backend,
            config=config,
            **kw,
            on_record=record,
            on_world_done=done,
            on_world_start=start,
            on_progress=lambda u: bar.update(description=f"{label}, {unit} {u}" if u > 0 else label),
        )


def _stdout_needed(output: str | None, tr: dict[str, Any] | None) -> None:
    """Refuse before measuring when the results could go nowhere (stdout closed, no --output): none are lost."""

    if output is None and runs.is_writer(tr) and not stdout_usable():
        raise StdoutClosed(
            "standard output is closed and no --output is given: the measurements would be lost; give --output FILE"
        )


def _result_writer(
    command: str,
    path: str | None,
    columns: Any,
    *,
    out: o.OutputOptions,
    backend: str,
    torch_version: str | None,
    about: dict[str, str],
) -> Any:
    """The writer of a bench command's rows (CSV, or JSON with --format json): its header names the command line
    it was run with, the host, torch and the backend, then ``about``."""
    from ..io.measured.results import ResultWriter, metadata  # lazy

    argv = " ".join(["simcli"] + sys.argv[1:]) if sys.argv else f"simcli {command}"
    return ResultWriter(
        path,
        columns,
        metadata(command, backend, torch_version, extra={"command": argv, **about}),
        force=out.force,
        fmt="json" if out.format is o.Format.json else "csv",
    )


def _finish(
    rows: list[dict[str, Any]], columns, out: o.OutputOptions, *, writer, noun: str, more: str = "--iters"
) -> None:
    if writer.path is not None:
        typer.echo(f"wrote {writer.path} ({len(rows)} rows)", err=True)
    noisy = [r for r in rows if (r.get("spread") or 0) > NOISY_SPREAD]
    if noisy:
        typer.echo(
            f"simcli: warning: {len(noisy)} of {len(rows)} {noun} are noisy (p10..p90 spread over "
            f"{NOISY_SPREAD:.0%} of the median); use more {more} on a quieter machine",
            err=True,
        )
    if not out.table and writer.path is None:  # with --output the data went into that file
        sys.stdout.write(to_json(rows) if out.format is o.Format.json else to_csv(rows, columns))


# --------------------------------------------------------------------------- allreduce


@app.command("allreduce", epilog=examples("simcli bench allreduce -k 1..4 -s 1KiB..64MiB:x4 -o run1.csv"))
@handle_errors
def bench_allreduce(
    world: bo.WorldOptions = bo.WorldOptions(),
    size: Annotated[
        str, o.option("--size", "-s", help="Message sizes: '1KiB..64MiB:x4', '1MiB,1GiB'.")
    ] = "1KiB..16MiB:x4",
    dtype: Annotated[
        str, o.option("--dtype", help="Element type: fp32, fp16, bf16, fp64, int32, int64, int8, uint8.")
    ] = "fp32",
    iters: Annotated[
        int,
        o.option(
            "--iters",
            "-n",
            min=1,
            help="Timed iterations per size, at least; more are added while a size's --stat is unsettled "
            "(--target-se, --max-iters, --max-time).",
        ),
    ] = 20,
    target_se: Annotated[
        str,
        o.option(
            "--target-se",
            help="Adaptive repetition: after --iters, add rounds (one iteration of each unsettled size, "
            "shuffled) until the relative standard error of every size's --stat is at most this "
            "('3%' or 0.03; 0: always up to --max-iters or --max-time). On a busy machine ten samples "
            "leave p10 ~15% apart between runs; a quiet one settles in --iters.",
        ),
    ] = "3%",
    max_iters: Annotated[
        Optional[int],
        o.option(
            "--max-iters",
            min=1,
            help="At most this many timed iterations per size [default: 200, or --iters if larger]; "
            "equal to --iters: a fixed count, no adaptive repetition.",
        ),
    ] = None,
    max_time: Annotated[
        float,
        o.option(
            "--max-time",
            min=0,
            help="Seconds a world may measure before no more rounds are added (the --iters always run; "
            "at most half of --timeout).",
        ),
    ] = 30.0,
    stat: Annotated[
        Stat,
        o.option(
            "--stat",
            help="The statistic of the per-iteration times reported as "
            "time_s (and used by calibrate and validate): min, p10, median, or mean "
            "(nccl-tests' choice). A busy machine only adds time, so a low quantile "
            "estimates the uncontended cost; all four are kept in the CSV.",
        ),
    ] = Stat(DEFAULT_STAT),
    rounds: Annotated[
        Optional[int],
        o.option(
            "--rounds",
            min=1,
            help="Split the --iters of each size over "
            "this many rounds, sizes in a new shuffled order each round "
            "[default: --iters, one iteration per size per round].",
        ),
    ] = None,
    seed: Annotated[int, o.option("--seed", help="Seed of the shuffled size order.")] = 0,
    out: Annotated[o.OutputOptions, o.tweak(omit=_OUTPUT, output=_ALLREDUCE_OUTPUT)] = o.OutputOptions(),
) -> None:
    """Time torch.distributed.all_reduce for each world size and message size (nccl-tests' columns)."""
    from ..bench.allreduce import TORCH_DTYPES  # lazy
    from ..io.measured.results import ALLREDUCE_COLUMNS  # lazy

    ks, tr = runs.world_sizes(world.world_sizes, "2")
    if dtype not in TORCH_DTYPES:
        raise InputError(f"--dtype: {dtype!r} is not one of {', '.join(TORCH_DTYPES)}")
    target = o.parse_fraction(target_se, "--target-se", "'3%' or 0.03", zero=True)
    if max_iters is not None and max_iters < iters:
        raise InputError(f"--max-iters: {max_iters} is below --iters {iters}; give at least {iters}")
    cap = max(iters, DEFAULT_MAX_ITERS if max_iters is None else max_iters)
    budget = min(max_time, world.timeout / 2)  # the watchdog sees no new size while settled sizes are repeated
    esize = TORCH_DTYPES[dtype][1]
    sizes = [int(n) for n in parse_sizes(size)]
    small = [n for n in sizes if n < esize]
    if small:
        raise InputError(
            f"--size: {small[0]} B is less than one {dtype} element ({esize} B); start at {esize}B or more"
        )
    _stdout_needed(out.output, tr)
    torch_version = require_torch()
    be, cuda = runs.resolve_backend(world.backend.value)
    if tr is None:
        runs.check_worlds(ks, be, world.oversubscribe, cuda=cuda, port=world.port)
    writer_path = out.output if runs.is_writer(tr) else None
    rows: list[dict[str, Any]] = []
    by_world: dict[int, list[dict[str, Any]]] = {}
    n_rounds = rounds if rounds is not None else iters
    with _result_writer(
        "bench allreduce",
        writer_path,
        ALLREDUCE_COLUMNS,
        out=out,
        backend=be,
        torch_version=torch_version,
        about={
            "time_s": f"{stat.value} over iterations of the slowest rank's time (--stat); p10/p90/min/max/"
            "median/mean likewise; noise = p90/p10",
            "rounds": f"{min(n_rounds, iters)} rounds of shuffled sizes (--rounds, --seed {seed}), warm-up per size",
            "adaptive": f"after --iters {iters}, rounds added until the relative standard error of each "
            f"size's {stat.value} is at most {target * 100:g}% (--target-se; column rse), up to {cap} iterations "
            f"(--max-iters) and {budget:g} s per world (--max-time)",
            "units": "bytes B, times s, algbw/busbw GB/s = 1e9 B/s, busbw = algbw*2(k-1)/k",
        },
    ) as writer:

        def on_record(rec: dict[str, Any]) -> None:
            writer.append(rec)
            rows.append(rec)
            by_world.setdefault(rec["world_size"], []).append(rec)

        def on_world_done(k: int) -> None:
            if out.table and by_world.get(k) and stdout_usable():
                from ..io.render import console  # lazy

                console.print(_allreduce_table(k, be, by_world[k]))

        _run_worlds(
            "allreduce",
            ks,
            tr,
            backend=be,
            world=world,
            config={
                "sizes": sizes,
                "dtype": dtype,
                "warmup": world.warmup,
                "iters": iters,
                "progress_unit": "size",
                "rounds": n_rounds,
                "stat": stat.value,
                "seed": seed,
                "target_se": target,
                "max_iters": cap,
                "max_time": budget,
            },
            on_record=on_record,
            on_world_done=on_world_done,
            records_per_world=len(sizes),
        )
    if runs.is_writer(tr):
        unsettled_rows = [r for r in rows if not (r.get("rse") or 0) <= target]
        if unsettled_rows and target > 0:
            worst = max(unsettled_rows, key=lambda r: r["rse"])
            typer.echo(
                f"simcli: warning: {len(unsettled_rows)} of {len(rows)} measurements did not settle to "
                f"±{target * 100:g}% (--target-se) within --max-iters {cap} and --max-time {budget:g} s "
                f"(worst: k={worst['world_size']}, {worst['bytes']} B at ±{worst['rse']:.1%}); "
                "their time_s may differ in another run",
                err=True,
            )
        _finish(rows, ALLREDUCE_COLUMNS, out, writer=writer, noun="measurements")


def _allreduce_table(k: int, backend: str, recs: list[dict[str, Any]], *, title: str | None = None):
    from rich.console import Group  # lazy
    from rich.text import Text  # lazy

    from ..io.render import Column, table, time_unit  # lazy

    f, unit = time_unit([r["time_s"] for r in recs])
    stat = recs[0].get("stat") or "median"

    def t(key: str):
        return lambda v: sig4(v / f)

    for r in recs:  # how noisy each point was: p90/p10 (1 = every iteration took the same time)
        if r.get("noise") is None and r.get("time_p10_s") and r.get("time_p90_s"):
            r["noise"] = r["time_p90_s"] / r["time_p10_s"]
    # size, time and busbw are the answer (never left out on a narrow terminal); the rest by priority
    cols = [
        Column("size", "bytes", fmt_bytes),
        Column("count", "count", priority=8),
        Column("type", "dtype", justify="left", priority=7),
        Column(f"time {unit}", "time_s", t("time_s")),
        Column(f"p10 {unit}", "time_p10_s", t("p10"), priority=5),
        Column(f"p90 {unit}", "time_p90_s", t("p90"), priority=4),
        Column("noise p90/p10", "noise", lambda v: f"{v:.3g}", priority=2, short="noise"),
        Column("algbw GB/s", "algbw_GBps", lambda v: f"{v:.4g}", priority=6, short="algbw"),
        Column("busbw GB/s", "busbw_GBps", lambda v: f"{v:.4g}"),
    ]
    adaptive = any(r.get("rse") is not None for r in recs)  # measured here (not imported from nccl-tests)
    if adaptive:
        cols[7:7] = [
            Column("± rse", "rse", lambda v: f"{v:.1%}" if math.isfinite(v) else "-", priority=1),
            Column("iters", "iters", priority=3),
        ]
    head = Text(title or f"all_reduce, world size {k}, {backend}: {stat} of the slowest rank's time per iteration")
    return Group(
        head,
        table(
            recs,
            cols,
            caption=f"Times in {unit}; time = {stat} (--stat); noise = p90/p10 of the iterations; "
            + ("± rse: relative standard error of time (--target-se); iters: timed iterations; " if adaptive else "")
            + "busbw = algbw·2(k-1)/k; GB/s = 1e9 B/s.",
        ),
        Text(""),
    )


# --------------------------------------------------------------------------- step


@app.command("step", epilog=examples("simcli bench step -k 1..4 -m mlp -o step1.csv"))
@handle_errors
def bench_step(
    world: Annotated[bo.WorldOptions, o.tweak(defaults={"warmup": 3})] = bo.WorldOptions(),
    shape: bo.ModelShapeOptions = bo.ModelShapeOptions(),
    dtype: Annotated[
        bo.StepDtype,
        o.option(
            "--dtype",
            metavar="fp32|tf32|bf16|fp16",
            help="Compute dtype: fp32, tf32 (TF32 matmuls), bf16 or "
            "fp16 (torch.autocast). CPU: fp32 and bf16; tf32 and fp16 need "
            "CUDA.",
        ),
    ] = bo.StepDtype("fp32"),
    batch_per_device: o.BatchPerDevice = None,
    mode: Annotated[
        Mode,
        o.option(
            "--mode",
            help="Gradient all-reduce: flat (one all_reduce of the "
            "flattened gradient), ddp (DistributedDataParallel buckets), both.",
        ),
    ] = Mode.both,
    steps: Annotated[int, o.option("--steps", min=1, help="Timed steps per measurement.")] = 20,
    lr: Annotated[float, o.option("--lr", help="SGD learning rate η in θ ← θ − η·g.")] = 0.01,
    bucket_cap_mb: Annotated[
        float,
        o.option("--bucket-mb", help="DDP bucket size in MiB (DDP's bucket_cap_mb), as speedup's --bucket-mb."),
    ] = 25.0,
    old_bucket: Annotated[
        Optional[float], o.option("--bucket-cap-mb", hidden=True, help="Old spelling of --bucket-mb.")
    ] = None,
    profile: Annotated[
        Optional[str],
        o.option(
            "--profile", "-p", help="Profile for the prediction [default: cpu-loopback with gloo, dgx-h100 with nccl]."
        ),
    ] = None,
    out: Annotated[o.OutputOptions, o.tweak(omit=_OUTPUT, output=_STEP_OUTPUT)] = o.OutputOptions(),
) -> None:
    """Time real data-parallel training steps; check the averaged gradient; compare S(k) with the prediction."""
    from ..io.measured.results import STEP_COLUMNS  # lazy

    if old_bucket is not None:
        bucket_cap_mb = old_bucket
    ks, tr = runs.world_sizes(world.world_sizes, "1,2")
    if tr is None and 1 not in ks:
        ks = [1] + ks
        typer.echo("simcli: world size 1 is measured too: it is T_step(1) for the speedup", err=True)
    b = batch_per_device if batch_per_device is not None else 32
    if b < 1:
        raise InputError(f"--batch-per-device: {b} must be at least 1")
    spec = shape.spec(b)
    if not lr > 0:
        raise InputError(f"--lr: {lr} must be positive")

    if not (bucket_cap_mb >= MIN_BUCKET_MB and bucket_cap_mb < float("inf")):  # checked before any rank starts
        raise InputError(
            f"--bucket-mb: {bucket_cap_mb:g} MiB must be at least 1 KiB ({MIN_BUCKET_MB:g} MiB); DDP's default is 25"
        )
    nparams = bm.params(spec)
    torch_version = require_torch()
    be, cuda = runs.resolve_backend(world.backend.value)
    if be != "nccl" and dtype.value not in bm.CPU_DTYPES:
        why = "this host has no CUDA device torch can use" if not cuda else "--backend gloo runs on the CPU"
        raise InputError(f"--dtype: {dtype.value} needs a CUDA device ({why}); on the CPU use --dtype fp32 or bf16")
    prof = resolve_profile(profile or ("dgx-h100" if be == "nccl" else "cpu-loopback"))
    if tr is None:
        runs.check_worlds(ks, be, world.oversubscribe, cuda=cuda, port=world.port)
    runs.check_memory(spec, b, be, ranks_here=max(ks) if tr is None else int(tr["local_world_size"]), kind=spec.kind)
    modes = ["flat", "ddp"] if mode is Mode.both else [mode.value]
    ref: dict[str, float] = {}
    rows: list[dict[str, Any]] = []
    with _result_writer(
        "bench step",
        out.output if runs.is_writer(tr) else None,
        STEP_COLUMNS,
        out=out,
        backend=be,
        torch_version=torch_version,
        about={
            "model": f"{bm.describe(spec)} ({nparams} params), {'MSE' if spec.kind == 'mlp' else 'cross-entropy'} "
            f"loss, SGD lr {lr}, synthetic data, dtype {dtype.value}",
            "flops": f"flops_per_sample {bm.flops_per_sample(spec):.6g} (as simcli's presets count it; mfu "
            f"uses it), flops_per_sample_exact {bm.flops_per_sample_exact(spec):.6g} (achieved_flops uses it)",
            "times": "median over steps of the slowest rank's time; t_step_ref_s = T_step(1) of the same mode",
            "prediction": f"simcli.step.engine.simulate, profile {prof.name}, --params {nparams}, --compute-time = "
            "measured T_step(1) of the same mode (all the work but communication), "
            "--overlap none for flat, buckets for ddp",
        },
    ) as writer:

        def on_record(rec: dict[str, Any]) -> None:
            runs.add_prediction(rec, ref, prof, tr=tr, bucket_cap_mb=bucket_cap_mb)
            runs.add_mfu(rec, prof)
            writer.append(rec)
            rows.append(rec)

        _run_worlds(
            "step",
            ks,
            tr,
            backend=be,
            world=world,
            config={
                "model": spec.to_dict(),
                "dtype": dtype.value,
                "width": spec.width,
                "depth": spec.depth,
                "batch_per_device": b,
                "steps": steps,
                "warmup": world.warmup,
                "modes": modes,
                "lr": lr,
                "bucket_cap_mb": bucket_cap_mb,
                "solo_reference": tr is not None,
                "progress_unit": "timed iteration",
            },
            on_record=on_record,
            on_world_done=lambda k: None,
            records_per_world=len(modes),
        )
    if not runs.is_writer(tr):
        return
    if out.table:
        from ..io.render import console  # lazy

        console.print(_step_table(rows, prof.name, be))
    _finish(rows, STEP_COLUMNS, out, writer=writer, noun="step measurements", more="--steps")


def _step_table(rows: list[dict[str, Any]], profile: str, backend: str):
    from rich.console import Group  # lazy
    from rich.text import Text  # lazy

    from ..io.render import Column, table, time_unit  # lazy

    f, unit = time_unit([r["t_step_s"] for r in rows])

    def t(v: float) -> str:
        return sig4(v / f)

    def num(spec: str):
        return lambda v: format(v, spec)

    def rest(r: dict[str, Any]) -> float | None:  # step - compute: exposed communication + optimizer and copies
        return r["t_step_s"] - r["t_compute_s"] if r.get("t_step_s") is not None and r.get("t_compute_s") else None

    def rest_cell(v: float) -> str:
        # compute and step are timed in separate loops: a step measured faster than compute alone is noise, not a
        # negative cost (the caption says so)
        return t(v) if v >= 0 else "~0"

    cols = [
        Column("k", "world_size"),
        Column("mode", "mode"),
        Column(f"compute {unit}", "t_compute_s", t, priority=3, short=f"comp {unit}"),
        Column(f"+ rest {unit}", rest, rest_cell, priority=2, short=f"+rest {unit}"),
        Column(f"= step {unit}", "t_step_s", t),
        Column(f"comm alone {unit}", "t_comm_s", t, priority=5, short=f"comm {unit}"),
        Column(f"pred comm {unit}", "predicted_t_comm_s", t, priority=6, short=f"p.comm {unit}"),
        Column(f"pred step {unit}", "predicted_t_step_s", t, priority=4, short=f"p.step {unit}"),
        Column("S meas", "speedup", num(".2f")),
        Column("S pred", "predicted_speedup", num(".2f")),
        Column("E meas", "efficiency", num(".3f")),
        Column("E pred", "predicted_efficiency", num(".3f"), priority=1),
        Column("max|Δg|", "grad_max_abs_err", num(".1e"), priority=7),
    ]
    r0 = rows[0] if rows else {}
    mfu = f" = {r0['mfu']:.3g} of {profile}'s {r0.get('dtype')} peak (preset FLOP count)" if r0.get("mfu") else ""
    split = (
        f"; forward {sig4(r0['t_forward_s'] / f)} + backward {sig4(r0['t_backward_s'] / f)} {unit} (backward "
        f"fraction {r0['backward_fraction']:.3f})"
        if r0.get("t_forward_s")
        else ""
    )
    head = Text(
        f"data-parallel step, {backend}: {r0.get('model', '')} ({fmt_count(r0.get('params', 0))} params), "
        f"{r0.get('dtype', 'fp32')}, batch {r0.get('batch_per_device', '')} per rank, "
        f"{r0.get('threads', '')} thread(s) per rank, "
        f"{fmt_flops(r0.get('achieved_flops', 0))} achieved at k={r0.get('world_size', '')}{mfu}{split}\n"
        f"predicted: simcli speedup --profile {profile} --params {r0.get('params', '')} "
        f"--compute-time <measured T_step(1) of the mode> --overlap none (flat) | buckets (ddp)"
    )
    cap = (
        f"Times in {unit}: medians of the slowest rank per step. compute + rest = step: rest is the step's "
        "exposed communication plus the optimizer and gradient copies; comm alone: the same all-reduces timed "
        "without the model (DDP hides part of it behind backward, so it may exceed rest). "
        "S = k·T_step(1)/T_step(k), E = S/k. max|Δg|: averaged gradient vs one process on the global batch "
        "(ranks agree exactly)."
    )
    if any((rest(r) or 0) < 0 for r in rows):
        cap += (
            " ~0: the step was timed no slower than compute alone (separate loops; the difference is within their "
            "noise, see the CSV's p10/p90)."
        )
    return Group(head, table(rows, cols, caption=cap))


# --------------------------------------------------------------------------- import


@app.command("import", epilog=examples("simcli bench import all_reduce_perf.txt -o run1.csv"))
@handle_errors
def bench_import(
    file: Annotated[
        str,
        typer.Argument(
            metavar="FILE",
            help="nccl-tests output (the text all_reduce_perf prints, or its -J JSON), NCCL Inspector output (a log, "
            "a Prometheus file, or the dump directory), or a PyTorch profiler trace (or a directory of one per rank).",
        ),
    ],
    world_size: Annotated[
        Optional[int],
        o.option("--world-size", help="Ranks of that run [default: counted from its '#  Rank' lines]."),
    ] = None,
    placement: Annotated[
        Optional[Placement],
        o.option(
            "--placement",
            help="Which timings of nccl-tests output: out (out-of-place) or in (in-place) [default: out].",
        ),
    ] = None,
    collective: Annotated[
        Optional[str],
        o.option("--collective", help="nccl-tests output's collective [default: from the file, else all_reduce]."),
    ] = None,
    out: Annotated[o.OutputOptions, o.tweak(omit=_OUTPUT)] = o.OutputOptions(),
) -> None:
    """Turn nccl-tests output, NCCL Inspector logs or a PyTorch profiler trace into simcli's benchmark CSV.

    The format is told from the content. Inspector logs and traces become one row per (collective, size,
    ranks, nodes); a trace's steps (forward, backward, optimizer) and buckets are in the table and in --format json.
    """
    from ..io.measured.live import detect  # lazy
    from ..io.measured.nccltests import parse_nccl_tests  # lazy
    from ..io.measured.results import ALLREDUCE_COLUMNS  # lazy

    if out.output:
        check_output_path(out.output, out.force, inputs=[file])
    from ..io import rules  # lazy

    live = detect(file)
    if live is not None:  # the file says its ranks, collectives and timings: an option that would be ignored is refused
        what = "NCCL Inspector output" if live == "inspector" else "a PyTorch profiler trace"
        for opt, given, why in (
            ("--world-size", world_size is not None, "its records name each communicator's size"),
            ("--collective", collective is not None, "its records name each call's collective"),
            ("--placement", placement is not None, "it has one time per call, no in-place and out-of-place columns"),
        ):
            if given:
                raise rules.not_for(opt, file, what, why=why)
        _import_live(file, live, out)
        return
    if collective is not None:
        collective = rules.collective_option(collective)
    placement = placement or Placement.out
    recs = parse_nccl_tests(file, world_size, placement.value, collective=collective)
    if out.table and not out.output:
        from ..io.render import console  # lazy

        console.print(
            _allreduce_table(
                recs[0]["world_size"],
                "nccl",
                recs,
                title=f"{recs[0]['collective']} from {file}, world size "
                f"{recs[0]['world_size']}, nccl ({placement.value}-of-place)",
            )
        )
        return
    if out.format is o.Format.json:
        emit(to_json(recs), out.output, out.force)
        return

    comments = [
        "simcli bench import",
        f"imported from: {file} (nccl-tests output; host and date of that run are in its own header)",
        "backend: nccl",
        f"placement: {placement.value}-of-place",
        f"imported: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
        "units: bytes B, times s, algbw/busbw GB/s = 1e9 B/s",
    ]
    emit(to_csv(recs, ALLREDUCE_COLUMNS, comments), out.output, out.force)


def _import_live(file: str, kind: str, out: o.OutputOptions) -> None:
    """bench import of an Inspector log or a profiler trace: the measured table, and a trace's steps."""

    from ..io.measured.live import read_live  # lazy

    live = read_live(file, kind)
    steps = None
    if kind == "kineto":
        from ..io.measured.kineto import step_summary  # lazy

        steps = step_summary(live.traces)
    if out.table and not out.output:
        from ..io.render import console  # lazy

        console.print(_live_table(file, kind, live.rows, steps=steps))
        return
    if out.format is o.Format.json:
        doc: Any = live.rows if steps is None else {"collectives": live.rows, "step": steps}
        emit(to_json(doc), out.output, out.force)
        return
    what = "NCCL Inspector output" if kind == "inspector" else "PyTorch profiler trace"
    comments = [
        "simcli bench import",
        f"imported from: {file} ({what})",
        f"backend: {live.rows[0]['backend']}",
        f"imported: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
        "time_s: median over the collective's repeats of its slowest rank; rank_spread: median (slowest - "
        "fastest rank) / slowest",
        "units: bytes B, times s, algbw/busbw GB/s = 1e9 B/s",
    ]
    emit(to_csv(live.rows, live.columns, comments), out.output, out.force)


def _live_table(file: str, kind: str, rows: list[dict[str, Any]], *, steps: dict[str, Any] | None):
    from rich.console import Group  # lazy
    from rich.text import Text  # lazy

    from ..io.render import Column, table, time_unit  # lazy

    f, unit = time_unit([r["time_s"] for r in rows])

    def t(x: float | None) -> str:
        return "-" if x is None else sig4(x / f)

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    coll = table(
        rows,
        [
            Column("collective", "collective", justify="left"),
            Column("k", "world_size"),
            Column("nodes", "nodes", lambda x: "-" if x is None else str(x)),
            Column("size", "bytes", fmt_bytes),
            Column("calls", "calls"),
            Column(f"time {unit}", "time_s", t),
            Column(f"p10 {unit}", "time_p10_s", t),
            Column(f"p90 {unit}", "time_p90_s", t),
            Column("busbw GB/s", "busbw_GBps", lambda x: "-" if x is None else sig4(x)),
            Column("rank spread", "rank_spread", pct),
        ],
        title=f"collectives in {file} ({'NCCL Inspector' if kind == 'inspector' else 'profiler trace'})",
        caption="time = median over repeats of the slowest rank; rank spread = median (slowest - fastest) / "
        "slowest over ranks; busbw as nccl-tests defines it, GB/s = 1e9 B/s",
    )
    if steps is None:
        return coll
    g, u2 = time_unit([steps["step_s"]])

    def s(x: float | None) -> str:
        return "-" if x is None else sig4(x / g)

    terms = [
        ("step", steps["step_s"]),
        ("forward", steps["forward_s"]),
        ("backward", steps["backward_s"]),
        ("optimizer (the update)", steps["optimizer_s"]),
        ("communication (any collective in flight)", steps["comm_s"]),
        ("exposed communication", steps["exposed_s"]),
        ("other (data, copies, DDP)", steps["other_s"]),
    ]
    step_t = table(
        [{"term": a, "v": b} for a, b in terms],
        [Column("term", "term", justify="left"), Column(f"per step {u2}", "v", s)],
        title=f"one step: {steps['step']}, the slowest of {steps['ranks']} rank(s)' median steps "
        f"({steps['steps']} each)",
        caption=None
        if steps["rank_spread"] is None
        else f"compute per rank {', '.join(s(x) for x in steps['rank_compute_s'])} {u2}: spread (sd/mean) "
        f"{100 * steps['rank_spread']:.1f}%",
    )
    bk = table(
        [
            {**b, "i": i, "hid": b["hidden_s"] / b["time_s"] if b["time_s"] else None}
            for i, b in enumerate(steps["buckets"])
        ],
        [
            Column("#", "i"),
            Column("collective", "collective", justify="left"),
            Column("size", "bytes", fmt_bytes),
            Column("count", "count"),
            Column("dtype", "dtype", justify="left"),
            Column(f"time {u2}", "time_s", s),
            Column(f"hidden {u2}", "hidden_s", s),
            Column("hidden", "hid", pct),
        ],
        title="the step's collectives (DDP's buckets): median over steps and ranks; hidden = overlapped by compute",
        caption=f"{fmt_bytes(sum(b['bytes'] for b in steps['buckets'] if b['collective'] == 'all_reduce'))} "
        "all-reduced a step",
    )
    return Group(coll, Text(""), step_t, bk)
