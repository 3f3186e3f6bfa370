"""`plan solve FIELD`: the value of one numeric profile field (by its path, ``network[1].bandwidth``,
``inter_node.latency``, ``device.mfu``, ...) at which E(k) reaches a target, by bisection in log space to a stated
relative tolerance, or the reason no value can; where NCCL's picks make E non-monotone in the field, the ranges
where a better value is worse. Pure: prints nothing, imports no CLI, YAML, pandas or plotting code."""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base.types import InputError
from ..base.units import fmt_bytes, fmt_flops, fmt_rate, fmt_time
from ..comm import nccl, nccl_choice
from ..io import schema
from ..step.engine import Result, Scenario, simulate
from .plan import Infeasible, breakdown, check_target, describe_breakdown

__all__ = ["FieldRef", "Solved", "field_ref", "solve_field", "solve_edge", "worse_text", "DEFAULT_RTOL", "MIN_RTOL"]

#: relative tolerance on a solved field value (the answer meets the target; one (1 + rtol) step
#: further towards the infeasible side does not)
DEFAULT_RTOL = 1e-6
#: the finest tolerance: float64's resolution (2.2e-16) with room for the geometric mean's rounding. Each
#: bisection step takes a bracket of ratio 1 + d to about 1 + d/2 + 2 eps, so it ends once 1 + d <= 1 + MIN_RTOL;
#: below about 4 eps the ends stop moving (1 + 1e-17 == 1 in float64) and the bisection would never end
MIN_RTOL = 1e-14


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
            field: dict[str, Any] = {self.attr: value}  # the one field this names
            net[self.tier] = dataclasses.replace(net[self.tier], **field)
            return sc.replace(profile=p.replace(network=tuple(net)))
        if self.attr == "mfu":
            # --mfu overrides the profile's device.mfu; the solved value is the one the model uses
            return sc.replace(mfu=None, profile=p.replace(device=dataclasses.replace(p.device, mfu=value)))
        if self.attr.startswith("peak_flops."):
            peaks = dict(p.device.peak_flops)
            peaks[self.attr.split(".", 1)[1]] = value
            return sc.replace(profile=p.replace(device=dataclasses.replace(p.device, peak_flops=peaks)))
        field = {self.attr: value}
        return sc.replace(profile=p.replace(device=dataclasses.replace(p.device, **field)))

    def fmt(self, v: float) -> str:
        return _fmt_value(self.kind, v)


def field_ref(sc: Scenario, path: str) -> FieldRef:
    """Resolve a field path: ``network[1].bandwidth``, ``inter_node.bandwidth`` (the tier right outside the
    node, network[1]), ``intra_node.latency`` (network[0]), ``<tier name>.efficiency``, ``device.mfu``,
    ``device.peak_flops.bf16`` or ``device.peak_flops`` (the compute dtype's peak)."""
    p = sc.profile
    m = _PATH.match(path or "")
    bad = InputError(f"FIELD: {path!r} is not a numeric profile field; solvable: {_SOLVABLE}")
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
                    f"FIELD: {path!r}: {p.name} gives no peak for {dt!r}; it has {', '.join(p.device.peak_flops)}"
                )
            return FieldRef(f"device.{rest}", path, "flops", None, rest)
        if rest in _DEVICE_FIELDS:
            attr, kind = _DEVICE_FIELDS[rest]
            if getattr(p.device, attr) is None:
                raise InputError(
                    f"FIELD: {path!r}: {p.name} gives no device.{rest}, so there is no value "
                    "to start from; add it to the profile first"
                )
            return FieldRef(f"device.{rest}", path, kind, None, attr)
        raise bad
    if head == "network" and index is not None:
        i = int(index)
        if not -len(p.network) <= i < len(p.network):
            raise InputError(f"FIELD: {path!r}: {p.name} has {len(p.network)} tier(s) ({tiers})")
        i %= len(p.network)
    elif index is None and head in ("inter_node", "intra_node"):
        i = 1 if head == "inter_node" else 0
        if i >= len(p.network):
            raise InputError(
                f"FIELD: {path!r}: {p.name} has one tier ({tiers}), so there is no inter-node tier; use network[0]"
            )
    elif index is None and head in [t.name for t in p.network]:
        i = [t.name for t in p.network].index(head)
    else:
        raise InputError(f"FIELD: {path!r}: no such tier or field; {p.name}'s tiers are {tiers}; solvable: {_SOLVABLE}")
    if rest == "size":
        raise InputError(
            f"FIELD: {path!r}: a tier's size is a whole number of devices that shapes the topology, "
            "not a quantity to solve for; try bandwidth, latency or efficiency"
        )
    if rest not in _TIER_FIELDS:
        raise InputError(f"FIELD: {path!r}: a tier's numeric fields are {', '.join(_TIER_FIELDS)}")
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
            s += "; " + worse_text(f, above, self.bound, target=self.target)
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


