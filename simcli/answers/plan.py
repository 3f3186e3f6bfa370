"""Decision answers on the analytic model: solve for the number instead of reading it off a plot.

Three questions, each a pure function of a :class:`~simcli.step.engine.Scenario`:

* :func:`max_devices`: the largest k whose efficiency E(k) = S(k)/k stays at or
  above a target, scanning every k asked for (E need not fall monotonically:
  a partial node at k = 9 on 8-device nodes reaches the next tier through one
  link, k = 16 through eight), with every k where E crosses the target.
* :func:`solve_field`: the value of one numeric profile field (by its path,
  ``network[1].bandwidth``, ``inter_node.latency``, ``device.mfu``, ...) at
  which E(k) reaches the target, by bisection in log space to a stated relative
  tolerance, or the reason no value can.
* :func:`time_to_train`: wall-clock time, device-hours and cost of a whole run
  for each k, with the cheapest and the fastest k within a budget.

:func:`training_memory` checks whether the training state and the activations fit in device memory,
on the one memory model (:mod:`simcli.step.memory`). :func:`whole_nodes` keeps the device counts that fill
whole nodes past the first.

This module prints nothing and imports no CLI, YAML, pandas or plotting code.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.types import InputError, SimcliError, Workload
from ..base.units import fmt_bytes, fmt_count, fmt_flops, fmt_rate, fmt_time
from ..io import schema
from ..step.engine import Result, Scenario, simulate
from ..step.memory import MemoryCheck
from ..step.memory import check as memory_check
from .explain import explain

__all__ = [
    "Infeasible",
    "Crossing",
    "MaxDevices",
    "FieldRef",
    "Solved",
    "TrainPlan",
    "training_memory",
    "whole_nodes",
    "breakdown",
    "efficiency_crossings",
    "max_devices",
    "field_ref",
    "solve_field",
    "worse_text",
    "samples_from_tokens",
    "time_to_train",
    "DEFAULT_RTOL",
]

#: relative tolerance on a solved field value (the answer meets the target; one (1 + rtol) step
#: further towards the infeasible side does not)
DEFAULT_RTOL = 1e-6


class Infeasible(SimcliError):
    """A well-posed question with no answer (no k, no field value, no plan within budget): exit 1."""


# --------------------------------------------------------------------------- memory


def training_memory(sc: Scenario, devices: Any, optimizer: str = "adam") -> MemoryCheck:
    """The memory per device of ``sc`` at ``devices``, from the one memory model (:mod:`simcli.step.memory`)."""
    return memory_check(sc, devices, optimizer)


def whole_nodes(sc: Scenario, devices: Any) -> np.ndarray:
    """The device counts of ``devices`` that fill whole nodes past the first: k <= node size, or a multiple of it.

    A partial node is a poor buy and a misleading answer: with 8 devices per node, a 9th device alone on a second
    node makes every collective cross the network through that one device's NIC, so E(9) is far below E(16)
    (dgx-h100, llama2-7b fsdp: 0.40 against 0.95), and a scan that stops at the first k below a target stops at 8.
    Profiles with one tier (or no node size) keep every k. Refuses a list with no whole-node count left."""
    k = np.asarray(devices, dtype=np.int64).ravel()
    net = sc.profile.network
    node = net[0].size if len(net) > 1 else None
    if not node:
        return k
    keep = k[(k <= node) | (k % node == 0)]
    if keep.size == 0:
        raise InputError(
            f"--devices: none of the {k.size} device counts ({int(k[0])}..{int(k[-1])}) fills whole nodes of "
            f"{node} ({sc.profile.name}); ask for multiples of {node}, or add --partial-nodes to scan every count"
        )
    return keep


# --------------------------------------------------------------------------- why: one k's step, term by term


#: explain's terms that a breakdown carries, under explain's keys
_TERMS = (
    "devices",
    "efficiency",
    "speedup",
    "t_compute_s",
    "t_straggler_s",
    "t_update_s",
    "t_comm_s",
    "t_comm_exposed_s",
    "t_step_s",
    "t_latency_s",
    "t_bandwidth_s",
    "t_reduction_s",
    "bottleneck",
    "bus_Bps",
)


def breakdown(res: Result, i: int) -> dict[str, Any]:
    """Every term of the step at the i-th k (:func:`simcli.answers.explain.explain`'s terms, under its keys), the term
    that dominates, and the bottleneck tier."""
    d = explain(res.scenario, int(res.devices[i]))
    out = {key: d[key] for key in _TERMS}
    t_comm, t_step, exposed = d["t_comm_s"], d["t_step_s"], d["t_comm_exposed_s"]
    terms = {"latency": d["t_latency_s"], "bandwidth": d["t_bandwidth_s"], "reduction": d["t_reduction_s"]}
    out.update(
        buckets=sum(m["count"] for m in d["messages"]) or 1,
        comm_share=exposed / t_step if t_step > 0 else 0.0,
        comm_bound=max(terms, key=lambda key: terms[key]) if t_comm > 0 else "-",
        step_bound="communication" if exposed > d["t_compute_s"] else "compute",
    )
    if out["bus_Bps"] is not None and not math.isfinite(out["bus_Bps"]):
        out["bus_Bps"] = None
    if "strategy" in d:  # a sharded strategy: its collectives, not an all-reduce in buckets
        out["strategy"] = d["strategy"]
    return out


def _compute(b: dict[str, Any]) -> str:
    """ "compute 480 ms", with the part spent waiting for the slowest device (a spread) and the optimizer step."""
    wait = b.get("t_straggler_s") or 0.0
    upd = b.get("t_update_s") or 0.0
    return (
        f"compute {fmt_time(b['t_compute_s'])}"
        + (f" ({fmt_time(wait)} of it waiting for the slowest device)" if wait > 0 else "")
        + (f" + optimizer step {fmt_time(upd)}" if upd > 0 else "")
    )


def describe_breakdown(b: dict[str, Any]) -> str:
    """One sentence: where the step's time goes at one k."""
    if b["t_comm_s"] <= 0:
        return f"at k={b['devices']} there is no communication: the step is all compute ({fmt_time(b['t_step_s'])})"
    hidden = b["t_comm_s"] - b["t_comm_exposed_s"]
    if b.get("strategy"):
        s = (
            f"at k={b['devices']}: step {fmt_time(b['t_step_s'])} = {_compute(b)} + exposed "
            f"communication {fmt_time(b['t_comm_exposed_s'])} ({100 * b['comm_share']:.0f}% of the step"
            + (f", {fmt_time(hidden)} hidden behind compute" if hidden > 0 else "")
            + f"); {b['strategy']}'s "
            f"{b['buckets']:g} collectives are {b['comm_bound']}-bound (latency terms {fmt_time(b['t_latency_s'])}, "
            f"bandwidth terms {fmt_time(b['t_bandwidth_s'])}), bottleneck tier '{b['bottleneck']}'"
        )
        return s + (f" at {fmt_rate(b['bus_Bps'])}" if b["bus_Bps"] else "")
    s = (
        f"at k={b['devices']}: step {fmt_time(b['t_step_s'])} = {_compute(b)} + "
        f"exposed all-reduce {fmt_time(b['t_comm_exposed_s'])} ({100 * b['comm_share']:.0f}% of the step"
        + (f", {fmt_time(hidden)} hidden behind backward" if hidden > 0 else "")
        + "); the all-reduce is "
        f"{b['comm_bound']}-bound ("
        + (f"{b['buckets']} buckets; " if b.get("buckets", 1) > 1 else "")
        + f"latency terms {fmt_time(b['t_latency_s'])}, bandwidth terms "
        f"{fmt_time(b['t_bandwidth_s'])}"
    )
    if b["t_reduction_s"]:
        s += f", reduction {fmt_time(b['t_reduction_s'])}"
    s += f"), bottleneck tier '{b['bottleneck']}'"
    if b["bus_Bps"]:
        s += f" at {fmt_rate(b['bus_Bps'])}"
    return s


# --------------------------------------------------------------------------- --max-devices


@dataclass(frozen=True)
class Crossing:
    """E(k) crosses the target between two scanned device counts."""

    previous: int  #: the scanned k before the crossing
    devices: int  #: the first scanned k on the new side
    direction: str  #: "falls below" or "rises to"
    efficiency: float  #: E at ``devices``

    def to_dict(self) -> dict[str, Any]:  # not dataclasses.asdict: 250,000 crossings took 4.5 s with it
        return {
            "previous": self.previous,
            "devices": self.devices,
            "direction": self.direction,
            "efficiency": self.efficiency,
        }


def efficiency_crossings(devices: np.ndarray, efficiency: np.ndarray, target: float) -> list[Crossing]:
    """Every pair of neighbouring scanned k where E(k) >= target changes (vectorised)."""
    meets = np.asarray(efficiency) >= target
    idx = np.flatnonzero(meets[1:] != meets[:-1]) + 1
    return [
        Crossing(
            previous=int(devices[i - 1]),
            devices=int(devices[i]),
            direction="rises to" if meets[i] else "falls below",
            efficiency=float(efficiency[i]),
        )
        for i in idx.tolist()
    ]


@dataclass(frozen=True)
class MaxDevices:
    target: float
    #: the largest scanned k before E(k) first falls below target (issue 12: not the last k that meets it,
    #: which a dip and a recovery, e.g. at a node boundary, would make misleading)
    answer: int
    efficiency: float  #: E(answer)
    crossings: tuple[Crossing, ...]
    #: why the answer stops there: "target" (E falls below it after), "range" (end of the scan)
    limited_by: str
    #: the step at the first scanned k past the answer (None when the answer ends the scan)
    beyond: dict[str, Any] | None
    at_answer: dict[str, Any]
    result: Result = field(repr=False)
    #: later runs of k where E(k) is back at or above target: (first k, last k) of each
    recoveries: tuple[tuple[int, int], ...] = ()

    @property
    def scanned(self) -> tuple[int, int, int]:
        d = self.result.devices
        return int(d[0]), int(d[-1]), int(len(d))

    def reason(self) -> str:
        lo, hi, _ = self.scanned
        if self.limited_by == "range":
            cap = self.result.scenario.profile.max_devices
            end = (
                f"the profile's limit of {cap} devices"
                if cap is not None and hi >= cap
                else "the end of the scanned range (widen --devices to look further)"
            )
            return f"efficiency stays at or above {self.target:g} up to k={hi}, {end}; " + describe_breakdown(
                self.at_answer
            )
        b = self.beyond
        assert b is not None
        if self.recoveries:
            runs = ", ".join(f"k={a}" if a == z else f"k={a}..{z}" for a, z in self.recoveries[:5])
            more = f" and {len(self.recoveries) - 5} more" if len(self.recoveries) > 5 else ""
            return (
                f"at k={b['devices']} efficiency first falls below {self.target:g} (E = {b['efficiency']:.4f}); "
                f"it is back at or above it later at {runs}{more} (see the crossings); " + describe_breakdown(b)
            )
        return (
            f"beyond k={self.answer} efficiency falls below {self.target:g} for the rest of the scan "
            f"(E({b['devices']}) = {b['efficiency']:.4f}); " + describe_breakdown(b)
        )

    def to_dict(self) -> dict[str, Any]:
        lo, hi, n = self.scanned
        return {
            "question": "max-devices",
            "answer": self.answer,
            "target_efficiency": self.target,
            "efficiency_at_answer": self.efficiency,
            "limited_by": self.limited_by,
            "scanned": {"first": lo, "last": hi, "count": n},
            "crossings": [c.to_dict() for c in self.crossings],
            "recoveries": [{"first": a, "last": z} for a, z in self.recoveries],
            "reason": self.reason(),
            "at_answer": self.at_answer,
            "beyond": self.beyond,
        }


def _check_target(target: float | None, option: str = "--min-efficiency") -> float:
    if target is None:
        raise InputError(f"{option}: required for this question (a fraction such as 0.9)")
    if not (isinstance(target, (int, float)) and math.isfinite(target) and 0 < target <= 1):
        raise InputError(f"{option}: {target!r} is not in (0, 1]; give the efficiency to reach, for example 0.9")
    return float(target)


def max_devices(sc: Scenario, devices: np.ndarray, *, target: float) -> MaxDevices:
    """The largest k in ``devices`` before E(k) first falls below target, with the later recoveries listed;
    every k is scanned (one vectorised simulate)."""
    target = _check_target(target)
    res = simulate(sc, devices)
    eff = res.efficiency
    meets = eff >= target
    k = res.devices
    if not meets.any():
        i = int(np.argmax(eff))
        raise Infeasible(
            f"no k from {int(k[0])} to {int(k[-1])} reaches efficiency {target:g}: the best is "
            f"E({int(k[i])}) = {eff[i]:.4f}; "
            + describe_breakdown(breakdown(res, i))
            + (" (k=1 always has E = 1: include it in --devices)" if k[0] > 1 else "")
        )
    first = int(np.argmax(meets))  # E(k) of the first k scanned may already miss (k > 1): start where it meets
    drops = np.flatnonzero(~meets[first:])
    last = first + int(drops[0]) - 1 if drops.size else len(k) - 1  # the k before E first falls below target
    limited = "range" if last == len(k) - 1 else "target"
    beyond = breakdown(res, last + 1) if limited == "target" else None
    rest = meets[last + 1 :]
    starts = np.flatnonzero(rest & ~np.concatenate(([False], rest[:-1]))) + last + 1
    ends = np.flatnonzero(rest & ~np.concatenate((rest[1:], [False]))) + last + 1
    recoveries = tuple((int(k[a]), int(k[z])) for a, z in zip(starts.tolist(), ends.tolist()))
    return MaxDevices(
        target=target,
        answer=int(k[last]),
        efficiency=float(eff[last]),
        crossings=tuple(efficiency_crossings(k, eff, target)),
        limited_by=limited,
        beyond=beyond,
        at_answer=breakdown(res, last),
        result=res,
        recoveries=recoveries,
    )


# --------------------------------------------------------------------------- --solve FIELD


#: tier and device fields by their YAML name: (attribute, kind), from the one profile schema
_TIER_FIELDS = schema.solvable(schema.TIER)
_DEVICE_FIELDS = schema.solvable(schema.DEVICE)
_SOLVABLE = (
    "network[i].bandwidth, network[i].latency, network[i].efficiency (or inter_node.*, intra_node.*, "
    "<tier name>.*), device.mfu, device.peak_flops[.<dtype>], device.reduce_bandwidth"
)
_PATH = re.compile(r"^\s*(?P<head>[A-Za-z_][\w-]*)(?:\[(?P<index>-?\d+)\])?(?:\.(?P<rest>[\w.]+))?\s*$")


_SI_UNIT = {"bandwidth": "B/s", "time": "s", "flops": "FLOP/s", "bytes": "B"}


def _fmt_value(kind: str, v: float) -> str:
    if kind in _SI_UNIT and not 1e-9 <= abs(v) < 1e15:
        return f"{v:.3g} {_SI_UNIT[kind]}"  # beyond the prefixes: plain SI
    if kind == "bandwidth":
        return f"{fmt_rate(v)} ({_sig(v * 8 / 1e9)} Gb/s)"
    if kind == "time":
        return fmt_time(v)
    if kind == "flops":
        return fmt_flops(v)
    if kind == "bytes":
        return fmt_bytes(v, binary=False)
    return f"{v:.6g}"


def _sig(v: float) -> str:
    return f"{v:.4g}"


@dataclass(frozen=True)
class FieldRef:
    """One numeric field of a profile, addressed by path; ``apply`` returns a scenario with a new value."""

    path: str  #: canonical path, e.g. network[1].bandwidth
    label: str  #: as the user wrote it
    kind: str  #: bandwidth, time, fraction, flops or bytes
    tier: int | None
    attr: str  #: attribute of Tier or Device, or "peak_flops.<dtype>"

    def get(self, sc: Scenario) -> float | None:
        p = sc.profile
        if self.tier is not None:
            return getattr(p.network[self.tier], self.attr)
        if self.attr == "mfu":
            return sc.achieved_mfu
        if self.attr.startswith("peak_flops."):
            return p.device.peak_flops[self.attr.split(".", 1)[1]]
        return getattr(p.device, self.attr)

    def apply(self, sc: Scenario, value: float) -> Scenario:
        p = sc.profile
        if self.tier is not None:
            net = list(p.network)
            net[self.tier] = dataclasses.replace(net[self.tier], **{self.attr: value})
            return sc.replace(profile=p.replace(network=tuple(net)))
        if self.attr == "mfu":
            # --mfu overrides the profile's device.mfu; the solved value is the one the model uses
            return sc.replace(mfu=None, profile=p.replace(device=dataclasses.replace(p.device, mfu=value)))
        if self.attr.startswith("peak_flops."):
            peaks = dict(p.device.peak_flops)
            peaks[self.attr.split(".", 1)[1]] = value
            return sc.replace(profile=p.replace(device=dataclasses.replace(p.device, peak_flops=peaks)))
        return sc.replace(profile=p.replace(device=dataclasses.replace(p.device, **{self.attr: value})))

    def fmt(self, v: float) -> str:
        return _fmt_value(self.kind, v)


def field_ref(sc: Scenario, path: str, option: str = "--solve") -> FieldRef:
    """Resolve a field path: ``network[1].bandwidth``, ``inter_node.bandwidth`` (the tier right outside the
    node, network[1]), ``intra_node.latency`` (network[0]), ``<tier name>.efficiency``, ``device.mfu``,
    ``device.peak_flops.bf16`` or ``device.peak_flops`` (the compute dtype's peak)."""
    p = sc.profile
    m = _PATH.match(path or "")
    bad = InputError(f"{option}: {path!r} is not a numeric profile field; solvable: {_SOLVABLE}")
    if not m:
        raise bad
    head, index, rest = m.group("head"), m.group("index"), m.group("rest")
    tiers = ", ".join(f"network[{i}] {t.name}" for i, t in enumerate(p.network))
    if head == "device" and index is None:
        if rest == "peak_flops":
            rest = f"peak_flops.{sc.compute_dtype}"
        if rest and rest.startswith("peak_flops."):
            dt = rest.split(".", 1)[1]
            if dt not in p.device.peak_flops:
                raise InputError(
                    f"{option}: {path!r}: {p.name} gives no peak for {dt!r}; it has {', '.join(p.device.peak_flops)}"
                )
            return FieldRef(f"device.{rest}", path, "flops", None, rest)
        if rest in _DEVICE_FIELDS:
            attr, kind = _DEVICE_FIELDS[rest]
            if getattr(p.device, attr) is None:
                raise InputError(
                    f"{option}: {path!r}: {p.name} gives no device.{rest}, so there is no value "
                    "to start from; add it to the profile first"
                )
            return FieldRef(f"device.{rest}", path, kind, None, attr)
        raise bad
    if head == "network" and index is not None:
        i = int(index)
        if not -len(p.network) <= i < len(p.network):
            raise InputError(f"{option}: {path!r}: {p.name} has {len(p.network)} tier(s) ({tiers})")
        i %= len(p.network)
    elif index is None and head in ("inter_node", "intra_node"):
        i = 1 if head == "inter_node" else 0
        if i >= len(p.network):
            raise InputError(
                f"{option}: {path!r}: {p.name} has one tier ({tiers}), so there is no inter-node tier; use network[0]"
            )
    elif index is None and head in [t.name for t in p.network]:
        i = [t.name for t in p.network].index(head)
    else:
        raise InputError(
            f"{option}: {path!r}: no such tier or field; {p.name}'s tiers are {tiers}; solvable: {_SOLVABLE}"
        )
    if rest == "size":
        raise InputError(
            f"{option}: {path!r}: a tier's size is a whole number of devices that shapes the topology, "
            "not a quantity to solve for; try bandwidth, latency or efficiency"
        )
    if rest not in _TIER_FIELDS:
        raise InputError(f"{option}: {path!r}: a tier's numeric fields are {', '.join(_TIER_FIELDS)}")
    attr, kind = _TIER_FIELDS[rest]
    return FieldRef(f"network[{i}].{rest}", path, kind, i, attr)


@dataclass(frozen=True)
class Solved:
    field: FieldRef
    devices: int
    target: float
    #: "minimum" (E rises with the field: the least value that reaches the target), "maximum" (E falls with it:
    #: the most it may be), or "any" (E does not depend on it and the target is met)
    bound: str
    answer: float | None
    efficiency: float | None  #: E(k) at the answer
    current: float
    current_efficiency: float
    rtol: float
    #: True when the answer is the end of the searched interval (every value beyond it also meets the target)
    at_limit: bool
    at_answer: dict[str, Any] | None
    searched: tuple[float, float]
    evaluations: int
    #: where E is not monotone: the ranges in which a value further in the field's better direction (larger for a
    #: "minimum" bound, smaller for a "maximum") gives a lower E, each with E at its ends and NCCL's picks there
    worse: tuple[dict[str, Any], ...] = ()

    def statement(self) -> str:
        f, k = self.field, self.devices
        if self.bound == "any":
            return (
                f"{f.path} does not change E({k}); the current efficiency {self.current_efficiency:.4f} "
                f"already meets {self.target:g} for any value"
            )
        assert self.answer is not None
        word = "at least" if self.bound == "minimum" else "at most"
        s = f"{f.path} must be {word} {f.fmt(self.answer)} for E({k}) >= {self.target:g}"
        if self.at_limit:
            s += (
                f" (every value {'above' if self.bound == 'minimum' else 'below'} it up to the end of the "
                "searched interval also meets it)"
                if self.bound == "minimum"
                else " (the end of the searched interval: every value up to it meets the target)"
            )
        meets = self.current_efficiency >= self.target
        s += (
            f"; the current {f.fmt(self.current)} gives E = {self.current_efficiency:.4f} "
            f"({'meets' if meets else 'misses'} the target)"
        )
        above = [w for w in self.worse if w["efficiency_from"] >= self.target]
        if above:
            s += "; " + worse_text(f, above, self.bound, self.target)
        if len(above) < len(self.worse):
            n = len(self.worse) - len(above)
            s += (
                f"; {'also ' if above else ''}{n} range{'s' if n > 1 else ''} where a "
                f"{'larger' if self.bound != 'maximum' else 'smaller'} value is worse, below the target (worse_ranges)"
            )
        return s

    def reason(self) -> str:
        return describe_breakdown(self.at_answer) if self.at_answer else self.statement()

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": "solve",
            "field": self.field.path,
            "field_as_given": self.field.label,
            "kind": self.field.kind,
            "devices": self.devices,
            "target_efficiency": self.target,
            "bound": self.bound,
            "answer": self.answer,
            "answer_text": None if self.answer is None else self.field.fmt(self.answer),
            "efficiency_at_answer": self.efficiency,
            "current": self.current,
            "current_efficiency": self.current_efficiency,
            "rtol": self.rtol,
            "at_limit": self.at_limit,
            "searched": list(self.searched),
            "evaluations": self.evaluations,
            "worse_ranges": [dict(w) for w in self.worse],
            "statement": self.statement(),
            "reason": self.reason(),
            "at_answer": self.at_answer,
        }


