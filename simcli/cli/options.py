"""Options declared once: ``Annotated`` aliases, and the groups that commands share.

Each option is an ``Annotated`` alias with its help text, so that every command
spells an option the same way. Options that travel together are one frozen
dataclass (an *option group*): :class:`ScenarioOptions` (what to simulate),
:class:`OutputOptions` (--format/--output/--force/--rows) and
:class:`PictureOptions` (--plot/--dpi/--width/--height/--threshold); for the
bench commands :class:`WorldOptions` (where the ranks run) and
:class:`ModelShapeOptions` (the model ``bench step`` trains). A command
takes a group as one parameter, ``scn: ScenarioOptions``, and :func:`command`
puts the group's options into the command's signature for typer; the function
receives the dataclass. ``Annotated[ScenarioOptions, Tweak(...)]`` changes a
command's help, default or set of a group's options without a second declaration.

This module imports no other module of :mod:`simcli.cli`.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import itertools
import math
import typing
from typing import Annotated, Any, Callable, Optional, Sequence, TypeVar

import typer

from ..base.ranges import check_combinations, parse_devices, parse_sizes
from ..base.types import InputError
from ..base.units import parse_at
from ..comm import nccl, registry, releases, specs
from ..io.files import check_output_path, same_output
from ..io.profiles import DEFAULT_PROFILE, list_profiles, resolve_profile, with_nccl_min_ctas, with_nccl_version
from ..io.workloads import DEFAULT_MODEL, build_workload, presets
from ..step import strategies, update
from ..step.engine import Scenario

#: what an option takes, as ``--help`` shows it after the option's name (its metavar), by the option's long name;
#: :func:`option` gives it to every option declared with that name, and a declaration that takes
#: something else (a comma-separated list of what the name usually takes) says so with ``metavar=``
METAVARS = {
    # what to simulate
    "--devices": "K-RANGE",
    "--nccl-version": "RELEASE",
    "--nccl-min-ctas": "N",
    "--world-sizes": "K-RANGE",
    "--profile": "PROFILE",
    "--model": "MODEL",
    "--workload": "FILE",
    "--params": "N",
    "--flops-per-sample": "FLOP",
    "--compute-time": "TIME",
    "--compute-time-at-k": "K",
    "--seq-len": "N",
    "--batch-per-device": "N",
    "--global-batch": "N",
    "--dtype": "DTYPE",
    "--grad-dtype": "DTYPE",
    "--param-dtype": "DTYPE",
    "--mfu": "FRACTION",
    "--algorithm": "ALGORITHM",
    "--protocol": "PROTOCOL",
    "--gpus-per-process": "N",
    "--collective": "COLLECTIVE",
    "--overlap": "buckets|none",
    "--bucket-mb": "MIB",
    "--strategy": "STRATEGY",
    "--shard-group": "N",
    "--units": "N",
    "--activations": "BYTES",
    "--spread": "FRACTION",
    "--optimizer": "OPTIMIZER",
    "--update-extras": "PASSES",
    "--update-time": "TIME",
    "--accum": "N",
    "--size": "SIZES",
    "--min-size": "SIZE",
    "--max-size": "SIZE",
    # output and pictures
    "--output": "FILE",
    "--rows": "N",
    "--plot": "FILE",
    "--dpi": "DPI",
    "--width": "INCHES",
    "--height": "INCHES",
    "--threshold": "FRACTION",
    # questions and checks
    "--min-efficiency": "FRACTION",
    "--samples": "N",
    "--tokens": "N",
    "--price-per-device-hour": "PRICE",
    "--max-cost": "COST",
    "--budget": "COST",
    "--max-days": "DAYS",
    "--max-hours": "HOURS",
    "--activation-checkpointing": "on|off|on,off",
    "--tolerance": "FRACTION",
    "--max-error": "FRACTION",
    "--where": "COLUMN=VALUE",
    "--tier": "TIER",
    "--holdout": "FRACTION",
    "--name": "NAME",
    "--seed": "N",
    "--world-size": "N",
    # bench
    "--iters": "N",
    "--warmup": "N",
    "--max-iters": "N",
    "--max-time": "SECONDS",
    "--target-se": "FRACTION",
    "--rounds": "N",
    "--threads": "N",
    "--timeout": "SECONDS",
    "--port": "PORT",
    "--steps": "N",
    "--lr": "RATE",
    "--model-width": "N",
    "--depth": "N",
    "--layers": "N",
    "--hidden": "N",
    "--heads": "N",
    "--vocab": "N",
    "--blocks": "N,N,N,N",
    "--image-size": "PIXELS",
    "--classes": "N",
    "--bucket-cap-mb": "MIB",
}


def option(*decls: str, **kw: Any) -> Any:
    """``typer.Option(*decls, **kw)`` with the metavar :data:`METAVARS` names for its long name (unless ``metavar``
    is given), and the shell completion of profile and model names for --profile and --model."""
    long = next((d for d in decls if d.startswith("--")), None)
    if long in METAVARS:
        kw.setdefault("metavar", METAVARS[long])
    if long in COMPLETIONS:
        kw.setdefault("autocompletion", COMPLETIONS[long])
    return typer.Option(*decls, **kw)


def listed(*decls: str, **kw: Any) -> Any:
    """:func:`option` for an option that takes a comma-separated list of what its long name takes (metavar 'N,...')."""
    kw.setdefault("metavar", f"{METAVARS[next(d for d in decls if d.startswith('--'))]},...")
    return option(*decls, **kw)


def enum_members(values: typing.Iterable[str]) -> dict[str, str]:
    """The members of a ``str`` enum of a domain tuple's values, one choice each ('-' in a value is '_' in its
    member's name): ``enum.Enum(name, enum_members(values), type=str)``, a type that typer offers as choices."""
    return {v.replace("-", "_"): v for v in values}


