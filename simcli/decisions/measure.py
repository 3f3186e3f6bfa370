"""`simcli plan measure`: which device counts and message sizes to benchmark on the cluster being sized, to narrow
the prediction's uncertainty most and to place the scaling knee, each with the command that measures it.

The step at the target k (the range's largest) is split into the terms the engine adds up: compute (the MFU),
the wait for the slowest of k devices (the spread σ), the exposed communication (each tier's α and B) and the
update. Each term has a band, what a measurement could find it to be; :func:`measure_plan` prices the step again
at each band's ends (``T_step`` with that term at its low and at its high end, the rest as predicted), and the
difference, as a share of ``T_step``, is what measuring the term narrows. The bands:

* communication: the p10-p90 band of the published runs of the same kind (:func:`simcli.comm.bands.time_band`)
  for each collective the step sends at the target k, weighted by its time, applied to every tier's α and B;
* compute: :data:`MFU_BAND`, how far published MFUs of one model family on one GPU kind lie from the figure a
  profile carries (none where ``--mfu`` or ``--compute-time`` gives it);
* the spread: :data:`SPREAD_BAND`, the σ that published FSDP runs of one cluster need (none where ``--spread`` or
  the profile's ``device.spread`` gives it);
* the update: :data:`UPDATE_BAND`, an optimizer step's share of the memory bandwidth (none where ``--update-time``
  or the profile's ``device.update_bandwidth`` gives it).

Each measurement pins some of these (nccl-tests in one node: the inner tier; across 2 nodes: the outer tier's
bandwidth; across the most nodes planned: its latency over many hops; ``bench step`` in one node: the MFU and the
update; across 2 nodes: σ) and is ranked by the share it narrows. Pure; no printing, no CLI imports.
"""

from __future__ import annotations

import dataclasses
import math
import shlex
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..base.types import InputError, Profile
from ..base.units import fmt_bytes
from ..comm import bands, collectives
from ..step.engine import Result, Scenario, simulate
from .plan import whole_nodes

__all__ = [
    "MFU_BAND",
    "SPREAD_BAND",
    "UPDATE_BAND",
    "TARGETS",
    "MAX_NODES",
    "NCCL_TESTS_SWEEP",
    "StepModel",
    "Measurement",
    "MeasurePlan",
    "measure_plan",
    "step_messages",
]

#: an MFU not measured on this model and cluster: the band (x low, x high) of the profile's figure. Published
#: dense-transformer training on H100 lies 0.70-1.08 of dgx-h100's 0.40 (Llama 3 405B, 38-43%, Dubey et al. 2024):
#: torchtitan's Llama 3.1 8B FSDP on 8 H100s, 5,762 tokens/s per GPU x 6 x 8.03e9 / 989.4 TFLOP/s = 0.28
#: (validation/published/fsdp-torchtitan-h100.csv, eager), llm-foundry's MPT 760m-13b 37.6-42.4%
#: (validation/published/fsdp-llm-foundry-h100.csv)
MFU_BAND = (0.70, 1.08)
#: a spread σ not fitted on this cluster: the σ that validate_fsdp.py's 'spread alone' column solves per row of
#: llm-foundry's and torchtitan's FSDP tables, -0.6% to 11.9% (docs/sharding.md, validation), clipped at 0
SPREAD_BAND = (0.0, 0.119)
#: an update priced over the datasheet's memory bandwidth: an optimizer step reaches 85-100% of it
#: (docs/calibration.md, 'The update bandwidth, from bench step': expect 85-93% of the datasheet's), as a time
UPDATE_BAND = (1.0, 1.0 / 0.85)
#: the efficiencies a knee is told against
TARGETS = (0.9, 0.8, 0.7, 0.5)
#: the most nodes a planned measurement takes unless --max-nodes says otherwise
MAX_NODES = 8
#: nccl-tests' sweep: 8 B to 8 GiB, doubling (what `-b 8 -e 8G -f 2` measures)
NCCL_TESTS_SWEEP = (8.0, 8.0 * 2**30)
#: the sizes whose band is read per count (one per power of four from 8 B to 8 GiB)
_BAND_SIZES = 8.0 * 4.0 ** np.arange(16)


