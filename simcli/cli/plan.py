"""`simcli plan`: decision answers on top of the analytic model (max-devices, solve, time-to-train; plan best
in :mod:`simcli.cli.plan_best`, compare in :mod:`simcli.cli.compare`).

The maths lives in :mod:`simcli.decisions.plan` (pure); this
module turns options into scenarios, calls them, and renders the answer with
its reason, the memory check and the command that shows the curve. rich,
matplotlib and the engine's answer modules are imported inside the commands.
"""

from __future__ import annotations

import dataclasses
import shlex
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Group
from rich.text import Text

from ..base.ranges import parse_devices
from ..base.types import InputError
from ..base.units import fmt_count, fmt_time, sig4
from ..io.render import Column, table, time_unit
from . import options as o
from .common import Lazy, LazyGroup, answer, examples, handle_errors, new_app, warn, warn_mfu_fallback
from .views import header_lines

if TYPE_CHECKING:  # pragma: no cover
    from ..step.engine import Scenario


#: the default scan for plan max-devices when the profile sets no limit (cheap: one vectorised simulate)
MAX_SCAN = 100_000

# plan's own options (their meaning is particular to plan)
SolveField = Annotated[
    str,
    typer.Argument(
        metavar="FIELD",
        help="The profile field to solve for, the value that "
        "gives --min-efficiency at --devices K: network[1].bandwidth, "
        "inter_node.bandwidth, network[0].latency, <tier>.efficiency, "
        "device.mfu, device.peak_flops[.bf16], device.reduce_bandwidth.",
    ),
]
MinEfficiency = Annotated[
    Optional[float],
    o.option(
        "--min-efficiency",
        "-e",
        help="Target efficiency E(k) = S(k)/k, 0 < x <= 1 (max-devices, solve; best: a constraint).",
    ),
]
PlanDevices = Annotated[
    Optional[str],
    o.option(
        "--devices",
        "-k",
        help="max-devices: the k to scan "
        "[default: 1..the profile's limit, or 1..100000]; solve: "
        "one k; time-to-train: the k to cost ('8..1024:x2').",
    ),
]
Tolerance = Annotated[
    float,
    o.option(
        "--tolerance",
        help="Relative tolerance on the solved value (bisection in log space stops when the bracket is this narrow).",
    ),
]
Samples = Annotated[Optional[float], o.option("--samples", help="Samples in the whole run (e.g. 1.2e9 images).")]
Tokens = Annotated[
    Optional[float],
    o.option("--tokens", help="Tokens in the whole run for a transformer (samples = tokens / seq_len), e.g. 2e12."),
]
Price = Annotated[
    Optional[float],
    o.option(
        "--price-per-device-hour",
        help="Price of one device for one hour (any currency); gives cost = device-hours x price.",
    ),
]


@dataclasses.dataclass(frozen=True)
class RunOptions(o.OptionGroup):
    """The whole run and its price (plan time-to-train, plan best): --samples or --tokens, --price-per-device-hour."""

    samples: Samples = None
    tokens: Tokens = None
    price_per_device_hour: Price = None


MaxHours = Annotated[Optional[float], o.option("--max-hours", help="Only plans that finish within this many hours.")]
MaxCost = Annotated[
    Optional[float], o.option("--max-cost", help="Only plans that cost at most this (needs --price-per-device-hour).")
]

PartialNodes = Annotated[
    bool,
    o.option(
        "--partial-nodes",
        help="Scan every device count, not only whole nodes past the first (a 9th device alone on a second node "
        "sends every collective through one NIC; see docs/plan.md).",
    ),
]

# compare's options take comma-separated alternatives


# --------------------------------------------------------------------------- helpers


def _curve_command(devices: str, scn: o.ScenarioOptions) -> str:
    """The `simcli speedup` command that shows the curve behind an answer, with the options that were given."""
    parts = ["simcli", "speedup", "--devices", devices]
    for key, v in scn.given().items():
        parts += [f"--{key.replace('_', '-')}"] + ([] if v is True else [str(v)])
    return " ".join(shlex.quote(p) for p in parts)


def _scan_string(res_devices: Any, given: str | None, *extra: int | None) -> str:
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


# --------------------------------------------------------------------------- plan