# --------------------------------------------------------------------------- shell completion


def _listed(items: Any, incomplete: str) -> list[str]:
    """The names that start with what the shell has typed, comma lists completed at their last item."""
    head, _, last = incomplete.rpartition(",")
    prefix = f"{head}," if head else ""
    return [prefix + n for n in items if n.startswith(last)]


def complete_profile(incomplete: str) -> list[str]:
    """Profile names a shell offers for --profile: the built-ins and the profile files simcli finds
    (simcli.io.profiles.list_profiles), then YAML files in the current folder."""
    import glob  # lazy

    names = list(dict.fromkeys(e.name for e in list_profiles()))
    _, _, last = incomplete.rpartition(",")
    files = sorted(glob.glob(f"{glob.escape(last)}*.y*ml")) if last else []
    return _listed(names, incomplete) + [f for f in files if f not in names]


def complete_model(incomplete: str) -> list[str]:
    """Model names a shell offers for --model: simcli's presets (simcli.io.workloads.presets)."""

    return _listed(presets(), incomplete)


#: the option whose values a shell completes, and how (:func:`option` attaches them)
COMPLETIONS = {"--profile": complete_profile, "--model": complete_model}


if typing.TYPE_CHECKING:  # pragma: no cover
    from ..plot.figures import FigSize

F = TypeVar("F", bound=Callable[..., Any])


class Format(str, enum.Enum):
    table = "table"
    csv = "csv"
    json = "json"


