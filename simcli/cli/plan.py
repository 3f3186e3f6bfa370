"""`simcli plan` and `simcli compare`: decision answers on top of the analytic model.

The maths lives in :mod:`simcli.plan` and :mod:`simcli.compare` (pure); this
module turns options into scenarios, calls them, and renders the answer with
its reason, the memory check and the command that shows the curve. rich,
matplotlib and the engine's answer modules are imported inside the commands.
"""

from __future__ import annotations

import enum
import shlex
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ..model import InputError
from . import options as o
from ..units import sig4
from .app import CONTEXT, app, emit, handle_errors, show

if TYPE_CHECKING:  # pragma: no cover
    from ..engine import Scenario


class Optimizer(str, enum.Enum):
    adam = "adam"
    sgd_momentum = "sgd-momentum"
    sgd = "sgd"


#: the default scan for --max-devices when the profile sets no limit (cheap: one vectorised simulate)
MAX_SCAN = 100_000

# plan's own options (their meaning is particular to plan)
MaxDevicesQ = Annotated[bool, typer.Option("--max-devices", help="Question: the largest k whose efficiency stays "
                                           "at or above --min-efficiency (scans every k of --devices).")]
SolveQ = Annotated[Optional[str], typer.Option("--solve", help="Question: the value of this profile field that "
                                               "gives --min-efficiency at --devices K: network[1].bandwidth, "
                                               "inter_node.bandwidth, network[0].latency, <tier>.efficiency, "
                                               "device.mfu, device.peak_flops[.bf16], device.reduce_bandwidth.")]
TimeQ = Annotated[bool, typer.Option("--time-to-train", help="Question: wall-clock time and cost of a whole run "
                                     "(--samples or --tokens) for each k of --devices.")]
MinEfficiency = Annotated[Optional[float], typer.Option("--min-efficiency", "-e", help="Target efficiency "
                                                        "E(k) = S(k)/k, 0 < x <= 1 (for --max-devices and "
                                                        "--solve).")]
PlanDevices = Annotated[Optional[str], typer.Option("--devices", "-k", help="--max-devices: the k to scan "
                                                    "[default: 1..the profile's limit, or 1..100000]; --solve: "
                                                    "one k; --time-to-train: the k to cost ('8..1024:x2').")]
Tolerance = Annotated[float, typer.Option("--tolerance", help="--solve: relative tolerance on the solved "
                                          "value (bisection in log space stops when the bracket is this "
                                          "narrow).")]
Samples = Annotated[Optional[float], typer.Option("--samples", help="--time-to-train: samples in the whole run "
                                                  "(e.g. 1.2e9 images).")]
Tokens = Annotated[Optional[float], typer.Option("--tokens", help="--time-to-train: tokens in the whole run for "
                                                 "a transformer (samples = tokens / seq_len), e.g. 2e12.")]
Price = Annotated[Optional[float], typer.Option("--price-per-device-hour", help="Price of one device for one hour "
                                                "(any currency); gives cost = device-hours x price.")]
MaxHours = Annotated[Optional[float], typer.Option("--max-hours", help="--time-to-train: only plans that finish "
                                                   "within this many hours.")]
MaxCost = Annotated[Optional[float], typer.Option("--max-cost", help="--time-to-train: only plans that cost at "
                                                  "most this (needs --price-per-device-hour).")]
OptimizerOpt = Annotated[Optimizer, typer.Option("--optimizer", help="Optimizer whose state the memory check "
                                                 "counts: adam (16 B/param with weights and gradients), "
                                                 "sgd-momentum (12), sgd (8).")]

# compare's options take comma-separated alternatives
ProfileList = Annotated[Optional[str], typer.Option("--profile", "-p", help="Profiles to compare, comma-separated "
                                                    "names or paths: 'dgx-a100,dgx-h100'.")]
ModelList = Annotated[Optional[str], typer.Option("--model", "-m", help="Built-in models to compare, "
                                                  "comma-separated.")]
DtypeList = Annotated[Optional[str], typer.Option("--dtype", help="Compute dtypes to compare, comma-separated "
                                                  "[default: the device's].")]
GradDtypeList = Annotated[str, typer.Option("--grad-dtype", help="Gradient dtypes to compare, comma-separated: "
                                            "'fp32,bf16'.")]
MfuList = Annotated[Optional[str], typer.Option("--mfu", help="Achieved fractions of peak to compare, "
                                                "comma-separated [default: the profile's].")]