#: ranges :func:`worse_text` names before it says "and N more"
WORSE_SHOWN = 3


def worse_text(f: FieldRef, worse: tuple[dict[str, Any], ...] | list[dict[str, Any]], bound: str, target: float) -> str:
    """The ranges where going further in the field's better direction lowers E, in words (the largest drops first)."""
    word = "larger" if bound != "maximum" else "smaller"
    parts = []
    shown = sorted(worse, key=lambda w: w["efficiency_to"] - w["efficiency_from"])[:WORSE_SHOWN]
    for w in sorted(shown, key=lambda w: worse.index(w)):
        lo, hi = sorted((w["from"], w["to"]))
        where = f"at {f.fmt(w['to'])}" if hi / lo <= 1.0 + 1e-3 else f"from {f.fmt(w['from'])} to {f.fmt(w['to'])}"
        why = ""
        if w["picks_from"] != w["picks_to"]:
            why = f" (NCCL's pick goes from {w['picks_from']} to {w['picks_to']})"
        parts.append(
            f"{where} E falls from {w['efficiency_from']:.4f} to {w['efficiency_to']:.4f}"
            + (", below the target" if w["efficiency_to"] < target <= w["efficiency_from"] else "")
            + why
        )
    more = len(worse) - len(shown)
    return f"a {word} value is worse: " + "; ".join(parts) + (f"; and {more} more (worse_ranges)" if more > 0 else "")