@dataclass(frozen=True)
class StepModel:
    """The model `simcli bench step` trains to stand in for the workload: its options and what it keeps."""

    args: tuple[str, ...]
    describe: str
    dtype: str


@dataclass(frozen=True)
class Measurement:
    """One planned measurement: what runs, on how many devices, the command, what it pins and why."""

    what: str
    devices: int
    nodes: int
    where: str
    sizes: tuple[dict[str, Any], ...]
    command: str
    alternative: str | None
    pins: tuple[str, ...]
    narrows: float  #: the share of T_step at the target k its terms' bands span, that it pins
    why: str
    rank: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "what": self.what,
            "devices": self.devices,
            "nodes": self.nodes,
            "where": self.where,
            "sizes": [dict(s) for s in self.sizes],
            "command": self.command,
            "alternative": self.alternative,
            "pins": list(self.pins),
            "narrows": self.narrows,
            "why": self.why,
        }


@dataclass(frozen=True)
class MeasurePlan:
    target: int
    t_step_s: float
    terms: tuple[dict[str, Any], ...]
    knee: dict[str, Any]
    measurements: tuple[Measurement, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": "measure",
            "target_devices": self.target,
            "t_step_s": self.t_step_s,
            "terms": [dict(t) for t in self.terms],
            "knee": dict(self.knee),
            "answer": [m.to_dict() for m in self.measurements],
            "notes": list(self.notes),
        }


# --------------------------------------------------------------------------- the step's messages


def step_messages(res: Result) -> list[tuple[str, float, float, Any, Profile, np.ndarray]]:
    """Every collective of one micro-step: (collective, how many, bytes as nccl-tests counts them, its cost over
    k, the profile it is priced on, its devices over k): DDP's full buckets and remainder, or a sharded strategy's
    all-gathers, reduce-scatters and all-reduces."""
    sc = res.scenario
    if res.sharded is not None:
        on = res.sharded.priced_on or tuple((m[0].split()[0], sc.profile, res.devices) for m in res.sharded.messages)
        return [
            (name.split()[0], float(count), float(nbytes), cost, prof, np.asarray(dev))
            for (name, count, nbytes, cost), (_, prof, dev) in zip(res.sharded.messages, on)
            if count
        ]
    plan = res.plan
    out = []
    if plan is not None and plan.full and res.comm_bucket is not None:
        out.append(("all_reduce", float(plan.full), float(plan.size), res.comm_bucket, sc.profile, res.devices))
    if plan is not None and plan.last and res.comm_last is not None:
        out.append(("all_reduce", 1.0, float(plan.last), res.comm_last, sc.profile, res.devices))
    return out


def _ratio_band(prof: Profile, k: int, n: float, *, cost: Any, i: int, collective: str) -> tuple[float, float, str]:
    """(low, high) of t_meas / t_pred for one collective at one k, and what the band was read from."""
    t = float(cost.time[i])
    if k <= 1 or t <= 0:
        return 1.0, 1.0, bands.ONE_DEVICE.basis
    alg = cost.algorithm[i] if cost.algorithm is not None else "ring"
    proto = None if cost.protocol is None else np.asarray(cost.protocol)[i]
    b = bands.time_band(
        prof.network,
        np.array([k]),
        np.array([n]),
        time=np.array([t]),
        algorithm=[alg],
        protocol=proto,
        collective=collective,
    )
    return float(b.lo[0]) / t, float(b.hi[0]) / t, b.bands[int(b.which[0])].words()


def _scaled(p: Profile, r: float) -> Profile:
    """Every tier's collective time r times the prediction: α x r, B / r."""
    net = tuple(dataclasses.replace(t, latency_s=t.latency_s * r, bandwidth_Bps=t.bandwidth_Bps / r) for t in p.network)
    return p.replace(network=net)