class _PlanGroup(LazyGroup):
    """plan's own commands, and best and measure, whose modules register them on :data:`plan_app` when imported."""

    lazy = {
        "best": Lazy(
            "plan_best",
            "The fastest (--objective time) or cheapest (cost) configuration that fits, searched jointly over "
            "strategies, device counts and micro-batches at a fixed global batch: the answer, what limits it, the "
            "runner-up, and the time-cost frontier.",
            app="plan_app",
        ),
        "measure": Lazy(
            "plan_measure",
            "Which device counts and message sizes to benchmark on the cluster being sized (nccl-tests in one node, "
            "across 2 nodes and across the most nodes planned; bench step in one node and across 2), each with its "
            "command, what it pins and how much of the band of the predicted step at the range's largest k it "
            "narrows.",
            app="plan_app",
        ),
    }


plan_app = new_app(
    cls=_PlanGroup,
    help="Answer a sizing question: the most devices at an efficiency, the profile value that reaches one, the "
    "time and cost of a whole run, or the best configuration of a grid (plan best); each with the reason (the "
    "dominant term), a memory check and the command that shows the curve. JSON: one object whose key 'answer' "
    "holds the answer.",
    epilog=examples(
        "simcli plan max-devices --min-efficiency 0.9 -p dgx-h100 -m llama2-7b",
        "simcli plan best -m llama2-7b --global-batch 4Mi-tokens --tokens 2e12",
    ),
    no_args_is_help=True,
)


def _plan_start(scn: o.ScenarioOptions, out: o.OutputOptions):
    """The scenario, and its --optimizer: the state the memory check counts and the step priced once per update."""
    o.check_outputs(out)
    sc = scn.build()
    warn_mfu_fallback([sc])
    return sc, sc.optimizer


@plan_app.command(
    "max-devices", epilog=examples("simcli plan max-devices --min-efficiency 0.9 -p dgx-h100 -m llama2-7b")
)
@handle_errors
def plan_max_devices(
    min_efficiency: MinEfficiency = None,
    devices: PlanDevices = None,
    partial_nodes: PartialNodes = False,
    scn: o.ScenarioOptions = o.ScenarioOptions(),
    out: o.OutputOptions = o.OutputOptions(),
) -> None:
    """The largest k whose efficiency stays at or above --min-efficiency (scans every k of --devices that fills
    whole nodes past the first; --partial-nodes scans every one)."""
    from ..decisions import plan as P  # lazy

    sc, mem = _plan_start(scn, out)
    cap = sc.profile.max_devices or MAX_SCAN
    k = parse_devices(devices if devices is not None else f"1..{cap}")
    every = k.size
    if not partial_nodes:
        k = P.whole_nodes(sc, k)
    ans = P.max_devices(sc, k, target=min_efficiency)
    res = ans.to_dict()
    # what was scanned, said: whole nodes past the first (a 9th device alone on a second node is not a plan)
    res["scan"] = "every count" if partial_nodes or k.size == every else "whole nodes past the first"
    nxt = ans.beyond["devices"] if ans.beyond else None
    res["command"] = _curve_command(_scan_string(ans.result.devices, devices, ans.answer, nxt), scn)
    from ..decisions.band_decisions import max_devices_band  # lazy

    res["band"] = max_devices_band(ans)
    _plan_finish(sc, ans, res, optimizer=mem, out=out, devices=[ans.answer] if ans.answer else k)


@plan_app.command("solve", epilog=examples("simcli plan solve inter_node.bandwidth -k 512 -e 0.85 -m bert-large"))
@handle_errors
def plan_solve(
    field: SolveField,
    min_efficiency: MinEfficiency = None,
    devices: PlanDevices = None,
    tolerance: Tolerance = 1e-6,
    scn: o.ScenarioOptions = o.ScenarioOptions(),
    out: o.OutputOptions = o.OutputOptions(),
) -> None:
    """The value of a profile field that gives --min-efficiency at --devices K."""
    from ..decisions import solve as S  # lazy

    sc, mem = _plan_start(scn, out)
    if devices is None:
        raise InputError("--devices: plan solve needs the device count to solve at, for example --devices 256")
    k = parse_devices(devices)
    if len(k) != 1:
        raise InputError(
            f"--devices: {devices!r} gives {len(k)} device counts; plan solve answers for one, "
            "for example --devices 256"
        )
    kk = int(k[0])
    ans = S.solve_field(sc, devices=kk, target=min_efficiency, path=field, rtol=tolerance)
    res = ans.to_dict()
    res["command"] = _curve_command(_scan_string([1, kk], None, kk), scn)
    from ..decisions.band_decisions import solve_band  # lazy

    res["band"] = solve_band(sc, ans)
    _plan_finish(sc, ans, res, optimizer=mem, out=out, devices=[kk])