BatchList = Annotated[Optional[str], typer.Option("--batch-per-device", "-b", help="Per-device batches to compare, "
                                                  "comma-separated [default: the model's].")]
AlgorithmList = Annotated[str, typer.Option("--algorithm", "-a", help="All-reduce algorithms to compare, "
                                            "comma-separated: 'ring,auto'.")]
OverlapList = Annotated[Optional[str], typer.Option("--overlap", help="Overlap modes to compare, comma-separated: "
                                                    "'none,buckets' [default: the engine's].")]
BucketList = Annotated[Optional[str], typer.Option("--bucket-mb", help="DDP bucket sizes in MiB to compare, "
                                                   "comma-separated: '25,100' [default: the engine's].")]
AccumList = Annotated[Optional[str], typer.Option("--accum", help="Gradient accumulation steps to compare, "
                                                  "comma-separated: '1,4'.")]


# --------------------------------------------------------------------------- helpers


def _split(value: str | None, option: str) -> list[str]:
    """'a,b' -> ['a', 'b'] (order kept, duplicates dropped); empty items refused."""
    items = [v.strip() for v in str(value).split(",")]
    if not all(items):
        raise InputError(f"{option}: empty item in {value!r}; separate values with single commas")
    return list(dict.fromkeys(items))


def _numbers(value: str | None, option: str, kind: type, lo: float, hi: float | None = None) -> list[Any]:
    if value is None:
        return []
    out = []
    for item in _split(value, option):
        try:
            v = kind(item)
        except ValueError:
            raise InputError(f"{option}: {item!r} is not {'a whole number' if kind is int else 'a number'}") from None
        if not (v >= lo and (hi is None or v <= hi)) or v != v:
            rng = f"at least {lo:g}" if hi is None else f"in ({lo:g}, {hi:g}]"
            raise InputError(f"{option}: {item!r} must be {rng}")
        out.append(v)
    return out


def _curve_command(devices: str, opts: dict[str, Any]) -> str:
    """The `simcli speedup` command that shows the curve behind an answer, with the options that were given."""
    parts = ["simcli", "speedup", "--devices", devices]
    defaults = {"grad_dtype": "fp32", "algorithm": "ring", "overlap": "buckets", "bucket_mb": 25.0, "accum": 1}
    for key, v in opts.items():
        if v is None or v is False or defaults.get(key) == v:
            continue
        parts += [f"--{key.replace('_', '-')}", str(v)]
    return " ".join(shlex.quote(p) for p in parts)


def _scan_string(res_devices: Any, given: str | None, *extra: int) -> str:
    """A --devices string for the curve: the given range when short, else powers of two plus the key k."""
    if given is not None and len(res_devices) <= 64:
        return given
    end = int(res_devices[-1])
    keys = sorted({int(x) for x in extra if x is not None and 1 <= x <= end})
    hi = min(end, max([64] + [4 * x for x in keys]))
    lo = int(res_devices[0])
    grid = f"{lo}..{hi}:x2" if hi > lo else str(lo)
    return ",".join([grid] + [str(x) for x in keys if x > hi or not _on_grid(x, lo)])


def _on_grid(x: int, lo: int) -> bool:
    """Is x = lo·2^j?"""
    while x > lo and x % 2 == 0:
        x //= 2
    return x == lo


def _warn(msg: str) -> None:
    typer.echo(f"simcli: warning: {msg}", err=True)


def _header_lines(sc: "Scenario") -> list[str]:
    from ..units import fmt_bytes, fmt_count, fmt_flops

    p, w = sc.profile, sc.workload
    batch = (f"global batch {sc.batch} split over k (strong scaling)" if sc.strong
             else f"batch {sc.batch} per device (weak scaling)")
    lines = [f"profile   {p.name}: {p.device.name} ({p.origin})",
             f"model     {w.name}: {fmt_count(w.params)} params" + (f", seq_len {w.seq_len}" if w.seq_len else "")
             + f"; {batch}",
             f"gradient  {fmt_bytes(sc.grad_bytes, binary=False)} ({sc.grad_dtype}) all-reduced with {sc.algorithm}"]
    extra = []
    if getattr(sc, "overlap", "none") not in (None, "none"):
        extra.append(f"overlap {sc.overlap} ({sc.bucket_mb:g} MiB buckets)")
    if getattr(sc, "accum", 1) != 1:
        extra.append(f"accumulation {sc.accum}")
    if extra:
        lines[-1] += "; " + ", ".join(extra)
    if sc.compute_time_s is None:
        lines.append(f"compute   {sc.compute_dtype} at {fmt_flops(sc.achieved_flops)} per device "
                     f"(peak x mfu {sc.achieved_mfu:g})")
    return lines