def _faster(sc: Scenario, f: float) -> Scenario:
    """The scenario with every peak f times the profile's: the MFU x f, still measured at the k it was measured at
    (a --mfu would take the wait of that k out of it)."""
    dev = sc.profile.device
    peaks = {d: v * f for d, v in dev.peak_flops.items()}
    return sc.replace(profile=sc.profile.replace(device=dataclasses.replace(dev, peak_flops=peaks)))


def _t_step(sc: Scenario, k: int) -> float:
    return float(simulate(sc, [k]).t_step_s[0])


# --------------------------------------------------------------------------- the terms and their bands


def _terms(sc: Scenario, res: Result, kt: int) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Each term of T_step at kt with its band, T_step at the band's ends, and the comm's tier shares."""
    i = int(np.flatnonzero(res.devices == kt)[0])
    t_step = float(res.t_step_s[i])
    strag = float(res.t_straggler_s[i])
    compute = float(res.t_compute_s[i]) - strag
    exposed = float(res.t_comm_exposed_s[i])
    upd = float(res.t_update_s[i])
    terms = []

    cal = sc.profile.calibration or {}
    fitted_mfu = sc.compute_dtype in ((cal.get("step") or {}).get("by_dtype") or {})
    if sc.compute_time_s is not None or sc.mfu is not None or fitted_mfu:
        lo_hi, basis = (t_step, t_step), "given (--mfu, --compute-time, or calibrated): taken as measured"
    else:
        mfu = sc.achieved_mfu
        lo_hi = (_t_step(_faster(sc, MFU_BAND[1]), kt), _t_step(_faster(sc, MFU_BAND[0]), kt))
        basis = f"MFU x{MFU_BAND[0]:g}..x{MFU_BAND[1]:g} of {mfu:g}: published MFUs of one family on one GPU kind"
    terms.append(_term("compute", "the MFU", compute, t_step=t_step, lo_hi=lo_hi, basis=basis))

    fitted = sc.spread is not None or sc.profile.device.spread is not None
    if fitted or kt <= 1:
        lo_hi, basis = (t_step, t_step), ("given or fitted: taken as measured" if fitted else "one device: no wait")
    else:
        lo_hi = (_t_step(sc.replace(spread=SPREAD_BAND[0]), kt), _t_step(sc.replace(spread=SPREAD_BAND[1]), kt))
        basis = f"σ {SPREAD_BAND[0]:g}..{SPREAD_BAND[1]:g}: what published FSDP runs of one cluster need"
    terms.append(_term("slowest of k", "the spread σ", strag, t_step=t_step, lo_hi=lo_hi, basis=basis))

    shares = {"inner": 0.0, "outer_latency": 0.0, "outer_bandwidth": 0.0}
    msgs = step_messages(res)
    weight = sum(c * float(cost.time[i]) for _, c, _, cost, _, _ in msgs)
    if kt > 1 and weight > 0:
        lo = hi = 0.0
        widest = ("", 0.0)
        for coll, count, nbytes, cost, prof, dev in msgs:
            w = count * float(cost.time[i]) / weight
            r_lo, r_hi, words = _ratio_band(prof, int(dev[i]), nbytes, cost=cost, i=i, collective=coll)
            lo, hi = lo + w * r_lo, hi + w * r_hi
            if w * (r_hi - r_lo) > widest[1]:
                widest = (f"{coll} {fmt_bytes(nbytes)}: {words}", w * (r_hi - r_lo))
        t_lo, t_hi = (_t_step(sc.replace(profile=_scaled(sc.profile, r)), kt) for r in (lo, hi))
        lo_hi = (t_lo, t_hi)
        basis = f"x{lo:.2f}..x{hi:.2f} of each collective (p10-p90 of published runs; widest: {widest[0]})"
        shares = _tier_shares(res.comm, i)
    else:
        lo_hi, basis = (t_step, t_step), "no collective at this k"
    terms.append(_term("exposed comm", "each tier's α and B", exposed, t_step=t_step, lo_hi=lo_hi, basis=basis))

    measured_upd = sc.update_time_s is not None or sc.profile.device.update_Bps is not None
    if measured_upd or upd <= 0:
        lo_hi, basis = (t_step, t_step), "given or fitted: taken as measured" if upd > 0 else "no update priced"
    else:
        lo_hi = (t_step + upd * (UPDATE_BAND[0] - 1), t_step + upd * (UPDATE_BAND[1] - 1))
        basis = f"x{UPDATE_BAND[0]:g}..x{UPDATE_BAND[1]:.2f}: an optimizer step reaches 85-100% of the memory bandwidth"
    terms.append(_term("update", "the update bandwidth", upd, t_step=t_step, lo_hi=lo_hi, basis=basis))
    return terms, shares


def _term(name: str, what: str, seconds: float, *, t_step: float, lo_hi: tuple[float, float], basis: str) -> dict:
    lo, hi = min(lo_hi), max(lo_hi)
    return {
        "term": name,
        "pinned_by": what,
        "seconds": seconds,
        "share": seconds / t_step,
        "t_step_lo_s": lo,
        "t_step_hi_s": hi,
        "narrows": (hi - lo) / t_step,
        "band": basis,
    }


def _tier_shares(comm: Any, i: int) -> dict[str, float]:
    """Of the step's communication at index i: the innermost tier's share, the outer tiers' latency and bandwidth
    shares (what a run in one node, and runs across nodes, measure)."""
    if comm.tier_latency is None or comm.tier_bandwidth_s is None:
        return {"inner": 0.0, "outer_latency": 0.5, "outer_bandwidth": 0.5}
    lat = np.asarray(comm.tier_latency)[:, i]
    bw = np.asarray(comm.tier_bandwidth_s)[:, i]
    total = float(lat.sum() + bw.sum()) or 1.0
    return {
        "inner": float(lat[0] + bw[0]) / total,
        "outer_latency": float(lat[1:].sum()) / total,
        "outer_bandwidth": float(bw[1:].sum()) / total,
    }


# --------------------------------------------------------------------------- the knee


def _knee(res: Result, measured: Sequence[int]) -> dict[str, Any]:
    k, e = res.devices, res.efficiency
    out: dict[str, Any] = {"crossings": [], "from": None, "to": None, "drop_per_doubling": None, "bracket": None}
    for t in TARGETS:
        below = np.flatnonzero(e < t)
        if below.size and e[0] >= t:
            j = int(below[0])
            out["crossings"].append({"target": t, "devices": int(k[j]), "efficiency": float(e[j])})
    if k.size < 2:
        out["words"] = f"one device count (k = {int(k[0])}): no knee to place"
        return out
    drop = (e[:-1] - e[1:]) / np.log2(k[1:] / k[:-1])
    j = int(np.argmax(drop))
    a, b = int(k[j]), int(k[j + 1])
    out.update({"from": a, "to": b, "drop_per_doubling": float(drop[j])})
    grow = {
        "exposed comm": float(res.t_comm_exposed_s[j + 1] - res.t_comm_exposed_s[j]),
        "slowest of k": float(res.t_straggler_s[j + 1] - res.t_straggler_s[j]),
        "update": float(res.t_update_s[j + 1] - res.t_update_s[j]),
    }
    out["grows"] = max(grow, key=lambda g: grow[g])
    lo = [m for m in measured if m <= a]
    hi = [m for m in measured if m >= b]
    out["bracket"] = [max(lo) if lo else None, min(hi) if hi else None]
    words = (
        f"E falls fastest from k = {a} to {b} ({float(e[j]):.3f} -> {float(e[j + 1]):.3f}; "
        f"{out['grows']} grows most, by {_ms(grow[out['grows']])})"
    )
    if out["crossings"]:
        c = out["crossings"][0]
        words += f"; E first falls below {c['target']:g} at k = {c['devices']}"
    else:
        words += f"; E stays at or above {min(TARGETS[0], float(e.min())):.3g} over the range"
    if hi:
        words += f"; measured counts {out['bracket'][0] if lo else '-'} and {min(hi)} bracket it"
    else:
        words += f"; it lies past the largest measured count ({max(measured)}): extrapolated from it"
    out["words"] = words
    return out


def _ms(s: float) -> str:
    return f"{s * 1e3:.3g} ms"


# --------------------------------------------------------------------------- the plan


def measure_plan(
    sc: Scenario,
    devices: Any,
    *,
    step_model: StepModel,
    max_nodes: int = MAX_NODES,
    partial_nodes: bool = False,
) -> MeasurePlan:
    """The measurements that narrow the prediction at the range's largest k most, ranked (see the module)."""
    if max_nodes < 1:
        raise InputError(f"--max-nodes: {max_nodes} must be at least 1 (the one node every plan measures)")
    k = np.asarray(devices, dtype=np.int64).ravel()
    if not partial_nodes:
        k = whole_nodes(sc, k)
    res = simulate(sc, k)
    kt = int(k.max())
    net = sc.profile.network
    node = int(net[0].size) if len(net) > 1 and net[0].size else kt
    k_in = min(node, kt)
    nodes_reached = math.ceil(kt / node)
    k2 = 2 * node if nodes_reached >= 2 else None
    far_nodes = min(nodes_reached, max_nodes)
    kf = far_nodes * node if far_nodes > 2 else None
    notes = []
    if nodes_reached < 2:
        notes.append(
            f"the range stays in one node (k <= {node}"
            + ("" if len(net) > 1 else f"; {sc.profile.name} has one tier")
            + "): no cross-node run"
        )
    if nodes_reached > far_nodes:
        notes.append(
            f"the range reaches k = {kt} ({nodes_reached} nodes); the largest run planned is {far_nodes} nodes "
            f"(--max-nodes {max_nodes}): past it the outer tier's latency and NCCL's choice are extrapolated"
        )
    others = sorted({m[0] for m in step_messages(res)} - {"all_reduce"})
    if others:
        notes.append(
            f"the step also sends {' and '.join(others)}: calibrate fits α and B from all-reduce runs and the model "
            "prices every collective on them; nccl-tests' "
            + " and ".join(f"{c}_perf" for c in others)
            + " with the same options measure them directly (no published curve of them: their band is their "
            "neighbours' widest)"
        )
    terms, shares = _terms(sc, res, kt)
    by = {t["term"]: t["narrows"] for t in terms}
    counts = [c for c in (k_in, k2, kf) if c]
    runs = _nccl_runs(
        sc,
        res,
        node,
        k_in=k_in,
        k2=k2,
        kf=kf,
        nodes_reached=nodes_reached,
        max_nodes=max_nodes,
        comm_narrows=by["exposed comm"],
        shares=shares,
    )
    runs += _step_runs(sc, node, k_in, k2=k2, model=step_model, by=by)
    ordered = sorted(runs, key=lambda m: -m.narrows)
    ranked = tuple(dataclasses.replace(m, rank=r) for r, m in enumerate(ordered, start=1))
    return MeasurePlan(
        target=kt,
        t_step_s=float(res.t_step_s[-1]),
        terms=tuple(terms),
        knee=_knee(res, counts),
        measurements=ranked,
        notes=tuple(notes),
    )


