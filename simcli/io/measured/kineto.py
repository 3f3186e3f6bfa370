"""Read PyTorch profiler (Kineto) Chrome traces of training steps: per-step compute and the collectives.

``torch.profiler.profile(...).export_chrome_trace(FILE)`` writes ``{"schemaVersion": 1, "distributedInfo":
{"backend", "rank", "world_size", "pg_config": [{"pg_name", "pg_size", "ranks"}, ...]}, "traceEvents": [...]}``
whose complete events (``"ph": "X"``, ``ts`` and ``dur`` in us) this reader uses:

* **steps**: ``ProfilerStep#N`` (``prof.step()`` once per training step; required);
* **backward**: the autograd engine's ``autograd::engine::evaluate_function: ...`` ops; **forward**: from the
  first ``*.forward`` annotation of the step (``DistributedDataParallel.forward``) or, without one, the step's
  start, to the first backward op (the loss included); **optimizer** (the update): ``Optimizer.step#...`` and
  ``Optimizer.zero_grad#...``;
* **collectives on GPU (NCCL)**: kernels (``"cat": "kernel"``) named ``ncclKernel_*`` or ``ncclDevKernel_*``,
  with the collective, element counts, dtype and group size in their args (``Collective name``, ``In msg
  nelems``, ``Out msg nelems``, ``dtype``, ``Group size``, ``Process Group Name``) or in the ``record_param_comms``
  CPU op that launched them (found through the launch's ``correlation``); GPU compute is every other kernel,
  assigned to forward, backward or optimizer by the CPU op that launched it;
* **collectives on CPU (gloo)**: the ``gloo:all_reduce`` (``gloo:broadcast``, ...) events that gloo's worker
  threads record, with ``Input Dims`` and ``Input type``; their communicator's size is distributedInfo's (a
  trace with process groups of several sizes cannot say which one a gloo op ran on, and is refused). CPU
  compute is the forward region and the backward ops less the ``c10d::`` calls inside them.

A collective's bytes are nccl-tests' size: the larger of its input and output element counts times the
element size. How much of it was *hidden* is the part of its interval that overlaps compute (GPU: compute
kernels; CPU: the compute thread's forward and backward); the step's *exposed* communication is the part of the
union of its collectives that no compute overlaps. Names were checked on a trace torch 2.13 wrote (CPU, gloo);
the GPU names follow torch's ``record_param_comms`` metadata and HolisticTraceAnalysis's readers of it.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ...base.types import InputError
from .. import rules
from ..inputs import check_json_depth, json_decoder
from .calls import DTYPE_BYTES, collective_name, files_of, read_log, sniff

__all__ = ["Trace", "Step", "read_trace", "read_traces", "parse_trace", "TORCH_DTYPES"]

_WHAT = "a PyTorch profiler trace (the JSON export_chrome_trace writes), or a directory of one per rank"
#: torch's dtype names (record_param_comms' "dtype", c10 ScalarType) and the profiler's Input type -> simcli's
TORCH_DTYPES = {
    "float": "fp32",
    "float32": "fp32",
    "double": "fp64",
    "float64": "fp64",
    "half": "fp16",
    "float16": "fp16",
    "bfloat16": "bf16",
    "c10::bfloat16": "bf16",
    "c10::half": "fp16",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "int": "int32",
    "int32": "int32",
    "long": "int64",
    "int64": "int64",
    "long int": "int64",
    "short": "int16",
    "char": "int8",
    "signed char": "int8",
    "byte": "uint8",
    "unsigned char": "uint8",
    "bool": "bool",
}
#: NCCL's kernel names, compared lower-cased: ncclKernel_* (older NCCL), ncclDevKernel_* (2.19 on, including
#: ncclDevKernel_Generic, whose name says no collective); some traces spell them in lower case
#: (HolisticTraceAnalysis#208, #247, #360)
_NCCL_KERNEL = ("ncclkernel_", "nccldevkernel_")


def _is_nccl(name: str) -> bool:
    return name.lower().startswith(_NCCL_KERNEL)


_BACKWARD = "autograd::engine::evaluate_function:"
_OPTIMIZER = ("Optimizer.step#", "Optimizer.zero_grad#")
_KERNEL_DTYPES = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "f64": "fp64", "i8": "int8", "u8": "uint8"}


@dataclass(frozen=True)
class Step:
    """One ``ProfilerStep#N`` of one rank; times in seconds."""

    name: str
    start_us: float
    step_s: float
    forward_s: float
    backward_s: float
    optimizer_s: float
    #: the step's collectives in order: collective, bytes, count, dtype, ranks, time_s, hidden_s, exposed_s
    buckets: tuple[dict[str, Any], ...]
    #: the part of the union of the collectives that no compute overlaps
    exposed_s: float
    #: the union of the step's collectives: the wall time with any collective in flight (gloo runs buckets on
    #: several threads at once, so their durations can add up to more)
    comm_s: float = 0.0

    @property
    def compute_s(self) -> float:
        return self.forward_s + self.backward_s

    @property
    def other_s(self) -> float:
        """What the step spent outside compute, exposed communication and the update (data, copies, DDP)."""
        return self.step_s - self.compute_s - self.exposed_s - self.optimizer_s