# --------------------------------------------------------------------------- plan


@app.command(context_settings=CONTEXT)
@handle_errors
def plan(
    max_devices: MaxDevicesQ = False,
    solve: SolveQ = None,
    time_to_train: TimeQ = False,
    min_efficiency: MinEfficiency = None,
    devices: PlanDevices = None,
    tolerance: Tolerance = 1e-6,
    samples: Samples = None,
    tokens: Tokens = None,
    price_per_device_hour: Price = None,
    max_hours: MaxHours = None,
    max_cost: MaxCost = None,
    optimizer: OptimizerOpt = Optimizer.adam,
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
    format: o.FormatOpt = o.Format.table,
    output: o.Output = None,
    force: o.Force = False,
    rows: o.Rows = 40,
) -> None:
    """Answer a sizing question: the most devices at an efficiency, the profile value that reaches one, or the
    time and cost of a whole run; each with the reason (the dominant term), a memory check and the command
    that shows the curve. JSON: one object whose key 'answer' holds the answer.

    Examples: simcli plan --max-devices --min-efficiency 0.9 --profile dgx-h100 --model llama2-7b;
    simcli plan --devices 512 --min-efficiency 0.85 --solve inter_node.bandwidth --profile dgx-a100 --model
    bert-large; simcli plan --time-to-train --tokens 2e12 --devices 1024 --model llama2-70b
    --price-per-device-hour 2.5
    """
    from .. import plan as P
    from ..ranges import parse_devices

    asked = [name for name, on in (("--max-devices", max_devices), ("--solve", solve is not None),
                                   ("--time-to-train", time_to_train)) if on]
    if len(asked) != 1:
        raise InputError(("give one question: " if not asked else f"{' and '.join(asked)} exclude each other; "
                          "give one of: ") + "--max-devices, --solve FIELD or --time-to-train")
    if not time_to_train:
        for name, v in (("--samples", samples), ("--tokens", tokens), ("--price-per-device-hour",
                        price_per_device_hour), ("--max-hours", max_hours), ("--max-cost", max_cost)):
            if v is not None:
                raise InputError(f"{name} goes with --time-to-train")
    elif min_efficiency is not None:
        raise InputError("--min-efficiency goes with --max-devices or --solve, not --time-to-train")
    o.check_outputs(output, force)
    opts = dict(profile=profile, model=model, params=params, flops_per_sample=flops_per_sample,
                compute_time=compute_time, workload=workload, seq_len=seq_len, batch_per_device=batch_per_device,
                global_batch=global_batch, dtype=dtype, grad_dtype=grad_dtype, mfu=mfu, algorithm=algorithm,
                overlap=overlap, bucket_mb=bucket_mb, accum=accum)
    sc = o.build_scenario(**opts)
    mem = P.training_memory(sc, optimizer.value)
    out: dict[str, Any]

    if max_devices:
        cap = sc.profile.max_devices or MAX_SCAN
        k = parse_devices(devices if devices is not None else f"1..{cap}")
        ans = P.max_devices(sc, k, min_efficiency)  # type: ignore[arg-type]
        out = ans.to_dict()
        nxt = ans.beyond["devices"] if ans.beyond else None
        out["command"] = _curve_command(_scan_string(ans.result.devices, devices, ans.answer, nxt), opts)
    elif solve is not None:
        if devices is None:
            raise InputError("--devices: --solve needs the device count to solve at, for example --devices 256")
        k = parse_devices(devices)
        if len(k) != 1:
            raise InputError(f"--devices: {devices!r} gives {len(k)} device counts; --solve answers for one, "
                             "for example --devices 256")
        ans = P.solve_field(sc, int(k[0]), min_efficiency, solve, tolerance)  # type: ignore[arg-type]
        out = ans.to_dict()
        kk = int(k[0])
        out["command"] = _curve_command(_scan_string([1, kk], None, kk), opts)
    else:
        if (samples is None) == (tokens is None):
            raise InputError("--time-to-train needs the size of the run: give --samples N or --tokens N (one)")
        if devices is None:
            raise InputError("--devices: --time-to-train needs the device counts to cost, for example "
                             "--devices 8..1024:x2")
        k = parse_devices(devices)
        n = samples if samples is not None else P.samples_from_tokens(sc.workload, tokens)  # type: ignore[arg-type]
        ans = P.time_to_train(sc, k, n, price_per_device_hour, max_hours, max_cost)
        out = ans.to_dict()
        if tokens is not None:
            out["tokens"] = tokens
        out["command"] = _curve_command(devices, opts)
    out["memory"] = mem.to_dict()
    out["warnings"] = [] if mem.fits is not False else [mem.message()]
    out["inputs"] = sc.inputs()
    for w in out["warnings"]:
        _warn(w)
    if format is o.Format.table:
        show(_plan_view(sc, ans, out, rows), output, force)
        return
    from ..output import to_csv, to_json

    if format is o.Format.json:
        emit(to_json(out), output, force)
    else:
        emit(to_csv(_plan_rows(out)), output, force)


