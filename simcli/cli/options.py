"""Option types shared by the commands that build a scenario (speedup, and later compare and plan).

Each option is an ``Annotated`` alias with its help text, so that every command
spells an option the same way.
"""

from __future__ import annotations

import enum
from typing import Annotated, Optional

import typer

from ..engine import Scenario
from ..model import InputError
from ..profiles import DEFAULT_PROFILE, resolve_profile
from ..units import UnitError, parse
from ..workloads import DEFAULT_MODEL, build_workload


class Format(str, enum.Enum):
    table = "table"
    csv = "csv"
    json = "json"


Devices = Annotated[str, typer.Option("--devices", "-k", help="Device counts: '1..64', '1..64:x2', '1,2,8,32', "
                                      "'1..8,16..64:x2'.")]
Profile = Annotated[Optional[str], typer.Option("--profile", "-p", help=f"Built-in profile name or path to a "
                                                f"YAML profile [default: {DEFAULT_PROFILE}].")]
Model = Annotated[Optional[str], typer.Option("--model", "-m", help=f"Built-in model (see 'simcli models list') "
                                              f"[default: {DEFAULT_MODEL}].")]
Params = Annotated[Optional[float], typer.Option("--params", help="Custom workload: number of parameters "
                                                 "(sets the gradient size).")]
FlopsPerSample = Annotated[Optional[float], typer.Option("--flops-per-sample", help="Custom workload: training "
                                                         "FLOPs per sample (forward + backward).")]
ComputeTime = Annotated[Optional[str], typer.Option("--compute-time", help="Measured single-device compute time "
                                                    "per step (seconds, or '350 ms'); replaces the FLOP model.")]
WorkloadFile = Annotated[Optional[str], typer.Option("--workload", help="Workload YAML file (name, params, "
                                                     "flops_per_sample or forward_flops or seq_len).")]
SeqLen = Annotated[Optional[int], typer.Option("--seq-len", help="Tokens per sample for a transformer "
                                               "[default: the model's].")]
BatchPerDevice = Annotated[Optional[int], typer.Option("--batch-per-device", "-b", help="Weak scaling: samples "
                                                       "per device per step [default: the model's].")]
GlobalBatch = Annotated[Optional[int], typer.Option("--global-batch", "-B", help="Strong scaling: samples per "
                                                    "step over all devices, split over k.")]
Dtype = Annotated[Optional[str], typer.Option("--dtype", help="Compute dtype, picks the peak FLOP/s "
                                              "[default: bf16, else fp16, tf32, fp32].")]
GradDtype = Annotated[str, typer.Option("--grad-dtype", help="Gradient dtype on the wire: fp32, bf16, fp16, fp8.")]
Mfu = Annotated[Optional[float], typer.Option("--mfu", help="Achieved fraction of peak, 0 < mfu <= 1 "
                                              "[default: the profile's].")]
Algorithm = Annotated[str, typer.Option("--algorithm", "-a", help="All-reduce algorithm: ring, tree, "
                                        "recursive-doubling, rabenseifner, hierarchical, ps, ps-sharded, or auto "
                                        "(the fastest per k and size; see 'simcli algorithms').")]
Overlap = Annotated[str, typer.Option("--overlap", help="How the all-reduce hides behind backward: 'buckets' "
                                      "(PyTorch DDP's gradient buckets, reduced as backward produces them) or "
                                      "'none' (one all-reduce after backward).")]
BucketMb = Annotated[float, typer.Option("--bucket-mb", help="DDP bucket size in MiB, as DDP's "
                                         "bucket_cap_mb; used with --overlap buckets.")]
Accum = Annotated[int, typer.Option("--accum", help="Gradient accumulation: micro-steps of compute per "
                                    "all-reduce (DDP's no_sync); speedup stays per sample.")]
Explain = Annotated[bool, typer.Option("--explain", help="Also print every term of the step for the largest k: "
                                       "forward, backward, each tier's latency and bandwidth terms, T_comm, the "
                                       "hidden and exposed parts, the bottleneck and the crossover size n*.")]
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="Output format; csv and json print only data "
                                           "to stdout.")]
Output = Annotated[Optional[str], typer.Option("--output", "-o", help="Write the output to this file "
                                               "(atomically) instead of stdout.")]
Force = Annotated[bool, typer.Option("--force", help="Overwrite an existing --output (or --plot) file.")]
Rows = Annotated[int, typer.Option("--rows", help="Table rows shown before the middle is elided (0: all).")]