def _search_grid(kind: str, x0: float) -> np.ndarray:
    """Candidate values, a quarter decade apart: 1e-12..1e12 times the current value; fractions up to 1."""
    if kind == "fraction":
        return np.concatenate([10.0 ** np.arange(-12.0, 0.0, 0.25), [1.0]])
    return x0 * 10.0 ** np.arange(-12.0, 12.0 + 1e-9, 0.25)


#: points sampled inside a grid step where NCCL's pick changes (then each change is bisected to the tolerance)
REFINE_POINTS = 12


def _picks(r: Result) -> str:
    """NCCL's (or the algorithm's) pick for each of the step's messages at the result's one k, as text."""
    if r.sharded is not None:
        costs = [c for _, count, _, c in r.sharded.messages if count]
    else:
        costs = [c for c in (r.comm_bucket, r.comm_last) if c is not None]
    out = []
    for c in costs:
        proto = None if c.protocol is None or c.protocol[0] in (None, "-") else str(c.protocol[0])
        name = str(c.algorithm[0]) + (f"/{proto}" if proto else "")
        if name not in out:
            out.append(name)
    return ", ".join(out)


def solve_field(sc: Scenario, *, devices: int, target: float, path: str, rtol: float = DEFAULT_RTOL) -> Solved:
    """The value of the field at ``path`` at which E(devices) reaches ``target``.

    E follows each solvable field for a fixed k in one direction while NCCL's picks stay the same (more bandwidth,
    less latency, a higher link efficiency never lower one pair's cost; a faster device, higher mfu or peak, lowers
    E because the same communication is then a larger share of a shorter step). Where NCCL's tuner then switches to
    a pair that simcli prices higher (docs/nccl.md), E can fall although the field got better: the search allows it.
    It evaluates a quarter-decade grid from 1e-12 to 1e12 times the current value (fractions: 1e-12 to 1), samples
    :data:`REFINE_POINTS` more values inside every grid step where NCCL's picks change and bisects each change
    to the tolerance, so that E is monotone between neighbouring samples. The answer is the first value, from
    the worse end of the field (the smallest bandwidth, the largest latency), that meets the target: the grid
    step where it is crossed is bisected in log space until its ends differ by a factor of at most 1 + rtol, and
    the end that meets the target is returned. ``worse`` lists the ranges where a better value lowers E. Raises
    :class:`Infeasible` when no value in the interval reaches the target, with the reason (and the best E found).
    """
    target = _check_target(target)
    if not (isinstance(rtol, (int, float)) and 0 < rtol < 1):
        raise InputError(f"--tolerance: {rtol!r} must be a relative tolerance in (0, 1), for example 1e-6")
    k = int(devices)
    ref = field_ref(sc, path)
    x0 = ref.get(sc)
    assert x0 is not None
    evals = 0
    seen: dict[float, tuple[float, str]] = {}

    def run(x: float) -> Result:
        nonlocal evals
        evals += 1
        return simulate(ref.apply(sc, float(x)), np.array([k]))

    def at(x: float) -> tuple[float, str]:
        x = float(x)
        if x not in seen:
            r = run(x)
            seen[x] = (float(r.efficiency[0]), _picks(r))
        return seen[x]

    def eff(x: float) -> float:
        return at(x)[0]

    e0 = eff(x0)
    grid = _search_grid(ref.kind, x0)
    es = np.array([eff(x) for x in grid])
    searched = (float(grid[0]), float(grid[-1]))
    flat = float(np.max(es) - np.min(es)) <= 1e-12 * max(1.0, float(np.max(np.abs(es))))
    if flat:
        if e0 >= target:
            return Solved(ref, k, target, "any", None, None, x0, e0, rtol, False, None, searched, evals)
        res0 = run(x0)
        why = ""
        if ref.tier is not None and ref.tier >= 1 and k <= (sc.profile.network[ref.tier - 1].size or 0):
            why = (
                f" (a ring over {k} devices stays inside one network[{ref.tier - 1}] domain of "
                f"{sc.profile.network[ref.tier - 1].size} and never crosses network[{ref.tier}])"
            )
        raise Infeasible(
            f"no value of {ref.path} reaches E({k}) >= {target:g}: efficiency at k={k} does not "
            f"depend on it{why} (E = {e0:.4f} for every value); " + describe_breakdown(breakdown(res0, 0))
        )
    increasing = es[-1] > es[0]
    # where NCCL's picks change inside a grid step, sample inside it and bisect every change to the tolerance
    for lo, hi in zip(grid[:-1], grid[1:]):
        if at(lo)[1] == at(hi)[1]:
            continue
        inner = np.exp(np.linspace(math.log(lo), math.log(hi), REFINE_POINTS + 2))
        for a, b in zip(inner[:-1], inner[1:]):
            if at(a)[1] == at(b)[1]:
                continue
            while b / a > 1.0 + rtol:
                mid = math.sqrt(a * b)
                if at(mid)[1] == at(a)[1]:
                    a = mid
                else:
                    b = mid
    xs = np.array(sorted(seen))
    if not increasing:
        xs = xs[::-1]  # from the field's worse end to its better end
    ev = np.array([seen[float(x)][0] for x in xs])
    worse = _worse_ranges(xs, ev, [seen[float(x)][1] for x in xs])
    meets = ev >= target
    if not meets.any():
        best = int(np.argmax(ev))
        top = np.flatnonzero(ev >= ev[best] - 1e-9 * max(1.0, abs(ev[best])))
        last = best
        while last + 1 in top:
            last += 1
        rb = run(xs[best])
        where = (
            f"at {ref.fmt(xs[best])}"
            if last == best
            else f"from {ref.fmt(xs[best])} to {ref.fmt(xs[last])} (as sampled)"
        )
        raise Infeasible(
            f"no value of {ref.path} reaches E({k}) >= {target:g} (searched from {ref.fmt(grid[0])} to "
            f"{ref.fmt(grid[-1])}): the best is E = {ev[best]:.4f}, {where}"
            + (f"; {worse_text(ref, worse, 'minimum' if increasing else 'maximum', target)}" if worse else "")
            + "; "
            + describe_breakdown(breakdown(rb, 0))
            + "; the other terms cap it, so relax the target or solve for another field"
        )
    i = int(np.flatnonzero(meets)[0])
    at_limit = i == 0
    good, bad = float(xs[i]), (float(xs[i - 1]) if i > 0 else None)
    if bad is not None:
        # bisection in log space between two neighbouring samples (E is monotone between them): the geometric mean
        # halves log(bad/good) each step
        while max(good, bad) / min(good, bad) > 1.0 + rtol:
            mid = math.sqrt(good * bad)
            if eff(mid) >= target:
                good = mid
            else:
                bad = mid
    good = float(good)
    r = run(good)
    return Solved(
        ref,
        k,
        target,
        "minimum" if increasing else "maximum",
        good,
        float(r.efficiency[0]),
        x0,
        e0,
        rtol,
        at_limit,
        breakdown(r, 0),
        searched,
        evals,
        tuple(worse),
    )


