"""`simcli plan best`: the fastest or cheapest configuration of a grid that fits (simcli.decisions.plan_best, pure).

Registered on :data:`simcli.cli.plan.plan_app`; the options it shares with the other questions are plan's.
"""

from __future__ import annotations

import enum
import shlex
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Group
from rich.text import Text

from ..base.ranges import parse_devices
from ..base.types import InputError
from ..base.units import fmt_bytes, fmt_count, sig4
from ..decisions import plan as P
from ..decisions import plan_best as PB
from ..decisions.band_decisions import best_band
from ..decisions.plan_best import REASON_TEXT
from ..io.render import Column, table
from ..step.strategies import SPECS, STRATEGIES
from . import options as o
from .common import answer, examples, handle_errors, warn_mfu_fallback
from .plan import MinEfficiency, PartialNodes, RunOptions, plan_app
from .progress import progress
from .views import header_lines

if TYPE_CHECKING:  # pragma: no cover
    from ..decisions.plan_best import Best


class Objective(str, enum.Enum):
    time = "time"
    cost = "cost"


GlobalBatchOpt = Annotated[
    str,
    o.option(
        "--global-batch",
        "-B",
        metavar="N|TOKENS",
        help="Samples per optimizer step over all devices ('512'), or tokens with a unit ('4Mi-tokens', "
        "'4M tokens'); the accumulation of each configuration follows: accum = B / (k x micro-batch).",
    ),
]
StrategyList = Annotated[
    str,
    o.listed(
        "--strategy",
        help="Strategies to search, comma-separated: ddp,zero1,zero2,fsdp,hsdp.",
    ),
]
BestDevices = Annotated[
    Optional[str],
    o.option(
        "--devices",
        "-k",
        help="Device counts to search ('64..2048:x2', '8..1024:+8') [default: 1..the profile's limit, or 1..4096]; "
        "past one node only whole nodes unless --partial-nodes.",
    ),
]
MicroBatchList = Annotated[
    Optional[str],
    o.listed(
        "--batch-per-device",
        "-b",
        help="Micro-batches (samples per device per micro-step) to search: '1,2,4,8' or '1..8' [default: 1..8].",
    ),
]
GradDtypeList = Annotated[str, o.listed("--grad-dtype", help="Gradient dtypes to search, comma-separated.")]
ShardGroupList = Annotated[
    Optional[str],
    o.listed(
        "--shard-group",
        help="hsdp shard groups to search: '8,16' [default: one node].",
    ),
]
CheckpointingList = Annotated[
    str,
    o.option(
        "--activation-checkpointing",
        help="Activation checkpointing to search: on, off or 'on,off' (memory only; at equal speed off is preferred).",
    ),
]
BucketList = Annotated[
    Optional[str],
    o.listed("--bucket-mb", help="DDP bucket sizes in MiB to search: '25,100'."),
]
ObjectiveOpt = Annotated[
    Objective, o.option("--objective", help="time: the most samples/s; cost: the least device-time (x price).")
]
MaxDays = Annotated[Optional[float], o.option("--max-days", help="Only runs that finish within this many days.")]
Budget = Annotated[
    Optional[float], o.option("--budget", help="Only runs that cost at most this (needs --price-per-device-hour).")
]

#: plan best searches these itself (lists), so they leave the scenario group
_OWN = ("strategy", "batch_per_device", "global_batch", "grad_dtype", "shard_group", "bucket_mb", "accum")


