"""Decision answers on the analytic model: solve for the number instead of reading it off a plot.

Three questions, each a pure function of a :class:`~simcli.step.engine.Scenario`:

* :func:`max_devices`: the largest k whose efficiency E(k) = S(k)/k stays at or
  above a target, scanning every k asked for (E need not fall monotonically:
  a partial node at k = 9 on 8-device nodes reaches the next tier through one
  link, k = 16 through eight), with every k where E crosses the target.
* :func:`simcli.decisions.solve.solve_field` (its own module): the value of one
  numeric profile field at which E(k) reaches the target.
* :func:`time_to_train`: wall-clock time, device-hours and cost of a whole run
  for each k, with the cheapest and the fastest k within a budget.

:func:`training_memory` checks whether the training state and the activations fit in device memory,
on the one memory model (:mod:`simcli.step.memory`). :func:`whole_nodes` keeps the device counts that fill
whole nodes past the first.

This module prints nothing and imports no CLI, YAML, pandas or plotting code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.types import InputError, SimcliError, Workload
from ..base.units import fmt_count, fmt_rate, fmt_time
from ..step.engine import Result, Scenario, simulate
from ..step.memory import MemoryCheck
from ..step.memory import check as memory_check
from .explain import explain

__all__ = [
    "Infeasible",
    "Crossing",
    "MaxDevices",
    "TrainPlan",
    "training_memory",
    "whole_nodes",
    "breakdown",
    "efficiency_crossings",
    "max_devices",
    "samples_from_tokens",
    "time_to_train",
    "check_target",
    "describe_breakdown",
]


class Infeasible(SimcliError):
    """A well-posed question with no answer (no k, no field value, no plan within budget): exit 1."""


# --------------------------------------------------------------------------- memory


def training_memory(sc: Scenario, devices: Any) -> MemoryCheck:
    """The memory per device of ``sc`` at ``devices``, from the one memory model (:mod:`simcli.step.memory`)."""
    return memory_check(sc, devices)


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
    """Every term of the step at the i-th k (:func:`simcli.decisions.explain.explain`'s terms, under its keys), the term
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


# --------------------------------------------------------------------------- max-devices


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


def check_target(target: float | None, option: str = "--min-efficiency") -> float:
    if target is None:
        raise InputError(f"{option}: required for this question (a fraction such as 0.9)")
    if not (isinstance(target, (int, float)) and math.isfinite(target) and 0 < target <= 1):
        raise InputError(f"{option}: {target!r} is not in (0, 1]; give the efficiency to reach, for example 0.9")
    return float(target)


def max_devices(sc: Scenario, devices: np.ndarray, *, target: float | None) -> MaxDevices:
    """The largest k in ``devices`` before E(k) first falls below target (None: refused, as --min-efficiency is
    required here), with the later recoveries listed; every k is scanned (one vectorised simulate)."""
    target = check_target(target)
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


# --------------------------------------------------------------------------- time-to-train


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
