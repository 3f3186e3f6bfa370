"""Tables for the terminal: headers that name every input, a time unit picked per table."""

from __future__ import annotations

import math
from typing import Any, Sequence

from rich.console import Group, RenderableType
from rich.text import Text

from ..base.types import (
    DTYPE_BYTES,
    NCCL_DEFAULT_SHORT,
    NCCL_DEFAULT_WHY,
    NCCL_TABLES_VERSION,
    TUNED_LIBRARIES,
    Profile,
)
from ..base.units import fmt_bytes, fmt_count, fmt_flops, fmt_rate, fmt_time
from ..base.units import sig4 as _g
from ..comm import rccl
from ..comm.bands import UNMEASURED
from ..comm.specs import COLLECTIVES
from ..io.render import Column, kv_table, labelled, table, time_unit
from ..step.engine import Result, Scenario, fsdp_units
from ..step.memory import PARTS, describe_parts
from ..step.straggler import expected_max
from ..step.strategies import SPECS
from ..step.update import describe


def _num(fmt: str):
    return lambda v: format(v, fmt)


def communicated(sc: Any, sizes: bool = True) -> str:
    """What a step communicates and how it overlaps, as simulated: the one text that headers, picture titles and
    plan's answers use (DDP's all-reduce in buckets, ZeRO's reduce-scatter and all-gather, FSDP's per-unit ones)."""
    w = sc.workload

    def size(n: float, dtype: str) -> str:
        return f"{fmt_bytes(n, binary=False)} ({dtype})" if sizes else dtype

    grads = size(sc.grad_bytes, sc.grad_dtype)
    params = size(w.params * DTYPE_BYTES[sc.param_dtype], sc.param_dtype)
    acc = f"; {sc.accum} micro-steps per optimizer step" if sc.accum > 1 else ""
    none = sc.overlap == "none"
    spec = SPECS[sc.strategy]
    if spec.timeline == "buckets":
        how = "after backward (no overlap)" if none else f"in {sc.bucket_mb:g} MiB buckets during backward"
        return f"DDP: {grads} gradients all-reduced with {sc.algorithm} {how}{acc}"
    if spec.timeline == "zero":
        how = "after backward" if none else "in buckets during backward"
        return (
            f"{spec.label}: {grads} gradients reduce-scattered {how}, {params} parameters all-gathered "
            f"after the step, with {sc.algorithm}{acc}"
        )
    group = "over k" if spec.group == "world" else f"in groups of {sc.shard_group or sc.profile.node_size}"
    how = "one after another (no overlap)" if none else "prefetched one unit ahead"
    return (
        f"{spec.label} {group}: {params} parameters all-gathered per unit {how}, {grads} gradients "
        f"reduce-scattered" + (", all-reduced across groups" if spec.replicas else "") + f", with "
        f"{sc.algorithm}{acc}"
    )


def header_lines(sc: Scenario) -> list[str]:
    """The block above a plan's answer: the profile, the model and batch, what is communicated, the compute."""
    p, w = sc.profile, sc.workload
    batch = (
        f"global batch {sc.batch} split over k (strong scaling)"
        if sc.strong
        else f"batch {sc.batch} per device (weak scaling)"
    )
    lines = [
        f"profile   {p.name}: {p.device.name} ({p.origin})",
        f"model     {w.name}: {fmt_count(w.params)} params"
        + (f", seq_len {w.seq_len}" if w.seq_len else "")
        + f"; {batch}",
        ("gradient  " if sc.strategy == "ddp" else "strategy  ") + communicated(sc),
    ]
    if sc.compute_time_s is None:
        lines.append(
            f"compute   {sc.compute_dtype} at {fmt_flops(sc.achieved_flops)} per device "
            f"(peak x mfu {sc.achieved_mfu:g})"
        )
    return lines


def scenario_header(res: Result) -> Any:
    """The block above a speedup table: every input, one labelled line each, wrapped at word boundaries."""

    return labelled([(line[:9].rstrip(), line[10:]) for line in _header_lines(res)])