@plan_app.command(
    "best",
    epilog=examples(
        "simcli plan best -m llama2-7b --global-batch 4Mi-tokens --tokens 2e12",
        "simcli plan best -m llama2-7b -B 1024 --tokens 2e12 --objective cost",
    ),
)
@handle_errors
def plan_best(
    global_batch: GlobalBatchOpt,
    devices: BestDevices = None,
    strategy: StrategyList = ",".join(STRATEGIES),
    batch_per_device: MicroBatchList = None,
    grad_dtype: GradDtypeList = "fp32",
    shard_group: ShardGroupList = None,
    activation_checkpointing: CheckpointingList = "on",
    bucket_mb: BucketList = None,
    objective: ObjectiveOpt = Objective.time,
    whole: RunOptions = RunOptions(),
    max_days: MaxDays = None,
    budget: Budget = None,
    min_efficiency: MinEfficiency = None,
    partial_nodes: PartialNodes = False,
    scn: Annotated[o.ScenarioOptions, o.tweak(omit=_OWN + ("no_activation_checkpointing",))] = o.ScenarioOptions(),
    out: Annotated[o.OutputOptions, o.tweak(defaults={"rows": 30})] = o.OutputOptions(),
    pic: o.PictureOptions = o.PictureOptions(),
) -> None:
    """The fastest (--objective time) or cheapest (cost) configuration that fits, searched jointly over strategies,
    device counts and micro-batches at a fixed global batch: the answer, what limits it, the runner-up, and the
    time-cost frontier.
    """

    size = o.check_outputs(out, pic, threshold=False)
    samples, tokens, price = whole.samples, whole.tokens, whole.price_per_device_hour
    sc = scn.build()
    warn_mfu_fallback([sc])
    B, given_as = PB.parse_global_batch(global_batch, sc.workload.seq_len)
    cap = sc.profile.max_devices or 4096
    k = parse_devices(devices if devices is not None else f"1..{cap}")
    every = k.size
    if not partial_nodes:
        k = P.whole_nodes(sc, k)
    scan = "every count" if partial_nodes or k.size == every else "whole nodes past the first"
    micro = [int(x) for x in parse_devices(batch_per_device, "--batch-per-device")] if batch_per_device else []
    ckpt = {"on": True, "off": False}
    ck = []
    for item in o.split_list(activation_checkpointing, "--activation-checkpointing"):
        if item not in ckpt:
            raise InputError(f"--activation-checkpointing: {item!r}; give on, off or 'on,off'")
        ck.append(ckpt[item])
    grid = PB.Grid(
        strategies=tuple(o.split_list(strategy, "--strategy")),
        devices=k,
        micro_batches=tuple(micro or range(1, 9)),
        grad_dtypes=tuple(o.split_list(grad_dtype, "--grad-dtype")),
        shard_groups=tuple(o.parse_numbers(shard_group, "--shard-group", int, lo=1)) or (None,),
        checkpointing=tuple(ck),
        bucket_mbs=tuple(o.parse_numbers(bucket_mb, "--bucket-mb", float, lo=1e-9)) or (sc.bucket_mb,),
    )

    n = grid.check_size()  # refused before any work, with the count and how to narrow it
    with progress(f"plan best: {n:,} configurations", total=n) as bar:
        ans = PB.best(
            sc,
            grid,
            global_batch=B,
            objective=objective.value,
            samples=samples,
            tokens=tokens,
            price=price,
            max_days=max_days,
            budget=budget,
            min_efficiency=min_efficiency,
            on_progress=bar.advance,
        )
    res = ans.to_dict()
    res["global_batch_given"] = {"text": global_batch, "as": given_as}
    if tokens is not None:
        res["tokens"] = tokens
    res["inputs"] = sc.inputs()
    res["scan"] = scan
    res["command"] = _speedup_command(ans.answer, scn)

    res["band"] = best_band(sc, ans, PB.answer_scenario)  # how sure: is the runner-up inside the answer's band
    if pic.plot:
        from ..plot import figures as PL  # heavy

        fig = PL.frontier_figure(ans, _title(sc, ans), size)
        typer.echo(f"wrote {PL.save_figure(fig, pic.plot, out.force)}", err=True)
    a = ans.answer
    answer(
        out,
        lambda: _view(sc, ans, res, rows=out.rows),
        lambda: res,
        rows=lambda: (
            [
                {**r, "answer": all(r[c] == a[c] for c in ("strategy", "devices", "batch_per_device"))}
                for r in res["frontier"]
            ],
            [],
        ),
    )


def _speedup_command(a: dict[str, Any], scn: o.ScenarioOptions) -> str:
    """The `simcli speedup` command that runs the answer's configuration."""

    parts = ["simcli", "speedup", "--devices", str(a["devices"]), "--strategy", a["strategy"]]
    parts += ["--batch-per-device", str(a["batch_per_device"]), "--accum", str(a["accum"])]
    if a["grad_dtype"] != "fp32":
        parts += ["--grad-dtype", a["grad_dtype"]]
    if SPECS[a["strategy"]].group == "shard_group" and a["shard_group"]:
        parts += ["--shard-group", str(a["shard_group"])]
    if not a["activation_checkpointing"]:
        parts.append("--no-activation-checkpointing")
    if SPECS[a["strategy"]].timeline == "buckets" and a["bucket_mb"] is not None and a["bucket_mb"] != 25.0:
        parts += ["--bucket-mb", f"{a['bucket_mb']:g}"]
    for key, v in scn.given().items():
        if key not in _OWN:
            parts += [f"--{key.replace('_', '-')}"] + ([] if v is True else [str(v)])
    return " ".join(shlex.quote(p) for p in parts)


def _title(sc: Any, ans: "Best") -> str:
    return (
        f"plan best ({ans.objective}): {sc.workload.name} on {sc.profile.name}, global batch {ans.global_batch:,}\n"
        f"every configuration that fits, the time-cost frontier, and the answer"
    )