#: the least relative fall of E that counts as a range where a better value is worse (below it: rounding, or a
#: last bucket's pick that changes nothing one can see)
WORSE_MIN = 1e-3


def _worse_ranges(xs: np.ndarray, es: np.ndarray, picks: list[str]) -> list[dict[str, Any]]:
    """Runs of samples, in the field's better direction, along which E falls (by more than WORSE_MIN of E)."""
    out: list[dict[str, Any]] = []
    start = None
    for j in range(1, len(xs) + 1):
        falling = j < len(xs) and es[j] < es[j - 1] - 1e-9 * max(1.0, abs(es[j - 1]))
        if falling and start is None:
            start = j - 1
        elif not falling and start is not None:
            end = j - 1
            if es[end] >= es[start] * (1.0 - WORSE_MIN):
                start = None
                continue
            out.append(
                {
                    "from": float(xs[start]),
                    "to": float(xs[end]),
                    "efficiency_from": float(es[start]),
                    "efficiency_to": float(es[end]),
                    "picks_from": picks[start],
                    "picks_to": picks[end],
                }
            )
            start = None
    return out


# --------------------------------------------------------------------------- --time-to-train


def samples_from_tokens(workload: Workload, tokens: float) -> float:
    """Samples in ``tokens`` tokens: tokens / seq_len (one sample is one sequence)."""
    if not workload.seq_len:
        raise InputError(
            f"--tokens: {workload.name} has no sequence length (not a transformer); give --samples, "
            "or --seq-len for a custom transformer"
        )
    return tokens / workload.seq_len