def _sizes(res: Result, k: int) -> list[dict[str, Any]]:
    """The collectives the step sends at k (bytes as nccl-tests counts them) and the bands of all-reduce at k."""
    out = []
    idx = np.flatnonzero(res.devices == k)
    i = int(idx[0]) if idx.size else None
    seen = set()
    for coll, count, nbytes, cost, _, dev in step_messages(res):
        key = (coll, round(nbytes))
        if key in seen:
            continue
        seen.add(key)
        out.append(
            {
                "bytes": int(round(nbytes)),
                "what": f"{coll} x{count:g} per micro-step",
                "kind": "model",
                "at_devices": None if i is None else int(dev[i]),
            }
        )
    return out


def _band_sizes(sc: Scenario, k: int) -> list[dict[str, Any]]:
    """Per size band, the widest all-reduce band at k over 8 B..8 GiB (NCCL's choice), widest first."""

    prof = sc.profile
    cost = collectives.collective(
        prof, sc.algorithm, np.array([k]), nbytes=_BAND_SIZES, collective="all_reduce", protocol=sc.protocol
    )
    t = np.broadcast_to(cost.time, _BAND_SIZES.shape)
    algs = cost.algorithm if cost.algorithm is not None else collectives.default_algorithm(prof)
    b = bands.time_band(prof.network, np.array([k]), _BAND_SIZES, time=t, algorithm=algs, protocol=cost.protocol)
    width = np.broadcast_to(b.hi, t.shape) / np.broadcast_to(b.lo, t.shape)
    idx = bands.size_band_index(_BAND_SIZES)
    out = []
    for j, (label, _, _) in enumerate(bands.SIZE_BANDS):
        m = np.flatnonzero(idx == j)
        if not m.size:
            continue
        w = m[int(np.argmax(width[m]))]
        rb = b.bands[int(np.broadcast_to(b.which, t.shape)[w])]
        out.append(
            {
                "band": label,
                "width": float(width[w]),
                "bytes": int(_BAND_SIZES[w]),
                "measured": rb.measured,
                "basis": rb.words(),
            }
        )
    return sorted(out, key=lambda d: -d["width"])