# --------------------------------------------------------------------------- one alias per option
# one declaration per option, laid out by hand as a table (the formatter would spread each over seven lines)
# fmt: off
Devices = Annotated[str, option(
    "--devices", "-k", help="Device counts: '1..64', '1..64:x2', '1,2,8,32', '1..8,16..64:x2'.",
)]
Profile = Annotated[Optional[str], option(
    "--profile", "-p", help=f"Built-in profile name or path to a YAML profile [default: {DEFAULT_PROFILE}].",
)]
Model = Annotated[Optional[str], option(
    "--model", "-m", help=f"Built-in model (see 'simcli models list') [default: {DEFAULT_MODEL}].",
)]
Params = Annotated[Optional[float], option(
    "--params", help="Custom workload: number of parameters (sets the gradient size).",
)]
FlopsPerSample = Annotated[Optional[float], option(
    "--flops-per-sample", help="Custom workload: training FLOPs per sample (forward + backward).",
)]
ComputeTime = Annotated[Optional[str], option(
    "--compute-time",
    help="Measured single-device compute time per step (seconds, or '350 ms'); replaces the FLOP model.",
)]
WorkloadFile = Annotated[Optional[str], option(
    "--workload", help="Workload YAML file (name, params, flops_per_sample or forward_flops or seq_len).",
)]
SeqLen = Annotated[Optional[int], option(
    "--seq-len", help="Tokens per sample for a transformer [default: the model's].",
)]
BatchPerDevice = Annotated[Optional[int], option(
    "--batch-per-device", "-b", help="Weak scaling: samples per device per step [default: the model's].",
)]
GlobalBatch = Annotated[Optional[int], option(
    "--global-batch", "-B", help="Strong scaling: samples per step over all devices, split over k.",
)]
Dtype = Annotated[Optional[str], option(
    "--dtype", help="Compute dtype, picks the peak FLOP/s [default: bf16, else fp16, tf32, fp32].",
)]
GradDtype = Annotated[str, option("--grad-dtype", help="Gradient dtype on the wire: fp32, bf16, fp16, fp8.")]
Mfu = Annotated[Optional[float], option(
    "--mfu", help="Achieved fraction of peak, 0 < mfu <= 1 [default: the profile's].",
)]
#: the algorithms' names, from the one registry in simcli.comm.registry
ALGORITHM_NAMES = [a.name for a in registry.REGISTRY]
#: the textbook all-reduce algorithms (affine in the size, so 'simcli algorithms' finds exact crossovers)
TEXTBOOK_NAMES = list(registry.ALGORITHMS)
Algorithm = Annotated[Optional[str], option(
    "--algorithm", "-a",
    help=f"Collective algorithm: "
    f"{', '.join(ALGORITHM_NAMES)}, or auto (the fastest of "
    "everything simcli models, which no single library reaches). On a "
    "profile that models NCCL, nccl is NCCL's own choice and ring, "
    "tree, nvls, nvls-tree, pat, collnet-direct, collnet-chain force one of NCCL's algorithms "
    "(NCCL_ALGO; collnet-*: a tier with collnet: sharp) [default: nccl on NCCL profiles, else ring].",
)]
Protocol = Annotated[Optional[str], option(
    "--protocol",
    help=f"NCCL protocol to force: {', '.join(specs.PROTOCOLS)} (NCCL_PROTO) [default: the one NCCL picks per size].",
)]
NcclVersion = Annotated[Optional[str], option(
    "--nccl-version",
    help="NCCL release whose tuner prices NCCL's choice and costs, over the profile's nccl.version: "
    f"{releases.RELEASES[0].version} to {releases.RELEASES[-1].version} are carried (docs/nccl.md, 'Carried "
    "releases'); one between two carried takes the earlier and says so, one before "
    f"{releases.RELEASES[0].version} is refused [default: the profile's nccl.version, else "
    f"{releases.DEFAULT_RELEASE.version}].",
)]
NcclMinCtas = Annotated[Optional[int], option(
    "--nccl-min-ctas", min=1, max=32,
    help="NCCL_MIN_CTAS: the least channels NCCL's kernels run on (1 to 32), over the profile's nccl.min_ctas; "
    "it moves what a size costs, not NCCL's choice (docs/nccl.md, 'NCCL_MIN_CTAS') [default: the profile's, "
    "else NCCL's own].",
)]
GpusPerProcess = Annotated[int, option(
    "--gpus-per-process", "-g", min=1,
    help="GPUs one host thread launches each collective on, as nccl-tests' -g: a single-process run "
    f"(-g 8) is no faster than 8 launches of {nccl.LAUNCH_US:g} us [default: 1, one process per GPU, as "
    "mpirun and torch.distributed run].",
)]
Collective = Annotated[str, option(
    "--collective",
    help=f"Collective: {', '.join(specs.COLLECTIVES)} (sizes as nccl-tests counts them: all_gather's is the "
    "gathered output).",
)]
Overlap = Annotated[str, option(
    "--overlap",
    help="How the all-reduce hides behind backward: 'buckets' "
    "(PyTorch DDP's gradient buckets, reduced as backward produces them) or "
    "'none' (one all-reduce after backward).",
)]
BucketMb = Annotated[float, option(
    "--bucket-mb", help="DDP bucket size in MiB, as DDP's bucket_cap_mb; used with --overlap buckets.",
)]
Strategy = Annotated[str, option(
    "--strategy",
    help="Data parallelism: "
    + ", ".join(f"{s.name} ({s.summary})" for s in strategies.STRATEGY_SPECS)
    + "; comma-separated for one result each (see docs/sharding.md).",
)]
ParamDtype = Annotated[str, option(
    "--param-dtype",
    help="Parameter dtype of the all-gathers and of the parameters in memory (sharded strategies): bf16, fp16, fp32.",
)]
ShardGroup = Annotated[Optional[int], option(
    "--shard-group", help="hsdp: devices per shard group [default: one node].",
)]
Units = Annotated[Optional[int], option(
    "--units", help="FSDP units (wrapped modules) [default: the model's layers, else 1].",
)]
NoReshard = Annotated[bool, option(
    "--no-reshard-after-forward",
    help="fsdp/hsdp: keep the gathered parameters from forward to backward (no second all-gather; more memory).",
)]
NoCheckpointing = Annotated[bool, option(
    "--no-activation-checkpointing",
    help="Count activations without activation checkpointing in the memory per device.",
)]
Activations = Annotated[Optional[str], option(
    "--activations",
    help="Activation memory kept for backward per sample (bytes, units allowed: '96MiB'), e.g. measured as "
    "the peak-memory growth per extra sample; replaces the per-token transformer estimate and gives CNNs and "
    "custom workloads one [default: the workload's activation_bytes_per_sample, else the estimate (0 where "
    "there is none)].",
)]
Spread = Annotated[Optional[str], option(
    "--spread",
    help="Spread of the devices' speed, a fraction of the step ('3%' or 0.03): each synchronised step waits "
    "for the slowest of k, T_compute x (1 + spread x E[max of k normals]) [default: the profile's "
    "device.spread, else the default of its device kind (GPUs: 0.0148), else none].",
)]
ComputeTimeAtK = Annotated[Optional[int], option(
    "--compute-time-at-k",
    help="The device count at which --compute-time was measured: its step already waited for the slowest of "
    "that many devices, so only the excess slowest-of-k factor is applied [default: 1].",
)]
#: the optimizers simcli prices (simcli.step.update.OPTIMIZER_SPECS: their passes and fp32 state)
OptimizerChoice = enum.Enum(  # type: ignore[misc]  # members from the registry: mypy sees an enum without members
    "OptimizerChoice", enum_members(update.OPTIMIZERS), type=str
)
OptimizerName = Annotated[OptimizerChoice, option(
    "--optimizer",
    help="Optimizer whose state the memory counts and whose step is priced once per optimizer step over the "
    "device's memory bandwidth (bytes read and written per parameter): "
    + ", ".join(f"{s.name} ({s.bytes_per_param:g})" for s in update.OPTIMIZER_SPECS)
    + "; adamw is torch.optim.AdamW's default on CUDA (foreach) (docs/model.md).",
)]
UpdateExtras = Annotated[Optional[str], option(
    "--update-extras",
    help="Comma-separated passes around the optimizer step, each priced over the memory bandwidth: "
    + ", ".join(f"{e.name} ({e.summary}, {update.EXTRAS[e.name]:g} B/param)" for e in update.EXTRA_SPECS)
    + ".",
)]
UpdateTime = Annotated[Optional[str], option(
    "--update-time",
    help="Measured seconds of one optimizer step per device ('12 ms'); replaces the memory-bandwidth price.",
)]
Accum = Annotated[int, option(
    "--accum",
    help="Gradient accumulation: micro-steps of compute per all-reduce (DDP's no_sync); speedup stays per sample.",
)]
Explain = Annotated[bool, option(
    "--explain",
    help="Also print every term of the step for the largest k: "
    "forward, backward, each tier's latency and bandwidth terms, T_comm, the "
    "hidden and exposed parts, the bottleneck and the crossover size n*.",
)]
FormatOpt = Annotated[Format, option("--format", "-f", help="Output format; csv and json print only data to stdout.")]
Output = Annotated[Optional[str], option(
    "--output", "-o", help="Write the output to this file (atomically) instead of stdout.",
)]
Force = Annotated[bool, option("--force", help="Overwrite an existing --output (or --plot) file.")]
Rows = Annotated[int, option("--rows", min=0, help="Table rows shown before the middle is elided (0: all).")]
Wide = Annotated[bool, option(
    "--wide", help="Show every table column, however wide (a narrow terminal otherwise leaves some out).",
)]
PlotFile = Annotated[Optional[str], option(
    "--plot",
    help="Also draw a picture into this file: PNG, SVG or PDF by its suffix (written atomically; --force overwrites).",
)]
Dpi = Annotated[int, option("--dpi", help="Picture resolution in dots per inch (PNG pixels = inches x dpi).")]
Width = Annotated[float, option("--width", help="Picture width in inches.")]
Height = Annotated[Optional[float], option(
    "--height", help="Picture height in inches [default: fits the figure's panels].",
)]
Threshold = Annotated[float, option(
    "--threshold", help="Mark the first k whose efficiency E(k) falls below this (0 < x <= 1).",
)]
Size = Annotated[str, option("--size", "-s", help="Message sizes with units: '1KiB..1GiB:x4', '32MiB,1GiB'.")]
CommDtype = Annotated[str, option("--dtype", help="Element type (sets nccl-tests' count column).")]
# fmt: on
#: defaults of the picture options
DPI, WIDTH, THRESHOLD = 150, 10.0, 0.8


