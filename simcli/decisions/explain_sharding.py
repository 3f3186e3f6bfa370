"""Every term of one sharded-strategy prediction (zero1, zero2, fsdp, hsdp) for one k:
:func:`simcli.decisions.explain.explain`
hands these scenarios here and returns the same keys (so `--explain`, `simcli explain` and `simcli plan` read them
alike), plus ``strategy``, ``units`` and, for fsdp/hsdp, ``units_timeline`` (the first and last units
of each phase from :func:`simcli.step.sharding.unit_timeline`). Pure; no printing, no CLI imports.
"""

from __future__ import annotations

from typing import Any

from ..step import sharding
from ..step.engine import Scenario, fsdp_units, simulate
from ..step.strategies import SPECS
from .explain_terms import message, proto, step_terms, tier_rows

__all__ = ["explain_sharded"]

#: a timeline longer than this shows its first and last units only
TIMELINE_ENDS = 2


def explain_sharded(sc: Scenario, k: int) -> dict[str, Any]:
    res = simulate(sc, [k])
    st = res.sharded
    assert st is not None
    comm = res.comm
    m = int(sc.accum)
    tiers = tier_rows(sc, comm, k, hops=comm.tier_hops)
    messages = [
        message(c, m * count, float(nbytes), collective=name) for name, count, nbytes, c in st.messages if count
    ]
    main = st.messages[0][3]
    out: dict[str, Any] = {
        "devices": k,
        "inputs": {
            **sc.inputs(),
            "strategy": sc.strategy,
            "param_dtype": sc.param_dtype,
            "shard_group": sc.shard_group,
            "units": fsdp_units(sc),
            "reshard_after_forward": sc.reshard_after_forward,
            "activation_checkpointing": sc.activation_checkpointing,
        },
        "strategy": sc.strategy,
        "units": fsdp_units(sc),
        **step_terms(
            sc,
            res,
            comm,
            algorithm=str(main.algorithm[0]),
            protocol=proto(main),
            formula_of=sc.algorithm,
            messages=messages,
            tiers=tiers,
        ),
        "message_bytes": float(st.messages[0][2]),
        "n_star_bytes": None,
        "latency_bound": False,
        "comm_bytes": float(res.comm_bytes[0]),
    }
    if SPECS[sc.strategy].timeline == "units":
        L = fsdp_units(sc)
        ag = next(c for name, _, _, c in st.messages if name == "all_gather")
        R = sum(float(c.time[0]) for name, _, _, c in st.messages if name != "all_gather")
        tl = sharding.unit_timeline(
            f=float(res.t_forward_s[0]) / m / L,
            b=float(res.t_backward_s[0]) / m / L,
            ag_fwd=float(ag.time[0]),
            ag_bwd=float(ag.time[0]) if sc.reshard_after_forward else None,
            rs=R,
            units=L,
        )
        if L > 2 * TIMELINE_ENDS:
            tl = [r for r in tl if min(r["unit"], L - 1 - r["unit"]) < TIMELINE_ENDS]
        out["units_timeline"] = tl
    return out