@dataclass(frozen=True)
class TrainPlan:
    samples: float
    price: float | None
    max_hours: float | None
    max_cost: float | None
    rows: list[dict[str, Any]]
    cheapest: dict[str, Any]
    fastest: dict[str, Any]
    result: Result = field(repr=False)

    def summary(self) -> str:
        c, f = self.cheapest, self.fastest
        what = "cost" if self.price is not None else "device-hours"
        return (
            f"cheapest ({what}) at k={c['devices']}: {fmt_time(c['time_s'])}, "
            + _money(c, self.price)
            + f"; fastest at k={f['devices']}: {fmt_time(f['time_s'])}, "
            + _money(f, self.price)
        )

    def reason(self) -> str:
        """Where the step's time goes at the fastest k (and at the cheapest, when that is another k)."""
        out = []
        for row in dict.fromkeys((self.fastest["devices"], self.cheapest["devices"])):
            i = int(np.flatnonzero(self.result.devices == row)[0])
            out.append(describe_breakdown(breakdown(self.result, i)))
        return "; ".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": "time-to-train",
            "answer": {"cheapest": self.cheapest, "fastest": self.fastest},
            "samples": self.samples,
            "price_per_device_hour": self.price,
            "max_hours": self.max_hours,
            "max_cost": self.max_cost,
            "summary": self.summary(),
            "reason": self.reason(),
            "rows": self.rows,
        }