# --------------------------------------------------------------------------- option groups


@dataclasses.dataclass(frozen=True)
class OptionGroup:
    """Base of the option dataclasses: a command parameter annotated with a subclass becomes its fields."""

    def copied(self, *names: str) -> dict[str, Any]:
        """The named options as they are, by name: what a constructor takes from the group unchanged."""
        return {name: getattr(self, name) for name in names}


@dataclasses.dataclass(frozen=True)
class Tweak:
    """How one command changes a group: ``fields`` maps a field to a new alias, or to ``(alias, default)``;
    ``defaults`` changes only defaults; ``omit`` leaves fields out of the command (they keep their defaults)."""

    omit: tuple[str, ...] = ()
    defaults: dict[str, Any] = dataclasses.field(default_factory=dict)
    fields: dict[str, Any] = dataclasses.field(default_factory=dict)


def tweak(*, omit: tuple[str, ...] | list[str] = (), defaults: dict[str, Any] | None = None, **fields: Any) -> Tweak:
    return Tweak(omit=tuple(omit), defaults=dict(defaults or {}), fields=fields)


def _group_of(annotation: Any) -> tuple[type[OptionGroup], Tweak] | None:
    """``(group class, tweak)`` when an annotation names an option group, else None."""
    extra: tuple[Any, ...] = ()
    if typing.get_origin(annotation) is Annotated:
        annotation, *rest = typing.get_args(annotation)
        extra = tuple(rest)
    if isinstance(annotation, type) and issubclass(annotation, OptionGroup):
        tw = next((x for x in extra if isinstance(x, Tweak)), Tweak())
        return annotation, tw
    return None


