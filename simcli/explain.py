"""Every term of one prediction, for one k: what `--explain` and `simcli explain` print.

Pure: takes a :class:`~simcli.engine.Scenario` and a device count, returns a
JSON-ready dict (SI units in the key names). No printing, no CLI imports.

The crossover size n* is where an all-reduce's latency terms equal its
bandwidth terms; every algorithm's cost is affine in the message size n
(T = L + n·s), so n* = L/s. For the ring, L = 2(k-1)·alpha and
s = 2(k-1)/k / B, hence n* = k·alpha·B. Messages below n* are latency-bound.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import collectives
from .engine import Scenario, bucket_timeline, simulate
from .memory import PARTS

__all__ = ["explain", "FORMULAS"]

#: the cost each algorithm charges, as printed in explanations: the registry's formulas (one copy)
FORMULAS: dict[str, str] = {a.name: a.formula for a in collectives.REGISTRY}


def formula(algorithm: str, library: str = "textbook") -> str:
    """The formula line for an algorithm on a profile of ``library``."""
    if algorithm == "auto":
        return "the fastest of every algorithm simcli models (no single library reaches it)"
    spec = collectives.SPECS[algorithm]
    text = spec.formula
    if library != "nccl" and spec.textbook is not None and "; on an NCCL profile" in text:
        text = text.split("; on an NCCL profile")[0]
    elif library == "nccl" and spec.nccl is not None and "; on an NCCL profile" in text:
        text = "NCCL's " + text.split("; on an NCCL profile NCCL's ")[-1]
    return text


def _f(x: Any) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def proto(c: collectives.CommCost) -> str | None:
    """The protocol NCCL runs for the first element of a cost (None for a textbook algorithm)."""
    return None if c.protocol is None or c.protocol[0] in (None, "-") else str(c.protocol[0])


def message(c: collectives.CommCost, count: float, nbytes: float, **extra: Any) -> dict[str, Any]:
    """One kind of message of the step: how many, how big, and the terms of one of them (s)."""
    fill = None if c.fill is None else float(np.asarray(c.fill).reshape(-1)[0])
    return {
        **extra,
        "count": count,
        "bytes": nbytes,
        "algorithm": str(c.algorithm[0]),
        "protocol": proto(c),
        "time_s": float(c.time[0]),
        "latency_s": float(c.latency[0]),
        "bandwidth_s": float(c.bandwidth[0]),
        "fill_s": fill,  #: the part of bandwidth_s that is pipeline fill (NVLS), None for textbook costs
        "reduction_s": float(c.reduction[0]),
    }


def tier_rows(sc: Scenario, comm: collectives.CommCost, k: int, hops: np.ndarray | None) -> list[dict[str, Any]]:
    """One row per tier: what it offers and the latency and bandwidth terms it carries in the step."""
    net = sc.profile.network
    karr = np.array([k])
    ring_bw = collectives.tier_bandwidth(net, karr)[:, 0]
    link_bw = collectives.tier_link_bandwidth(net, karr)[:, 0]
    spanned = collectives.tier_spanned(net, karr)[:, 0]
    return [
        {
            "tier": t.name,
            "spanned": bool(spanned[i]),
            "per": t.per,
            "size": t.size,
            "alpha_s": t.latency_s,
            "ring_bandwidth_Bps": _f(ring_bw[i]),
            "link_bandwidth_Bps": _f(link_bw[i]),
            "latency_term_s": float(comm.tier_latency[i][0]),
            "bandwidth_term_s": float(comm.tier_bandwidth_s[i][0]),
            # hops on the chunk's critical path (NCCL model only)
            "hops": None if hops is None else float(hops[i][0]),
        }
        for i, t in enumerate(net)
    ]


def step_terms(
    sc: Scenario,
    res: Any,
    comm: collectives.CommCost,
    *,
    algorithm: str,
    protocol: str | None,
    formula_of: str,
    messages: list[dict[str, Any]],
    tiers: list[dict[str, Any]],
) -> dict[str, Any]:
    """The keys every explanation has, in their order (the ddp and the sharded explanations both use it)."""
    b = int(comm.bottleneck[0])
    return {
        "algorithm": algorithm,
        "protocol": protocol,
        "library": sc.profile.library,
        "formula": formula(formula_of, sc.profile.library) if formula_of in collectives.SPECS else "",
        "nccl_defaulted": (list(collectives.nccl_spec(sc.profile).defaulted) if sc.profile.library == "nccl" else None),
        "overlap": sc.overlap,
        "accum": sc.accum,
        "batch_per_device": float(res.batch_per_device[0]),
        "t_forward_s": float(res.t_forward_s[0]),
        "t_backward_s": float(res.t_backward_s[0]),
        "t_compute_s": float(res.t_compute_s[0]),
        "spread": sc.device_spread,
        "t_straggler_s": float(res.t_straggler_s[0]),
        "messages": messages,
        "tiers": tiers,
        "t_latency_s": float(comm.latency[0]),
        "t_bandwidth_s": float(comm.bandwidth[0]),
        "t_reduction_s": float(comm.reduction[0]),
        "t_comm_s": float(res.t_comm_s[0]),
        "t_comm_hidden_s": float(res.t_comm_hidden_s[0]),
        "t_comm_exposed_s": float(res.t_comm_exposed_s[0]),
        "t_step_s": float(res.t_step_s[0]),
        "speedup": float(res.speedup[0]),
        "efficiency": float(res.efficiency[0]),
        "samples_per_s": float(res.samples_per_s[0]),
        "bottleneck": sc.profile.network[b].name if b >= 0 else None,
        "alpha_s": float(comm.alpha[0]),
        "bus_Bps": _f(comm.bus_Bps[0]),
        "memory": memory_terms(sc, res),
    }


def memory_terms(sc: Scenario, res: Any) -> dict[str, Any]:
    """The memory per device at the result's first k, part by part (simcli.memory, the one memory model)."""
    mem = res.memory
    cap = sc.profile.device.memory_bytes
    total = float(mem.total[0])
    return {
        "params_bytes": float(mem.params[0]),
        **{f"{part}_bytes": float(getattr(mem, part)[0]) for part in PARTS},
        "total_bytes": total,
        "capacity_bytes": cap,
        "fits": None if cap is None else total <= cap,
    }