def _plan_rows(out: dict[str, Any]) -> list[dict[str, Any]]:
    """CSV of a plan: the per-k table for --time-to-train, the crossings for --max-devices, one row for --solve."""
    q = out["question"]
    if q == "time-to-train":
        ch, fa = out["answer"]["cheapest"]["devices"], out["answer"]["fastest"]["devices"]
        return [{**r, "cheapest": r["devices"] == ch, "fastest": r["devices"] == fa,
                 "fits_memory": out["memory"]["fits"]} for r in out["rows"]]
    if q == "max-devices":
        base = {"answer": out["answer"], "target_efficiency": out["target_efficiency"],
                "limited_by": out["limited_by"], "fits_memory": out["memory"]["fits"]}
        cr = out["crossings"] or [{"previous": None, "devices": None, "direction": None, "efficiency": None}]
        return [{**base, **c} for c in cr]
    keys = ("field", "devices", "target_efficiency", "bound", "answer", "efficiency_at_answer", "current",
            "current_efficiency", "rtol", "at_limit")
    return [{**{key: out[key] for key in keys}, "fits_memory": out["memory"]["fits"]}]


def _plan_view(sc: "Scenario", ans: Any, out: dict[str, Any], rows: int) -> Any:
    from rich.console import Group
    from rich.text import Text

    from ..render import Column, table
    from ..units import fmt_count, fmt_time

    parts: list[Any] = [Text("\n".join(_header_lines(sc)))]
    q = out["question"]
    if q == "max-devices":
        lo, hi, n = ans.scanned
        headline = (f"answer    k = {ans.answer}: the largest k in {lo}..{hi} ({n:,} counts scanned) with "
                    f"E(k) >= {ans.target:g} (E({ans.answer}) = {ans.efficiency:.4f})")
    elif q == "solve":
        headline = f"answer    {ans.statement()}"
        if ans.answer is not None:
            headline += (f"\n          solved to a relative tolerance of {ans.rtol:g} ({ans.evaluations} evaluations); "
                         f"E({ans.devices}) = {ans.efficiency:.6f} there")
    else:
        c, f = ans.cheapest, ans.fastest
        what = "cost" if ans.price is not None else "device-hours"
        budget = [s for s in ((f"--max-hours {ans.max_hours:g}" if ans.max_hours else ""),
                              (f"--max-cost {ans.max_cost:g}" if ans.max_cost else "")) if s]
        lines = [f"run       {fmt_count(ans.samples)} samples" + (f" ({fmt_count(out['tokens'])} tokens)"
                                                                    if out.get("tokens") else "")
                 + (f"; price {ans.price:g} per device-hour" if ans.price is not None else "")
                 + (f"; within {' and '.join(budget)}" if budget else "")]
        for name, r in (("cheapest", c), ("fastest", f)):
            lines.append(f"{name:<9} k = {r['devices']}: {fmt_time(r['time_s'])} ({sig4(r['hours'])} h), "
                         f"{fmt_count(r['device_hours'])} device-hours"
                         + (f", cost {fmt_count(r['cost'])}" if r["cost"] is not None else "")
                         + (f" (least {what})" if name == "cheapest" else ""))
        headline = "\n".join(lines)
    parts.append(Text(headline, style="bold"))
    parts.append(Text(f"why       {ans.reason()}"))
    fits = out["memory"]["fits"]
    parts.append(Text(f"memory    {out['memory']['message']}", style="bold red" if fits is False else ""))
    parts.append(Text(f"curve     {out['command']}"))
    if q == "max-devices" and out["crossings"]:
        parts.append(Text(""))
        parts.append(table(out["crossings"], [Column("from k", "previous"), Column("to k", "devices"),
                                               Column("E crosses", "direction", justify="left"),
                                               Column("E(to k)", "efficiency", lambda v: f"{v:.4f}")],
                           title=f"every k where E(k) crosses {ans.target:g} ({len(out['crossings'])})",
                           max_rows=rows))
    if q == "time-to-train":
        from ..render import time_unit

        f_, unit = time_unit([r["t_step_s"] for r in out["rows"]])
        ch, fa = ans.cheapest["devices"], ans.fastest["devices"]

        def mark(r: dict[str, Any]) -> str:
            tags = [t for t, on in (("cheapest", r["devices"] == ch), ("fastest", r["devices"] == fa),
                                    ("over budget", not r["within_budget"])) if on]
            return ", ".join(tags)

        cols = [Column("k", "devices"), Column("E(k)", "efficiency", lambda v: f"{v:.3f}"),
                Column(f"step {unit}", "t_step_s", lambda v: sig4(v / f_)),
                Column("samples/s", "samples_per_s", lambda v: f"{v:.4g}"),
                Column("time", "time_s", fmt_time), Column("device-h", "device_hours", fmt_count)]
        if ans.price is not None:
            cols.append(Column("cost", "cost", fmt_count))
        cols.append(Column("", mark, justify="left"))
        parts.append(Text(""))
        parts.append(table(out["rows"], cols, max_rows=rows,
                           caption="time = ceil(samples / samples per step) x T_step; device-hours = k x time; "
                                   "cost = device-hours x price."))
    return Group(*parts)