def _money(row: dict[str, Any], price: float | None) -> str:
    s = f"{fmt_count(row['device_hours'])} device-hours"
    if price is not None:
        s += f", cost {fmt_count(row['cost'])}"
    return s


def time_to_train(
    sc: Scenario,
    devices: np.ndarray,
    *,
    samples: float,
    price: float | None = None,
    max_hours: float | None = None,
    max_cost: float | None = None,
) -> TrainPlan:
    """Wall-clock time and cost of training on ``samples`` samples, for each k.

    steps(k) = ceil(samples / samples per step), samples per step = k·b (weak
    scaling) or B (strong scaling); time(k) = steps · T_step(k);
    device-hours = k · time / 3600 h; cost = device-hours · price.
    Cheapest: least cost (device-hours without a price) among the k within
    --max-hours and --max-cost; fastest: least time among the same k.
    """
    for name, v in (
        ("--samples/--tokens", samples),
        ("--price-per-device-hour", price),
        ("--max-hours", max_hours),
        ("--max-cost", max_cost),
    ):
        if v is not None and not (math.isfinite(v) and v > 0):
            raise InputError(f"{name}: {v!r} must be a positive number")
    if max_cost is not None and price is None:
        raise InputError("--max-cost needs --price-per-device-hour (the cost of one device for one hour)")
    res = simulate(sc, devices)
    k = res.devices.astype(np.float64)
    per_step = res.samples_per_s * res.t_step_s  # k·b (·m micro-steps with accumulation), or B
    steps = np.ceil(samples / per_step - 1e-9)
    time_s = steps * res.t_step_s
    dev_h = k * time_s / 3600.0
    cost = dev_h * price if price is not None else None
    ok = np.ones(len(k), dtype=bool)
    if max_hours is not None:
        ok &= time_s <= max_hours * 3600.0
    if cost is not None and max_cost is not None:
        ok &= cost <= max_cost
    rows = []
    for i in range(len(k)):
        rows.append(
            {
                "devices": int(res.devices[i]),
                "efficiency": float(res.efficiency[i]),
                "t_step_s": float(res.t_step_s[i]),
                "samples_per_s": float(res.samples_per_s[i]),
                "steps": float(steps[i]),
                "time_s": float(time_s[i]),
                "hours": float(time_s[i] / 3600.0),
                "device_hours": float(dev_h[i]),
                "cost": None if cost is None else float(cost[i]),
                "within_budget": bool(ok[i]),
            }
        )
    if not ok.any():
        fastest, parts = int(np.argmin(time_s)), []
        if max_hours is not None and time_s[fastest] > max_hours * 3600.0:
            parts.append(
                f"the fastest, k={rows[fastest]['devices']}, takes {fmt_time(time_s[fastest])} > "
                f"--max-hours {max_hours:g}"
            )
        if cost is not None and max_cost is not None:
            ch = int(np.argmin(cost))
            if cost[ch] > max_cost:
                parts.append(
                    f"the cheapest, k={rows[ch]['devices']}, costs {fmt_count(cost[ch])} > --max-cost {max_cost:g}"
                )
        if not parts:
            parts.append(
                f"each of --max-hours {max_hours:g} and --max-cost {max_cost:g} can be met alone, but no k meets both"
            )
        raise Infeasible(
            f"no k from {rows[0]['devices']} to {rows[-1]['devices']} trains {fmt_count(samples)} "
            f"samples within budget: " + "; ".join(parts)
        )
    idx = np.flatnonzero(ok)
    money = cost if cost is not None else dev_h
    cheapest = int(idx[np.lexsort((time_s[idx], money[idx]))[0]])
    fastest = int(idx[np.lexsort((money[idx], time_s[idx]))[0]])
    return TrainPlan(
        samples=float(samples),
        price=price,
        max_hours=max_hours,
        max_cost=max_cost,
        rows=rows,
        cheapest=rows[cheapest],
        fastest=rows[fastest],
        result=res,
    )