def command(fn: F) -> F:
    """Expand every option-group parameter of ``fn`` into the group's options, for typer.

    The options take the group parameter's place in the signature (so in ``--help``); the wrapper
    collects them back into the dataclass and calls ``fn`` with it.
    """
    hints = typing.get_type_hints(fn, include_extras=True)
    sig = inspect.signature(fn)
    params: list[inspect.Parameter] = []
    groups: dict[str, tuple[type[OptionGroup], list[str]]] = {}
    for p in sig.parameters.values():
        ann = hints.get(p.name, p.annotation)
        found = _group_of(ann)
        if found is None:
            params.append(p.replace(annotation=ann, kind=inspect.Parameter.KEYWORD_ONLY))
            continue
        cls, tw = found
        field_hints = typing.get_type_hints(cls, include_extras=True)
        names = []
        for f in dataclasses.fields(cls):
            default = f.default
            if f.name in tw.omit:
                continue
            annotation = field_hints[f.name]
            if f.name in tw.fields:
                new = tw.fields[f.name]
                annotation, default = new if isinstance(new, tuple) else (new, default)
            default = tw.defaults.get(f.name, default)
            names.append(f.name)
            params.append(
                inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
            )
        unknown = set(tw.omit) | set(tw.fields) | set(tw.defaults)
        unknown -= {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise TypeError(f"{fn.__name__}: {cls.__name__} has no field {', '.join(sorted(unknown))}")
        groups[p.name] = (cls, names)
    seen: set[str] = set()
    for p in params:
        if p.name in seen:
            raise TypeError(f"{fn.__name__}: two options are called {p.name!r}")
        seen.add(p.name)

    @functools.wraps(fn)
    def wrapper(**kwargs: Any) -> Any:
        for pname, (cls, names) in groups.items():
            kwargs[pname] = cls(**{n: kwargs.pop(n) for n in names})
        return fn(**kwargs)

    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]  # what inspect (so typer) reads
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    del wrapper.__wrapped__  # typer must read the new signature, not fn's
    return typing.cast(F, wrapper)