def _header_lines(res: Result) -> list[str]:
    sc = res.scenario
    p, w = sc.profile, sc.workload
    inp = sc.inputs()
    lines = [
        f"profile   {p.name}: {p.device.name} ({p.origin})",
        f"model     {w.name}: {fmt_count(w.params)} params" + (f", seq_len {w.seq_len}" if w.seq_len else ""),
        "batch     "
        + (
            f"global {sc.batch} split over k (strong scaling)" if sc.strong else f"{sc.batch} per device (weak scaling)"
        ),
        f"gradient  {fmt_bytes(sc.grad_bytes, binary=False)} ({sc.grad_dtype}) all-reduced with {sc.algorithm}"
        if sc.strategy == "ddp"
        else f"gradient  {fmt_bytes(sc.grad_bytes, binary=False)} ({sc.grad_dtype}) reduce-scattered, parameters "
        f"{fmt_bytes(w.params * DTYPE_BYTES[sc.param_dtype], binary=False)} ({sc.param_dtype}) all-gathered, with "
        f"{sc.algorithm}",
    ]
    k0 = sc.reference_k
    if sc.compute_time_s is not None:
        where = "on one device" if k0 == 1 else f"at k = {k0} (--compute-time-at-k)"
        lines.append(f"compute   measured {fmt_time(sc.compute_time_s)} per step {where} (--compute-time)")
    else:
        mfu, src, _ = sc.mfu_choice
        assert w.flops_per_sample is not None  # a scenario without --compute-time has FLOPs (checked on creation)
        lines.append(
            f"compute   {fmt_count(w.flops_per_sample)}FLOP/sample / ({fmt_flops(inp['peak_flops'])} "
            f"{sc.compute_dtype} peak x mfu {mfu:g} = {fmt_flops(sc.achieved_flops)}; mfu: {src}"
            + (f", measured at k = {k0})" if k0 > 1 else ")")
        )
    sigma, given = sc.spread_and_source
    if sigma:
        excess = f" / (1 + σ·m_{k0})" if k0 > 1 else ""  # the compute speed measured at k0 holds that wait
        lines.append(
            f"devices   speed spread σ = {sigma:.3g} ({given}): a step waits for the slowest of k, "
            f"T_compute x (1 + σ·m_k){excess}, m_k = E[max of k normals]"
        )

    lines.append(f"update    {describe(sc)}")  # simcli.step.update
    tiers = ", ".join(
        f"{t.name} {fmt_rate(t.bandwidth_Bps)}/{t.per} x{t.efficiency:g}, α {fmt_time(t.latency_s)}"
        + (f", {t.size}/domain" if t.size else "")
        for t in p.network
    )
    lines.append(f"network   {tiers}" + (f"; {release_words(p, short=True)}" if release_words(p) else ""))
    from ..decisions.explain_terms import formula  # lazy

    if sc.algorithm == "auto":
        lines.append(
            "T_comm    = the fastest of every algorithm simcli models, per k (columns 'algorithm', "
            "'protocol'); no single library reaches it"
        )
    else:
        lines.append(
            f"T_comm    = {formula(str(sc.algorithm), p.library)}"
            + (f"; protocol forced: {sc.protocol}" if sc.protocol else "")
        )
    acc = f"; accum {sc.accum} micro-steps per all-reduce" if sc.accum > 1 else ""
    if SPECS[sc.strategy].timeline != "buckets":
        lines += _sharding_lines(res)
    elif sc.overlap == "buckets":
        lines.append(
            f"overlap   DDP buckets of {sc.bucket_mb:g} MiB reduced during backward "
            f"({sc.backward_fraction:.3g} of compute); T_step = T_compute + exposed T_comm + T_update{acc}"
        )
    else:
        lines.append(f"overlap   none: one all-reduce after backward; T_step = T_compute + T_comm + T_update{acc}")
    return lines