# --------------------------------------------------------------------------- compare


@app.command(context_settings=CONTEXT)
@handle_errors
def compare(
    devices: o.Devices = "1..64:x2",
    profile: ProfileList = None,
    model: ModelList = None,
    params: o.Params = None,
    flops_per_sample: o.FlopsPerSample = None,
    compute_time: o.ComputeTime = None,
    workload: o.WorkloadFile = None,
    seq_len: o.SeqLen = None,
    batch_per_device: BatchList = None,
    global_batch: o.GlobalBatch = None,
    dtype: DtypeList = None,
    grad_dtype: GradDtypeList = "fp32",
    mfu: MfuList = None,
    algorithm: AlgorithmList = "ring",
    overlap: OverlapList = None,
    bucket_mb: BucketList = None,
    accum: AccumList = None,
    optimizer: OptimizerOpt = Optimizer.adam,
    format: o.FormatOpt = o.Format.table,
    output: o.Output = None,
    force: o.Force = False,
    rows: o.Rows = 80,
    plot: o.PlotFile = None,
    dpi: o.Dpi = o.DPI,
    width: o.Width = o.WIDTH,
    height: o.Height = None,
    threshold: o.Threshold = o.THRESHOLD,
) -> None:
    """Every combination of the comma-separated alternatives, side by side: step time, speedup, efficiency and
    the gain (throughput over the first combination at the same k).

    Example: simcli compare --profile dgx-a100,dgx-h100 --model llama2-7b --devices 8..512:x2 --grad-dtype fp32,bf16
    """
    from ..compare import compare as run_compare
    from ..profiles import resolve_profile
    from ..ranges import parse_devices
    from ..workloads import build_workload

    fig_size = o.check_outputs(output, force, plot, dpi, width, height, threshold)
    k = parse_devices(devices)
    profiles = _split(profile, "--profile") if profile is not None else [None]
    models = _split(model, "--model") if model is not None else [None]
    dtypes = _split(dtype, "--dtype") if dtype is not None else [None]
    grads = _split(grad_dtype, "--grad-dtype")
    algs = _split(algorithm, "--algorithm")
    mfus = _numbers(mfu, "--mfu", float, 0.0, 1.0) or [None]
    if 0.0 in mfus:
        raise InputError("--mfu: 0 is not in (0, 1]")
    batches = _numbers(batch_per_device, "--batch-per-device", int, 1) or [None]
    sc = o.build_scenario(profile=profiles[0], model=models[0], params=params, flops_per_sample=flops_per_sample,
                          compute_time=compute_time, workload=workload, seq_len=seq_len,
                          batch_per_device=batches[0], global_batch=global_batch, dtype=dtypes[0],
                          grad_dtype=grads[0], mfu=mfus[0], algorithm=algs[0])
    choices: dict[str, list[Any]] = {}
    if len(profiles) > 1:
        choices["profile"] = [resolve_profile(p) for p in profiles]
    if len(models) > 1:
        if params is not None or workload is not None:
            raise InputError("--model with several names excludes --params and --workload")
        ct = sc.compute_time_s
        choices["workload"] = [build_workload(model=m, seq_len=seq_len, compute_time=ct) for m in models]
    for name, vals in (("dtype", dtypes), ("grad_dtype", grads), ("mfu", mfus), ("batch_per_device", batches),
                       ("algorithm", algs)):
        if len(vals) > 1:
            choices[name] = vals
    if overlap is not None:
        choices["overlap"] = _split(overlap, "--overlap")
    if bucket_mb is not None:
        choices["bucket_mb"] = _numbers(bucket_mb, "--bucket-mb", float, 1e-9)
    if accum is not None:
        choices["accum"] = _numbers(accum, "--accum", int, 1)
    cmp = run_compare(sc, choices, k, optimizer.value)
    from ..plan import training_memory

    misfits: dict[str, list[str]] = {}
    for alt in cmp.alternatives:
        mem = training_memory(alt.scenario, optimizer.value)
        if mem.fits is False:
            misfits.setdefault(mem.message(), []).append(alt.label)
    for msg, labels in misfits.items():
        _warn(("every alternative" if len(labels) == len(cmp.alternatives) else ", ".join(labels)) + ": " + msg)
    if plot:
        _draw_compare(cmp, plot, force, fig_size, threshold)
    if format is o.Format.table:
        show(_compare_view(cmp, rows), output, force)
        return
    from ..output import to_csv, to_json

    recs = cmp.records()
    emit(to_json(recs) if format is o.Format.json else to_csv(recs), output, force)