def parse_bytes(value: str | None, option: str) -> float | None:
    """A size in bytes from the command line (units allowed: '96MiB'); None stays None; negative is refused."""
    return None if value is None else parse_at(value, "bytes", option)


@typing.overload
def parse_fraction(value: str, option: str, example: str, *, zero: bool = False) -> float: ...
@typing.overload
def parse_fraction(value: str | None, option: str, example: str, *, zero: bool = False) -> float | None: ...
def parse_fraction(value: str | None, option: str, example: str, *, zero: bool = False) -> float | None:
    """A fraction from the command line, as a percentage ('15%') or a number (0.15); None stays None.

    Finite and positive (``zero``: 0 is allowed too), else bad input naming the option and an ``example``."""
    if value is None:
        return None
    s = str(value).strip()
    try:
        x = float(s[:-1]) / 100 if s.endswith("%") else float(s)
    except ValueError:
        raise InputError(f"{option}: {value!r} is not a fraction or a percentage (try {example})") from None
    if not math.isfinite(x) or x < 0 or (x == 0 and not zero):
        need = "0 or more and finite" if zero else "positive"
        raise InputError(f"{option}: {value!r} must be {need} (try {example})")
    return x


def parse_time(value: str | None, option: str) -> float | None:
    """A positive time from the command line (units allowed: '350 ms'); None stays None."""
    return None if value is None else parse_at(value, "time", option, positive=True)


@typing.overload
def split_list(value: str, option: str) -> list[str]: ...
@typing.overload
def split_list(value: str | None, option: str) -> list[str] | list[None]: ...
def split_list(value: str | None, option: str) -> list[str] | list[None]:
    """Comma-separated option values: 'dgx-a100,dgx-h100' -> ['dgx-a100', 'dgx-h100'] (order kept, duplicates
    dropped, empty items refused); None -> [None]."""
    if value is None:
        return [None]
    items = [v.strip() for v in str(value).split(",")]
    if not all(items):
        raise InputError(f"{option}: empty item in {value!r}; separate values with single commas")
    return list(dict.fromkeys(items))


#: options that take several comma-separated values, one scenario per combination
MULTI = ("profile", "model", "algorithm", "strategy")
#: Scenario's defaults: an option that sets a Scenario field defaults to the field's default (written once, there)
SCENARIO_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(Scenario)}


#: the scenario options a :class:`Scenario` field of the same name takes as they are
# fmt: off
_AS_THEY_ARE = (
    "dtype", "grad_dtype", "mfu", "batch_per_device", "global_batch", "algorithm", "protocol", "overlap", "bucket_mb",
    "accum", "strategy", "param_dtype", "shard_group", "units", "compute_time_at_k",
)
# fmt: on