def _sharding_lines(res: Result) -> list[str]:
    """The header of a sharded strategy (simcli.step.sharding): what is gathered and reduced, how it overlaps."""

    sc = res.scenario
    L = fsdp_units(sc)
    acc = f"; each of the {sc.accum} micro-steps communicates" if sc.accum > 1 else ""
    spec = SPECS[sc.strategy]
    if spec.timeline == "zero":
        what = (
            f"{sc.strategy}: reduce-scatter in buckets of 5e8 elements (DeepSpeed's) during backward, one "
            "all-gather of the parameters after the step"
        )
        how = "the reduce-scatters as DDP's buckets during backward, the all-gather after the step exposed"
    else:
        group = "over k" if spec.group == "world" else f"in groups of {sc.shard_group or sc.profile.node_size}"
        gathers = "forward and backward" if sc.reshard_after_forward else "forward"
        what = f"{sc.strategy} {group}, {L} units: all-gather before {gathers}, reduce-scatter after backward" + (
            ", all-reduce across groups" if spec.replicas else ""
        )
        how = "all-gathers one unit ahead, reduce-scatters one unit behind; the first all-gather exposed"
    if sc.overlap == "none":
        how = how.replace("the reduce-scatters as DDP's buckets during backward", "one reduce-scatter after backward")
    cap = sc.profile.device.memory_bytes
    assert res.memory is not None  # simulate counts every step's memory
    mem = (
        f"memory    {fmt_bytes(float(res.memory.total[0]), binary=False)} per device at k = {int(res.devices[0])}"
        + (
            f", {fmt_bytes(float(res.memory.total[-1]), binary=False)} at k = {int(res.devices[-1])}"
            if len(res.devices) > 1
            else ""
        )
        + (f" (device: {fmt_bytes(cap, binary=False)})" if cap else "")
    )
    return [f"strategy  {what}", f"overlap   {how}; T_step = T_compute + exposed T_comm + T_update{acc}", mem]


def speedup_table(res: Result, max_rows: int = 40, total: int | None = None) -> Group:
    """``total``: the number of k asked for when ``res`` holds only the first and last rows shown."""
    recs = res.records()
    f, unit = time_unit(list(res.t_step_s))
    # priority: k, step, S(k), E(k) and samples/s are the answer and never left out; the others go from the
    # highest number down when the terminal is too narrow (render.FitTable), with a line naming them
    cols = [
        Column("k", "devices"),
        Column(f"compute {unit}", "t_compute_s", lambda v: _g(v / f), priority=4, short=f"comp {unit}"),
        Column(f"comm {unit}", "t_comm_s", lambda v: _g(v / f), priority=5),
        Column(f"exposed {unit}", "t_comm_exposed_s", lambda v: _g(v / f), priority=3, short=f"exp {unit}"),
        Column(f"step {unit}", "t_step_s", lambda v: _g(v / f)),
        Column("S(k)", "speedup", _num(".2f")),
        Column("E(k)", "efficiency", _num(".3f")),
        # how sure (simcli.step.band): the band parts are the first columns a narrow terminal leaves out
        Column("E(k) band", lambda r: _step_band(r, "efficiency", 2), priority=10, short="E band"),
        Column("samples/s", "samples_per_s", _g),
        Column("samples/s band", lambda r: _step_band(r, "samples_per_s", 0), priority=11, short="band"),
        Column("bottleneck GB/s", "bottleneck_GBps", _num(".4g"), priority=9, short="bn GB/s"),
        Column("bottleneck", "bottleneck", justify="left", priority=6),
    ]
    if res.scenario.algorithm in _PER_ROW or res.scenario.profile.library in TUNED_LIBRARIES:  # rccl hook
        cols.append(Column("algorithm", "algorithm", justify="left", priority=7))
    if res.scenario.profile.library in TUNED_LIBRARIES or res.scenario.algorithm == "auto":  # rccl hook
        cols.append(Column("proto", "protocol", lambda v: v or "-", justify="left", priority=8))
    if res.scenario.strong:
        cols.insert(1, Column("batch/device", "batch_per_device", _num(".4g"), priority=2, short="b/dev"))
    if SPECS[res.scenario.strategy].timeline != "buckets":
        cols.append(Column("mem GB", "memory_bytes", lambda v: _g(v / 1e9), priority=2))
    n = total if total is not None else len(recs)
    t = table(
        recs,
        cols,
        max_rows=max_rows,
        total=n,
        caption=f"Times in {unit}. S(k) speedup, E(k) = S(k)/k efficiency; bands: the communication's p10-p90 and "
        "σ's range together, held to the training runs' (docs/model.md#how-sure-is-a-step); bottleneck GB/s: the "
        "bandwidth of the bottleneck tier (GB/s = 1e9 B/s; not nccl-tests' busbw)."
        + (f" {n} rows; --format csv or json holds every row." if max_rows and n > max_rows else ""),
    )
    return Group(scenario_header(res), Text(""), t)