def worse_text(
    f: FieldRef, worse: tuple[dict[str, Any], ...] | list[dict[str, Any]], bound: str, *, target: float
) -> str:
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


class _Sampler:
    """E(k) of a scenario as one field varies: each value priced once (its E and NCCL's picks), the calls counted."""

    def __init__(self, sc: Scenario, ref: FieldRef, k: int, *, target: float) -> None:
        self.sc, self.ref, self.k, self.target = sc, ref, k, target
        self.evals = 0
        self.seen: dict[float, tuple[float, str]] = {}
        self.state: dict[float, str] = {}  # NCCL's picks and its search graph at each value

    def run(self, x: float) -> Result:
        self.evals += 1
        return simulate(self.ref.apply(self.sc, float(x)), np.array([self.k]))

    def at(self, x: float) -> tuple[float, str]:
        x = float(x)
        if x not in self.seen:
            r = self.run(x)
            self.seen[x] = (float(r.efficiency[0]), _picks(r))
            self.state[x] = self.seen[x][1] + _graph(r)
        return self.seen[x]

    def moved(self, a: float, b: float) -> bool:
        """NCCL's picks, or its search graph's channels, differ between a and b (where E may jump)."""
        self.at(a), self.at(b)
        return self.state[float(a)] != self.state[float(b)]

    def eff(self, x: float) -> float:
        return self.at(x)[0]


def _check_tolerance(rtol: float) -> None:
    if not (isinstance(rtol, (int, float)) and 0 < rtol < 1):
        raise InputError(f"--tolerance: {rtol!r} must be a relative tolerance in (0, 1), for example 1e-6")
    if rtol < MIN_RTOL:
        raise InputError(
            f"--tolerance: {rtol:g} is finer than float64 resolves (a bracket that narrow stops shrinking); give "
            f"at least {MIN_RTOL:g}"
        )


def _flat(s: _Sampler, x0: float, e0: float, *, target: float, rtol: float, searched: tuple[float, float]) -> Solved:
    """E does not depend on the field: every value answers (the target met), or none does (Infeasible, and why)."""
    ref, k, sc = s.ref, s.k, s.sc
    if e0 >= target:
        return Solved(ref, k, target, "any", None, None, x0, e0, rtol, False, None, searched, s.evals)
    res0 = s.run(x0)
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


def _refine_picks(s: _Sampler, grid: np.ndarray, rtol: float) -> None:
    """Where NCCL's picks (or its search graph's channels) change inside a grid step: sample :data:`REFINE_POINTS`
    values inside it and bisect every change to the tolerance, so that E is monotone between neighbouring samples."""
    for lo, hi in zip(grid[:-1], grid[1:]):
        if not s.moved(lo, hi):
            continue
        inner = np.exp(np.linspace(math.log(lo), math.log(hi), REFINE_POINTS + 2))
        for a, b in zip(inner[:-1], inner[1:]):
            if not s.moved(a, b):
                continue
            while b / a > 1.0 + rtol:
                mid = math.sqrt(a * b)
                if not s.moved(mid, a):
                    a = mid
                else:
                    b = mid


def _unreachable(
    s: _Sampler, xs: np.ndarray, ev: np.ndarray, *, grid: np.ndarray, worse: list, increasing: bool
) -> None:
    """No sample meets the target: raise Infeasible with the best E found, where, and what caps it."""
    ref, k, target = s.ref, s.k, s.target
    best = int(np.argmax(ev))
    top = np.flatnonzero(ev >= ev[best] - 1e-9 * max(1.0, abs(ev[best])))
    last = best
    while last + 1 in top:
        last += 1
    rb = s.run(xs[best])
    where = (
        f"at {ref.fmt(xs[best])}" if last == best else f"from {ref.fmt(xs[best])} to {ref.fmt(xs[last])} (as sampled)"
    )
    raise Infeasible(
        f"no value of {ref.path} reaches E({k}) >= {target:g} (searched from {ref.fmt(grid[0])} to "
        f"{ref.fmt(grid[-1])}): the best is E = {ev[best]:.4f}, {where}"
        + (f"; {worse_text(ref, worse, 'minimum' if increasing else 'maximum', target=target)}" if worse else "")
        + "; "
        + describe_breakdown(breakdown(rb, 0))
        + "; the other terms cap it, so relax the target or solve for another field"
    )