@plan_app.command(
    "time-to-train",
    epilog=examples("simcli plan time-to-train --tokens 2e12 -k 1024 -m llama2-70b"),
)
@handle_errors
def plan_time_to_train(
    devices: PlanDevices = None,
    whole: RunOptions = RunOptions(),
    max_hours: MaxHours = None,
    max_cost: MaxCost = None,
    scn: o.ScenarioOptions = o.ScenarioOptions(),
    out: o.OutputOptions = o.OutputOptions(),
) -> None:
    """Wall-clock time and cost of a whole run (--samples or --tokens) for each k of --devices."""
    from ..decisions import plan as P  # lazy

    sc, mem = _plan_start(scn, out)
    samples, tokens = whole.samples, whole.tokens
    if (samples is None) == (tokens is None):
        raise InputError("plan time-to-train needs the size of the run: give --samples N or --tokens N (one)")
    if devices is None:
        raise InputError(
            "--devices: plan time-to-train needs the device counts to cost, for example --devices 8..1024:x2"
        )
    k = parse_devices(devices)
    if samples is not None:
        n = samples
    else:
        assert tokens is not None  # one of the two (checked above)
        n = P.samples_from_tokens(sc.workload, tokens)
    ans = P.time_to_train(sc, k, samples=n, price=whole.price_per_device_hour, max_hours=max_hours, max_cost=max_cost)
    res = ans.to_dict()
    if tokens is not None:
        res["tokens"] = tokens
    res["command"] = _curve_command(devices, scn)
    _plan_finish(sc, ans, res, optimizer=mem, out=out, devices=k)


def _plan_finish(
    sc: "Scenario", ans: Any, res: dict[str, Any], *, optimizer: str, out: o.OutputOptions, devices: Any
) -> None:
    from ..decisions.plan import training_memory  # lazy

    mem = training_memory(sc, devices)
    res["memory"] = mem.to_dict()
    res["warnings"] = [] if mem.fits is not False else [mem.message()]
    res["inputs"] = sc.inputs()
    for w in res["warnings"]:
        warn(w)
    answer(out, lambda: _plan_view(sc, ans, res, rows=out.rows), lambda: res, rows=lambda: (_plan_rows(res), []))


def _plan_rows(out: dict[str, Any]) -> list[dict[str, Any]]:
    """CSV of a plan: the per-k table for time-to-train, the crossings for max-devices, one row for solve."""
    q = out["question"]
    if q == "time-to-train":
        ch, fa = out["answer"]["cheapest"]["devices"], out["answer"]["fastest"]["devices"]
        return [
            {**r, "cheapest": r["devices"] == ch, "fastest": r["devices"] == fa, "fits_memory": out["memory"]["fits"]}
            for r in out["rows"]
        ]
    if q == "max-devices":
        base = {
            "answer": out["answer"],
            "target_efficiency": out["target_efficiency"],
            "limited_by": out["limited_by"],
            "fits_memory": out["memory"]["fits"],
        }
        cr = out["crossings"] or [{"previous": None, "devices": None, "direction": None, "efficiency": None}]
        return [{**base, **c} for c in cr]
    keys = (
        "field",
        "devices",
        "target_efficiency",
        "bound",
        "answer",
        "efficiency_at_answer",
        "current",
        "current_efficiency",
        "rtol",
        "at_limit",
    )
    worse = "; ".join(
        f"{w['from']:.6g}..{w['to']:.6g}: E {w['efficiency_from']:.4f} -> {w['efficiency_to']:.4f}"
        for w in out.get("worse_ranges") or []
    )
    return [{**{key: out[key] for key in keys}, "worse_ranges": worse or None, "fits_memory": out["memory"]["fits"]}]