def _step_band(r: dict[str, Any], key: str, digits: int) -> str | None:
    """``(lo–hi)`` of a speedup record's band (simcli.step.band), the low end rounded down and the high end up so
    that the band shown holds the value shown; E(k) to ``digits`` decimals, samples/s to 3 significant figures."""

    lo, hi = r.get(f"{key}_lo"), r.get(f"{key}_hi")
    if lo is None or hi is None:
        return None
    if key == "efficiency":
        q = 10.0**digits
        return f"({math.floor(lo * q) / q:.{digits}f}–{math.ceil(hi * q) / q:.{digits}f})"
    return f"({_sig_down(lo)}–{_sig_up(hi)})"


def _sig_down(v: float, up: bool = False) -> str:
    """``v`` to 3 significant figures, rounded down (up with ``up``), as sig4 writes numbers."""

    if v <= 0:
        return _g(v)
    q = 10.0 ** (math.floor(math.log10(v)) - 2)
    return _g((math.ceil(v / q) if up else math.floor(v / q)) * q)


def _sig_up(v: float) -> str:
    return _sig_down(v, up=True)


def release_words(profile: Profile, short: bool = False) -> str:
    """The NCCL release that prices a profile, as a header says it: 'NCCL 2.29.7 (the default: what torch 2.13's
    CUDA wheels install)' (``short``: 'NCCL 2.29.7 (the default: torch 2.13's)'), or 'nccl.version 2.28.9' for
    another; for RCCL the row that prices it ('RCCL 2.21.5'); '' where neither tuner prices it."""
    if profile.nccl is None or profile.library not in ("nccl", "rccl"):
        return ""
    plugin = ", its platform's tuner plugin choosing" if profile.nccl.tuner == "fastest" else ""
    if profile.library == "rccl":
        return f"RCCL {rccl.release(profile.nccl).version}{plugin}"
    v = profile.nccl.version
    why = NCCL_DEFAULT_SHORT if short else NCCL_DEFAULT_WHY
    return (f"NCCL {v} (the default: {why})" if v == NCCL_TABLES_VERSION else f"nccl.version {v}") + plugin


#: explain's row where a platform's tuner plugin replaces NCCL's choice (nccl.tuner: fastest)
PLUGIN_WORDS = (
    "the platform's tuner plugin replaces NCCL's tuner (nccl.tuner: fastest): the pair simcli's cost prices "
    "fastest (docs/nccl.md#tuner-plugins)"
)


#: algorithms that choose per k and size, so the table shows what they chose
_PER_ROW = ("auto", "nccl")


def _unmeasured(r: dict[str, Any]) -> bool:
    return str(r.get("band_basis") or "").startswith(UNMEASURED)


def _band(r: dict[str, Any], f: float) -> str | None:
    """``lo–hi`` of a comm record's band in the time column's unit; ``*`` where no published run is of its kind."""
    if r.get("time_lo_s") is None or not r["time_s"]:
        return None
    return f"{_g(r['time_lo_s'] / f)}–{_g(r['time_hi_s'] / f)}" + ("*" if _unmeasured(r) else "")


def comm_table(
    profile: Profile,
    recs: Sequence[dict[str, Any]],
    algorithm: str,
    *,
    max_rows: int = 60,
    collective: str = "all_reduce",
    total: int | None = None,
) -> Group:
    """``total``: the grid's size when ``recs`` holds only the first and last rows shown."""
    f, unit = time_unit([r["time_s"] for r in recs])
    # k, size, time and busbw are the answer (never left out on a narrow terminal); the rest by priority
    cols = [
        Column("k", "devices"),
        Column("size", "bytes", lambda v: fmt_bytes(v)),
        Column("count", "count", priority=8),
        Column("type", "dtype", justify="left", priority=7),
        Column(f"time {unit}", "time_s", lambda v: _g(v / f)),
        Column(f"latency {unit}", "latency_s", lambda v: _g(v / f), priority=3, short=f"lat {unit}"),
        # how sure (simcli.comm.bands): the first column a narrow terminal leaves out
        Column(f"band {unit}", lambda r: _band(r, f), priority=9),
        Column("algbw GB/s", "algbw_GBps", _num(".4g"), priority=4, short="algbw"),
        Column("busbw GB/s", "busbw_GBps", _num(".4g")),
        Column("α %", lambda r: 100 * r["latency_s"] / r["time_s"] if r["time_s"] else None, _num(".0f"), priority=3),
        Column("bottleneck", "bottleneck", justify="left", priority=6),
    ]
    if algorithm in _PER_ROW or profile.library in TUNED_LIBRARIES:  # rccl hook
        cols.append(Column("algorithm", "algorithm", justify="left", priority=2))
    if profile.library in TUNED_LIBRARIES or algorithm == "auto":  # rccl hook
        cols.append(Column("proto", "protocol", lambda v: v or "-", justify="left", priority=5))
    head = Text(
        f"{collective.replace('_', '-')}, {algorithm}, profile {profile.name} ({profile.device.name}); "
        + (f"{release_words(profile)}; " if release_words(profile) else "")
        + f"algbw = size/time, busbw = algbw·{COLLECTIVES[collective].busbw} (nccl-tests)"
    )
    caption = (
        f"Times in {unit}; GB/s = 1e9 B/s; α % = share of the latency terms; band = p10-p90 of published runs of "
        "its kind (docs/nccl.md#how-sure)"
        + ("; * none of its kind: its neighbours' widest." if any(_unmeasured(r) for r in recs) else ".")
    )
    if any(r.get("host_s") for r in recs):
        cols.append(Column("host +", "host_s", lambda v: _g(v / f) if v else "-", priority=1))
        caption += (
            " host +: what the host's launches add (one thread launching on several GPUs, nccl-tests -g;"
            " simcli.comm.nccl.LAUNCH_US each)."
        )
    return Group(
        head,
        Text(""),
        table(
            list(recs),
            cols,
            max_rows=max_rows,
            total=total,
            caption=caption,
        ),
    )


