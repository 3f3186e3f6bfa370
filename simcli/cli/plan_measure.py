"""`simcli plan measure`: which device counts and message sizes to benchmark, ranked by how much each narrows the
prediction (simcli.decisions.measure, pure). Registered on :data:`simcli.cli.plan.plan_app`.

The model `bench step` trains in place of the workload is chosen here, from :mod:`simcli.bench.models`' counts (no
torch): the workload's hidden size, heads and sequence with as many layers as bench step's memory check passes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from rich.console import Group
from rich.text import Text

from ..base.ranges import parse_devices
from ..base.types import InputError
from ..base.units import fmt_bytes, fmt_time
from ..bench import models as bm
from ..decisions.measure import StepModel, measure_plan
from ..io.render import Column, labelled, table
from . import options as o
from .common import answer, examples, handle_errors, warn_mfu_fallback
from .plan import PartialNodes, PlanDevices, plan_app
from .views import header_lines

if TYPE_CHECKING:  # pragma: no cover
    from ..decisions.measure import MeasurePlan, StepModel
    from ..step.engine import Scenario

MaxNodes = Annotated[
    int,
    o.option(
        "--max-nodes",
        min=1,
        metavar="N",
        help="The most nodes one planned measurement takes; a range past it is extrapolated from that many.",
    ),
]

#: the share of a device's memory a bench step model may take (bench step refuses past all of it)
STEP_MEMORY_SHARE = 0.8
#: bench step's attention head size when the workload gives none (Llama 2 and GPT-2: 128 and 64)
HEAD_DIM = 128


@plan_app.command(
    "measure",
    epilog=examples(
        "simcli plan measure -p dgx-h100 -m llama2-7b --strategy fsdp -k 8..1024:x2",
        "simcli plan measure -m bert-large -k 8..256:x2 -f json",
    ),
)
@handle_errors
def plan_measure(
    devices: PlanDevices = None,
    max_nodes: MaxNodes = 8,
    partial_nodes: PartialNodes = False,
    scn: o.ScenarioOptions = o.ScenarioOptions(),
    out: o.OutputOptions = o.OutputOptions(),
) -> None:
    """Which device counts and message sizes to benchmark on the cluster being sized (nccl-tests in one node,
    across 2 nodes and across the most nodes planned; bench step in one node and across 2), each with its command,
    what it pins and how much of the band of the predicted step at the range's largest k it narrows."""

    o.check_outputs(out)
    sc = scn.build()
    warn_mfu_fallback([sc])
    if devices is None:
        raise InputError(
            "--devices: plan measure needs the device counts being sized, for example --devices 8..1024:x2"
        )
    k = parse_devices(devices)
    plan = measure_plan(sc, k, step_model=step_model(sc), max_nodes=max_nodes, partial_nodes=partial_nodes)
    res = plan.to_dict()
    res["inputs"] = sc.inputs()
    answer(out, lambda: _view(sc, plan), lambda: res, rows=lambda: ([_csv_row(m) for m in res["answer"]], []))


