"""A real training step, from a profiler trace, held against simcli's model term by term.

The measured terms come from :func:`simcli.io.measured.kineto.step_summary` (one step: the slowest rank's median
step, so that the terms add up): forward, backward, each collective of the step (grouped by collective and size), the
exposed communication, the update (optimizer), and what the step spent outside all of these (``other``: data
loading, DDP's copies, the Python between ops). The predicted terms are :func:`simcli.step.engine.simulate`'s for the
same k, with DDP's buckets of the size the trace's largest all-reduce shows (``bucket_mb``) and the trace's
gradient dtype. A term the engine has no counterpart for (the update, where the engine has no ``t_update_s``;
``other``) is predicted as 0 s, which is what the model's T_step assumes, and marked so.

The term that differs most is the one whose |predicted - measured| is the largest in seconds (of the
terms that make up the step: forward, backward, exposed communication, update, other; each collective is
compared too, but it reaches the step only through the exposed part).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..base.types import InputError, Profile, Workload
from ..base.units import fmt_bytes
from ..comm import collectives
from ..comm.specs import COLLECTIVES
from ..step.engine import Scenario, simulate

__all__ = ["validate_trace", "STEP_TERMS"]

#: the terms that add up to the measured step (the model's T_step = compute + exposed; the rest it assumes 0)
STEP_TERMS = ("forward", "backward", "exposed communication", "update (optimizer)", "other")


def _term(name: str, meas: float, pred: float | None, *, leaf: bool, note: str = "") -> dict[str, Any]:
    p = 0.0 if pred is None else float(pred)
    return {
        "term": name,
        "measured_s": float(meas),
        "predicted_s": None if pred is None else float(pred),
        "difference_s": p - float(meas),
        "error": (p / meas - 1.0) if meas > 0 else None,
        "modelled": pred is not None,
        "leaf": leaf,
        "note": note,
    }


def validate_trace(
    summary: dict[str, Any],
    profile: Profile,
    workload: Workload,
    *,
    scenario: Mapping[str, Any] | None = None,
    path: str = "",
) -> dict[str, Any]:
    """Measured beside predicted for every term of a traced step; ``summary`` from kineto.step_summary.

    ``scenario``: the Scenario fields the run's options set (every scenario option: ``--optimizer``,
    ``--compute-time``, ``--spread``, ...; the CLI passes ``ScenarioOptions.scenario_fields()``); the trace's own
    gradient dtype, bucket size and DDP overlap replace theirs, and the batch defaults to the workload's."""

    k = int(summary.get("world_size") or summary["ranks"])
    if k < 1:
        raise InputError(f"{path}: world size {k}")
    ar = [b for b in summary["buckets"] if b["collective"] == "all_reduce"]
    grad_meas = float(sum(b["bytes"] for b in ar))
    grad_dtypes = sorted({b["dtype"] for b in ar if b["dtype"]})
    grad_dtype = grad_dtypes[0] if len(grad_dtypes) == 1 else "fp32"
    bucket_mb = max(b["bytes"] for b in ar) / 2**20 if ar else 25.0
    opts = {key: v for key, v in (scenario or {}).items() if key != "global_batch"}
    batch = opts.pop("batch_per_device", None)
    sc = Scenario(
        profile=profile,
        workload=workload,
        **{
            **opts,
            "batch_per_device": batch if batch is not None else workload.batch_per_device,
            "grad_dtype": grad_dtype if grad_dtype in ("fp32", "bf16", "fp16", "fp8") else "fp32",
            "overlap": "buckets",
            "bucket_mb": bucket_mb,
        },
    )
    res = simulate(sc, np.array([k]))
    at = lambda x: None if x is None else float(np.asarray(x).ravel()[0])  # noqa: E731
    notes = []
    terms = [
        _term("forward", summary["forward_s"], at(res.t_forward_s), leaf=True),
        _term("backward", summary["backward_s"], at(res.t_backward_s), leaf=True),
        _term("compute (forward + backward)", summary["compute_s"], at(res.t_compute_s), leaf=False),
    ]
    # each collective of the step, grouped by (collective, bytes): per step, all of them
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for b in summary["buckets"]:
        groups.setdefault((b["collective"], int(b["bytes"])), []).append(b)

    for (coll, n), bs in groups.items():
        if coll in COLLECTIVES and k > 1:
            one = float(
                collectives.collective(
                    profile, sc.algorithm, np.array([k]), nbytes=np.array([float(n)]), collective=coll, protocol=None
                ).time[0]
            )
            pred = one * len(bs)
        else:
            pred = None
        hid = sum(b["hidden_s"] for b in bs)
        tot = sum(b["time_s"] for b in bs)
        terms.append(
            _term(
                f"{coll} {fmt_bytes(n)} x{len(bs)}",
                tot,
                pred,
                leaf=False,
                note=f"{100 * hid / tot:.0f}% hidden behind compute" if tot > 0 else "",
            )
        )
    terms.append(_term("communication (any in flight)", summary["comm_s"], at(res.t_comm_s), leaf=False))
    terms.append(_term("exposed communication", summary["exposed_s"], at(res.t_comm_exposed_s), leaf=True))
    upd = getattr(res, "t_update_s", None)
    terms.append(
        _term(
            "update (optimizer)",
            summary["optimizer_s"],
            at(upd),
            leaf=True,
            note=""
            if upd is not None and np.any(np.asarray(upd) > 0)
            else "the profile gives no device.memory_bandwidth (nor update_bandwidth): predicted 0; 'simcli "
            "calibrate' on this trace with --optimizer fits it",
        )
    )
    terms.append(_term("other", summary["other_s"], None, leaf=True, note="data, copies, DDP, Python: not modelled, 0"))
    terms.append(_term("step", summary["step_s"], at(res.t_step_s), leaf=False))
    leaves = [t for t in terms if t["leaf"]]
    worst = max(leaves, key=lambda t: abs(t["difference_s"]))
    grad_pred = float(sc.grad_bytes)
    if ar and abs(grad_pred / grad_meas - 1) > 0.01:
        notes.append(
            f"the model's gradient is {fmt_bytes(grad_pred)} ({grad_dtype}), the trace all-reduces "
            f"{fmt_bytes(grad_meas)} a step: check --model/--params"
        )
    return {
        "file": path,
        "profile": profile.name,
        "devices": k,
        "ranks": summary["ranks"],
        "steps": summary["steps"],
        "batch_per_device": int(sc.batch),
        "bucket_mb": bucket_mb,
        "gradient_bytes_measured": grad_meas,
        "gradient_bytes_predicted": grad_pred,
        "grad_dtype": grad_dtype,
        "terms": terms,
        "buckets": summary["buckets"],
        "differs_most": worst["term"],
        "differs_most_s": worst["difference_s"],
        "rank_spread": summary.get("rank_spread"),
        "step": summary.get("step"),
        "notes": notes,
    }