def _overlap_label(d: dict[str, Any]) -> str:
    """What hides the communication in this explanation: DDP's buckets, ZeRO's or FSDP's own overlap, or none."""
    strategy = d.get("strategy") or "ddp"
    timeline = SPECS[strategy].timeline
    if d["overlap"] != "buckets" or timeline == "buckets":
        return f"overlap {d['overlap']}"
    if timeline == "zero":
        return "overlap buckets: reduce-scatter buckets during backward"
    return "overlap buckets: all-gathers one unit ahead, reduce-scatters one unit behind"


def _band_rows(d: dict[str, Any]) -> list[tuple[str, str]]:
    """explain's line on how sure the step is (simcli.step.band): the band and the source that dominates it."""
    b = d.get("band")
    if not b:
        return []
    w = b["efficiency_width_by_source"]
    widths = ", ".join(f"{name} {w[name]:.3f}" for name in ("comm", "spread", "training", "calibration") if name in w)
    head = (
        f"E(k) {b['efficiency_lo']:.3f}–{b['efficiency_hi']:.3f}, T_step {fmt_time(b['t_step_lo_s'])}–"
        f"{fmt_time(b['t_step_hi_s'])}"
    )
    if b["dominant"] is None:
        return [("how sure", head + ": no width (one device, σ taken as given)")]
    return [
        (
            "how sure",
            f"{head}; the widest part from {b['dominant_words']} (E(k)'s band from each alone: {widths}); "
            f"σ {b['spread_range'][0]:.3g}–{b['spread_range'][1]:.3g}: {b['spread_basis']}"
            + (f"; training runs: {b['training_basis']}" if b.get("training_basis") else ""),
        )
    ]


