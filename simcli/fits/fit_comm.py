"""Calibration's communication part: the options of a calibration, and each spanned tier fitted to measured
all-reduces, by NCCL's constants (simcli.fits.fit_nccl) or by a textbook alpha-beta (simcli.fits.fitting), into
the profile's network block and the report's tier records. :mod:`simcli.fits.calibration` builds the profile.
"""

from __future__ import annotations

import dataclasses
import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..base.types import InputError
from ..base.units import fmt_bytes, fmt_rate, fmt_time
from ..comm.topology import check_devices, ring_params, tier_spanned
from ..io.measured.table import filter_rows, placement_notes
from .fit_nccl import fit_nccl
from .fitting import fit_link, outer_tier

if TYPE_CHECKING:  # pragma: no cover
    from ..base.types import Profile
    from ..io.measured.table import Measured

__all__ = ["CalibrationOptions", "fit_comm"]


@dataclass(frozen=True)
class CalibrationOptions:
    """How a calibration fits and what it records: the one options value :func:`calibrate_profile` takes.

    ``tier``: the one tier a textbook fit refits (None: every tier the data spans); ``holdout``/``seed``: the
    share of points held out of the fits, and its seed; ``min_size``/``max_size``/``where``: the all-reduce rows
    kept; ``algorithm``: the model the all-reduces are fitted with (None: the profile's default); ``loss``:
    "huber" or "linear"; ``name``: the new profile's; ``now`` (an aware datetime) and ``host``: the clock and the
    machine the calibration block records, arguments so that the same inputs give the same profile."""

    name: str
    now: datetime.datetime
    host: str
    tier: str | None = None
    holdout: float = 0.0
    seed: int = 0
    min_size: float = 0.0
    max_size: float | None = None
    where: tuple[str, ...] = ()
    algorithm: str | None = None
    loss: str = "huber"


def _fit_nccl_tiers(
    base: Profile,
    network: list,
    tiers_out: list,
    *,
    k: np.ndarray,
    n: np.ndarray,
    t: np.ndarray,
    algorithm: str,
    holdout: float,
    seed: int,
    what: str,
    gpus: np.ndarray | None = None,
) -> tuple[str, ...]:
    """NCCL's model fitted on every identified tier: updates ``network``, appends one record per tier and returns
    the fit's warnings."""
    fit = fit_nccl(base, k, n, t=t, algorithm=algorithm, holdout=holdout, seed=seed, what=what, gpus=gpus)
    spanned = tier_spanned(base.network, k)
    for ti, t_before in enumerate(base.network):
        if not spanned[ti].any():
            continue
        changes: dict[str, Any] = {}
        if fit.latency_identified[ti]:
            changes["latency_s"] = fit.latency_s[ti]
        if fit.bandwidth_identified[ti]:
            changes.update(bandwidth_Bps=fit.bandwidth_Bps[ti], efficiency=1.0)
        network[ti] = dataclasses.replace(t_before, **changes)
        tiers_out.append(
            _tier_record(
                t_before,
                network[ti],
                ti,
                fit=fit,
                world_sizes=[int(x) for x in sorted(set(k[spanned[ti]].tolist()))],
                holdout=holdout,
                seed=seed,
                latency=(fit.latency_se_s[ti], fit.latency_identified[ti]),
                bandwidth=(fit.bandwidth_se_Bps[ti], fit.bandwidth_identified[ti]),
                downweighted=0,
            )
        )
    return fit.warnings


def _tier_record(
    before: Any,
    after: Any,
    ti: int,
    *,
    fit: Any,
    world_sizes: list[int],
    holdout: float,
    seed: int,
    latency: tuple[float | None, bool],
    bandwidth: tuple[float | None, bool],
    downweighted: int,
) -> dict[str, Any]:
    """One fitted tier for the report: what was fitted from what, before and after, and the fit's quality
    (the NCCL fit and the textbook fit both; ``latency`` and ``bandwidth`` are (standard error, identified))."""
    return {
        "tier": before.name,
        "index": ti,
        "world_sizes": world_sizes,
        "sizes": [int(x) for x in fit.sizes],
        "size_range": (
            f"{fmt_bytes(fit.sizes[0])} (1 size)"
            if len(fit.sizes) == 1
            else f"{fmt_bytes(min(fit.sizes))}..{fmt_bytes(max(fit.sizes))} ({len(fit.sizes)} sizes)"
        ),
        "points": fit.n_fit,
        "holdout_points": fit.n_holdout,
        "holdout_fraction": holdout,
        "seed": seed,
        "latency": {
            "before_s": before.latency_s,
            "after_s": after.latency_s,
            "se_s": latency[0],
            "identified": latency[1],
        },
        "bandwidth": {
            "before_Bps": before.effective_Bps,
            "after_Bps": after.effective_Bps,
            "se_Bps": bandwidth[0],
            "identified": bandwidth[1],
        },
        "quality": {
            "r2_log_time": fit.r2_log,
            "median_rel_error_fit": fit.fit_median_rel,
            "max_rel_error_fit": fit.fit_max_rel,
            "median_rel_error_holdout": fit.holdout_median_rel,
            "max_rel_error_holdout": fit.holdout_max_rel,
            "downweighted_points": downweighted,
        },
        "warnings": list(fit.warnings),
    }


