"""Every term of one sharded-strategy prediction (zero1, zero2, fsdp, hsdp) for one k: :func:`simcli.explain.explain`
hands these scenarios here and returns the same keys (so `--explain`, `simcli explain` and `simcli plan` read them
alike), plus ``strategy``, ``units``, ``memory`` and, for fsdp/hsdp, ``units_timeline`` (the first and last units
of each phase from :func:`simcli.sharding.unit_timeline`). Pure; no printing, no CLI imports.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import collectives, sharding
from .engine import Scenario, _units, simulate

__all__ = ["explain_sharded"]

#: a timeline longer than this shows its first and last units only
TIMELINE_ENDS = 2


def _f(x: Any) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def _proto(c: collectives.CommCost) -> str | None:
    return None if c.protocol is None or c.protocol[0] in (None, "-") else str(c.protocol[0])


def explain_sharded(sc: Scenario, k: int) -> dict[str, Any]:
    from .explain import formula

    res = simulate(sc, [k])
    st = res.sharded
    assert st is not None
    net = sc.profile.network
    karr = np.array([k])
    ring_bw = collectives.tier_bandwidth(net, karr)[:, 0]
    link_bw = collectives.tier_link_bandwidth(net, karr)[:, 0]
    spanned = collectives.tier_spanned(net, karr)[:, 0]
    comm = res.comm
    m = int(sc.accum)
    tiers = []
    for i, t in enumerate(net):
        tiers.append(
            {
                "tier": t.name,
                "spanned": bool(spanned[i]),
                "per": t.per,
                "size": t.size,
                "alpha_s": t.latency_s,
                "ring_bandwidth_Bps": _f(ring_bw[i]),
                "link_bandwidth_Bps": _f(link_bw[i]),
                "latency_term_s": float(comm.tier_latency[i][0]) if comm.tier_latency is not None else None,
                "bandwidth_term_s": (float(comm.tier_bandwidth_s[i][0]) if comm.tier_bandwidth_s is not None else None),
                "hops": float(comm.tier_hops[i][0]) if comm.tier_hops is not None else None,
            }
        )
    messages = [
        {
            "collective": name,
            "count": m * count,
            "bytes": float(nbytes),
            "algorithm": str(c.algorithm[0]),
            "protocol": _proto(c),
            "time_s": float(c.time[0]),
            "latency_s": float(c.latency[0]),
            "bandwidth_s": float(c.bandwidth[0]),
            "reduction_s": float(c.reduction[0]),
        }
        for name, count, nbytes, c in st.messages
        if count
    ]
    main = st.messages[0][3]
    b = int(comm.bottleneck[0])
    mem = res.memory
    cap = sc.profile.device.memory_bytes
    total = float(mem.total[0])
    out: dict[str, Any] = {
        "devices": k,
        "inputs": {
            **sc.inputs(),
            "strategy": sc.strategy,
            "param_dtype": sc.param_dtype,
            "shard_group": sc.shard_group,
            "units": _units(sc),
            "reshard_after_forward": sc.reshard_after_forward,
            "activation_checkpointing": sc.activation_checkpointing,
        },
        "strategy": sc.strategy,
        "units": _units(sc),
        "algorithm": str(main.algorithm[0]),
        "protocol": _proto(main),
        "library": sc.profile.library,
        "formula": formula(sc.algorithm, sc.profile.library) if sc.algorithm in collectives.SPECS else "",
        "nccl_defaulted": (list(collectives.nccl_spec(sc.profile).defaulted) if sc.profile.library == "nccl" else None),
        "overlap": sc.overlap,
        "accum": sc.accum,
        "batch_per_device": float(res.batch_per_device[0]),
        "t_forward_s": float(res.t_forward_s[0]),
        "t_backward_s": float(res.t_backward_s[0]),
        "t_compute_s": float(res.t_compute_s[0]),
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
        "bottleneck": net[b].name if b >= 0 else None,
        "alpha_s": float(comm.alpha[0]),
        "bus_Bps": _f(comm.bus_Bps[0]),
        "message_bytes": float(st.messages[0][2]),
        "n_star_bytes": None,
        "latency_bound": False,
        "comm_bytes": float(res.comm_bytes[0]),
        "memory": {
            "params_bytes": float(mem.params[0]),
            "grads_bytes": float(mem.grads[0]),
            "optimizer_bytes": float(mem.optimizer[0]),
            "activations_bytes": float(mem.activations[0]),
            "total_bytes": total,
            "capacity_bytes": cap,
            "fits": None if cap is None else total <= cap,
        },
    }
    if sc.strategy in ("fsdp", "hsdp"):
        L = _units(sc)
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