def explain_view(d: dict[str, Any]) -> Any:
    """A rich renderable of :func:`simcli.decisions.explain.explain`'s terms."""

    def t(x: float | None) -> str:
        return "-" if x is None else fmt_time(x)

    k = d["devices"]
    rows = [
        ("devices k", str(k)),
        ("algorithm", f"{d['algorithm']}: {d['formula']}"),
        ("forward", t(d["t_forward_s"])),
        (
            "backward",
            t(d["t_backward_s"])
            + (f" ({d['accum']} micro-steps; the last one's backward hides communication)" if d["accum"] > 1 else ""),
        ),
        ("T_compute", t(d["t_compute_s"])),
    ]
    if d["spread"]:
        k0 = d.get("reference_k", 1)
        rows.append(
            (
                "slowest of k",
                (
                    f"{t(d['t_straggler_s'])} of T_compute waits for the slowest device"
                    if d["t_straggler_s"] >= 0
                    else f"T_compute is {t(-d['t_straggler_s'])} shorter than in the run its speed was measured on "
                    "(fewer devices to wait for)"
                )
                + f": compute x (1 + spread {d['spread']:.3g} x m_{k} {float(expected_max(k)):.3f})"
                + (
                    f" / (1 + spread x m_{k0} {float(expected_max(k0)):.3f}), the wait already in a compute speed "
                    f"measured at k = {k0}"
                    if k0 > 1
                    else ""
                )
                + ", m_k the expected largest of k standard normals (simcli.step.straggler)",
            )
        )
    if d.get("t_update_s") is not None:
        rows.append(("update", f"{t(d['t_update_s'])}: {d.get('update_what', '')}"))
    for m in d["messages"]:
        alg = m["algorithm"] + (f"/{m['protocol']}" if m.get("protocol") else "")
        rows.append(
            (
                m.get("collective", "all-reduce").replace("_", "-"),
                f"{m['count']:g} x {fmt_bytes(m['bytes'], binary=False)} with {alg}: "
                f"{t(m['time_s'])} each (latency {t(m['latency_s'])}, bandwidth "
                f"{t(m['bandwidth_s'])}"
                + (f" of which NVLS pipeline fill {t(m['fill_s'])}" if m.get("fill_s") else "")
                + f", reduction {t(m['reduction_s'])})",
            )
        )
    rows += [
        ("latency terms", t(d["t_latency_s"])),
        ("bandwidth terms", t(d["t_bandwidth_s"])),
        (
            "reduction term",
            t(d["t_reduction_s"]) + ("" if d["t_reduction_s"] else " (the profile gives no device.reduce_bandwidth)"),
        ),
        ("T_comm (total)", t(d["t_comm_s"])),
        ("hidden by overlap", t(d["t_comm_hidden_s"]) + f"  ({_overlap_label(d)})"),
        ("exposed", t(d["t_comm_exposed_s"])),
        ("T_step", f"{t(d['t_step_s'])} = T_compute + exposed + update"),
        ("speedup S(k)", f"{d['speedup']:.4g}   E(k) = {d['efficiency']:.4g}"),
        *_band_rows(d),
        (
            "bottleneck tier",
            str(d["bottleneck"] or "-")
            + (f" (B = {fmt_rate(d['bus_Bps'])}, α = {t(d['alpha_s'])})" if d["bus_Bps"] else ""),
        ),
    ]
    if d.get("nccl_version") == NCCL_TABLES_VERSION:
        rel = d.get("nccl_release") or {}
        against = f"; against {rel['previous']}: {rel['changes']}" if rel.get("previous") else ""
        rows.append(("NCCL release", f"{NCCL_TABLES_VERSION}, the default: {NCCL_DEFAULT_WHY}{against}"))
    elif d.get("nccl_version"):
        rel = d.get("nccl_release") or {}
        against = f"; against {rel['previous']}: {rel['changes']}" if rel.get("previous") else ""
        rows.append(
            (
                "NCCL release",
                f"nccl.version {d['nccl_version']}: its tuner's tables (simcli.comm.releases), priced as "
                f"{rel.get('version', d['nccl_version'])}{against}",
            )
        )
    if d.get("nccl_tuner") == "fastest":
        rows.append(("NCCL's choice", PLUGIN_WORDS))
    if d.get("nccl_defaulted"):
        rows.append(("NCCL constants", "defaulted by GPU generation and link kind: " + ", ".join(d["nccl_defaulted"])))
    kinds = []
    for r in d["tiers"]:
        if r.get("kind_note") and (r.get("defaulted") or d.get("library") == "nccl"):
            kept = [f for f in ("latency", "efficiency") if f in (r.get("defaulted") or [])]
            vals = {"latency": t(r["alpha_s"]), "efficiency": f"{r.get('efficiency', 1.0):g}"}
            kinds.append(
                f"{r['tier']}: {r['kind_note']}"
                + (f" ({', '.join(f'{f} {vals[f]}' for f in kept)}: the kind's defaults)" if kept else "")
            )
    if kinds:
        rows.append(("link kinds", "; ".join(kinds)))
    for r in d.get("nccl_faster") or []:
        pick = r["algorithm"] + (f"/{r['protocol']}" if r["protocol"] else "")
        fast = r["faster_algorithm"] + (f"/{r['faster_protocol']}" if r["faster_protocol"] else "")
        rows.append(
            (
                "NCCL's choice",
                f"the {fmt_bytes(r['bytes'], binary=False)} {r['collective'].replace('_', '-')} runs NCCL's pick "
                f"{pick} ({t(r['time_s'])}); simcli prices {fast} at {t(r['faster_time_s'])}: {r['setting']} "
                f"saves {t(r['saving_s'])} per micro-step before overlap",
            )
        )
    if d["n_star_bytes"] is not None:
        rows.append(
            (
                "crossover n*",
                f"{fmt_bytes(d['n_star_bytes'], binary=False)}: latency = bandwidth terms; "
                f"the {fmt_bytes(d['message_bytes'], binary=False)} message is "
                + ("latency-bound" if d["latency_bound"] else "bandwidth-bound"),
            )
        )
    if "strategy" in d:  # a sharded strategy (simcli.decisions.explain_sharding)
        rows.insert(
            1,
            (
                "strategy",
                f"{d['strategy']}, {d['units']} units; each device sends "
                f"{fmt_bytes(d['comm_bytes'], binary=False)} per step",
            ),
        )
    if "memory" in d:
        mem = d["memory"]
        cap = mem["capacity_bytes"]

        held = describe_parts({p: mem[f"{p}_bytes"] for p in PARTS}, d.get("strategy") or "ddp", d["optimizer"])
        rows.append(
            (
                "memory",
                f"{fmt_bytes(mem['total_bytes'], binary=False)} per device = {held}"
                + (
                    ""
                    if cap is None
                    else f"; {'fits' if mem['fits'] else 'DOES NOT FIT'} in {fmt_bytes(cap, binary=False)}"
                ),
            )
        )
    # the tier and its two terms are the answer (never left out on a narrow terminal); the rest by priority
    cols = [
        Column("tier", "tier", justify="left"),
        Column("spanned", lambda r: "yes" if r["spanned"] else "no", priority=6),
        Column("per", "per", justify="left", priority=5),
        Column("α", "alpha_s", fmt_time, priority=3),
        Column("ring B", "ring_bandwidth_Bps", fmt_rate, priority=2),
        Column("link B", "link_bandwidth_Bps", fmt_rate, priority=7),
        Column("latency term", "latency_term_s", fmt_time, short="latency"),
        Column("bandwidth term", "bandwidth_term_s", fmt_time, short="bandwidth"),
    ]
    if any(r.get("hops") is not None for r in d["tiers"]):
        cols.insert(4, Column("hops", "hops", lambda v: "-" if v is None else f"{v:g}", priority=4))
    parts: list[RenderableType] = [
        kv_table(rows, title=f"explain: k = {k}"),
        Text(""),
        table(
            d["tiers"],
            cols,
            caption="Per-tier terms of the step's all-reduces (they add up to the latency "
            "and bandwidth terms). ring B: what a domain offers a ring; link B: "
            "each device's share when all send at once."
            + (
                " hops: hops of one all-reduce that pay this tier's latency (NCCL's "
                "base latency is charged to the first tier)."
                if any(r.get("hops") is not None for r in d["tiers"])
                else ""
            ),
        ),
    ]
    if d.get("units_timeline"):
        ucols = [
            Column("phase", "phase", justify="left"),
            Column("unit", "unit"),
            Column("gathered", "gather_end_s", t, priority=3),
            Column("compute from", "start_s", t, priority=2, short="from", label="compute from"),
            Column("to", "end_s", t, priority=2, label="compute to"),
            Column("reduced", "reduce_end_s", t, priority=1),
            Column("stall", "wait_s", t),
        ]
        parts += [
            Text(""),
            table(
                d["units_timeline"],
                ucols,
                caption="One micro-step, per unit (first and last units of each phase), seconds "
                "from the phase's start: all-gather done, compute, reduce-scatter done; "
                "stall: compute waiting on communication.",
            ),
        ]
    return Group(*parts)


def flat_terms(d: dict[str, Any]) -> list[dict[str, Any]]:
    """term,value rows of an explanation (for --format csv)."""
    rows = []
    for key, v in d.items():
        if key == "inputs":
            rows += [{"term": f"inputs.{a}", "value": b} for a, b in v.items()]
        elif key == "tiers":
            for tier in v:
                rows += [
                    {"term": f"tiers.{tier['tier']}.{a}", "value": ",".join(b) if isinstance(b, list) else b}
                    for a, b in tier.items()
                    if a != "tier"
                ]
        elif key == "memory":
            rows += [{"term": f"memory.{a}", "value": b} for a, b in v.items()]
        elif key in ("messages", "timeline", "units_timeline", "nccl_faster"):
            for i, m in enumerate(v or []):
                rows += [{"term": f"{key}[{i}].{a}", "value": b} for a, b in m.items()]
        else:
            rows.append({"term": key, "value": v})
    return rows
