"""Every term of one prediction, for one k: what `--explain` and `simcli explain` print.

Pure: takes a :class:`~simcli.step.engine.Scenario` and a device count, returns a
JSON-ready dict (SI units in the key names). No printing, no CLI imports.

The crossover size n* is where an all-reduce's latency terms equal its
bandwidth terms; every algorithm's cost is affine in the message size n
(T = L + n·s), so n* = L/s. For the ring, L = 2(k-1)·alpha and
s = 2(k-1)/k / B, hence n* = k·alpha·B. Messages below n* are latency-bound.
"""

from __future__ import annotations

from typing import Any

from ..comm.cost import CommCost
from ..step.buckets import bucket_timeline
from ..step.engine import Scenario, simulate
from ..step.strategies import SPECS
from .explain_sharding import explain_sharded
from .explain_terms import message, proto, step_terms, tier_rows

__all__ = ["explain"]


def _crossover(cost: CommCost, nbytes: float) -> float | None:
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
    if SPECS[sc.strategy].timeline != "buckets":  # zero1/zero2/fsdp/hsdp: the same keys, plus the per-unit timeline
        return explain_sharded(sc, k)
    res = simulate(sc, [k])
    plan = res.plan
    assert plan is not None
    comm = res.comm
    main_cost = res.comm_bucket if res.comm_bucket is not None else res.comm_last
    tiers = tier_rows(sc, comm, k, hops=main_cost.tier_hops if main_cost is not None else None)
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
        out["timeline"] = bucket_timeline(plan, t_b, c_full, c_last=c_last)
    return out
