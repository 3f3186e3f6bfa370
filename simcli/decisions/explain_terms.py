"""The rows every explanation shares (DDP's in :mod:`simcli.decisions.explain`, the sharded strategies' in
:mod:`simcli.decisions.explain_sharding`): the formula line, one message's terms, one row per tier, the step's keys.

Pure: JSON-ready dicts in SI units. No printing, no CLI imports.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..comm import nccl, nccl_choice, registry, releases, topology
from ..comm.cost import CommCost
from ..io.profiles import kind_text
from ..step.engine import Scenario
from ..step.memory import PARTS
from ..step.notes import nccl_faster
from ..step.update import describe as update_describe

__all__ = [
    "band_terms",
    "FORMULAS",
    "formula",
    "proto",
    "message",
    "tier_rows",
    "step_terms",
    "memory_terms",
    "faster_terms",
]

#: the cost each algorithm charges, as printed in explanations: the registry's formulas (one copy)
FORMULAS: dict[str, str] = {a.name: a.formula for a in registry.REGISTRY}


def formula(algorithm: str, library: str = "textbook") -> str:
    """The formula line for an algorithm on a profile of ``library``."""
    if algorithm == "auto":
        return "the fastest of every algorithm simcli models (no single library reaches it)"
    spec = registry.SPECS[algorithm]
    text = spec.formula
    if library != "nccl" and spec.textbook is not None and "; on an NCCL profile" in text:
        text = text.split("; on an NCCL profile")[0]
    elif library == "nccl" and spec.nccl is not None and "; on an NCCL profile" in text:
        text = "NCCL's " + text.split("; on an NCCL profile NCCL's ")[-1]
    return text


def _f(x: Any) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def proto(c: CommCost) -> str | None:
    """The protocol NCCL runs for the first element of a cost (None for a textbook algorithm)."""
    return None if c.protocol is None or c.protocol[0] in (None, "-") else str(c.protocol[0])


def message(c: CommCost, count: float, nbytes: float, **extra: Any) -> dict[str, Any]:
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


def tier_rows(sc: Scenario, comm: CommCost, k: int, *, hops: np.ndarray | None) -> list[dict[str, Any]]:
    """One row per tier: what it offers and the latency and bandwidth terms it carries in the step."""
    net = sc.profile.network
    karr = np.array([k])
    ring_bw = topology.tier_bandwidth(net, karr)[:, 0]
    link_bw = topology.tier_link_bandwidth(net, karr)[:, 0]
    spanned = topology.tier_spanned(net, karr)[:, 0]
    tl, tb = comm.tier_latency, comm.tier_bandwidth_s
    assert tl is not None and tb is not None  # every cost simcli prices carries its per-tier terms
    return [
        {
            "tier": t.name,
            "spanned": bool(spanned[i]),
            "per": t.per,
            "size": t.size,
            # the link kind (given, or guessed from the name), what it changes in NCCL's model, and the fields the
            # profile left to the kind's defaults
            "kind": nccl.tier_kind(t, i),
            "kind_note": kind_text(t, i),
            "defaulted": list(nccl.tier_defaulted(t)),
            "alpha_s": t.latency_s,
            "efficiency": t.efficiency,
            "ring_bandwidth_Bps": _f(ring_bw[i]),
            "link_bandwidth_Bps": _f(link_bw[i]),
            "latency_term_s": float(tl[i][0]),
            "bandwidth_term_s": float(tb[i][0]),
            # hops on the chunk's critical path (NCCL model only)
            "hops": None if hops is None else float(hops[i][0]),
        }
        for i, t in enumerate(net)
    ]


def step_terms(
    sc: Scenario,
    res: Any,
    comm: CommCost,
    *,
    algorithm: str | None,
    protocol: str | None,
    formula_of: str | None,
    messages: list[dict[str, Any]],
    tiers: list[dict[str, Any]],
) -> dict[str, Any]:
    """The keys every explanation has, in their order (the ddp and the sharded explanations both use it)."""
    b = int(comm.bottleneck[0])
    return {
        "algorithm": algorithm,
        "protocol": protocol,
        "library": sc.profile.library,
        "formula": formula(formula_of, sc.profile.library) if formula_of in registry.SPECS else "",
        "nccl_defaulted": (list(nccl_choice.nccl_spec(sc.profile).defaulted) if sc.profile.library == "nccl" else None),
        "nccl_version": nccl_choice.nccl_spec(sc.profile).version if sc.profile.library == "nccl" else None,
        "nccl_release": _release_changes(sc.profile),
        #: whose choice runs: "nccl" (NCCL's tuner) or "fastest" (a platform's tuner plugin; docs/nccl.md)
        "nccl_tuner": sc.profile.nccl.tuner if sc.profile.nccl is not None else None,
        "overlap": sc.overlap,
        "accum": sc.accum,
        "batch_per_device": float(res.batch_per_device[0]),
        "t_forward_s": float(res.t_forward_s[0]),
        "t_backward_s": float(res.t_backward_s[0]),
        "t_compute_s": float(res.t_compute_s[0]),
        "spread": sc.device_spread,
        "t_straggler_s": float(res.t_straggler_s[0]),
        "reference_k": sc.reference_k,
        "t_update_s": float(res.t_update_s[0]),
        "update_what": update_describe(sc),
        "optimizer": sc.optimizer,
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
        "band": band_terms(res),
        "bottleneck": sc.profile.network[b].name if b >= 0 else None,
        "alpha_s": float(comm.alpha[0]),
        "bus_Bps": _f(comm.bus_Bps[0]),
        "memory": memory_terms(sc, res),
        "nccl_faster": faster_terms(sc, res),
    }


def band_terms(res: Any) -> dict[str, Any]:
    """How sure the step at the result's first k is (simcli.step.band): its band, σ's range, the width of E(k)'s
    band from each source alone and the source of the widest (None where the band has no width)."""
    from ..step.band import TERMS, banded, dominant  # lazy

    b = banded(res).band
    top, widths = dominant(res, 0)
    return {
        **{key: float(v[0]) for key, v in b.columns().items()},
        "spread_range": [b.spread[0], b.spread[2]],
        "spread_basis": b.spread_basis,
        "training_basis": b.training_basis,
        "efficiency_width_by_source": widths,
        "dominant": top if widths[top] > 0 else None,
        "dominant_words": TERMS[top] if widths[top] > 0 else None,
    }


def faster_terms(sc: Scenario, res: Any) -> list[dict[str, Any]] | None:
    """Where NCCL's own pick costs more than another of its pairs (simcli.step.notes.nccl_faster) at the result's
    k; None where NCCL does not choose (a textbook profile, a forced algorithm or protocol)."""
    if sc.profile.library != "nccl" or sc.algorithm != "nccl" or sc.protocol is not None:
        return None
    return [{k: v for k, v in row.items() if k != "devices"} for row in nccl_faster(res)]


def memory_terms(sc: Scenario, res: Any) -> dict[str, Any]:
    """The memory per device at the result's first k, part by part (simcli.step.memory, the one memory model)."""
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


def _release_changes(profile: Any) -> dict[str, Any] | None:
    """The NCCL release that prices ``profile`` (its row of simcli.comm.releases), the carried row before it and what
    the row changes against that one; None on a profile that does not model NCCL."""
    if profile.library != "nccl":
        return None
    row, before = releases.against_previous(nccl_choice.nccl_spec(profile).version)
    return {"version": row.version, "previous": before.version if before else None, "changes": row.changes}
