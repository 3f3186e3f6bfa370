"""How sure a step is: the band of T_step, S(k), E(k) and samples/s from what its inputs are known to.

Pure numpy, vectorised over k (no Python loop per k); docs/model.md#how-sure-is-a-step says why and how. Three
sources of width, each a range of one input of the step:

* **comm**: every collective the step runs at the low and at the high end of its band (simcli.comm.bands: the
  p10-p90 of t_pred/t_meas of the published nccl-tests curves of its kind, by its k, size, transport and the
  algorithm NCCL ran; :func:`simcli.comm.bands.at_end`), priced through the step's own overlap (DDP's buckets,
  FSDP's per-unit timeline), not added as widths: the exposed part is monotone in T_comm.
* **spread**: σ of the slowest-of-k wait (simcli.step.straggler) from half to twice its value where it is a
  default or a profile's figure with no standard error (a judgement: the default is Sinha et al.'s one figure
  for every GPU kind), its fit's value -+ Z80 standard errors (within that judgement) where ``simcli calibrate``
  fitted it, none where --spread gives it.
* **calibration**: a calibrated profile's tiers priced by their fit's standard errors where the collective's
  widest tier was fitted and k lies within the fit's world sizes (simcli.comm.bands.fitted_tiers), and σ's above.

The combination: the step is priced at each corner (comm low or high, σ low or high) and the band is the least
and the most of the corners and the value itself, per k: the ends taken together (every collective at its low
end at once, with the least σ), the conservative rule for errors that may move together (one cluster, one NCCL
release). It assumes the step is monotone in each input, which it is in T_comm (the exposed part grows with it)
and in σ above the k the compute speed was measured at (below it a larger σ takes more out of the measured time;
the corners hold both directions).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..comm.bands import Z80, fitted_tiers
from . import engine

__all__ = [
    "StepBand",
    "spread_range",
    "step_band",
    "banded",
    "widths",
    "dominant",
    "BAND_KEYS",
    "TERMS",
    "SPREAD_FACTORS",
]

#: the keys a banded result's records gain, in order
BAND_KEYS = (
    "t_step_lo_s",
    "t_step_hi_s",
    "speedup_lo",
    "speedup_hi",
    "efficiency_lo",
    "efficiency_hi",
    "samples_per_s_lo",
    "samples_per_s_hi",
)
#: the sources of width, in the words explain uses
TERMS = {
    "comm": "the communication band (p10-p90 of the published nccl-tests curves)",
    "spread": "the speed spread σ",
    "calibration": "the calibration's standard errors",
}
#: the judgement range of a σ that carries no standard error: from half to twice it
SPREAD_FACTORS = (0.5, 2.0)


@dataclass(frozen=True)
class StepBand:
    """The band of one result, arrays over k, ``lo <= value <= hi``; ``spread`` the σ range it was priced at."""

    t_step_lo_s: np.ndarray
    t_step_hi_s: np.ndarray
    speedup_lo: np.ndarray
    speedup_hi: np.ndarray
    efficiency_lo: np.ndarray
    efficiency_hi: np.ndarray
    samples_per_s_lo: np.ndarray
    samples_per_s_hi: np.ndarray
    spread: tuple[float, float, float]  #: (σ low, σ, σ high)
    spread_basis: str  #: where σ's range comes from, in words

    def columns(self) -> dict[str, np.ndarray]:
        return {key: getattr(self, key) for key in BAND_KEYS}


def spread_range(sc: "engine.Scenario") -> tuple[float, float, str]:
    """(σ low, σ high, why) of ``sc``'s σ: see the module. A calibrated σ's range is its fit's value -+ Z80
    standard errors, clipped to the judgement range around it (a fit narrows, never widens)."""
    sigma, source = sc.spread_and_source
    if source == "--spread" or sigma == 0:
        return sigma, sigma, f"σ = {sigma:g} from {source}: taken as given"
    lo, hi = SPREAD_FACTORS[0] * sigma, SPREAD_FACTORS[1] * sigma
    se = _spread_se(sc) if source == "device.spread" else None
    if se is not None:
        return (
            max(sigma - Z80 * se, lo),
            min(sigma + Z80 * se, hi),
            f"σ = {sigma:g} -+ {Z80} x its standard error {se:g} (simcli calibrate's fit, calibration.spread)",
        )
    return lo, hi, f"σ = {sigma:g} from half to twice ({source}; a judgement: one measured figure for every GPU)"


def _spread_se(sc: "engine.Scenario") -> float | None:
    cal = sc.profile.calibration or {}
    rec = cal.get("spread") if isinstance(cal, dict) else None
    try:
        se = float(rec["standard_error"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        return None
    return se if se >= 0 and np.isfinite(se) else None


def _corners(res: "engine.Result", sigmas: tuple[float, ...], ends: tuple[str | None, ...]) -> list[Any]:
    sc = res.scenario
    micro = None if sc.strong else res.batch_per_device
    return [engine.simulate(sc.replace(spread=s), res.devices, micro, comm_end=e) for s in sigmas for e in ends]


def _envelope(res: "engine.Result", runs: list[Any]) -> dict[str, np.ndarray]:
    out = {}
    for key in ("t_step_s", "speedup", "efficiency", "samples_per_s"):
        stack = np.stack([getattr(res, key)] + [getattr(r, key) for r in runs])
        base = key.removesuffix("_s") if key == "t_step_s" else key
        suffix = "_s" if key == "t_step_s" else ""
        out[f"{base}_lo{suffix}"] = stack.min(axis=0)
        out[f"{base}_hi{suffix}"] = stack.max(axis=0)
    return out


def step_band(res: "engine.Result", spread_bounds: tuple[float, float] | None = None) -> StepBand:
    """The band of ``res`` (every source at once): see the module. ``spread_bounds``: σ's range (low, high) in place
    of :func:`spread_range`'s (it must hold the scenario's σ)."""
    s_lo, s_hi, why = spread_range(res.scenario)
    if spread_bounds is not None:
        lo, hi = spread_bounds
        s_lo, s_hi, why = float(lo), float(hi), f"σ from {lo:g} to {hi:g}, as given"
    runs = _corners(res, (s_lo, s_hi), ("lo", "hi"))
    sigma = res.scenario.device_spread
    return StepBand(**_envelope(res, runs), spread=(s_lo, sigma, s_hi), spread_basis=why)


def banded(res: "engine.Result", spread_bounds: tuple[float, float] | None = None) -> "engine.Result":
    """``res`` with its band (:func:`step_band`): its records gain :data:`BAND_KEYS`."""
    return dataclasses.replace(res, band=step_band(res, spread_bounds))


def widths(res: "engine.Result") -> dict[str, np.ndarray]:
    """The width of E(k)'s band from each source alone, per k (the others at the value): ``comm`` (the
    published band, or the fit's where it stands in), ``spread`` (σ's range), ``calibration`` (what a calibrated
    profile's fits narrowed: the comm band and σ's range with the fits' standard errors, measured as the width
    they leave; 0 on a profile with none)."""
    sc = res.scenario
    s_lo, s_hi, _ = spread_range(sc)
    sigma = sc.device_spread
    comm = _envelope(res, _corners(res, (sigma,), ("lo", "hi")))
    spread = _envelope(res, _corners(res, (s_lo, s_hi), (None,)))
    out = {
        "comm": comm["efficiency_hi"] - comm["efficiency_lo"],
        "spread": spread["efficiency_hi"] - spread["efficiency_lo"],
    }
    calibrated = bool(sc.profile.calibration)
    out["calibration"] = np.zeros(res.devices.shape)
    if calibrated:  # what the fits leave of the band: the calibrated ends' share, told apart from the published
        if fitted_tiers(sc.profile):
            out["calibration"] = out.pop("comm")
            out["comm"] = np.zeros(res.devices.shape)
        if sc.spread_and_source[1] == "device.spread" and _spread_se(sc) is not None:
            out["calibration"] = out["calibration"] + out["spread"]
            out["spread"] = np.zeros(res.devices.shape)
    return out


def dominant(res: "engine.Result", i: int = -1) -> tuple[str, dict[str, float]]:
    """(the source whose width is the largest at ``res.devices[i]``, each source's width of E there)."""
    w = {key: float(v[i]) for key, v in widths(res).items()}
    return max(w, key=lambda key: w[key]), w
