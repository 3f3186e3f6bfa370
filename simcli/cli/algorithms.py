"""`simcli algorithms` (which all-reduce algorithm wins where) and `simcli explain` (every term for one k).

Also the explanation view that `simcli speedup --explain` prints.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from . import options as o
from .app import CONTEXT, app, emit, handle_errors, show

__all__ = ["explain_view", "algorithms", "explain"]

#: short names for the winner grid
SHORT = {"ring": "ring", "tree": "tree", "recursive-doubling": "rd", "rabenseifner": "rab",
         "hierarchical": "hier", "ps": "ps", "ps-sharded": "ps-sh"}


def explain_view(d: dict[str, Any]) -> Any:
    """A rich renderable of :func:`simcli.explain.explain`'s terms."""
    from rich.console import Group
    from rich.text import Text

    from ..render import Column, kv_table, table
    from ..units import fmt_bytes, fmt_rate, fmt_time

    def t(x: float | None) -> str:
        return "-" if x is None else fmt_time(x)

    k = d["devices"]
    rows = [
        ("devices k", str(k)),
        ("algorithm", f"{d['algorithm']}: {d['formula']}"),
        ("forward", t(d["t_forward_s"])),
        ("backward", t(d["t_backward_s"]) + (f" ({d['accum']} micro-steps; the last one's backward hides "
                                             "communication)" if d["accum"] > 1 else "")),
        ("T_compute", t(d["t_compute_s"])),
    ]
    for m in d["messages"]:
        rows.append(("all-reduce", f"{m['count']} x {fmt_bytes(m['bytes'], binary=False)} with {m['algorithm']}: "
                                   f"{t(m['time_s'])} each (latency {t(m['latency_s'])}, bandwidth "
                                   f"{t(m['bandwidth_s'])}, reduction {t(m['reduction_s'])})"))
    rows += [
        ("latency terms", t(d["t_latency_s"])),
        ("bandwidth terms", t(d["t_bandwidth_s"])),
        ("reduction term", t(d["t_reduction_s"]) + ("" if d["t_reduction_s"] else
                                                   " (the profile gives no device.reduce_bandwidth)")),
        ("T_comm (total)", t(d["t_comm_s"])),
        ("hidden by overlap", t(d["t_comm_hidden_s"]) + f"  (overlap {d['overlap']})"),
        ("exposed", t(d["t_comm_exposed_s"])),
        ("T_step", f"{t(d['t_step_s'])} = T_compute + exposed"),
        ("speedup S(k)", f"{d['speedup']:.4g}   E(k) = {d['efficiency']:.4g}"),
        ("bottleneck tier", str(d["bottleneck"] or "-") + (f" (B = {fmt_rate(d['bus_Bps'])}, α = "
                                                          f"{t(d['alpha_s'])})" if d["bus_Bps"] else "")),
    ]
    if d["n_star_bytes"] is not None:
        rows.append(("crossover n*", f"{fmt_bytes(d['n_star_bytes'], binary=False)}: latency = bandwidth terms; "
                                     f"the {fmt_bytes(d['message_bytes'], binary=False)} message is "
                                     + ("latency-bound" if d["latency_bound"] else "bandwidth-bound")))
    cols = [Column("tier", "tier", justify="left"), Column("spanned", lambda r: "yes" if r["spanned"] else "no"),
            Column("per", "per", justify="left"), Column("α", "alpha_s", fmt_time),
            Column("ring B", "ring_bandwidth_Bps", fmt_rate), Column("link B", "link_bandwidth_Bps", fmt_rate),
            Column("latency term", "latency_term_s", fmt_time),
            Column("bandwidth term", "bandwidth_term_s", fmt_time)]
    parts = [kv_table(rows, title=f"explain: k = {k}"), Text(""),
             table(d["tiers"], cols, caption="Per-tier terms of the step's all-reduces (they add up to the latency "
                                              "and bandwidth terms). ring B: what a domain offers a ring; link B: "
                                              "each device's share when all send at once.")]
    return Group(*parts)