def _crossover(cost: collectives.CommCost, nbytes: float) -> float | None:
    """n* = L / s for a cost T = L + n·s evaluated at ``nbytes`` (None when there is no bandwidth term)."""
    lat = float(cost.latency[0])
    bw = float(cost.bandwidth[0])
    if bw <= 0 or lat <= 0:
        return None
    return lat * nbytes / bw


def explain(scenario: Scenario, devices: int) -> dict[str, Any]:
    """Every term of the step on ``devices`` devices, in SI (JSON-ready)."""
    sc = scenario
    k = int(devices)
    if sc.strategy != "ddp":  # zero1/zero2/fsdp/hsdp: the same keys, plus the per-unit timeline
        from .explain_sharding import explain_sharded

        return explain_sharded(sc, k)
    res = simulate(sc, [k])
    plan = res.plan
    assert plan is not None
    comm = res.comm
    main_cost = res.comm_bucket if res.comm_bucket is not None else res.comm_last
    tiers = tier_rows(sc, comm, k, main_cost.tier_hops if main_cost is not None else None)
    main = res.comm_bucket if res.comm_bucket is not None else res.comm_last
    main_bytes = plan.size if plan.full else plan.last
    algorithm = str(main.algorithm[0]) if main is not None else sc.algorithm
    messages = []
    if res.comm_bucket is not None:
        messages.append(message(res.comm_bucket, plan.full, plan.size))
    if res.comm_last is not None:
        messages.append(message(res.comm_last, 1, plan.last))
    n_star = _crossover(main, main_bytes) if main is not None and k >= 2 else None
    out: dict[str, Any] = {
        "devices": k,
        "inputs": sc.inputs(),
        **step_terms(
            sc,
            res,
            comm,
            algorithm=algorithm,
            protocol=proto(main) if main is not None else None,
            formula_of=algorithm,
            messages=messages,
            tiers=tiers,
        ),
        "message_bytes": main_bytes,
        "n_star_bytes": n_star,
        "latency_bound": bool(n_star is not None and main_bytes < n_star),
    }
    if sc.overlap == "buckets" and plan.count <= 64 and k >= 2:
        t_b = float(res.t_backward_s[0]) / sc.accum
        c_full = float(res.comm_bucket.time[0]) if res.comm_bucket is not None else 0.0
        c_last = float(res.comm_last.time[0]) if res.comm_last is not None else 0.0
        out["timeline"] = bucket_timeline(plan, t_b, c_full, c_last)
    return out