def _nccl_runs(
    sc: Scenario,
    res: Result,
    node: int,
    *,
    k_in: int,
    k2: int | None,
    kf: int | None,
    nodes_reached: int,
    max_nodes: int,
    comm_narrows: float,
    shares: dict[str, float],
) -> list[Measurement]:
    prof = sc.profile
    lib = prof.library
    outer = prof.network[1].name if len(prof.network) > 1 else prof.network[0].name
    inner = prof.network[0].name
    big = max([n for _, _, n, _, _, _ in step_messages(res)] + [0.0])
    fit = 2.0 ** math.ceil(math.log2(big)) if big else 0.0
    # nccl-tests' 8 GiB sweep (or past the largest message); a CPU host (gloo) only to the largest message
    end = max(64.0 * 2**20, fit) if lib == "gloo" else max(NCCL_TESTS_SWEEP[1], fit)
    sizes = sorted({int(round(n)) for _, _, n, _, _, _ in step_messages(res)})
    runs = []
    plan: list[tuple[int, str, float, tuple[str, ...]]] = [
        (k_in, f"inside one node, {inner}", shares["inner"], (f"α and B of {inner}",))
    ]
    if k2:
        plan.append(
            (
                k2,
                f"across 2 nodes, {outer}",
                shares["outer_bandwidth"] + (0.0 if kf else shares["outer_latency"]),
                (f"B of {outer}",) + (() if kf else (f"α of {outer}",)),
            )
        )
    if kf:
        many = (f"α of {outer} over many hops",)
        plan.append((kf, f"across {kf // node} nodes, {outer}", shares["outer_latency"], many))
    for k, where, share, pins in plan:
        nodes = max(1, math.ceil(k / node))
        tool = {"nccl": "nccl-tests", "rccl": "rccl-tests"}.get(lib)
        out_file = f"ar-{k}.txt"
        sweep = f"-b {int(NCCL_TESTS_SWEEP[0])} -e {_g(end)} -f 2 -g 1"
        if tool:
            per = "" if nodes == 1 or (prof.network[0].kind == "mnnvl") else f" -N {node}"
            hosts = "" if nodes == 1 else " --hostfile hosts"
            command = f"mpirun -np {k}{per}{hosts} ./build/all_reduce_perf {sweep} | tee {out_file}"
        size_arg = f"8B..{_g(end)}iB:x2" + "".join(f",{s}B" for s in sizes)
        backend = "gloo" if lib == "gloo" else "nccl"
        simcli_run = f"simcli bench allreduce --world-sizes {k} --backend {backend} --size {size_arg} -o ar-{k}.csv"
        if nodes > 1 and lib != "gloo":  # gloo profiles describe one host: its ranks are spawned there
            simcli_run = (
                f"torchrun --nnodes {nodes} --nproc-per-node {node} --rdzv-backend c10d --rdzv-endpoint HEAD:29500 "
                f"-m simcli bench allreduce --backend {backend} --size {size_arg} -o ar-{k}.csv"
            )
        alternative: str | None = simcli_run
        if not tool:
            command, alternative = simcli_run, None
        model_sizes = _sizes(res, k)
        widest = _band_sizes(sc, k)[:1]
        why = (
            f"what it pins is {share:.0%} of the step's communication at k = {int(res.devices[-1])}, whose band "
            f"spans {comm_narrows:.1%} of T_step there"
        )
        if widest:
            w = widest[0]
            why += f"; the band at k = {k} is widest at {w['band']} (x{w['width']:.2f}: {w['basis']})"
        if nodes == max_nodes and nodes_reached > max_nodes:
            why += f"; {nodes} nodes: the most --max-nodes allows (the range reaches {nodes_reached})"
        runs.append(
            Measurement(
                what=f"{tool or 'simcli bench'} all_reduce",
                devices=k,
                nodes=nodes,
                where=where,
                sizes=tuple(model_sizes + [{**w, "kind": "band", "what": f"widest band {w['band']}"} for w in widest]),
                command=command,
                alternative=alternative,
                pins=pins,
                narrows=comm_narrows * share,
                why=why,
            )
        )
    return runs