def _bisect(meets: Any, good: float, bad: float | None, *, rtol: float) -> float:
    """Bisection in log space between a value that meets the target and its neighbour that does not (E monotone
    between them): the geometric mean halves log(bad/good) each step, until they differ by at most 1 + rtol."""
    if bad is None:
        return float(good)
    while max(good, bad) / min(good, bad) > 1.0 + rtol:
        mid = math.sqrt(good * bad)
        if meets(mid):
            good = mid
        else:
            bad = mid
    return float(good)


def _graph(r: Result) -> str:
    """The channels and speed of NCCL's inter-node search graph at the result's one k ('' where the rule does not
    apply): a faster NIC can stop the search at fewer, faster channels (simcli.comm.nccl.graph_tie), which moves E
    while NCCL's picks keep their names, so the search refines there too."""
    sc = r.scenario
    if sc.profile.library != "nccl" or len(sc.profile.network) < 2:
        return ""

    tie = nccl.graph_tie(sc.profile.network, nccl_choice.nccl_spec(sc.profile), np.asarray(r.devices))
    if tie is None:
        return ""
    return f" [{float(tie['channels'][0]):g} x {float(tie['speed_GBps'][0]):g} GB/s]"


def solve_field(sc: Scenario, *, devices: int, target: float | None, path: str, rtol: float = DEFAULT_RTOL) -> Solved:
    """The value of the field at ``path`` at which E(devices) reaches ``target`` (None: refused, as
    --min-efficiency is required here).

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
    target = check_target(target)
    _check_tolerance(rtol)
    k = int(devices)
    ref = field_ref(sc, path)
    x0 = ref.get(sc)
    assert x0 is not None
    s = _Sampler(sc, ref, k, target=target)
    e0 = s.eff(x0)
    grid = _search_grid(ref.kind, x0)
    es = np.array([s.eff(x) for x in grid])
    searched = (float(grid[0]), float(grid[-1]))
    if float(np.max(es) - np.min(es)) <= 1e-12 * max(1.0, float(np.max(np.abs(es)))):
        return _flat(s, x0, e0, target=target, rtol=rtol, searched=searched)
    increasing = es[-1] > es[0]
    _refine_picks(s, grid, rtol)
    xs = np.array(sorted(s.seen))
    if not increasing:
        xs = xs[::-1]  # from the field's worse end to its better end
    ev = np.array([s.seen[float(x)][0] for x in xs])
    worse = _worse_ranges(xs, ev, [s.seen[float(x)][1] for x in xs])
    meets = ev >= target
    if not meets.any():
        _unreachable(s, xs, ev, grid=grid, worse=worse, increasing=increasing)
    i = int(np.flatnonzero(meets)[0])
    good = _bisect(lambda x: s.eff(x) >= target, float(xs[i]), float(xs[i - 1]) if i > 0 else None, rtol=rtol)
    r = s.run(good)
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
        i == 0,
        breakdown(r, 0),
        searched,
        s.evals,
        tuple(worse),
    )


def solve_edge(sc: Scenario, ans: Solved, edge: str, *, band_of: Any) -> float | None:
    """The answer of ``ans`` re-solved on one edge of E(k)'s band (``edge`` "lo" or "hi"; ``band_of(scenario, k)``
    gives (E low, E high) at one k): the first value, from the field's worse end, whose E at that edge meets the
    target, to the answer's tolerance; None where no value of the searched interval does. The lower edge needs a
    better value than the answer (it lies below E), the upper edge a worse one, so the search walks the quarter-decade
    grid from the answer in that direction and bisects the step where the edge crosses the target (E's band is
    monotone in the field where E is: each edge is E with the inputs at one end of their ranges)."""
    if ans.answer is None or ans.bound == "any":
        return None
    ref, k, t = ans.field, ans.devices, ans.target
    j = 0 if edge == "lo" else 1
    seen: dict[float, float] = {}

    def meets(x: float) -> bool:
        x = float(x)
        if x not in seen:
            seen[x] = float(band_of(ref.apply(sc, x), k)[j])
        return seen[x] >= t

    grid = _search_grid(ref.kind, ans.current)
    better = grid > ans.answer if ans.bound == "minimum" else grid < ans.answer
    if edge == "lo":  # from the answer towards the better end: the first grid value whose lower edge meets
        if meets(ans.answer):
            return float(ans.answer)
        steps = grid[better] if ans.bound == "minimum" else grid[better][::-1]
        prev = ans.answer
        for x in steps:
            if meets(x):
                return _bisect(meets, float(x), float(prev), rtol=ans.rtol)
            prev = x
        return None
    steps = grid[~better][::-1] if ans.bound == "minimum" else grid[~better]  # towards the worse end
    prev = ans.answer
    for x in steps:
        if not meets(x):
            return _bisect(meets, float(prev), float(x), rtol=ans.rtol)
        prev = x
    return float(prev)


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