def _compare_title(cmp: Any) -> str:
    sc = cmp.alternatives[0].scenario
    varied = cmp.varied or ["nothing"]
    return (f"Compare {', '.join(varied)}: speedup S(k) and efficiency E(k)\n"
            f"{sc.workload.name} on {sc.profile.name}" + (" (first alternative)" if cmp.varied else ""))


def _draw_compare(cmp: Any, path: str, force: bool, size: Any, threshold: float) -> None:
    from .. import plot as P

    series = [P.Series(a.label, r.records()) for a, r in zip(cmp.alternatives, cmp.results)]
    fig = P.speedup_figure(series, _compare_title(cmp), threshold, size)
    typer.echo(f"wrote {P.save_figure(fig, path, force)}", err=True)


def _compare_view(cmp: Any, rows: int) -> Any:
    from rich.console import Group
    from rich.text import Text

    from ..render import Column, table, time_unit
    from ..units import fmt_bytes

    recs = cmp.by_devices()
    first = cmp.alternatives[0]
    f, unit = time_unit([r["t_step_s"] for r in recs])
    keys = cmp.varied
    label_cols = [Column(key, key, lambda v: f"{v:g}" if isinstance(v, float) else str(v), justify="left")
                  for key in keys]
    cols = [Column("k", "devices"), *label_cols,
            Column(f"compute {unit}", "t_compute_s", lambda v: sig4(v / f)),
            Column(f"comm {unit}", "t_comm_s", lambda v: sig4(v / f)),
            *([Column(f"exposed {unit}", "t_comm_exposed_s", lambda v: sig4(v / f))]
              if any(r.get("t_comm_exposed_s") is not None and r["t_comm_exposed_s"] != r["t_comm_s"] for r in recs)
              else []),
            Column(f"step {unit}", "t_step_s", lambda v: sig4(v / f)),
            Column("S(k)", "speedup", lambda v: f"{v:.2f}"),
            Column("E(k)", "efficiency", lambda v: f"{v:.3f}"),
            Column("samples/s", "samples_per_s", lambda v: f"{v:.4g}"),
            Column("gain", "gain", lambda v: f"x{v:.3f}")]
    if any(r["fits_memory"] is False for r in recs):
        cols.append(Column("memory", lambda r: None if r["fits_memory"] is None else
                           ("fits" if r["fits_memory"] else f"NO ({fmt_bytes(r['memory_bytes'], binary=False)})"),
                           justify="left"))
    t = table(recs, cols, max_rows=rows,
              caption=f"Times in {unit}. gain = samples/s over the first alternative ({first.label}) at the same k. "
                      f"{len(cmp.alternatives)} alternatives x {len(cmp.results[0].devices)} device counts."
                      + (" --format csv or json holds every row." if rows and len(recs) > rows else ""))
    head = Text("\n".join(_header_lines(first.scenario)) + "\n(first alternative; the table's columns "
                + ", ".join(keys or ["none"]) + " vary)")
    return Group(head, Text(""), t)