def _g(n: float) -> str:
    """nccl-tests' size spelling: 8G, 512M, 64K, 8."""
    for unit, f in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= f and n % f == 0:
            return f"{int(n // f)}{unit}"
    return str(int(n))


def _step_runs(
    sc: Scenario, node: int, k_in: int, *, k2: int | None, model: StepModel, by: dict[str, float]
) -> list[Measurement]:
    prof = sc.profile
    backend = "gloo" if prof.library == "gloo" else "nccl"
    args = " ".join(shlex.quote(a) for a in model.args)
    common = f"{args} --batch-per-device {_micro_batch(sc, k_in)} --mode ddp --backend {backend} --profile {prof.name}"
    pins0 = ["the MFU (device.mfu_by_dtype)", "the update (device.update_bandwidth)", "the backward fraction"]
    narrows0 = by["compute"] + by["update"]
    if not k2:
        pins0.append("σ (T_compute at k against k = 1)")
        narrows0 += by["slowest of k"]
    runs = [
        Measurement(
            what="simcli bench step",
            devices=k_in,
            nodes=1,
            where="inside one node",
            sizes=(),
            command=f"simcli bench step --world-sizes 1,{k_in} {common} -o step-{k_in}.csv",
            alternative=None,
            pins=tuple(pins0),
            narrows=narrows0,
            why=(
                f"the band of the compute spans {_share(by, 'compute')} of T_step at the target, the update's "
                f"{_share(by, 'update')}"
                + (f", the spread's {_share(by, 'slowest of k')}" if not k2 else "")
                + f"; {model.describe}"
            ),
        )
    ]
    if k2:
        nodes = k2 // node
        runs.append(
            Measurement(
                what="simcli bench step",
                devices=k2,
                nodes=nodes,
                where="across 2 nodes",
                sizes=(),
                command=(
                    f"simcli bench step --world-sizes 1,{k2} {common} -o step-{k2}.csv"
                    if prof.library == "gloo"
                    else f"torchrun --nnodes {nodes} --nproc-per-node {node} --rdzv-backend c10d "
                    f"--rdzv-endpoint HEAD:29500 -m simcli bench step {common} -o step-{k2}.csv"
                ),
                alternative=None,
                pins=("σ (T_compute across 2 nodes against one)", "the overlap of the step's collectives"),
                narrows=by["slowest of k"],
                why=(
                    f"the wait for the slowest of k spans {by['slowest of k']:.1%} of T_step at the target; "
                    "with the one-node run's rows it is a (devices, speedup) table that calibrate fits σ from"
                ),
            )
        )
    return runs


def _share(by: dict[str, float], term: str) -> str:
    return f"{by[term]:.1%}"


def _micro_batch(sc: Scenario, k: int) -> int:
    if sc.strong:
        return max(1, int(sc.batch // (k * sc.accum)))
    return int(sc.batch)