@dataclass(frozen=True)
class Trace:
    path: str
    rank: int | None
    world_size: int | None
    backend: str | None
    device: str  # "gpu" or "cpu"
    steps: tuple[Step, ...]
    #: every collective call (simcli.io.measured.calls' form) of the trace, in steps or not
    calls: tuple[dict[str, Any], ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: the GPUs' names (deviceProperties), empty on a CPU trace
    devices: tuple[str, ...] = ()


def _distributed(info: dict, source: str) -> tuple[int | None, int | None, list[dict]]:
    """(rank, world size, process groups) of distributedInfo, each against the others (simcli.io.rules): a rank
    inside the world, no group larger than the world, the default group the whole world, a group's ranks its size."""
    where = f"{source}: distributedInfo"
    world = rules.number(info["world_size"], where, "world_size", kind="ranks") if "world_size" in info else None
    rank = rules.number(info["rank"], where, "rank", kind="rank") if "rank" in info else None
    if rank is not None and world is not None and rank >= world:
        raise InputError(f"{where}: rank {rank} of a world of {world} ranks (0 to {world - 1}); the trace is damaged")
    pgs = [g for g in info.get("pg_config") or [] if isinstance(g, dict)]
    for j, g in enumerate(pgs):
        at = f"{where}.pg_config[{j}]"
        if "pg_size" not in g:
            continue
        size = g["pg_size"] = rules.number(g["pg_size"], at, "pg_size", kind="ranks")
        members = g.get("ranks")
        if world is not None and size > world:
            raise InputError(
                f"{at}: pg_size {size} is more than world_size {world}: a process group is part of the world; "
                "the trace is damaged or edited"
            )
        default = g.get("pg_desc") == "default_pg" or str(g.get("pg_name")) == "0"
        if default and world is not None and size != world:
            raise InputError(
                f"{at}: the default group has {size} ranks, but world_size says {world}: the default group is the "
                "whole world; the trace is damaged or edited"
            )
        if isinstance(members, list) and len(members) not in (0, size):
            raise InputError(f"{at}: ranks lists {len(members)} ranks, pg_size says {size}; the trace is damaged")
        for r in members if isinstance(members, list) else []:
            r = rules.number(r, at, "ranks[]", kind="rank")
            if world is not None and r >= world:
                raise InputError(f"{at}: rank {r} of a world of {world} ranks; the trace is damaged or edited")
    return rank, world, pgs


def read_trace(path: str | Path) -> Trace:
    p = Path(path)
    text = read_log(p, _WHAT, 1 << 30)
    return parse_trace(text, str(p))


def read_traces(path: str | Path) -> list[Trace]:
    """Every rank's trace: one file, or every trace file of a directory (ranks told apart by distributedInfo)."""
    files = files_of(path, _WHAT)
    out = []
    for f in files:
        text = read_log(f, _WHAT, 1 << 30)
        if len(files) > 1 and sniff(text) != "kineto":
            raise InputError(f"{f}: not a PyTorch profiler trace (no traceEvents); give only traces in {path}")
        out.append(parse_trace(text, str(f)))
    ranks = [t.rank for t in out]
    dup = {r for r in ranks if r is not None and ranks.count(r) > 1}
    if dup:
        raise InputError(
            f"{path}: rank {min(dup)} has {ranks.count(min(dup))} traces; give one trace per rank (one run)"
        )
    worlds = {t.world_size for t in out if t.world_size is not None}
    if len(worlds) > 1:
        raise InputError(
            f"{path}: the traces say world_size {', '.join(map(str, sorted(worlds)))}: traces of two runs; give one "
            "run's traces"
        )
    if len(files) > 1 and worlds and len(out) < min(worlds):
        have = sorted(r for r in ranks if r is not None)
        rules.suspicious(
            f"{path}: distributedInfo.world_size: {len(out)} traces of a world of {min(worlds)} ranks (ranks "
            f"{', '.join(map(str, have[:8]))}); the slowest rank may be a missing one: give every rank's trace"
        )
    return out


def _num(e: dict, key: str, where: str) -> float:
    v = e.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise InputError(f"{where}: event {e.get('name', '?')!r}: {key} {json.dumps(v)[:30]} is not a number")
    return float(v)


def _union(iv: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _overlap(a: float, b: float, merged: list[tuple[float, float]], *, starts: list[float]) -> float:
    """Length of [a, b] that the sorted disjoint intervals ``merged`` cover."""
    i = max(0, bisect.bisect_right(starts, a) - 1)
    tot = 0.0
    while i < len(merged) and merged[i][0] < b:
        lo, hi = max(a, merged[i][0]), min(b, merged[i][1])
        if hi > lo:
            tot += hi - lo
        i += 1
    return tot


def _length(iv: list[tuple[float, float]]) -> float:
    return float(sum(b - a for a, b in _union(iv)))


def _subtract(iv: list[tuple[float, float]], minus: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out = []
    m = _union(minus)
    for a, b in _union(iv):
        cur = a
        for c, d in m:
            if d <= cur or c >= b:
                continue
            if c > cur:
                out.append((cur, c))
            cur = max(cur, d)
        if cur < b:
            out.append((cur, b))
    return out


def _dims_elements(dims: Any, where: str = "Input Dims") -> int | None:
    """Elements of the tensors in a profiler 'Input Dims' entry: [262144] or [[262144], [1024]] (a tensor list).
    A dimension that is negative, fractional or beyond 2**62 is refused (simcli.io.rules)."""
    if not isinstance(dims, list):
        return None
    if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in dims):
        n = math.prod(rules.number(x, where, "Input Dims", kind="dim") for x in dims)
        return rules.number(n, where, "Input Dims (their product, the elements)", kind="count")
    tot = 0
    for d in dims:
        n = _dims_elements(d, where)
        if n is None:
            return None
        tot += n
    return rules.number(tot, where, "Input Dims (their sum, the elements)", kind="count")


def _dtype(name: Any) -> str | None:
    if not isinstance(name, str) or not name:
        return None
    return TORCH_DTYPES.get(name.strip().lower(), name.strip().lower())


def _kernel_name_meta(name: str) -> tuple[str | None, str | None]:
    """ncclDevKernel_AllReduce_Sum_f32_RING_LL(...) -> ('all_reduce', 'fp32')."""
    body = re.sub(r"^(nccldevkernel_|ncclkernel_)", "", name.split("(")[0], flags=re.IGNORECASE)
    parts = body.split("_")
    coll = collective_name(parts[0]) if parts and parts[0] else None
    dt = next((_KERNEL_DTYPES[x] for x in parts[1:] if x in _KERNEL_DTYPES), None)
    return coll, dt


def _document(text: str, source: str) -> dict[str, Any]:
    """The trace's JSON object with its traceEvents list, read by the strict decoder (a key twice, 31 digits, NaN:
    simcli.io.rules), Kineto's schema version 1."""

    check_json_depth(text, source)  # before json's recursive parser
    try:
        doc = json_decoder(source).decode(text)
    except InputError:
        raise
    except ValueError as e:
        cut = "it ends mid-way (the trace was cut short)" if getattr(e, "pos", 0) >= len(text.rstrip()) - 1 else str(e)
        raise InputError(f"{source}: not valid JSON: {cut}; export the trace again (export_chrome_trace)") from None
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise InputError(f"{source}: no 'traceEvents' list; give {_WHAT}")
    version = doc.get("schemaVersion", 1)
    if version != 1:
        raise InputError(
            f"{source}: schemaVersion {json.dumps(version)[:20]} is not one this reader knows (Kineto writes 1)"
        )
    return doc


def parse_trace(text: str, source: str) -> Trace:
    doc = _document(text, source)
    info = doc.get("distributedInfo")
    if not isinstance(info, dict):
        info = {}
    rank, world, pgs = _distributed(info, source)
    backend = info.get("backend") if isinstance(info.get("backend"), str) else None
    devices = tuple(
        str(d.get("name")) for d in doc.get("deviceProperties") or [] if isinstance(d, dict) and d.get("name")
    )
    events = []
    for i, e in enumerate(doc["traceEvents"]):
        if not isinstance(e, dict) or e.get("ph") != "X" or not isinstance(e.get("name"), str):
            continue
        where = f"{source}: traceEvents[{i}]"
        ts, dur = _num(e, "ts", where), _num(e, "dur", where)
        if dur < 0:
            raise InputError(f"{where}: event {e['name']!r}: dur {dur:g} us is negative")
        events.append((ts, dur, e))
    steps_ev = sorted((x for x in events if x[2]["name"].startswith("ProfilerStep#")), key=lambda x: x[0])
    kernels = [x for x in events if x[2].get("cat") == "kernel"]
    nccl_k = [x for x in kernels if _is_nccl(x[2]["name"])]
    device = "gpu" if kernels else "cpu"
    notes: list[str] = []
    if nccl_k:
        calls_iv = _gpu_calls(nccl_k, events, pgs, world=world, source=source)
    else:
        calls_iv = _cpu_calls(events, pgs, world, source=source)
    for c, a, _ in calls_iv:
        if world is not None and c["ranks"] > world:
            raise InputError(
                f"{source}: a {c['collective']} at ts {a:.0f} of a group of {c['ranks']} ranks in a world of {world} "
                "(distributedInfo.world_size); the trace is damaged or edited"
            )
    if not calls_iv:
        raise InputError(
            f"{source}: no collectives in the trace (no ncclKernel_/ncclDevKernel_ kernels, no gloo: ops); "
            "profile steps of a distributed run (torch.distributed initialised, DDP or FSDP) with "
            "torch.profiler"
        )
    if not steps_ev:
        raise InputError(
            f"{source}: no ProfilerStep#N events, so the trace's steps cannot be told apart; call prof.step() "
            "once per training step inside torch.profiler.profile"
        )
    # instances: the i-th collective of a process group is the same collective on every rank
    seen: dict[Any, int] = {}
    calls = []
    for c, a, b in sorted(calls_iv, key=lambda x: x[1]):
        i = seen.get(c["group"], 0)
        seen[c["group"]] = i + 1
        calls.append({**c, "instance": (c["group"], c.get("seq", i)), "start_us": a, "end_us": b})
    bwd = [(ts, ts + dur) for ts, dur, e in events if e["name"].startswith(_BACKWARD)]
    opt = [(ts, ts + dur) for ts, dur, e in events if e["name"].startswith(_OPTIMIZER)]
    fwd_marks = sorted(ts for ts, dur, e in events if e["name"].endswith(".forward") or e["name"] == "## forward ##")
    phase_of = _gpu_phases(kernels, events) if device == "gpu" else {}
    rules.steps(
        (
            (e["name"], dur * 1e-6, [(c["collective"], c["time_s"]) for c in calls if ts <= c["start_us"] < ts + dur])
            for ts, dur, e in steps_ev
        ),
        source,
    )  # a step longer than zero, each collective inside its step
    steps = []
    for ts, dur, e in steps_ev:
        t0, t1 = ts, ts + dur
        b_in = [(a, b) for a, b in bwd if t0 <= a < t1]
        o_in = [(a, b) for a, b in opt if t0 <= a < t1]
        f_start = next((m for m in fwd_marks if t0 <= m < t1), t0)
        b_start = min((a for a, _ in b_in), default=None)
        if device == "cpu":
            c10d = [(a, a + d) for a, d, x in events if t0 <= a < t1 and x["name"].startswith("c10d::")]
            fwd_iv = [(f_start, b_start)] if b_start is not None and b_start > f_start else []
            fwd_iv = _subtract(fwd_iv, c10d)
            bwd_iv = _subtract(b_in, c10d)
            forward_s, backward_s = _length(fwd_iv) * 1e-6, _length(bwd_iv) * 1e-6
            optimizer_s = _length(o_in) * 1e-6
            comp = _union(fwd_iv + bwd_iv)
        else:
            ks = [(a, a + d, phase_of.get(id(x))) for a, d, x in kernels if t0 <= a < t1]
            ks = [k for k in ks if k[2] not in (None, "comm")]
            forward_s = _length([(a, b) for a, b, ph in ks if ph == "forward"]) * 1e-6
            backward_s = _length([(a, b) for a, b, ph in ks if ph == "backward"]) * 1e-6
            optimizer_s = _length([(a, b) for a, b, ph in ks if ph == "optimizer"]) * 1e-6
            comp = _union([(a, b) for a, b, ph in ks if ph in ("forward", "backward")])
        starts = [a for a, _ in comp]
        mine = [c for c in calls if t0 <= c["start_us"] < t1]
        buckets = []
        for c in mine:
            # timestamps are microseconds since the epoch in float64 (steps of 0.25 us at 1.7e15), so an overlap
            # measured on them can exceed the call's own duration by a rounding step: a call hides at most itself
            hid = min(_overlap(c["start_us"], c["end_us"], comp, starts=starts) * 1e-6, c["time_s"])
            buckets.append(
                {
                    "collective": c["collective"],
                    "bytes": c["bytes"],
                    "count": c["count"],
                    "dtype": c["dtype"],
                    "ranks": c["ranks"],
                    "start_s": (c["start_us"] - t0) * 1e-6,
                    "time_s": c["time_s"],
                    "hidden_s": hid,
                    "exposed_s": max(0.0, c["time_s"] - hid),
                }
            )
        civ = [(c["start_us"], c["end_us"]) for c in mine]
        exposed, in_flight = _length(_subtract(civ, comp)) * 1e-6, _length(civ) * 1e-6
        steps.append(
            Step(e["name"], t0, dur * 1e-6, forward_s, backward_s, optimizer_s, tuple(buckets), exposed, in_flight)
        )
    for c in calls:
        c["rank"] = rank
    if rank is None:
        notes.append(f"{source}: no distributedInfo.rank; read as one rank")
    return Trace(source, rank, world, backend, device, tuple(steps), tuple(calls), tuple(notes), devices)


def _group_size(pgs: list[dict], world: int | None, source: str, *, what: str) -> tuple[int, str]:
    sizes = sorted({int(g["pg_size"]) for g in pgs if isinstance(g.get("pg_size"), int)})
    if len(sizes) > 1:
        raise InputError(
            f"{source}: {what} do not say which process group they ran on, and the trace has groups of "
            f"{', '.join(map(str, sizes))} ranks (distributedInfo.pg_config); profile one group's collectives, "
            "or use NCCL, whose kernels carry their group size"
        )
    if sizes:
        return sizes[0], str(next(g.get("pg_name", "0") for g in pgs if g.get("pg_size") == sizes[0]))
    if world is not None:
        return world, "world"
    raise InputError(f"{source}: {what} carry no group size and the trace has no distributedInfo; cannot tell k")


def _cpu_calls(events, pgs, world, *, source):
    gloo = [x for x in events if x[2]["name"].startswith("gloo:")]
    if not gloo:
        return []
    k, group = _group_size(pgs, world, source, what="its gloo ops")
    out = []
    for ts, dur, e in gloo:
        args = e.get("args") or {}
        coll = collective_name(e["name"].split(":", 1)[1])
        dims = args.get("Input Dims")
        n_el = (
            _dims_elements(dims[0], f"{source}: {e['name']} at ts {ts:.0f}")
            if isinstance(dims, list) and dims
            else None
        )
        types = args.get("Input type")
        dt = _dtype(types[0]) if isinstance(types, list) and types else None
        if n_el is None or dt is None:
            raise InputError(
                f"{source}: {e['name']} at ts {ts:.0f} has no Input Dims / Input type; profile with "
                "record_shapes=True, which records them"
            )
        size = DTYPE_BYTES.get(dt)
        if size is None:
            raise InputError(f"{source}: {e['name']} at ts {ts:.0f}: element type {types[0]!r} is not one simcli knows")
        c = {
            "collective": coll,
            "bytes": rules.number(
                n_el * size, f"{source}: {e['name']} at ts {ts:.0f}", "Input Dims x type", kind="bytes"
            ),
            "count": n_el,
            "dtype": dt,
            "ranks": k,
            "nodes": None,
            "group": group,
            "time_s": dur * 1e-6,
        }
        out.append((c, ts, ts + dur))
    return out


def _meta(args: dict) -> dict | None:
    if not isinstance(args, dict) or "In msg nelems" not in args:
        return None
    return args


def _gpu_calls(
    nccl_k: list[tuple[float, float, dict]],
    events: list[tuple[float, float, dict]],
    pgs: list[dict],
    *,
    world: int | None,
    source: str,
) -> list[tuple[dict[str, Any], float, float]]:
    # record_param_comms CPU ops by thread, to find the one around a kernel's launch (its correlation)
    rpc: dict[Any, list] = {}
    for ts, dur, e in events:
        if e["name"] == "record_param_comms":
            rpc.setdefault(e.get("tid"), []).append((ts, ts + dur, e.get("args") or {}))
    for v in rpc.values():
        v.sort(key=lambda x: x[0])
    launch = {c: (ts, e.get("tid")) for ts, c, e in _launches(events)}
    out = []
    sizes = None
    for ts, dur, e in nccl_k:
        args = e.get("args") or {}
        meta = _meta(args)
        if meta is None and args.get("correlation") in launch:
            lts, tid = launch[args["correlation"]]
            inside = [r for r in rpc.get(tid, []) if r[0] <= lts <= r[1]]
            meta = _meta(inside[-1][2]) if inside else None
        name_coll, name_dt = _kernel_name_meta(e["name"])
        if meta is None:
            raise InputError(
                f"{source}: kernel {e['name'][:60]} at ts {ts:.0f} has no element count (no 'In msg nelems' in its "
                "args or in a record_param_comms op around its launch); profile with torch >= 2.1"
            )
        coll = collective_name(str(meta.get("Collective name") or name_coll or "unknown"))
        dt = _dtype(meta.get("dtype")) or name_dt
        nin, nout = meta.get("In msg nelems"), meta.get("Out msg nelems", 0)
        if not isinstance(nin, (int, float)) or dt not in DTYPE_BYTES:
            raise InputError(
                f"{source}: kernel {e['name'][:60]} at ts {ts:.0f}: element count {nin!r} or dtype {dt!r} unusable"
            )
        at = f"{source}: kernel {e['name'][:40]} at ts {ts:.0f}"
        nin = rules.number(nin, at, "In msg nelems", kind="count")
        nout = rules.number(nout, at, "Out msg nelems", kind="count") if isinstance(nout, (int, float)) else 0
        n_el = max(nin, nout)
        k = meta.get("Group size")
        if k is not None and not isinstance(k, bool) and isinstance(k, (int, float)):
            k = rules.number(k, at, "Group size", kind="ranks")
        group = meta.get("Process Group Name")
        if not isinstance(k, int):
            if sizes is None:
                sizes = _group_size(pgs, world, source, what="its NCCL kernels")
            k, group = sizes[0], group or sizes[1]
        c = {
            "collective": coll,
            "bytes": rules.number(n_el * DTYPE_BYTES[dt], at, "elements x dtype", kind="bytes"),
            "count": n_el,
            "dtype": dt,
            "ranks": int(k),
            "nodes": None,
            "group": str(group or "default"),
            "time_s": dur * 1e-6,
        }
        if isinstance(meta.get("Seq"), int):
            c["seq"] = meta["Seq"]
        out.append((c, ts, ts + dur))
    return out


def _launches(events):
    """(ts, correlation, event) of the CUDA runtime/driver calls that launched kernels."""
    for ts, _, e in events:
        corr = (e.get("args") or {}).get("correlation")
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and isinstance(corr, int):
            yield ts, corr, e


def _gpu_phases(kernels, events) -> dict[int, str]:
    """Each kernel's phase (forward, backward, optimizer, comm, or other) by the CPU op that launched it."""
    launch = {c: ts for ts, c, e in _launches(events)}
    bwd = _union([(ts, ts + d) for ts, d, e in events if e["name"].startswith(_BACKWARD)])
    opt = _union([(ts, ts + d) for ts, d, e in events if e["name"].startswith(_OPTIMIZER)])
    steps = sorted((ts, ts + d) for ts, d, e in events if e["name"].startswith("ProfilerStep#"))
    bs, os_ = [a for a, _ in bwd], [a for a, _ in opt]
    out = {}
    for ts, dur, e in kernels:
        if _is_nccl(e["name"]):
            out[id(e)] = "comm"
            continue
        lts = launch.get((e.get("args") or {}).get("correlation"))
        if lts is None:
            out[id(e)] = "other"
        elif _overlap(lts, lts + 1e-9, opt, starts=os_) > 0:
            out[id(e)] = "optimizer"
        elif _overlap(lts, lts + 1e-9, bwd, starts=bs) > 0:
            out[id(e)] = "backward"
        elif any(a <= lts < b for a, b in steps):
            out[id(e)] = "forward"
        else:
            out[id(e)] = "other"
    return out


def step_summary(traces: Sequence[Trace]) -> dict[str, Any]:
    """The step of the slowest rank: each rank's median step (by step time; the lower median of an even count),
    and of those the longest (a synchronised step waits for the slowest rank). One step's terms, so they add up:
    step = forward + backward + exposed + optimizer + other. Beside it the spread of the ranks' compute (each
    rank's median forward + backward; sample sd / mean) where several ranks are given, and the buckets."""
    terms = ("step_s", "forward_s", "backward_s", "compute_s", "optimizer_s", "comm_s", "exposed_s", "other_s")
    median_steps, comp = [], []
    for t in traces:
        if not t.steps:
            continue
        by_time = sorted(t.steps, key=lambda s: s.step_s)
        median_steps.append((by_time[(len(by_time) - 1) // 2], t))
        comp.append(float(np.median([s.compute_s for s in t.steps])))
    step, slow = max(median_steps, key=lambda x: x[0].step_s)
    out: dict[str, Any] = {x: float(getattr(step, x)) for x in terms}
    comp_a = np.array(comp)
    out["ranks"] = len(median_steps)
    out["steps"] = min(len(t.steps) for t in traces)
    out["step"] = f"{step.name} of rank {slow.rank if slow.rank is not None else '?'} ({slow.path})"
    out["rank_compute_s"] = comp_a.tolist()
    out["rank_spread"] = float(np.std(comp_a, ddof=1) / np.mean(comp_a)) if comp_a.size > 1 else None
    # the buckets: each (collective, bytes, i-th of them in the step) seen in at least half of the steps, with
    # the median over steps and ranks (a first step's one-off collectives, DDP's bucket rebuild, drop out)
    t0 = traces[0]
    seen: dict[tuple, list[dict[str, Any]]] = {}
    nsteps = 0
    for t in traces:
        for s in t.steps:
            nsteps += 1
            count: dict[tuple, int] = {}
            for b in s.buckets:
                key = (b["collective"], b["bytes"])
                count[key] = count.get(key, 0) + 1
                seen.setdefault((*key, count[key]), []).append(b)
    buckets = []
    for key, rows in seen.items():
        if 2 * len(rows) < nsteps:
            continue
        first = rows[0]
        buckets.append(
            {
                "collective": first["collective"],
                "bytes": first["bytes"],
                "count": first["count"],
                "dtype": first["dtype"],
                "ranks": first["ranks"],
                "steps": len(rows),
                "time_s": float(np.median([r["time_s"] for r in rows])),
                "hidden_s": float(np.median([r["hidden_s"] for r in rows])),
                "exposed_s": float(np.median([r["exposed_s"] for r in rows])),
                "start_s": float(np.median([r["start_s"] for r in rows])),
            }
        )
    buckets.sort(key=lambda b: b["start_s"])
    out["buckets"] = buckets
    out["device"] = t0.device
    out["backend"] = t0.backend
    out["world_size"] = t0.world_size
    return out