@dataclasses.dataclass(frozen=True)
class ScenarioOptions(OptionGroup):
    """What to simulate: every option that goes into a :class:`~simcli.step.engine.Scenario`.

    To add one: a field here (its alias above, or an ``Annotated`` type in place) and its use in :meth:`build`.
    """

    profile: Profile = None
    model: Model = None
    params: Params = None
    flops_per_sample: FlopsPerSample = None
    compute_time: ComputeTime = None
    workload: WorkloadFile = None
    seq_len: SeqLen = None
    batch_per_device: BatchPerDevice = None
    global_batch: GlobalBatch = None
    dtype: Dtype = None
    grad_dtype: GradDtype = SCENARIO_DEFAULTS["grad_dtype"]
    mfu: Mfu = None
    algorithm: Algorithm = None
    protocol: Protocol = None
    nccl_version: NcclVersion = None
    nccl_min_ctas: NcclMinCtas = None
    overlap: Overlap = SCENARIO_DEFAULTS["overlap"]
    bucket_mb: BucketMb = SCENARIO_DEFAULTS["bucket_mb"]
    accum: Accum = SCENARIO_DEFAULTS["accum"]
    strategy: Strategy = SCENARIO_DEFAULTS["strategy"]
    param_dtype: ParamDtype = SCENARIO_DEFAULTS["param_dtype"]
    shard_group: ShardGroup = None
    units: Units = None
    no_reshard_after_forward: NoReshard = False
    no_activation_checkpointing: NoCheckpointing = False
    activations: Activations = None
    spread: Spread = None
    compute_time_at_k: ComputeTimeAtK = None
    optimizer: OptimizerName = OptimizerChoice(SCENARIO_DEFAULTS["optimizer"])
    update_extras: UpdateExtras = None
    update_time: UpdateTime = None

    def build(self) -> Scenario:
        """The one place where command-line options become a :class:`Scenario`."""
        ct = parse_time(self.compute_time, "--compute-time")
        prof = with_nccl_version(resolve_profile(self.profile), self.nccl_version)
        prof = with_nccl_min_ctas(prof, self.nccl_min_ctas)
        wl = build_workload(
            model=self.model,
            params=self.params,
            flops_per_sample=self.flops_per_sample,
            workload_file=self.workload,
            seq_len=self.seq_len,
            compute_time=ct,
        )
        return Scenario(profile=prof, workload=wl, **self.scenario_fields())

    def scenario_fields(self) -> dict[str, Any]:
        """The :class:`Scenario` fields these options set, besides the profile and the workload (validate and
        calibrate price measured rows with them, on the rows' own profile, model and batch)."""
        return dict(
            **self.copied(*_AS_THEY_ARE),
            compute_time_s=parse_time(self.compute_time, "--compute-time"),
            reshard_after_forward=not self.no_reshard_after_forward,
            activation_checkpointing=not self.no_activation_checkpointing,
            activation_bytes_per_sample=parse_bytes(self.activations, "--activations"),
            spread=parse_fraction(self.spread, "--spread", "3%", zero=True),
            optimizer=OptimizerChoice(self.optimizer).value,
            update_extras=tuple(x.strip() for x in (self.update_extras or "").split(",") if x.strip()),
            update_time_s=None if self.update_time is None else parse_at(self.update_time, "time", "--update-time"),
        )

    def build_all(self) -> list[Scenario]:
        """One :class:`Scenario` per combination of comma-separated --profile, --model, --algorithm and --strategy
        values.

        Order: profile-major, then model, then algorithm, then strategy, as given on the command line.
        """

        lists = [split_list(getattr(self, name), f"--{name}") for name in MULTI]
        check_combinations({f"--{name}": len(v) for name, v in zip(MULTI, lists)})
        return [
            dataclasses.replace(
                self, profile=prof, model=model, algorithm=alg or self.algorithm, strategy=strat or self.strategy
            ).build()
            for prof, model, alg, strat in itertools.product(*lists)
        ]

    def replace(self, **changes: Any) -> "ScenarioOptions":
        return dataclasses.replace(self, **changes)

    def given(self) -> dict[str, Any]:
        """The options that differ from their defaults, in declaration order (for a command line)."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) is not None
            and getattr(self, f.name) is not False
            and getattr(self, f.name) != f.default
        }


@dataclasses.dataclass(frozen=True)
class OutputOptions(OptionGroup):
    """Where and how a command's answer goes: --format, --output, --force, --rows, --wide."""

    format: FormatOpt = Format.table
    output: Output = None
    force: Force = False
    rows: Rows = 40
    wide: Wide = False

    @property
    def table(self) -> bool:
        return self.format is Format.table


@dataclasses.dataclass(frozen=True)
class CommOptions(OptionGroup):
    """Which collective to price, on what, over which (k, size) grid: `simcli comm` and `simcli plot comm`."""

    devices: Devices = "2..64:x2"
    size: Size = "1KiB..1GiB:x4"
    profile: Profile = None
    algorithm: Algorithm = None
    protocol: Protocol = None
    collective: Collective = "all_reduce"
    dtype: CommDtype = "fp32"
    nccl_version: NcclVersion = None
    nccl_min_ctas: NcclMinCtas = None

    def profiles(self) -> list[Any]:
        """The comma-separated --profile values, loaded, each priced as --nccl-version and --nccl-min-ctas where
        given."""
        return [
            with_nccl_min_ctas(with_nccl_version(resolve_profile(p), self.nccl_version), self.nccl_min_ctas)
            for p in split_list(self.profile, "--profile")
        ]

    def grid(self) -> tuple[Any, Any]:
        """(k, sizes) as arrays, checked against their limits before anything is allocated."""

        return parse_devices(self.devices), parse_sizes(self.size)