def _plan_view(sc: "Scenario", ans: Any, out: dict[str, Any], *, rows: int) -> Any:
    parts: list[Any] = [Text("\n".join(header_lines(sc)))]
    q = out["question"]
    if q == "max-devices":
        lo, hi, n = ans.scanned
        scan = "" if out.get("scan", "every count") == "every count" else f", {out['scan']}"
        headline = (
            f"answer    k = {ans.answer}: the largest k in {lo}..{hi} ({n:,} counts scanned{scan}) before "
            f"E(k) first falls below {ans.target:g} (E({ans.answer}) = {ans.efficiency:.4f})"
        )
    elif q == "solve":
        headline = f"answer    {ans.statement()}"
        if ans.answer is not None:
            headline += (
                f"\n          solved to a relative tolerance of {ans.rtol:g} ({ans.evaluations} evaluations); "
                f"E({ans.devices}) = {ans.efficiency:.6f} there"
            )
    else:
        c, f = ans.cheapest, ans.fastest
        what = "cost" if ans.price is not None else "device-hours"
        budget = [
            s
            for s in (
                (f"--max-hours {ans.max_hours:g}" if ans.max_hours else ""),
                (f"--max-cost {ans.max_cost:g}" if ans.max_cost else ""),
            )
            if s
        ]
        lines = [
            f"run       {fmt_count(ans.samples)} samples"
            + (f" ({fmt_count(out['tokens'])} tokens)" if out.get("tokens") else "")
            + (f"; price {ans.price:g} per device-hour" if ans.price is not None else "")
            + (f"; within {' and '.join(budget)}" if budget else "")
        ]
        for name, r in (("cheapest", c), ("fastest", f)):
            lines.append(
                f"{name:<9} k = {r['devices']}: {fmt_time(r['time_s'])} ({sig4(r['hours'])} h), "
                f"{fmt_count(r['device_hours'])} device-hours"
                + (f", cost {fmt_count(r['cost'])}" if r["cost"] is not None else "")
                + (f" (least {what})" if name == "cheapest" else "")
            )
        headline = "\n".join(lines)
    parts.append(Text(headline, style="bold"))
    if out.get("band"):  # how sure (simcli.decisions.band_decisions)
        parts.append(Text(f"band      {out['band']['line']}"))
    parts.append(Text(f"why       {ans.reason()}"))
    fits = out["memory"]["fits"]
    parts.append(Text(f"memory    {out['memory']['message']}", style="bold red" if fits is False else ""))
    parts.append(Text(f"curve     {out['command']}"))
    if q == "solve" and out.get("worse_ranges"):
        fmt = ans.field.fmt
        parts.append(Text(""))
        parts.append(
            table(
                out["worse_ranges"],
                [
                    Column("from", "from", fmt, justify="left"),
                    Column("to", "to", fmt, justify="left"),
                    Column("E from", "efficiency_from", lambda v: f"{v:.4f}"),
                    Column("E to", "efficiency_to", lambda v: f"{v:.4f}"),
                    Column("NCCL's picks from", "picks_from", justify="left", priority=2, short="picks from"),
                    Column("to", "picks_to", justify="left", priority=1, label="picks to"),
                ],
                title=f"where a {'larger' if ans.bound != 'maximum' else 'smaller'} {ans.field.path} is worse "
                f"({len(out['worse_ranges'])})",
                caption="Where NCCL's picks differ, its tuner switches to a pair that simcli's cost prices higher "
                "(docs/nccl.md); "
                "'simcli explain' at a value past the range names the cheaper pair and its NCCL_ALGO/NCCL_PROTO.",
                max_rows=rows,
            )
        )
    if q == "max-devices" and out["crossings"]:
        parts.append(Text(""))
        parts.append(
            table(
                out["crossings"],
                [
                    Column("from k", "previous"),
                    Column("to k", "devices"),
                    Column("E crosses", "direction", justify="left"),
                    Column("E(to k)", "efficiency", lambda v: f"{v:.4f}"),
                ],
                title=f"every k where E(k) crosses {ans.target:g} ({len(out['crossings'])})",
                max_rows=rows,
            )
        )
    if q == "time-to-train":
        f_, unit = time_unit([r["t_step_s"] for r in out["rows"]])
        ch, fa = ans.cheapest["devices"], ans.fastest["devices"]

        def mark(r: dict[str, Any]) -> str:
            tags = [
                t
                for t, on in (
                    ("cheapest", r["devices"] == ch),
                    ("fastest", r["devices"] == fa),
                    ("over budget", not r["within_budget"]),
                )
                if on
            ]
            return ", ".join(tags)

        cols = [
            Column("k", "devices"),
            Column("E(k)", "efficiency", lambda v: f"{v:.3f}"),
            Column(f"step {unit}", "t_step_s", lambda v: sig4(v / f_), priority=3),
            Column("samples/s", "samples_per_s", sig4, priority=2),
            Column("time", "time_s", fmt_time),
            Column("device-h", "device_hours", fmt_count, priority=1),
        ]
        if ans.price is not None:
            cols.append(Column("cost", "cost", fmt_count))
        cols.append(Column("", mark, justify="left", label="marker"))
        parts.append(Text(""))
        parts.append(
            table(
                out["rows"],
                cols,
                max_rows=rows,
                caption="time = ceil(samples / samples per step) x T_step; device-hours = k x time; "
                "cost = device-hours x price.",
            )
        )
    return Group(*parts)
