"""`simcli bench`: real measurements with torch.distributed, and nccl-tests' output read in.

torch is imported only inside the commands (an optional extra); without it a
command prints one line naming ``pip install 'simcli[bench]'`` and exits 2.
"""

from __future__ import annotations

import enum
import math
import os
import sys
from typing import Annotated, Any, Callable, Optional

import typer

from ..base.types import InputError
from ..base.units import sig4
from . import options as o
from .common import emit, handle_errors, new_app

app = new_app(
    help="Measure all-reduce and training steps with torch.distributed; import nccl-tests output.", no_args_is_help=True
)


class Backend(str, enum.Enum):
    auto = "auto"
    gloo = "gloo"
    nccl = "nccl"


class Mode(str, enum.Enum):
    flat = "flat"
    ddp = "ddp"
    both = "both"


class ModelKind(str, enum.Enum):
    mlp = "mlp"
    gpt = "gpt"
    resnet = "resnet"


class StepDtype(str, enum.Enum):
    fp32 = "fp32"
    tf32 = "tf32"
    bf16 = "bf16"
    fp16 = "fp16"


class Placement(str, enum.Enum):
    out = "out"
    inplace = "in"


WorldSizes = Annotated[
    Optional[str],
    typer.Option(
        "--world-sizes",
        "-k",
        help="Ranks per world, one fresh world each: '2,4', '1..4'. Under torchrun: the launcher's WORLD_SIZE.",
    ),
]
BackendOpt = Annotated[
    Backend, typer.Option("--backend", help="torch.distributed backend; auto: nccl with CUDA devices, gloo otherwise.")
]
Warmup = Annotated[int, typer.Option("--warmup", min=0, help="Untimed iterations before timing.")]
Timeout = Annotated[
    float,
    typer.Option(
        "--timeout",
        min=1,
        help="Seconds a world may go without any rank "
        "starting a new size or step (start-up gets at least 120 s); then every "
        "rank is stopped and the command exits 1.",
    ),
]
Port = Annotated[
    int, typer.Option("--port", help="TCP port of the rendezvous on 127.0.0.1 [default: a free one per world size].")
]
Threads = Annotated[
    Optional[int],
    typer.Option(
        "--threads",
        min=1,
        help="torch threads per rank on CPU, the "
        "same in every world [default: cores // largest world size, "
        "at least 1].",
    ),
]
Oversubscribe = Annotated[
    bool,
    typer.Option(
        "--oversubscribe", help="Allow more CPU ranks than max(4, 2 x cores) (the times then measure the scheduler)."
    ),
]


# --------------------------------------------------------------------------- shared plumbing


def _world_sizes(text: str | None, default: str) -> tuple[list[int], dict[str, Any] | None]:
    from ..base.ranges import parse_devices
    from ..bench.launch import torchrun_env

    tr = torchrun_env()
    if tr is not None:
        if text is not None and [int(x) for x in parse_devices(text, "--world-sizes")] != [tr["world_size"]]:
            raise InputError(
                f"--world-sizes: {text!r} differs from the launcher's WORLD_SIZE={tr['world_size']}; "
                "under torchrun leave --world-sizes out (the launcher sets the world)"
            )
        return [int(tr["world_size"])], tr
    return [int(x) for x in parse_devices(text or default, "--world-sizes")], None


def _backend(backend: Backend) -> tuple[str, int | None]:
    import torch

    cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if backend is Backend.auto:
        return ("nccl" if cuda else "gloo"), cuda
    if backend is Backend.nccl and not cuda:
        raise InputError("--backend nccl: this host has no CUDA device torch can use; use --backend gloo")
    return backend.value, cuda