def _comm_rows(
    base: Profile, m: Measured, warnings: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """The all-reduce rows a fit reads, (k, bytes, time, GPUs per process): world size 1 left out (said in
    ``warnings``), the world sizes checked against the profile's network."""
    k, n, t = m.devices(), m.number("bytes"), m.allreduce_time()
    gpus = m.gpus_per_process()  # nccl-tests' -g, as bench import records it
    one = k < 2
    if one.any():
        warnings.append(f"{m.path}: {int(one.sum())} row(s) with world size 1 left out (no communication)")
        keep = ~one
        k, n, t = k[keep], n[keep], t[keep]
        gpus = None if gpus is None else gpus[keep]
        if not k.size:
            raise InputError(f"{m.path}: only world size 1: nothing to fit; measure world sizes >= 2")
    check_devices(base.network, k)
    return k, n, t, gpus


def _textbook_groups(base: Profile, k: np.ndarray, tier: str | None) -> dict[int, np.ndarray]:
    """The rows each textbook fit reads, by tier index: every row for ``--tier`` (each must cross it), else each
    row in the outermost tier its ring spans."""
    if tier is None:
        spans = outer_tier(base.network, k)
        return {int(i): spans == i for i in np.unique(spans)}
    names = [x.name for x in base.network]
    if tier not in names:
        raise InputError(f"--tier: {base.name} has no tier {tier!r}; it has {', '.join(names)}")
    ti = names.index(tier)
    spans = outer_tier(base.network, k)
    if np.any(spans < ti):
        bad = sorted({int(x) for x in k[spans < ti]})
        raise InputError(
            f"--tier {tier}: world sizes {bad} do not cross tier {tier!r}; leave them out "
            "with --where or choose another tier"
        )
    return {ti: np.ones(k.shape, dtype=bool)}


def _fit_textbook_tiers(
    base: Profile,
    m: Measured,
    rows: tuple[np.ndarray, np.ndarray, np.ndarray],
    *,
    groups: dict[int, np.ndarray],
    network: list,
    tiers_out: list,
    algorithm: str,
    opts: CalibrationOptions,
    warnings: list[str],
) -> None:
    """The textbook fit of each tier in ``groups`` (``network``, ``tiers_out`` updated), and the bottleneck's check."""
    k, n, t = rows
    holdout, seed = opts.holdout, opts.seed
    for ti, sel in sorted(groups.items()):
        t_before = base.network[ti]
        fit = fit_link(
            base.network,
            ti,
            k[sel],
            n=n[sel],
            t=t[sel],
            algorithm=algorithm,
            reduce_Bps=base.device.reduce_Bps,
            holdout=holdout,
            seed=seed + ti,
            loss=opts.loss,
            what=f"{m.path} (tier {t_before.name})",
        )
        for w in fit.warnings:
            warnings.append(f"tier {t_before.name}: {w}")
        changes: dict[str, Any] = {}
        if fit.identified["alpha"]:
            changes["latency_s"] = fit.alpha_s
        if fit.identified["bandwidth"]:
            changes.update(bandwidth_Bps=fit.bandwidth_Bps, efficiency=1.0)
        network[ti] = dataclasses.replace(t_before, **changes)
        rec = _tier_record(
            t_before,
            network[ti],
            ti,
            fit=fit,
            world_sizes=list(fit.world_sizes),
            holdout=holdout,
            seed=seed + ti,
            latency=(fit.alpha_se_s, fit.identified["alpha"]),
            bandwidth=(fit.bandwidth_se_Bps, fit.identified["bandwidth"]),
            downweighted=fit.downweighted,
        )
        tiers_out.append(rec)
    # the textbook fits assume the fitted tier is the ring's bottleneck; say so where the new profile disagrees
    for rec in tiers_out:
        ks = np.array(rec["world_sizes"])
        alpha, _, bott = ring_params(network, ks)
        if np.any(bott != rec["index"]):
            warnings.append(
                f"tier {rec['tier']}: with the fitted values another tier is the bottleneck for "
                f"k = {sorted({int(x) for x in ks[bott != rec['index']]})}; predictions there use it"
            )


def _network_block(tiers_out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calibration block's ``network``: each fitted tier, its values before and after, for people."""
    return [
        {
            "tier": r["tier"],
            "world_sizes": r["world_sizes"],
            "sizes": r["size_range"],
            "points": r["points"],
            "holdout_points": r["holdout_points"],
            "seed": r["seed"],
            "latency": {
                "before": fmt_time(r["latency"]["before_s"]),
                "after": fmt_time(r["latency"]["after_s"]),
                "standard_error": None if r["latency"]["se_s"] is None else fmt_time(r["latency"]["se_s"]),
                "identified": r["latency"]["identified"],
            },
            "effective_bandwidth": {
                "before": fmt_rate(r["bandwidth"]["before_Bps"]),
                "after": fmt_rate(r["bandwidth"]["after_Bps"]),
                "standard_error": (None if r["bandwidth"]["se_Bps"] is None else fmt_rate(r["bandwidth"]["se_Bps"])),
                "identified": r["bandwidth"]["identified"],
            },
            "quality": {key: (None if v is None else round(float(v), 5)) for key, v in r["quality"].items()},
            "warnings": r["warnings"],
        }
        for r in tiers_out
    ]


def fit_comm(
    base: Profile,
    comm_m: Measured,
    opts: CalibrationOptions,
    *,
    algorithm: str,
    network: list,
    tiers_out: list,
    warnings: list[str],
    cal: dict[str, Any],
) -> None:
    """The all-reduce file's fit: NCCL's model on every tier the data identify (a profile that models NCCL), else
    the textbook fit tier by tier; ``network``, ``tiers_out``, ``warnings`` and the calibration block updated."""
    m = filter_rows(comm_m, list(opts.where), opts.min_size, max_size=opts.max_size)
    warnings.extend(f"{m.path}: {w}" for w in placement_notes(m, base))
    k, n, t, gpus = _comm_rows(base, m, warnings)
    if base.library == "rccl" and algorithm == "nccl":  # rccl hook (issue 37): no RCCL fit yet
        raise InputError(
            f"--profile: {base.name} models RCCL (library: rccl), whose choice simcli does not fit yet; "
            "give --algorithm ring for the textbook fit, or calibrate a copy with library: nccl"
        )
    use_nccl = base.library == "nccl"
    groups: dict[int, np.ndarray] = {}
    if use_nccl:
        if opts.tier is not None:
            warnings.append("--tier is for the textbook fit; NCCL's model is fitted on every tier the data identifies")
        cal["method"] = (
            f"NCCL's model (simcli.comm.nccl, tuning.cc 2.20.3), algorithm {algorithm}: each tier's "
            "hop latency and effective bandwidth by least squares on log(t_pred/t_meas), "
            "derivative-free coordinate search; standard errors from 8 half-samples"
        )
        nccl_warnings = _fit_nccl_tiers(
            base,
            network,
            tiers_out,
            k=k,
            n=n,
            t=t,
            algorithm=algorithm,
            holdout=opts.holdout,
            seed=opts.seed,
            what=m.path,
            gpus=gpus,
        )
        warnings.extend(f"{m.path}: {w}" for w in nccl_warnings)
    else:
        groups = _textbook_groups(base, k, opts.tier)
    cal["data"] = {"file": m.path, "rows": int(k.size), "comments": list(m.comments)[:6]}
    if not use_nccl:
        _fit_textbook_tiers(
            base,
            m,
            (k, n, t),
            groups=groups,
            network=network,
            tiers_out=tiers_out,
            algorithm=algorithm,
            opts=opts,
            warnings=warnings,
        )
    cal["network"] = _network_block(tiers_out)
    cal["note"] = "bandwidth is the measured achievable bandwidth (efficiency set to 1.0 on fitted tiers); " + (
        "latency is the tier's Ring/Simple hop latency; NCCL's other per-protocol latencies scale with it"
        if use_nccl
        else "latency is the per-step alpha"
    )
