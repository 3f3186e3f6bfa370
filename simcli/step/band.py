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

import numpy as np

from ..comm import collectives
from ..comm.bands import Z80, fit_covers, fitted_tiers
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
    "propagated",
    "training_ratio",
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
    "training": "the published training runs' band (p10-p90 of predicted/measured throughput)",
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
    training_basis: str = ""  #: what the training runs' band at the largest k is read from, in words

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
    if not isinstance(rec, dict):
        return None
    try:
        se = float(rec["standard_error"])
    except (KeyError, TypeError, ValueError):
        return None
    return se if se >= 0 and np.isfinite(se) else None


def _run(
    res: "engine.Result", sigma: float, end: str | None, *, keep: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """The step at σ = ``sigma`` and every collective at ``end`` of its band, over ``res``'s k (``keep``: only those
    k, the others at the value)."""
    sc = res.scenario
    k = res.devices if keep is None else res.devices[keep]
    micro = None if sc.strong else (res.batch_per_device if keep is None else res.batch_per_device[keep])
    run = engine.simulate(sc.replace(spread=sigma), k, micro, comm_end=end)
    out = {}
    for key in _KEYS:
        full = np.array(getattr(res, key), dtype=np.float64, copy=True)
        if keep is None:
            full = np.asarray(getattr(run, key), dtype=np.float64)
        else:
            full[keep] = getattr(run, key)
        out[key] = full
    return out


_KEYS = ("t_step_s", "speedup", "efficiency", "samples_per_s")


def _corners(res: "engine.Result", s_lo: float, s_hi: float) -> list[dict[str, np.ndarray]]:
    """The corners of the (σ, comm) box that hold the step's least and most: every output is monotone in T_comm
    (the exposed part grows with it) and S(k), E(k) fall with σ at every k, T_step and samples/s at k >= k0 (the k
    the compute speed was measured at); so (σ low, comm low) and (σ high, comm high) are the ends, plus the two
    crossed corners at the k below k0 only, where a larger σ takes more out of the measured time than it adds."""
    below = res.devices < res.scenario.reference_k
    with collectives.memo():  # the corners' collectives are the same: each priced once
        runs = [_run(res, s_lo, "lo"), _run(res, s_hi, "hi")]
        if s_lo != s_hi and below.any():
            keep = None if below.all() else below
            runs += [_run(res, s_hi, "lo", keep=keep), _run(res, s_lo, "hi", keep=keep)]
    return runs


def _envelope(res: "engine.Result", runs: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    out = {}
    for key in _KEYS:
        stack = np.stack([np.asarray(getattr(res, key), dtype=np.float64)] + [r[key] for r in runs])
        base = key.removesuffix("_s") if key == "t_step_s" else key
        suffix = "_s" if key == "t_step_s" else ""
        out[f"{base}_lo{suffix}"] = stack.min(axis=0)
        out[f"{base}_hi{suffix}"] = stack.max(axis=0)
    return out


def propagated(res: "engine.Result", s_lo: float, s_hi: float) -> dict[str, np.ndarray]:
    """The band the inputs' ranges give, before the training runs' (:data:`BAND_KEYS`, arrays over k): the least
    and the most of the value and the corners of :func:`_corners`, per k."""
    return _envelope(res, _corners(res, s_lo, s_hi))


def step_band(res: "engine.Result", spread_bounds: tuple[float, float] | None = None) -> StepBand:
    """The band of ``res`` (every source at once): see the module. ``spread_bounds``: σ's range (low, high) in place
    of :func:`spread_range`'s (it must hold the scenario's σ)."""
    s_lo, s_hi, why = spread_range(res.scenario)
    if spread_bounds is not None:
        lo, hi = spread_bounds
        s_lo, s_hi, why = float(lo), float(hi), f"σ from {lo:g} to {hi:g}, as given"
    env = propagated(res, s_lo, s_hi)
    r_lo, r_hi, words = training_ratio(res)
    env = _with_training(res, env, r_lo, r_hi=r_hi)
    sigma = res.scenario.device_spread
    return StepBand(**env, spread=(s_lo, sigma, s_hi), spread_basis=why, training_basis=words)


def training_ratio(res: "engine.Result") -> tuple[np.ndarray, np.ndarray, str]:
    """(r low, r high, words) per k: the band of r = predicted / measured throughput per device that the published
    training runs of the step's kind show (simcli.step.errors: its strategy, how the step at k0 was known, its
    node band), 1 at k = 1 (S(1) = 1 by definition) and where a calibrated profile's fits cover k
    (simcli.comm.bands.fit_covers: the fits were made on this cluster, the training runs on others; the fits'
    standard errors stand in). The words are the largest k's."""
    from . import errors  # lazy

    sc = res.scenario
    k = np.asarray(res.devices, dtype=np.int64)
    base = "measured" if sc.compute_time_s is not None else "mfu"
    per_node = max(int(sc.profile.network[0].size or 1), 1)
    nodes = -(-k // per_node)
    band = errors.node_band(nodes)
    corpus = errors.published()
    rbs = [errors.ratio_band(corpus, (str(sc.strategy), base, i)) for i in range(len(errors.NODE_BANDS))]
    lo = np.array([b.lo for b in rbs])[band]
    hi = np.array([b.hi for b in rbs])[band]
    off = (k <= 1) | fit_covers(sc.profile, k)
    lo, hi = np.where(off, 1.0, lo), np.where(off, 1.0, hi)
    last = int(band[-1])
    if k[-1] <= 1:
        words = "one device: no training-run band"
    elif off[-1]:
        words = "none: the calibrated profile's fits cover this k (their standard errors stand in)"
    else:
        words = f"{errors.kind_words((str(sc.strategy), base, last))}: {rbs[last].words()}"
    return lo, hi, words


def _with_training(
    res: "engine.Result", env: dict[str, np.ndarray], r_lo: np.ndarray, *, r_hi: np.ndarray
) -> dict[str, np.ndarray]:
    """The propagated band ``env`` widened to hold the training runs' band: T_step from t·r_lo to t·r_hi, the
    rates (S, E, samples/s) from x/r_hi to x/r_lo, r_lo no lower than E (the runs' band does not take E past 1);
    the wider of the two at each end (docs/model.md#how-sure-is-a-step:
    both estimate the same p10-p90, so neither is added to the other)."""
    out = dict(env)
    # the runs' low end never takes E past 1 (S(k) past k): r no lower than E itself
    r_lo = np.maximum(r_lo, np.minimum(np.asarray(res.efficiency, dtype=np.float64), 1.0))
    t = np.asarray(res.t_step_s, dtype=np.float64)
    out["t_step_lo_s"] = np.minimum(env["t_step_lo_s"], t * r_lo)
    out["t_step_hi_s"] = np.maximum(env["t_step_hi_s"], t * r_hi)
    for key in ("speedup", "efficiency", "samples_per_s"):
        x = np.asarray(getattr(res, key), dtype=np.float64)
        out[f"{key}_lo"] = np.minimum(env[f"{key}_lo"], x / r_hi)
        out[f"{key}_hi"] = np.maximum(env[f"{key}_hi"], x / r_lo)
    return out


def banded(res: "engine.Result", spread_bounds: tuple[float, float] | None = None) -> "engine.Result":
    """``res`` with its band (:func:`step_band`): its records gain :data:`BAND_KEYS`."""
    return dataclasses.replace(res, band=step_band(res, spread_bounds))


def widths(res: "engine.Result") -> dict[str, np.ndarray]:
    """The width of E(k)'s band from each source alone, per k (the others at the value): ``comm`` (the
    published band, or the fit's where it stands in), ``spread`` (σ's range), ``training`` (the published training
    runs' band of r, simcli.step.errors), ``calibration`` (what a calibrated profile's fits narrowed: the comm band
    and σ's range with the fits' standard errors, measured as the width they leave; 0 on a profile with none)."""
    sc = res.scenario
    s_lo, s_hi, _ = spread_range(sc)
    sigma = sc.device_spread
    with collectives.memo():
        comm = _envelope(res, [_run(res, sigma, "lo"), _run(res, sigma, "hi")])
        spread = _envelope(res, [_run(res, s_lo, None), _run(res, s_hi, None)])
    r_lo, r_hi, _ = training_ratio(res)
    e = np.asarray(res.efficiency, dtype=np.float64)
    out = {
        "comm": comm["efficiency_hi"] - comm["efficiency_lo"],
        "spread": spread["efficiency_hi"] - spread["efficiency_lo"],
        "training": e / r_lo - e / r_hi,
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