def step_model(sc: "Scenario") -> "StepModel":
    """The model `bench step` trains for the workload: a transformer's shape with the layers that fit, ResNet-50
    for a CNN, else an MLP of the workload's parameters (as many as fit)."""

    w = sc.workload
    dtype = sc.compute_dtype if sc.compute_dtype in bm.DTYPES else "bf16"
    cap = (sc.profile.device.memory_bytes or 80e9) * STEP_MEMORY_SHARE
    b = max(1, int(sc.batch_per_device or w.batch_per_device or 1)) if not sc.strong else 1
    if w.hidden and w.layers and w.seq_len and w.vocab:
        heads = max(1, w.hidden // HEAD_DIM)
        while w.hidden % heads:
            heads -= 1
        layers = w.layers
        while layers > 1 and bm.memory_estimate(_gpt(bm, w, layers, heads=heads), b) > cap:
            layers -= 1
        args: tuple[str, ...] = (
            "--model",
            "gpt",
            "--layers",
            str(layers),
            "--hidden",
            str(w.hidden),
            "--heads",
            str(heads),
        )
        args += ("--seq-len", str(w.seq_len), "--vocab", str(w.vocab), "--dtype", dtype)
        kept = "all its" if layers == w.layers else f"{layers} of its {w.layers}"
        return StepModel(
            args,
            f"bench step trains {w.name}'s hidden size, heads and sequence with {kept} layers (what fits its fp32 "
            "DDP step), so the matmuls, and the MFU, are the model's",
            dtype,
        )
    if w.family == "cnn":
        args = ("--model", "resnet", "--model-width", "64", "--blocks", "3,4,6,3", "--image-size", "224")
        args += ("--classes", "1000", "--dtype", dtype)
        return StepModel(args, "bench step trains ResNet-50's shape, the CNN it builds", dtype)
    n = min(float(w.params), cap / 16.0)
    args = ("--model", "mlp", "--params", f"{n:.4g}", "--dtype", dtype)
    return StepModel(args, "bench step trains an MLP of the workload's parameters: its MFU is a stand-in", dtype)


def _gpt(bm: Any, w: Any, layers: int, *, heads: int) -> Any:
    return bm.ModelSpec(kind="gpt", layers=layers, hidden=w.hidden, heads=heads, seq_len=w.seq_len, vocab=w.vocab)


def _csv_row(m: dict[str, Any]) -> dict[str, Any]:
    """One CSV row per measurement; the sizes and pins joined with '; '."""
    return {
        "rank": m["rank"],
        "what": m["what"],
        "devices": m["devices"],
        "nodes": m["nodes"],
        "sizes": "; ".join(f"{s['bytes']} B {s['what']}" for s in m["sizes"]) or None,
        "command": m["command"],
        "alternative": m["alternative"],
        "pins": "; ".join(m["pins"]),
        "narrows": m["narrows"],
        "why": m["why"],
    }


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _view(sc: "Scenario", plan: "MeasurePlan") -> Any:
    kt, t = plan.target, plan.t_step_s
    parts: list[Any] = [Text("\n".join(header_lines(sc)))]
    split = ", ".join(f"{r['term']} {fmt_time(r['seconds'])} ({_pct(r['share'])})" for r in plan.terms)
    lo = min(r["t_step_lo_s"] for r in plan.terms)
    hi = max(r["t_step_hi_s"] for r in plan.terms)
    lines = [
        ("target", f"k = {kt} (the range's largest): T_step {fmt_time(t)} = {split}"),
        ("band", f"T_step {fmt_time(lo)}..{fmt_time(hi)} at k = {kt}, each term alone at its band's ends (below)"),
        ("knee", plan.knee["words"]),
    ]
    lines += [("note", n) for n in plan.notes]
    parts.append(labelled(lines))
    parts.append(Text(""))
    parts.append(
        table(
            list(plan.terms),
            [
                Column("term", "term", justify="left"),
                Column("at k", "seconds", fmt_time, short="time"),
                Column("share", "share", _pct, priority=2),
                Column("band of T_step", "narrows", _pct, short="band"),
                Column("pinned by", "pinned_by", justify="left", priority=1),
            ],
            title=f"the step at k = {kt}, term by term",
            caption="band of T_step: (T_step at the term's high end - at its low end) / T_step; slowest of k: "
            "the wait beyond the one in the measured speed (negative below the k it was measured at); -f json: "
            "what each band is read from.",
        )
    )
    parts.append(Text(""))
    parts.append(
        table(
            [m.to_dict() for m in plan.measurements],
            [
                Column("#", "rank"),
                Column("measurement", "what", justify="left"),
                Column("k", "devices"),
                Column("nodes", "nodes", priority=2),
                Column("narrows", "narrows", _pct),
                Column("pins", lambda r: "; ".join(r["pins"]), justify="left", priority=1, label="pins"),
            ],
            title="measurements, ranked by the share of T_step's band each pins",
        )
    )
    for m in plan.measurements:
        parts.append(Text(""))
        parts.append(Text(f"{m.rank}. {m.what}, k = {m.devices} ({m.where})", style="bold"))
        rows = [("run", m.command)]
        if m.alternative:
            rows.append(("or", m.alternative))
        model = [s for s in m.sizes if s["kind"] == "model"]
        if model:
            rows.append(("sizes", "; ".join(f"{fmt_bytes(s['bytes'])} ({s['what']})" for s in model)))
        rows.append(("pins", "; ".join(m.pins)))
        rows.append(("why", m.why))
        parts.append(labelled(rows))
    return Group(*parts)