@app.command(context_settings=CONTEXT)
@handle_errors
def algorithms(
    devices: o.Devices = "2..1024:x2",
    size: Annotated[str, typer.Option("--size", "-s", help="Message sizes with units: '1KiB..4GiB:x4', "
                                      "'32MiB,1GiB'.")] = "1KiB..4GiB:x4",
    profile: o.Profile = None,
    format: o.FormatOpt = o.Format.table,
    output: o.Output = None,
    force: o.Force = False,
    plot: o.PlotFile = None,
    dpi: o.Dpi = o.DPI,
    width: o.Width = o.WIDTH,
    height: o.Height = None,
) -> None:
    """Which all-reduce algorithm is fastest at each (k, message size), and the crossover sizes."""
    import numpy as np

    from .. import collectives
    from ..profiles import resolve_profile
    from ..ranges import parse_devices, parse_sizes

    fig_size = o.check_outputs(output, force, plot, dpi, width, height)
    k = parse_devices(devices)
    n = parse_sizes(size)
    prof = resolve_profile(profile)
    net = prof.network
    collectives.check_devices(net, k)
    gamma = prof.device.reduce_Bps
    names = list(collectives.ALGORITHMS)
    times = np.stack([collectives.allreduce(a, net, k[:, None], n[None, :], gamma).time for a in names])
    win = np.argmin(times, axis=0)
    if plot:
        from .plot import draw_algorithm_map

        draw_algorithm_map(prof, k, n, names, win, plot, force, fig_size)
    cross = collectives.crossovers(net, k, float(n.min()), float(n.max()), gamma)
    grid = []
    for i, kk in enumerate(k.tolist()):
        for j, nn in enumerate(n.tolist()):
            rec = {"devices": kk, "bytes": int(nn), "fastest": names[int(win[i, j])],
                   "time_s": float(times[win[i, j], i, j])}
            rec.update({f"{a}_s": float(times[x, i, j]) for x, a in enumerate(names)})
            grid.append(rec)
    if format is o.Format.json:
        from ..output import to_json

        emit(to_json({"profile": prof.name, "grid": grid, "crossovers": cross}), output, force)
        return
    if format is o.Format.csv:
        from ..output import to_csv

        emit(to_csv(grid), output, force)
        return
    from rich.console import Group
    from rich.text import Text

    from ..render import Column, table
    from ..units import fmt_bytes

    rows = [{"size": fmt_bytes(nn), **{str(kk): SHORT[names[int(win[i, j])]] for i, kk in enumerate(k.tolist())}}
            for j, nn in enumerate(n.tolist())]
    cols = [Column("size \\ k", "size")] + [Column(str(kk), str(kk), justify="left") for kk in k.tolist()]
    legend = ", ".join(f"{v} = {a}" for a, v in SHORT.items())
    crows = [{"devices": c["devices"], "bytes": c["bytes"], "change": f"{c['from']} -> {c['to']}"} for c in cross]
    ctab = table(crows, [Column("k", "devices"), Column("crossover size", "bytes", lambda v: fmt_bytes(v)),
                         Column("fastest changes", "change", justify="left")],
)
    ctab = Group(ctab, Text("Crossover: where two algorithms' costs are equal (each is L + s·n, so it is exact)."))
    head = Text(f"fastest all-reduce per (k, size), profile {prof.name} ({prof.device.name})")
    show(Group(head, Text(""), table(rows, cols), Text(legend), Text(""),
               ctab if crows else Text("no crossovers in this size range")), output, force)


@app.command(context_settings=CONTEXT)
@handle_errors
def explain(
    devices: Annotated[int, typer.Option("--devices", "-k", help="The one device count to explain.")] = 8,
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
) -> None:
    """Every term of the step on k devices: forward, backward, each tier's terms, T_comm, hidden, exposed, n*."""
    from ..explain import explain as explain_terms
    from ..model import InputError

    o.check_outputs(output, force)
    if devices < 1:
        raise InputError(f"--devices: {devices} must be at least 1")
    sc = o.build_scenario(profile=profile, model=model, params=params, flops_per_sample=flops_per_sample,
                          compute_time=compute_time, workload=workload, seq_len=seq_len,
                          batch_per_device=batch_per_device, global_batch=global_batch, dtype=dtype,
                          grad_dtype=grad_dtype, mfu=mfu, algorithm=algorithm, overlap=overlap,
                          bucket_mb=bucket_mb, accum=accum)
    d = explain_terms(sc, devices)
    if format is o.Format.table:
        show(explain_view(d), output, force)
        return
    from ..output import to_csv, to_json

    if format is o.Format.json:
        emit(to_json(d), output, force)
    else:
        emit(to_csv(_flat_terms(d)), output, force)


def _flat_terms(d: dict[str, Any]) -> list[dict[str, Any]]:
    """term,value rows of an explanation (for --format csv)."""
    rows = []
    for key, v in d.items():
        if key == "inputs":
            rows += [{"term": f"inputs.{a}", "value": b} for a, b in v.items()]
        elif key == "tiers":
            for tier in v:
                rows += [{"term": f"tiers.{tier['tier']}.{a}", "value": b} for a, b in tier.items() if a != "tier"]
        elif key in ("messages", "timeline"):
            for i, m in enumerate(v):
                rows += [{"term": f"{key}[{i}].{a}", "value": b} for a, b in m.items()]
        else:
            rows.append({"term": key, "value": v})
    return rows