@dataclasses.dataclass(frozen=True)
class PictureOptions(OptionGroup):
    """A picture besides the answer (or instead of it): --plot, --dpi, --width, --height, --threshold."""

    plot: PlotFile = None
    dpi: Dpi = DPI
    width: Width = WIDTH
    height: Height = None
    threshold: Threshold = THRESHOLD

    def size(self, path: str, force: bool, option: str = "--plot", *, threshold: bool = True) -> "FigSize":
        """Check a picture request before any work: suffix, directory, clobbering, size and threshold."""
        return picture_size(
            path,
            force,
            self.dpi,
            width=self.width,
            height=self.height,
            threshold=self.threshold if threshold else None,
            option=option,
        )


def picture_size(
    path: str,
    force: bool,
    dpi: int,
    *,
    width: float,
    height: float | None,
    threshold: float | None = None,
    option: str = "--plot",
) -> "FigSize":
    """Check a picture request before any work: suffix, directory, clobbering, size and threshold."""
    from ..plot.figures import FigSize, check_figsize, picture_format  # heavy

    picture_format(path, option)
    check_output_path(path, force, option)
    if threshold is not None and not (0 < threshold <= 1):
        raise InputError(f"--threshold: {threshold:g} is not in (0, 1]; give an efficiency such as 0.8")
    return check_figsize(FigSize(width=width, height=height, dpi=dpi))


def check_outputs(out: OutputOptions, pic: PictureOptions | None = None, threshold: bool = True):
    """Refuse bad --output and --plot requests before any work is done; the picture's size, or None.

    --output and --plot naming one file (the same name, or two names of one file: a link, ``./x`` and ``x``) is
    refused before either is claimed: the picture would be written, then replaced by the answer, or refused."""
    if out.output and pic is not None and pic.plot:
        if same_output(out.output, pic.plot):
            raise InputError(
                f"--plot: {pic.plot} is also --output ({out.output}); the picture and the answer need two files, "
                "give each its own name"
            )
    if out.output:
        check_output_path(out.output, out.force)
    if pic is not None and pic.plot:
        return pic.size(pic.plot, out.force, threshold=threshold)
    return None


def scenario_tags(sc: Scenario) -> dict[str, str]:
    """The values that name one combination (the keys of MULTI)."""
    # a Scenario's algorithm is a name once it is made (None asks for the profile's default)
    return {
        "profile": sc.profile.name,
        "model": sc.workload.name,
        "algorithm": str(sc.algorithm),
        "strategy": sc.strategy,
    }


def varying(scenarios: list[Scenario]) -> list[str]:
    """The keys of MULTI whose values differ between ``scenarios``."""
    tags = [scenario_tags(sc) for sc in scenarios]
    return [k for k in MULTI if len({t[k] for t in tags}) > 1]


def speedup_records(results: Sequence[Any]) -> list[dict[str, Any]]:
    """The JSON/CSV records of one or several results; several get profile/model/algorithm keys in front."""
    if len(results) == 1:
        return results[0].records()
    vary = varying([r.scenario for r in results]) or list(MULTI)
    out = []
    for r in results:
        tags = scenario_tags(r.scenario)
        for rec in r.records():
            out.append({**{k: tags[k] for k in vary}, **rec})
    return out


def parse_numbers(
    value: str | float | None, option: str, kind: type, *, lo: float, hi: float | None = None
) -> list[Any]:
    """The numbers of a comma-separated option ('1,4'; a group's option a command tweaks into a list, e.g.
    compare's --mfu), each of ``kind`` and in [lo, hi]; None -> []."""
    if value is None:
        return []
    out = []
    for item in split_list(str(value), option):
        try:
            v = kind(item)
        except ValueError:
            raise InputError(f"{option}: {item!r} is not {'a whole number' if kind is int else 'a number'}") from None
        if not (v >= lo and (hi is None or v <= hi)) or v != v:
            rng = f"at least {lo:g}" if hi is None else f"in ({lo:g}, {hi:g}]"
            raise InputError(f"{option}: {item!r} must be {rng}")
        out.append(v)
    return out