def _config(r: dict[str, Any]) -> str:
    s = f"{r['strategy']} on {r['devices']} devices, micro-batch {r['batch_per_device']} x accumulation {r['accum']}"
    extra = []
    if r["grad_dtype"] != "fp32":
        extra.append(f"{r['grad_dtype']} gradients")
    if SPECS[r["strategy"]].group == "shard_group" and r["shard_group"]:
        extra.append(f"shard group {r['shard_group']}")
    if not r["activation_checkpointing"]:
        extra.append("no activation checkpointing")
    if SPECS[r["strategy"]].timeline == "buckets" and r["bucket_mb"] not in (None, 25.0):
        extra.append(f"{r['bucket_mb']:g} MiB buckets")
    return s + (f" ({', '.join(extra)})" if extra else "")


def _figures(r: dict[str, Any], price: float | None) -> str:
    s = (
        f"{r['samples_per_s']:.4g} samples/s (E = {r['efficiency']:.3f}), "
        f"{fmt_bytes(r['memory_bytes'], binary=False)} per device"
    )
    if r["days"] is not None:
        s += f", {sig4(r['days'])} days, {fmt_count(r['device_hours'])} device-hours"
    if r["cost"] is not None:
        s += f", cost {fmt_count(r['cost'])}"
    return s


def _view(sc: Any, ans: "Best", out: dict[str, Any], *, rows: int) -> Any:
    head = [line for line in header_lines(sc) if not line.startswith(("model", "gradient"))]
    w = sc.workload
    head.insert(
        1, f"model     {w.name}: {fmt_count(w.params)} params" + (f", seq_len {w.seq_len}" if w.seq_len else "")
    )
    tokens = f" ({fmt_count(ans.global_batch * w.seq_len)} tokens)" if w.seq_len else ""
    run = f"global    {ans.global_batch:,} samples per optimizer step{tokens}; accumulation = B / (k x micro-batch)"
    if ans.samples is not None:
        run += f"\nrun       {fmt_count(ans.samples)} samples" + (
            f" ({fmt_count(out['tokens'])} tokens)" if out.get("tokens") else ""
        )
        if ans.price is not None:
            run += f"; price {ans.price:g} per device-hour"
    cons = [f"{k.replace('_', '-')} {v:g}" for k, v in ans.constraints.items() if v is not None]
    if cons:
        run += f"; within --{', --'.join(cons)}"
    head.append(run)
    drops = "; ".join(f"{n:,} {REASON_TEXT[r]}" for r, n in ans.dropped.items()) or "none"
    nodes = "" if out.get("scan", "every count") == "every count" else f" (device counts: {out['scan']})"
    head.append(f"searched  {ans.scanned:,} configurations{nodes}, {out['kept']:,} kept; dropped: {drops}")
    a = ans.answer
    lines = [f"answer    {_config(a)}: {_figures(a, ans.price)}"]
    parts: list[Any] = [Text("\n".join(head)), Text("\n".join(lines), style="bold")]
    parts.append(Text(f"why       limited by {ans.why}"))
    if ans.runner_up is not None:
        parts.append(Text(f"runner-up {_config(ans.runner_up)}: {ans.worse} ({_figures(ans.runner_up, ans.price)})"))
    if out.get("band"):
        parts.append(Text(f"band      {out['band']['line']}"))
    parts.append(Text(f"check     {out['command']}"))
    # strategy, k, the speed, days, cost and the answer marker are the answer (never left out on a narrow
    # terminal); the rest by priority, with a line naming them
    cols = [
        Column("strategy", "strategy", justify="left"),
        Column("k", "devices"),
        Column("micro", "batch_per_device", priority=3),
        Column("accum", "accum", priority=4),
        Column("samples/s", "samples_per_s", lambda v: f"{v:.4g}"),
        Column("E", "efficiency", lambda v: f"{v:.3f}", priority=6),
        Column("mem GB", "memory_bytes", lambda v: f"{v / 1e9:.4g}", priority=8),
    ]
    if ans.samples is not None:
        cols.append(Column("days", "days", lambda v: sig4(v)))
        cols.append(Column("device-h", "device_hours", fmt_count, priority=7))
    if ans.price is not None:
        cols.append(Column("cost", "cost", fmt_count))
    if len({r["grad_dtype"] for r in ans.frontier}) > 1:
        cols.insert(4, Column("grad", "grad_dtype", justify="left", priority=5))
    key = ("strategy", "devices", "batch_per_device", "activation_checkpointing", "grad_dtype")
    cols.append(
        Column("", lambda r: "answer" if all(r[c] == a[c] for c in key) else "", justify="left", label="answer")
    )
    parts.append(Text(""))
    parts.append(
        table(
            ans.frontier,
            cols,
            max_rows=rows,
            title=f"the frontier: {len(ans.frontier)} configurations no other beats on both time and cost, "
            "fastest first",
            caption="Memory per device from simcli.step.memory; days = ceil(samples / global batch) x T_step; cost = "
            "devices x hours x price.",
        )
    )
    return Group(*parts)