def parse_time(value: str | None, option: str) -> float | None:
    if value is None:
        return None
    try:
        t = parse(value, "time")
    except UnitError as e:
        raise InputError(f"{option}: {e}") from None
    if not t > 0:
        raise InputError(f"{option}: {value!r} must be a positive time")
    return t


def build_scenario(*, profile: str | None, model: str | None, params: float | None,
                   flops_per_sample: float | None, compute_time: str | None, workload: str | None,
                   seq_len: int | None, batch_per_device: int | None, global_batch: int | None,
                   dtype: str | None, grad_dtype: str, mfu: float | None, algorithm: str = "ring",
                   overlap: str = "buckets", bucket_mb: float = 25.0, accum: int = 1) -> Scenario:
    """The one place where command-line options become a :class:`Scenario`."""
    ct = parse_time(compute_time, "--compute-time")
    prof = resolve_profile(profile)
    wl = build_workload(model=model, params=params, flops_per_sample=flops_per_sample, workload_file=workload,
                        seq_len=seq_len, compute_time=ct)
    return Scenario(profile=prof, workload=wl, dtype=dtype, grad_dtype=grad_dtype, mfu=mfu,
                    batch_per_device=batch_per_device, global_batch=global_batch, compute_time_s=ct,
                    algorithm=algorithm, overlap=overlap, bucket_mb=bucket_mb, accum=accum)


# --------------------------------------------------------------------------- pictures and multi-value options
# (issue 4: `--plot FILE` on speedup and comm, and the `simcli plot` group)

PlotFile = Annotated[Optional[str], typer.Option("--plot", help="Also draw a picture into this file: PNG, SVG or "
                                                 "PDF by its suffix (written atomically; --force overwrites).")]
Dpi = Annotated[int, typer.Option("--dpi", help="Picture resolution in dots per inch (PNG pixels = inches x dpi).")]
Width = Annotated[float, typer.Option("--width", help="Picture width in inches.")]
Height = Annotated[Optional[float], typer.Option("--height", help="Picture height in inches [default: fits the "
                                                 "figure's panels].")]
Threshold = Annotated[float, typer.Option("--threshold", help="Mark the first k whose efficiency E(k) falls below "
                                          "this (0 < x <= 1).")]
#: defaults of the picture options
DPI, WIDTH, THRESHOLD = 150, 10.0, 0.8


def split_list(value: str | None, option: str) -> list[str | None]:
    """Comma-separated option values: 'dgx-a100,dgx-h100' -> ['dgx-a100', 'dgx-h100']; None -> [None]."""
    if value is None:
        return [None]
    items = [v.strip() for v in str(value).split(",")]
    if not all(items):
        raise InputError(f"{option}: empty item in {value!r}; separate names with single commas")
    return list(dict.fromkeys(items))


#: options that take several comma-separated values, one scenario per combination
MULTI = ("profile", "model", "algorithm")


def build_scenarios(**options) -> list[Scenario]:
    """One :class:`Scenario` per combination of comma-separated --profile, --model and --algorithm values.

    Every other keyword goes to :func:`build_scenario` unchanged. Order: profile-major, then model, then
    algorithm, as given on the command line.
    """
    import itertools

    lists = [split_list(options.pop(name, None), f"--{name}") for name in MULTI]
    out = []
    for prof, model, alg in itertools.product(*lists):
        kw = dict(options, profile=prof, model=model)
        if alg is not None:
            kw["algorithm"] = alg
        out.append(build_scenario(**kw))
    return out


def scenario_tags(sc: Scenario) -> dict[str, str]:
    """The values that name one combination (the keys of MULTI)."""
    return {"profile": sc.profile.name, "model": sc.workload.name, "algorithm": sc.algorithm}


def varying(scenarios: list[Scenario]) -> list[str]:
    """The keys of MULTI whose values differ between ``scenarios``."""
    tags = [scenario_tags(sc) for sc in scenarios]
    return [k for k in MULTI if len({t[k] for t in tags}) > 1]


def check_outputs(output: str | None, force: bool, plot: str | None = None, dpi: int = 150,
                  width: float = 10.0, height: float | None = None, threshold: float | None = None):
    """Refuse bad --output and --plot requests before any work is done; the picture's size, or None."""
    if output:
        from ..output import check_output_path

        check_output_path(output, force)
    if plot:
        from .plot import picture_size

        return picture_size(plot, force, dpi, width, height, threshold)
    return None
