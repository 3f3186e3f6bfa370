"""Decisions that know their band: where the step's band (simcli.step.band) straddles plan's target or its runner-up.

Pure: JSON-ready dicts and one line of words each; no printing. ``plan max-devices``, ``plan solve`` and ``plan best``
add the dict as ``band`` in -f json and its ``line`` under their answer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..step.band import banded
from ..step.engine import simulate

__all__ = ["last_before_fall", "max_devices_band", "solve_band", "best_band"]


def last_before_fall(devices: np.ndarray, efficiency: np.ndarray, target: float) -> int | None:
    """max-devices' rule on one curve: the largest k before E(k) first falls below ``target`` (from the first k
    that meets it), None where no k meets it."""
    meets = np.asarray(efficiency) >= target
    if not meets.any():
        return None
    first = int(np.argmax(meets))
    drops = np.flatnonzero(~meets[first:])
    return int(devices[first + int(drops[0]) - 1 if drops.size else len(devices) - 1])


def max_devices_band(ans: Any) -> dict[str, Any]:
    """The answer of ``plan max-devices`` read on the band's lower and upper edges of E(k) (the same scan, the same
    rule): it straddles where either edge gives another k."""
    res = banded(ans.result)
    b, t, k = res.band, ans.target, res.devices
    lo = last_before_fall(k, b.efficiency_lo, t)
    hi = last_before_fall(k, b.efficiency_hi, t)
    straddles = lo != ans.answer or hi != ans.answer
    if not straddles:
        line = f"k = {ans.answer} meets E >= {t:g} across the band (its lower edge too): the band does not move it"
    else:
        low = (
            f"no k meets E >= {t:g} at the band's lower edge"
            if lo is None
            else f"k = {lo} meets E >= {t:g} at the band's lower edge"
        )
        line = (
            f"{low}; {ans.answer} at the value"
            + (f"; {hi} only at its upper edge" if hi != ans.answer else "")
            + " (the band straddles the target)"
        )
    return {"answer_lower_edge": lo, "answer_upper_edge": hi, "straddles": straddles, "line": line}


def _band_at(sc: Any, k: int) -> tuple[float, float, float]:
    r = banded(simulate(sc, np.array([k])))
    return float(r.band.efficiency_lo[0]), float(r.efficiency[0]), float(r.band.efficiency_hi[0])


def _edges_at(sc: Any, k: int) -> tuple[float, float]:
    lo, _, hi = _band_at(sc, k)
    return lo, hi


def solve_band(sc: Any, ans: Any) -> dict[str, Any] | None:
    """``plan solve`` re-solved on the lower and upper edges of E(k)'s band (simcli.decisions.solve.solve_edge: the
    same search on the edge in place of the value), and E(k)'s band at the current value of the field: whether the
    current value meets the target across the band, misses it across the band, or the band straddles it; None where
    E does not depend on the field."""
    from .solve import solve_edge  # lazy

    if ans.answer is None:
        return None
    t, k, f = ans.target, ans.devices, ans.field
    c_lo, _, c_hi = _band_at(sc, k)
    a_lo, _, a_hi = _band_at(f.apply(sc, float(ans.answer)), k)
    lower, upper = solve_edge(sc, ans, "lo", band_of=_edges_at), solve_edge(sc, ans, "hi", band_of=_edges_at)
    cur = f.fmt(ans.current)
    if c_lo >= t:
        verdict = f"the current {cur} meets E >= {t:g} across its band ({c_lo:.3f}–{c_hi:.3f})"
    elif c_hi < t:
        verdict = f"the current {cur} misses E >= {t:g} across its band ({c_lo:.3f}–{c_hi:.3f})"
    else:
        verdict = (
            f"the current {cur} meets E >= {t:g} only at its band's upper edge ({c_lo:.3f}–{c_hi:.3f}: the band "
            "straddles the target)"
        )
    word = "at least" if ans.bound == "minimum" else "at most"
    low = (
        f"no value of {f.path} meets E({k}) >= {t:g} at the band's lower edge"
        if lower is None
        else f"{f.path} {word} {f.fmt(lower)} meets E({k}) >= {t:g} at the band's lower edge"
    )
    straddles = lower != ans.answer or upper != ans.answer
    edges = f"{low}; {f.fmt(ans.answer)} at the value" + (
        f"; {f.fmt(upper)} only at its upper edge" if upper is not None and upper != ans.answer else ""
    )
    edges += " (the band straddles the target)" if straddles else " (the band does not move it)"
    return {
        "current_lo": c_lo,
        "current_hi": c_hi,
        "answer_lo": a_lo,
        "answer_hi": a_hi,
        "answer_lower_edge": lower,
        "answer_upper_edge": upper,
        "straddles": bool(straddles),
        "current_straddles": bool(c_lo < t <= c_hi),
        "line": f"{edges}; {verdict}",
    }


def best_band(sc: Any, ans: Any, scenario_of: Any) -> dict[str, Any] | None:
    """The answer's band in the objective's terms (samples/s for time, device-seconds per step for cost) and
    whether the runner-up lies inside it; None where there is no runner-up."""
    r = ans.runner_up
    if r is None:
        return None
    a = ans.answer
    res = banded(simulate(scenario_of(sc, a), np.array([int(a["devices"])])))
    if ans.objective == "time":
        lo, hi = float(res.band.samples_per_s_lo[0]), float(res.band.samples_per_s_hi[0])
        value, words = float(r["samples_per_s"]), "samples/s"
        inside = value >= lo
    else:
        k = float(a["devices"])
        lo, hi = k * float(res.band.t_step_lo_s[0]), k * float(res.band.t_step_hi_s[0])
        value, words = float(r["cost_key"]), "device-seconds per step"
        inside = value <= hi
    if inside:
        line = (
            f"the runner-up is inside the band of the answer ({value:.4g} against {lo:.4g}–{hi:.4g} {words}): "
            "the two cannot be told apart by this model"
        )
    else:
        line = f"the runner-up is outside the band of the answer ({value:.4g} against {lo:.4g}–{hi:.4g} {words})"
    return {"answer_lo": lo, "answer_hi": hi, "runner_up": value, "runner_up_inside": inside, "line": line}