def _threads(threads: int | None, k_max: int, backend: str) -> int | None:
    """torch threads per CPU rank: the same for every world size (a fixed "device"), cores // largest k."""
    if threads is not None:
        return threads
    if backend == "nccl":
        return None
    return max(1, (os.cpu_count() or 1) // k_max)


def _run_worlds(
    task: str,
    sizes_k: list[int],
    tr: dict[str, Any] | None,
    backend: str,
    config: dict[str, Any],
    *,
    timeout: float,
    port: int,
    threads: int | None,
    on_record: Callable[[dict], None],
    on_world_done: Callable[[int], None],
    records_per_world: int = 1,
) -> None:
    """Spawn each world in turn (or, under torchrun, be one rank of the given world).

    On a terminal, a progress bar on stderr counts the records (``records_per_world`` per world) and names the
    world and the unit its slowest rank has reached."""
    if tr is not None:
        from ..bench import worker

        d = worker.init(
            backend,
            int(tr["rank"]),
            int(tr["world_size"]),
            int(tr["local_rank"]),
            int(tr["local_world_size"]),
            timeout,
            emit_fn=on_record,
        )
        cfg = {k: v for k, v in config.items() if k not in ("backend", "progress_unit")}
        try:
            worker.run_task(task, d, cfg)
        except worker.IdentityError as e:
            raise _bench_error(f"rank {d.rank} of world size {d.world_size}: {e}") from None
        except RuntimeError as e:  # a peer died: torch.distributed raises on the survivors
            raise _bench_error(f"rank {d.rank} of world size {d.world_size}: {str(e).splitlines()[0]}") from None
        finally:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
        if d.rank == 0:
            on_world_done(d.world_size)
        return
    from ..bench.launch import run_world
    from .progress import progress

    unit = str(config.get("progress_unit", "step"))
    with progress(f"bench {task}", total=len(sizes_k) * records_per_world) as bar:

        def record(rec: dict) -> None:
            on_record(rec)
            bar.advance()

        for i, k in enumerate(sizes_k):
            label = f"bench {task}: world size {k} ({i + 1} of {len(sizes_k)})"
            with bar.suspend():
                typer.echo(f"simcli: world size {k}: {k} rank(s), {backend} on 127.0.0.1 ...", err=True)
            bar.update(description=label)
            run_world(
                k,
                task,
                dict(config, backend=backend),
                timeout_s=timeout,
                on_record=record,
                port=port,
                threads=_threads(threads, max(sizes_k), backend),
                on_progress=lambda u, label=label: bar.update(description=f"{label}, {unit} {u}" if u > 0 else label),
            )
            with bar.suspend():
                on_world_done(k)


def _bench_error(msg: str):
    from ..bench.launch import BenchError

    return BenchError(msg)


class Stat(str, enum.Enum):
    min = "min"
    p10 = "p10"
    median = "median"
    mean = "mean"


def _stdout_needed(output: str | None, tr: dict[str, Any] | None) -> None:
    """Refuse before measuring when the results could go nowhere (stdout closed, no --output): none are lost."""
    from ..io.output import StdoutClosed, stdout_usable

    if output is None and _is_writer(tr) and not stdout_usable():
        raise StdoutClosed(
            "standard output is closed and no --output is given: the measurements would be lost; give --output FILE"
        )


def _is_writer(tr: dict[str, Any] | None) -> bool:
    return tr is None or int(tr["rank"]) == 0


def _finish(rows: list[dict[str, Any]], columns, format: o.Format, writer, noun: str, more: str = "--iters") -> None:
    from ..bench.stats import NOISY_SPREAD

    if writer.path is not None:
        typer.echo(f"wrote {writer.path} ({len(rows)} rows)", err=True)
    noisy = [r for r in rows if (r.get("spread") or 0) > NOISY_SPREAD]
    if noisy:
        typer.echo(
            f"simcli: warning: {len(noisy)} of {len(rows)} {noun} are noisy (p10..p90 spread over "
            f"{NOISY_SPREAD:.0%} of the median); use more {more} on a quieter machine",
            err=True,
        )
    if format is not o.Format.table and writer.path is None:  # with --output the data went into that file
        from ..io.output import to_csv, to_json

        sys.stdout.write(to_json(rows) if format is o.Format.json else to_csv(rows, columns))


# --------------------------------------------------------------------------- allreduce


@app.command("allreduce")
@handle_errors
def bench_allreduce(
    world_sizes: WorldSizes = None,
    size: Annotated[
        str, typer.Option("--size", "-s", help="Message sizes: '1KiB..64MiB:x4', '1MiB,1GiB'.")
    ] = "1KiB..16MiB:x4",
    backend: BackendOpt = Backend.auto,
    dtype: Annotated[
        str, typer.Option("--dtype", help="Element type: fp32, fp16, bf16, fp64, int32, int64, int8, uint8.")
    ] = "fp32",
    warmup: Warmup = 5,
    iters: Annotated[
        int,
        typer.Option(
            "--iters",
            "-n",
            min=1,
            help="Timed iterations per size, at least; more are added while a size's --stat is unsettled "
            "(--target-se, --max-iters, --max-time).",
        ),
    ] = 20,
    target_se: Annotated[
        str,
        typer.Option(
            "--target-se",
            help="Adaptive repetition: after --iters, add rounds (one iteration of each unsettled size, "
            "shuffled) until the relative standard error of every size's --stat is at most this "
            "('3%' or 0.03; 0: always up to --max-iters or --max-time). On a busy machine ten samples "
            "leave p10 ~15% apart between runs; a quiet one settles in --iters.",
        ),
    ] = "3%",
    max_iters: Annotated[
        Optional[int],
        typer.Option(
            "--max-iters",
            min=1,
            help="At most this many timed iterations per size [default: 200, or --iters if larger]; "
            "equal to --iters: a fixed count, no adaptive repetition.",
        ),
    ] = None,
    max_time: Annotated[
        float,
        typer.Option(
            "--max-time",
            min=0,
            help="Seconds a world may measure before no more rounds are added (the --iters always run; "
            "at most half of --timeout).",
        ),
    ] = 30.0,
    timeout: Timeout = 300.0,
    port: Port = 0,
    threads: Threads = None,
    oversubscribe: Oversubscribe = False,
    stat: Annotated[
        Stat,
        typer.Option(
            "--stat",
            help="The statistic of the per-iteration times reported as "
            "time_s (and used by calibrate and validate): min, p10, median, or mean "
            "(nccl-tests' choice). A busy machine only adds time, so a low quantile "
            "estimates the uncontended cost; all four are kept in the CSV.",
        ),
    ] = Stat.p10,
    rounds: Annotated[
        Optional[int],
        typer.Option(
            "--rounds",
            min=1,
            help="Split the --iters of each size over "
            "this many rounds, sizes in a new shuffled order each round "
            "[default: --iters, one iteration per size per round].",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the shuffled size order.")] = 0,
    format: o.FormatOpt = o.Format.table,
    output: Annotated[
        Optional[str],
        typer.Option(
            "--output",
            "-o",
            help="Write the measurements here in the "
            "--format (csv for table); rows are added as they are "
            "measured, and the file is valid after each.",
        ),
    ] = None,
    force: o.Force = False,
) -> None:
    """Time torch.distributed.all_reduce for each world size and message size (nccl-tests' columns)."""
    from ..base.ranges import parse_sizes
    from ..bench import require_torch
    from ..bench.allreduce import TORCH_DTYPES
    from ..bench.launch import check_port, check_world_size
    from ..bench.results import ALLREDUCE_COLUMNS, ResultWriter, metadata
    from ..bench.stats import DEFAULT_MAX_ITERS

    ks, tr = _world_sizes(world_sizes, "2")
    if dtype not in TORCH_DTYPES:
        raise InputError(f"--dtype: {dtype!r} is not one of {', '.join(TORCH_DTYPES)}")
    target = o.parse_fraction(target_se, "--target-se", "'3%' or 0.03", zero=True)
    if max_iters is not None and max_iters < iters:
        raise InputError(f"--max-iters: {max_iters} is below --iters {iters}; give at least {iters}")
    cap = max(iters, DEFAULT_MAX_ITERS if max_iters is None else max_iters)
    budget = min(max_time, timeout / 2)  # the watchdog sees no new size while settled sizes are repeated
    esize = TORCH_DTYPES[dtype][1]
    sizes = [int(n) for n in parse_sizes(size)]
    small = [n for n in sizes if n < esize]
    if small:
        raise InputError(
            f"--size: {small[0]} B is less than one {dtype} element ({esize} B); start at {esize}B or more"
        )
    _stdout_needed(output, tr)
    torch_version = require_torch()
    be, cuda = _backend(backend)
    if tr is None:
        for k in ks:
            check_world_size(k, be, oversubscribe, cuda)
        if port:
            check_port(port)
    writer_path = output if _is_writer(tr) else None
    rows: list[dict[str, Any]] = []
    by_world: dict[int, list[dict[str, Any]]] = {}
    n_rounds = rounds if rounds is not None else iters
    with ResultWriter(
        writer_path,
        ALLREDUCE_COLUMNS,
        metadata(
            "bench allreduce",
            be,
            torch_version,
            {
                "command": " ".join(["simcli"] + sys.argv[1:]) if sys.argv else "simcli bench allreduce",
                "time_s": f"{stat.value} over iterations of the slowest rank's time (--stat); p10/p90/min/max/"
                "median/mean likewise; noise = p90/p10",
                "rounds": f"{min(n_rounds, iters)} rounds of shuffled sizes (--rounds, --seed {seed}), "
                "warm-up per size",
                "adaptive": f"after --iters {iters}, rounds added until the relative standard error of each "
                f"size's {stat.value} is at most {target * 100:g}% (--target-se; column rse), up to {cap} iterations "
                f"(--max-iters) and {budget:g} s per world (--max-time)",
                "units": "bytes B, times s, algbw/busbw GB/s = 1e9 B/s, busbw = algbw*2(k-1)/k",
            },
        ),
        force=force,
        fmt="json" if format is o.Format.json else "csv",
    ) as writer:

        def on_record(rec: dict[str, Any]) -> None:
            writer.append(rec)
            rows.append(rec)
            by_world.setdefault(rec["world_size"], []).append(rec)

        def on_world_done(k: int) -> None:
            from ..io.output import stdout_usable

            if format is o.Format.table and by_world.get(k) and stdout_usable():
                from ..io.render import console

                console.print(_allreduce_table(k, be, by_world[k]))

        _run_worlds(
            "allreduce",
            ks,
            tr,
            be,
            {
                "sizes": sizes,
                "dtype": dtype,
                "warmup": warmup,
                "iters": iters,
                "progress_unit": "size",
                "rounds": n_rounds,
                "stat": stat.value,
                "seed": seed,
                "target_se": target,
                "max_iters": cap,
                "max_time": budget,
            },
            timeout=timeout,
            port=port,
            threads=threads,
            on_record=on_record,
            on_world_done=on_world_done,
            records_per_world=len(sizes),
        )
    if _is_writer(tr):
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
        _finish(rows, ALLREDUCE_COLUMNS, format, writer, "measurements")


def _allreduce_table(k: int, backend: str, recs: list[dict[str, Any]], title: str | None = None):
    from rich.console import Group
    from rich.text import Text

    from ..base.units import fmt_bytes
    from ..io.render import Column, table, time_unit

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


@app.command("step")
@handle_errors
def bench_step(
    world_sizes: WorldSizes = None,
    model: Annotated[
        ModelKind,
        typer.Option(
            "--model",
            "-m",
            help="Model to train: mlp (--depth "
            "Linear(width, width) layers), gpt (a GPT-style decoder stack: "
            "--layers, --hidden, --heads, --seq-len, --vocab), resnet "
            "(bottleneck blocks: --model-width, --blocks, --image-size, --classes).",
        ),
    ] = ModelKind.mlp,
    width: Annotated[
        Optional[int],
        typer.Option(
            "--model-width",
            min=1,
            help="mlp: layer width [default: "
            "1024]; resnet: the first stage's bottleneck width [default: "
            "16]. (Not --width, which is a picture's width elsewhere.)",
        ),
    ] = None,
    old_width: Annotated[
        Optional[int], typer.Option("--width", min=1, hidden=True, help="Old spelling of --model-width.")
    ] = None,
    depth: Annotated[int, typer.Option("--depth", min=1, help="MLP layers.")] = 8,
    params: Annotated[
        Optional[float],
        typer.Option("--params", help="Size the MLP to about this many parameters (sets the width for --depth)."),
    ] = None,
    layers: Annotated[int, typer.Option("--layers", min=1, help="gpt: decoder blocks.")] = 2,
    hidden: Annotated[int, typer.Option("--hidden", min=1, help="gpt: hidden size.")] = 128,
    heads: Annotated[int, typer.Option("--heads", min=1, help="gpt: attention heads (must divide --hidden).")] = 4,
    seq_len: Annotated[int, typer.Option("--seq-len", min=1, help="gpt: tokens per sample.")] = 128,
    vocab: Annotated[
        int, typer.Option("--vocab", min=2, help="gpt: vocabulary (the tied embedding and head; GPT-2: 50257).")
    ] = 1024,
    blocks: Annotated[
        str,
        typer.Option(
            "--blocks", help="resnet: bottleneck blocks per stage, the width doubling per stage (ResNet-50: 3,4,6,3)."
        ),
    ] = "1,1,1,1",
    image_size: Annotated[
        int,
        typer.Option(
            "--image-size",
            min=8,
            help="resnet: image side in pixels (64 or more: ResNet-50's 7x7/2 stem and max pool; less: a 3x3/1 stem).",
        ),
    ] = 32,
    classes: Annotated[int, typer.Option("--classes", min=2, help="resnet: classifier outputs.")] = 10,
    dtype: Annotated[
        StepDtype,
        typer.Option(
            "--dtype",
            help="Compute dtype: fp32, tf32 (TF32 matmuls), bf16 or "
            "fp16 (torch.autocast). CPU: fp32 and bf16; tf32 and fp16 need "
            "CUDA.",
        ),
    ] = StepDtype.fp32,
    batch_per_device: o.BatchPerDevice = None,
    mode: Annotated[
        Mode,
        typer.Option(
            "--mode",
            help="Gradient all-reduce: flat (one all_reduce of the "
            "flattened gradient), ddp (DistributedDataParallel buckets), both.",
        ),
    ] = Mode.both,
    steps: Annotated[int, typer.Option("--steps", min=1, help="Timed steps per measurement.")] = 20,
    warmup: Warmup = 3,
    lr: Annotated[float, typer.Option("--lr", help="SGD learning rate η in θ ← θ − η·g.")] = 0.01,
    bucket_cap_mb: Annotated[
        float,
        typer.Option("--bucket-mb", help="DDP bucket size in MiB (DDP's bucket_cap_mb), as speedup's --bucket-mb."),
    ] = 25.0,
    old_bucket: Annotated[
        Optional[float], typer.Option("--bucket-cap-mb", hidden=True, help="Old spelling of --bucket-mb.")
    ] = None,
    profile: Annotated[
        Optional[str],
        typer.Option(
            "--profile", "-p", help="Profile for the prediction [default: cpu-loopback with gloo, dgx-h100 with nccl]."
        ),
    ] = None,
    backend: BackendOpt = Backend.auto,
    timeout: Timeout = 300.0,
    port: Port = 0,
    threads: Threads = None,
    oversubscribe: Oversubscribe = False,
    format: o.FormatOpt = o.Format.table,
    output: Annotated[
        Optional[str], typer.Option("--output", "-o", help="CSV file; rows are appended as they are measured.")
    ] = None,
    force: o.Force = False,
) -> None:
    """Time real data-parallel training steps; check the averaged gradient; compare S(k) with the prediction."""
    from ..bench import models as bm
    from ..bench import require_torch
    from ..bench.launch import check_port, check_world_size
    from ..bench.results import STEP_COLUMNS, ResultWriter, metadata
    from ..bench.step import mlp_width_for_params
    from ..io.profiles import resolve_profile

    if old_width is not None:
        if width is not None:
            raise InputError("--width and --model-width are the same option (--width is its old spelling); give one")
        width = old_width
    if old_bucket is not None:
        bucket_cap_mb = old_bucket
    ks, tr = _world_sizes(world_sizes, "1,2")
    if tr is None and 1 not in ks:
        ks = [1] + ks
        typer.echo("simcli: world size 1 is measured too: it is T_step(1) for the speedup", err=True)
    b = batch_per_device if batch_per_device is not None else 32
    if b < 1:
        raise InputError(f"--batch-per-device: {b} must be at least 1")
    if params is not None:
        if model is not ModelKind.mlp:
            raise InputError(f"--params: sizes the mlp only; give --model {model.value}'s shape options instead")
        if not params >= 1:
            raise InputError(f"--params: {params!r} must be at least 1")
        width = mlp_width_for_params(params, depth)
    spec = _step_spec(model.value, width, depth, layers, hidden, heads, seq_len, vocab, blocks, image_size, classes, b)
    if not lr > 0:
        raise InputError(f"--lr: {lr} must be positive")
    from ..step.engine import MIN_BUCKET_MB

    if not (bucket_cap_mb >= MIN_BUCKET_MB and bucket_cap_mb < float("inf")):  # checked before any rank starts
        raise InputError(
            f"--bucket-mb: {bucket_cap_mb:g} MiB must be at least 1 KiB ({MIN_BUCKET_MB:g} MiB); DDP's default is 25"
        )
    nparams = bm.params(spec)
    torch_version = require_torch()
    be, cuda = _backend(backend)
    if be != "nccl" and dtype.value not in bm.CPU_DTYPES:
        why = "this host has no CUDA device torch can use" if not cuda else "--backend gloo runs on the CPU"
        raise InputError(f"--dtype: {dtype.value} needs a CUDA device ({why}); on the CPU use --dtype fp32 or bf16")
    prof = resolve_profile(profile or ("dgx-h100" if be == "nccl" else "cpu-loopback"))
    if tr is None:
        for k in ks:
            check_world_size(k, be, oversubscribe, cuda)
        if port:
            check_port(port)
    _check_memory(spec, b, be, max(ks) if tr is None else int(tr["local_world_size"]), model.value)
    modes = ["flat", "ddp"] if mode is Mode.both else [mode.value]
    ref: dict[str, float] = {}
    rows: list[dict[str, Any]] = []
    with ResultWriter(
        output if _is_writer(tr) else None,
        STEP_COLUMNS,
        metadata(
            "bench step",
            be,
            torch_version,
            {
                "command": " ".join(["simcli"] + sys.argv[1:]) if sys.argv else "simcli bench step",
                "model": f"{bm.describe(spec)} ({nparams} params), {'MSE' if spec.kind == 'mlp' else 'cross-entropy'} "
                f"loss, SGD lr {lr}, synthetic data, dtype {dtype.value}",
                "flops": f"flops_per_sample {bm.flops_per_sample(spec):.6g} (as simcli's presets count it; mfu "
                f"uses it), flops_per_sample_exact {bm.flops_per_sample_exact(spec):.6g} (achieved_flops uses it)",
                "times": "median over steps of the slowest rank's time; t_step_ref_s = T_step(1) of the same mode",
                "prediction": f"simcli.step.engine.simulate, profile {prof.name}, --params {nparams}, --compute-time = "
                "measured T_step(1) of the same mode (all the work but communication), "
                "--overlap none for flat, buckets for ddp",
            },
        ),
        force=force,
        fmt="json" if format is o.Format.json else "csv",
    ) as writer:

        def on_record(rec: dict[str, Any]) -> None:
            _add_prediction(rec, ref, prof, tr, bucket_cap_mb)
            peak = prof.device.peak_flops.get(rec.get("dtype") or "fp32")
            rec["peak_flops"] = peak
            rec["mfu"] = (
                rec["flops_per_sample"] * rec["batch_per_device"] / rec["t_compute_s"] / peak
                if peak and rec.get("flops_per_sample")
                else None
            )
            writer.append(rec)
            rows.append(rec)

        _run_worlds(
            "step",
            ks,
            tr,
            be,
            {
                "model": spec.to_dict(),
                "dtype": dtype.value,
                "width": spec.width,
                "depth": depth,
                "batch_per_device": b,
                "steps": steps,
                "warmup": warmup,
                "modes": modes,
                "lr": lr,
                "bucket_cap_mb": bucket_cap_mb,
                "solo_reference": tr is not None,
                "progress_unit": "timed iteration",
            },
            timeout=timeout,
            port=port,
            threads=threads,
            on_record=on_record,
            on_world_done=lambda k: None,
            records_per_world=len(modes),
        )
    if not _is_writer(tr):
        return
    if format is o.Format.table:
        from ..io.render import console

        console.print(_step_table(rows, prof.name, be))
    _finish(rows, STEP_COLUMNS, format, writer, "step measurements", more="--steps")


def _step_spec(
    kind: str,
    width: int | None,
    depth: int,
    layers: int,
    hidden: int,
    heads: int,
    seq_len: int,
    vocab: int,
    blocks: str,
    image_size: int,
    classes: int,
    batch: int,
):
    """The bench model's shape from the options, every value checked (one line per bad option)."""
    from ..bench.models import ModelSpec, resnet_final_size

    if kind == "gpt" and hidden % heads:
        raise InputError(f"--heads: {heads} does not divide --hidden {hidden}; give heads that divide the hidden size")
    try:
        bl = tuple(int(x) for x in blocks.split(","))
    except ValueError:
        bl = ()
    if not bl or any(x < 1 for x in bl) or len(bl) > 6:
        raise InputError(f"--blocks: {blocks!r} is not 1 to 6 whole numbers >= 1 separated by commas (e.g. 3,4,6,3)")
    spec = ModelSpec(
        kind=kind,
        width=width or 0,
        depth=depth,
        layers=layers,
        hidden=hidden,
        heads=heads,
        seq_len=seq_len,
        vocab=vocab,
        blocks=bl,
        image_size=image_size,
        classes=classes,
    )
    if kind == "resnet":
        side = resnet_final_size(spec)
        if side < 1 or batch * side * side < 2:
            raise InputError(
                f"--image-size: {image_size} px leaves {max(side, 0)}x{max(side, 0)} pixels after "
                f"{len(bl)} stages, too few for BatchNorm with batch {batch}; give a larger --image-size "
                "or fewer --blocks stages"
            )
    return spec


def _check_memory(spec, batch: int, backend: str, ranks_here: int, kind: str) -> None:
    """Refuse a model whose step cannot fit: parameters x 4 B x 4 + activations, per rank, vs the memory there."""
    from ..base.units import fmt_bytes
    from ..bench.models import memory_estimate

    need = memory_estimate(spec, batch)
    if backend == "nccl":
        import torch

        have, where, total = float(torch.cuda.get_device_properties(0).total_memory), "GPU 0 has", need
    else:
        have, where, total = _available_memory(), "this host has available", need * ranks_here
    if have and total > have:
        per = f"{fmt_bytes(need, binary=False)} per rank: parameters x 4 B x 4 + activations"
        if total != need:
            per += f", x {ranks_here} ranks"
        raise InputError(
            f"--model {kind}: a step needs about {fmt_bytes(total, binary=False)} ({per}) but {where} "
            f"{fmt_bytes(have, binary=False)}; use a smaller model or --batch-per-device"
        )


def _available_memory() -> float:
    """MemAvailable from /proc/meminfo (Linux), else physical pages x page size, else 0 (unknown: no check)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0.0


def _add_prediction(
    rec: dict[str, Any], ref: dict[str, float], prof, tr: dict[str, Any] | None, bucket_cap_mb: float = 25.0
) -> None:
    """Measured S(k), E(k) and the engine's prediction for the same profile and params.

    The prediction's compute time is the measured T_step(1) of the same mode: at k = 1 there is no
    communication, so it is everything else the step does (forward, backward, flattening, the
    optimizer), and the comparison isolates the communication model. The flat mode all-reduces
    after backward (``--overlap none``); DDP overlaps its buckets with backward (``buckets``).
    """
    from ..io.workloads import custom_workload
    from ..step.engine import Scenario, simulate

    k, mode = int(rec["world_size"]), rec["mode"]
    if k == 1:
        ref[mode] = rec["t_step_s"]
    t_ref = ref.get(mode) if tr is None else (rec["t_step_s"] if k == 1 else rec.get("t_solo_step_s"))
    rec["profile"] = prof.name
    rec["t_step_ref_s"] = t_ref
    if t_ref:
        rec["speedup"] = k * t_ref / rec["t_step_s"]
        rec["efficiency"] = rec["speedup"] / k
    wl = custom_workload(float(rec["params"]), None, int(rec["batch_per_device"]))
    sc = Scenario(
        profile=prof,
        workload=wl,
        batch_per_device=int(rec["batch_per_device"]),
        compute_time_s=float(t_ref or rec["t_compute_s"]),
        grad_dtype="fp32",
        overlap="buckets" if mode == "ddp" else "none",
        bucket_mb=bucket_cap_mb,
        update_time_s=0.0,  # the measured T_step(1) holds the step's SGD update (simcli.step.update)
    )
    res = simulate(sc, [k])
    rec.update(
        {
            "predicted_t_comm_s": float(res.t_comm_s[0]),
            "predicted_t_step_s": float(res.t_step_s[0]),
            "predicted_speedup": float(res.speedup[0]),
            "predicted_efficiency": float(res.efficiency[0]),
        }
    )


def _step_table(rows: list[dict[str, Any]], profile: str, backend: str):
    from rich.console import Group
    from rich.text import Text

    from ..base.units import fmt_count, fmt_flops
    from ..io.render import Column, table, time_unit

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


@app.command("import")
@handle_errors
def bench_import(
    file: Annotated[
        str,
        typer.Argument(
            help="nccl-tests output (the text all_reduce_perf prints, or its -J JSON), NCCL Inspector output (a log, "
            "a Prometheus file, or the dump directory), or a PyTorch profiler trace (or a directory of one per rank)."
        ),
    ],
    world_size: Annotated[
        Optional[int],
        typer.Option("--world-size", help="Ranks of that run [default: counted from its '#  Rank' lines]."),
    ] = None,
    placement: Annotated[
        Placement, typer.Option("--placement", help="Which timings: out (out-of-place) or in (in-place).")
    ] = Placement.out,
    collective: Annotated[
        Optional[str], typer.Option("--collective", help="Collective name [default: from the file, else all_reduce].")
    ] = None,
    format: o.FormatOpt = o.Format.table,
    output: o.Output = None,
    force: o.Force = False,
) -> None:
    """Turn nccl-tests output, NCCL Inspector logs or a PyTorch profiler trace into simcli's benchmark CSV.

    The format is told from the content. Inspector logs and traces become one row per (collective, size,
    ranks, nodes); a trace's steps (forward, backward, optimizer) and buckets are in the table and in --format json.
    """
    from ..bench.live import detect
    from ..bench.nccltests import parse_nccl_tests
    from ..bench.results import ALLREDUCE_COLUMNS
    from ..io.output import check_output_path, to_csv, to_json

    if output:
        check_output_path(output, force, inputs=[file])
    live = detect(file)
    if live is not None:
        _import_live(file, live, format, output, force)
        return
    recs = parse_nccl_tests(file, world_size, placement.value, collective)
    if format is o.Format.table and not output:
        from ..io.render import console

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
    if format is o.Format.json:
        emit(to_json(recs), output, force)
        return
    import datetime

    comments = [
        "simcli bench import",
        f"imported from: {file} (nccl-tests output; host and date of that run are in its own header)",
        "backend: nccl",
        f"placement: {placement.value}-of-place",
        f"imported: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
        "units: bytes B, times s, algbw/busbw GB/s = 1e9 B/s",
    ]
    emit(to_csv(recs, ALLREDUCE_COLUMNS, comments), output, force)


def _import_live(file: str, kind: str, format: o.Format, output: str | None, force: bool) -> None:
    """bench import of an Inspector log or a profiler trace: the measured table, and a trace's steps."""
    import datetime

    from ..bench.live import read_live
    from ..io.output import to_csv, to_json

    live = read_live(file, kind)
    steps = None
    if kind == "kineto":
        from ..bench.kineto import step_summary

        steps = step_summary(live.traces)
    if format is o.Format.table and not output:
        from ..io.render import console

        console.print(_live_table(file, kind, live.rows, steps))
        return
    if format is o.Format.json:
        doc: Any = live.rows if steps is None else {"collectives": live.rows, "step": steps}
        emit(to_json(doc), output, force)
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
    emit(to_csv(live.rows, live.columns, comments), output, force)


def _live_table(file: str, kind: str, rows: list[dict[str, Any]], steps: dict[str, Any] | None):
    from rich.console import Group
    from rich.text import Text

    from ..base.units import fmt_bytes
    from ..io.render import Column, table, time_unit

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
