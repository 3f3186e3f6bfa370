"""Calibration: fit a profile's tiers (and compute rate) to measurements and build the calibrated profile.

A pure function of its inputs: the base profile, the measurements read by :mod:`simcli.answers.validate`, the
options, the clock and the host name. The fitting maths is :mod:`simcli.answers.fitting`'s; this module
applies it tier by tier, rebuilds the profile, and returns the report and the YAML text to write.
The command line (:mod:`simcli.cli.calibrate`) reads the files, writes the YAML and renders the report.
"""

from __future__ import annotations

import dataclasses
import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from ..base.types import InputError
from ..base.units import fmt_bytes, fmt_flops, fmt_rate, fmt_time
from ..comm.topology import check_devices, ring_params, tier_spanned
from ..io.profiles import profile_from_dict, profile_to_dict
from ..version import __version__
from .fit_compute import fit_mfu_by_dtype, fit_spread, fit_step
from .fit_nccl import fit_nccl
from .fitting import fit_link, outer_tier
from .validate import filter_present, filter_rows, placement_notes

if TYPE_CHECKING:  # pragma: no cover
    from ..base.types import Profile
    from .validate import Measured

__all__ = ["CalibrationOptions", "calibrate_profile"]


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


def _fit_dtypes(
    base: Profile,
    device: Any,
    sm: Measured,
    *,
    dts: list[str],
    k: np.ndarray,
    b: np.ndarray,
    tc: np.ndarray,
    fps: np.ndarray,
    warnings: list[str],
    cal: dict[str, Any],
) -> tuple[Any, list]:
    """mfu_by_dtype and the backward fraction from a ``bench step --dtype`` file's rows, dtype by dtype.

    Each fitted dtype's mfu goes into ``device.mfu_by_dtype`` (and ``device.mfu`` for the default dtype, as
    before); both values, their standard errors and the run they come from go into the calibration block and
    one ``sources`` line per dtype. The backward fraction is recorded there too (the engine's
    ``backward_fraction`` is a scenario input; the profile does not set it).
    """
    tf, tb = sm.optional("t_forward_s"), sm.optional("t_backward_s")
    fits = fit_mfu_by_dtype(
        dts,
        k,
        b,
        t_compute=tc,
        flops_per_sample=fps,
        peaks=device.peak_flops,
        t_forward=tf,
        t_backward=tb,
        t_p10=sm.optional("t_compute_p10_s"),
        t_p90=sm.optional("t_compute_p90_s"),
        steps=sm.optional("steps"),
        what=sm.path,
    )
    by = dict(device.mfu_by_dtype)
    models = sorted(set(sm.text("model"))) if "model" in sm.header else []
    run = f"{sm.path} (bench step{', ' + '; '.join(models) if models else ''})"
    recs, block, sources = [], {}, []
    for dt, f in fits.items():
        warnings.extend(f"{sm.path}: {w}" for w in f.warnings)
        ok = f.mfu is not None and 0 < f.mfu <= 1
        before = base.device.mfu_by_dtype.get(dt)
        if ok:
            by[dt] = f.mfu
        rec = {
            "dtype": dt,
            "rows": f.n_rows,
            "achieved_flops": f.achieved_flops,
            "mfu": f.mfu,
            "mfu_se": f.mfu_se,
            "mfu_before": before,
            "written": ok,
            "backward_fraction": f.backward_fraction,
            "backward_fraction_se": f.backward_fraction_se,
        }
        recs.append(rec)
        block[dt] = {
            "rows": f.n_rows,
            "achieved": fmt_flops(f.achieved_flops),
            "mfu": None if f.mfu is None else round(f.mfu, 6),
            "mfu_standard_error": None if f.mfu_se is None else round(f.mfu_se, 6),
            "mfu_before": before,
            "written": ok,
            "backward_fraction": None if f.backward_fraction is None else round(f.backward_fraction, 4),
            "backward_fraction_standard_error": (
                None if f.backward_fraction_se is None else round(f.backward_fraction_se, 4)
            ),
        }
        if ok:
            se = f" (+- {f.mfu_se:.2g})" if f.mfu_se is not None else " (one row: no standard error)"
            bf = (
                ""
                if f.backward_fraction is None
                else f"; backward fraction T_b/(T_f+T_b) "
                f"{f.backward_fraction:.3f}"
                + (f" (+- {f.backward_fraction_se:.2g})" if f.backward_fraction_se is not None else "")
            )
            sources.append(
                f"device.mfu_by_dtype.{dt} {f.mfu:.4g}{se}: CALIBRATED by simcli calibrate on {cal['date']} "
                f"from {run}, {f.n_rows} row(s), mfu = flops_per_sample x batch / (T_compute x "
                f"peak_flops.{dt}){bf}"
            )
    dtype = device.default_dtype()
    if by:
        device = dataclasses.replace(device, mfu_by_dtype={d: by[d] for d in device.peak_flops if d in by})
    cal["step"]["by_dtype"] = block
    cal["step"]["by_dtype_definition"] = (
        "mfu = flops_per_sample (as simcli's presets count it) x batch_per_device "
        "/ (t_compute_s x peak_flops[dtype]), mean over distinct rows +- standard "
        "error; backward_fraction = t_backward_s / (t_forward_s + t_backward_s)"
    )
    cal["step"]["sources"] = sources
    if dtype in by and by[dtype] != device.mfu:
        device = dataclasses.replace(device, mfu=by[dtype])
    return device, recs


def _fit_spread(
    base: Profile, network: list, device: Any, *, scaling: "tuple[Measured, Any]", warnings: list[str], cal: dict
) -> tuple[Any, dict[str, Any]]:
    """device.spread from a scaling table (simcli.answers.fit_compute.fit_spread), on the profile calibrated so far."""
    m, sc = scaling
    so_far = dataclasses.replace(base, network=tuple(network), device=dataclasses.replace(device, spread=None))
    if "speedup" not in m.header:  # (k, samples/s, accum): the spread and the per-update time together
        return _fit_spread_update(base, m, sc.replace(profile=so_far), device=device, warnings=warnings, cal=cal)
    sf = fit_spread(sc.replace(profile=so_far), m.devices(), m.number("speedup"), what=m.path)
    warnings.extend(f"{m.path}: {w}" for w in sf.warnings)
    device = dataclasses.replace(device, spread=sf.spread or None)
    errs = [abs(r["predicted_after"] / r["measured"] - 1) for r in sf.rows]
    before = [abs(r["predicted_before"] / r["measured"] - 1) for r in sf.rows]
    out = {
        "file": m.path,
        "rows": sf.n_rows,
        "k0": sf.k0,
        "before": base.device.spread,
        "after": sf.spread,
        "se": sf.spread_se,
        **_medians(before, errs),
        "per_row": list(sf.rows),
    }
    cal["spread"] = {
        "file": m.path,
        "rows": sf.n_rows,
        "scenario": {
            key: v
            for key, v in sc.inputs().items()
            if key
            in ("model", "params", "batch_per_device", "global_batch", "compute_time_s", "grad_dtype", "algorithm")
        }
        | {"strategy": sc.strategy},
        "spread": round(sf.spread, 6),
        "standard_error": None if sf.spread_se is None else round(sf.spread_se, 6),
        "method": (
            f"the per-device throughput ratio to k = {sf.k0}, (S(k)/k)/(S(k0)/k0), by least squares on its log, "
            "with simcli's communication kept in the prediction and T_compute x (1 + spread x m_k) "
            "(simcli.step.straggler); golden-section search on [0, 0.9]"
        ),
        "median_rel_error": _before_after(out),
    }
    return device, out


def _medians(before: Any, after: Any) -> dict[str, float]:
    """A scaling fit's median relative error over its rows without and with what was fitted."""
    return {"median_rel_error_before": float(np.median(before)), "median_rel_error_after": float(np.median(after))}


def _before_after(out: dict[str, Any]) -> dict[str, float]:
    """A scaling fit's median relative error without and with what was fitted, as the report records it."""
    return {"before": round(out["median_rel_error_before"], 5), "after": round(out["median_rel_error_after"], 5)}


def _fit_update_bandwidth(base: Profile, device: Any, sm: Measured, *, k: np.ndarray, cal: dict) -> tuple[Any, dict]:
    """device.update_bandwidth from a bench step file's timed optimizer steps (t_update_s, update_bytes_per_param,
    params): the one-rank rows where there are any (more ranks on one host share its memory bandwidth)."""
    from .fit_update import fit_update_bandwidth

    one = k == 1 if np.any(k == 1) else np.ones(k.shape, dtype=bool)
    per = sm.optional("update_bytes_per_param")
    per = per[one] if per is not None else np.full(int(one.sum()), 80.0)
    # every mode's row of a world repeats its one measurement: each (params, bytes, time) once
    trip = np.unique(np.column_stack([sm.number("params")[one], per, sm.number("t_update_s")[one]]), axis=0)
    f = fit_update_bandwidth(trip[:, 0], trip[:, 1], trip[:, 2], what=sm.path)
    device = dataclasses.replace(device, update_Bps=f.bandwidth_Bps)
    out = {
        "rows": f.n_rows,
        "before": base.device.update_Bps or base.device.memory_bandwidth_Bps,
        "after": f.bandwidth_Bps,
        "se": f.bandwidth_se,
        "per_row": list(f.rows),
    }
    cal["step"]["update_bandwidth"] = f"{f.bandwidth_Bps / 1e9:.6g} GB/s" + (
        f" +- {f.bandwidth_se / 1e9:.2g}" if f.bandwidth_se is not None else ""
    )
    cal["step"]["update_method"] = (
        "t_update_s = params x update_bytes_per_param / B (the optimizer step alone, simcli.step.update), least "
        "squares on the relative error through the origin" + (", world size 1 rows only" if np.any(k == 1) else "")
    )
    return device, out


def _fit_spread_update(
    base: Profile, m: Measured, sc: Any, *, device: Any, warnings: list[str], cal: dict
) -> tuple[Any, dict[str, Any]]:
    """device.spread and device.update_bandwidth from a (devices, samples_per_s, accum) table
    (simcli.answers.fit_update: both at once, with standard errors; a warning when they cannot be told apart)."""
    from .fit_update import fit_spread_update

    b = m.number("batch_per_device") if "batch_per_device" in m.header else None
    f = fit_spread_update(
        sc,
        m.devices(),
        m.number("samples_per_s"),
        accum=m.number("accum", integer=True),
        batch=None if b is None else b[0],
        what=m.path,
    )
    warnings.extend(f"{m.path}: {w}" for w in f.warnings)
    bw = f.update_bandwidth_Bps
    device = dataclasses.replace(device, spread=f.spread or None, update_Bps=bw)
    errs = [abs(r["predicted_after"] / r["measured"] - 1) for r in f.rows[1:]]
    before = [abs(r["predicted_before"] / r["measured"] - 1) for r in f.rows[1:]]
    out = {
        "file": m.path,
        "rows": len(f.rows) - 1,
        "k0": f.k0,
        "before": base.device.spread,
        "after": f.spread,
        "se": f.spread_se,
        "update_s": f.update_s,
        "update_se": f.update_se,
        "update_bandwidth_Bps": bw,
        "correlation": f.correlation,
        "separable": f.separable,
        **_medians(before, errs),
        "per_row": list(f.rows),
    }
    cal["spread"] = {
        "file": m.path,
        "rows": len(f.rows) - 1,
        "scenario": {
            key: v
            for key, v in sc.inputs().items()
            if key in ("model", "params", "batch_per_device", "compute_time_s", "grad_dtype", "algorithm", "optimizer")
        }
        | {"strategy": sc.strategy, "update_extras": list(sc.update_extras)},
        "spread": round(f.spread, 6),
        "standard_error": None if f.spread_se is None else round(f.spread_se, 6),
        "update_time_at_k0": f"{f.update_s:.6g} s" + (f" +- {f.update_se:.2g}" if f.update_se is not None else ""),
        "update_bandwidth": None if bw is None else f"{bw / 1e9:.6g} GB/s",
        "correlation": None if f.correlation is None else round(f.correlation, 4),
        "told_apart": f.separable,
        "method": (
            f"samples/s per row, the micro-step solved so that the first row (k = {f.k0}) is met; the spread "
            "(T_compute x (1 + σ·m_k) / (1 + σ·m_k0)) and the per-update time (u_k = the optimizer's bytes at k x "
            "seconds per byte) by least squares on log(predicted / measured) (simcli.answers.fit_update); "
            "standard errors and their correlation from the Jacobian"
        ),
        "median_rel_error": _before_after(out),
    }
    return device, out


def calibrate_profile(
    base: Profile,
    comm_m: Measured | None,
    step_m: Measured | None,
    *,
    opts: CalibrationOptions,
    scaling: "tuple[Measured, Any] | None" = None,
    run: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Fit, build the new profile and its YAML; return a report (plain data) for tables and JSON.

    ``run``: what a live job's trace or Inspector log measured beyond the fits (the per-update time, the spread
    across ranks), recorded in the calibration block as ``measured_run`` and reported, not fitted.

    ``opts``: how to fit and what to record (:class:`CalibrationOptions`).
    """

    from ..comm.collectives import default_algorithm

    tier, holdout, seed, loss, name = opts.tier, opts.holdout, opts.seed, opts.loss, opts.name
    min_size, max_size, where, now, host = opts.min_size, opts.max_size, list(opts.where), opts.now, opts.host
    algorithm = opts.algorithm
    algorithm = algorithm or default_algorithm(base)
    warnings: list[str] = []
    network = list(base.network)
    tiers_out: list[dict[str, Any]] = []
    cal: dict[str, Any] = {
        "tool": f"simcli {__version__} calibrate",
        "date": now.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": host,
        "base_profile": f"{base.name} ({base.origin})",
        "method": (
            f"{algorithm} alpha-beta model, weighted least squares on relative error, alpha >= 0, B > 0, "
            f"loss {loss}"
            + (" (Huber IRLS, c = 1.345 x 1.4826 MAD)" if loss == "huber" else "")
            + "; standard errors from the fit's covariance"
        ),
    }
    if comm_m is None and step_m is None and scaling is None and run is None:
        raise InputError("calibrate: nothing to fit")
    if comm_m is not None:
        m = filter_rows(comm_m, where, min_size, max_size=max_size)
        warnings.extend(f"{m.path}: {w}" for w in placement_notes(m, base))
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
        if base.library == "rccl" and algorithm == "nccl":  # rccl hook (issue 37): no RCCL fit yet
            raise InputError(
                f"--profile: {base.name} models RCCL (library: rccl), whose choice simcli does not fit yet; "
                "give --algorithm ring for the textbook fit, or calibrate a copy with library: nccl"
            )
        use_nccl = base.library == "nccl"
        if use_nccl:
            groups = {}
            if tier is not None:
                warnings.append(
                    "--tier is for the textbook fit; NCCL's model is fitted on every tier the data identifies"
                )
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
                holdout=holdout,
                seed=seed,
                what=m.path,
                gpus=gpus,
            )
            warnings.extend(f"{m.path}: {w}" for w in nccl_warnings)
        elif tier is not None:
            names = [x.name for x in base.network]
            if tier not in names:
                raise InputError(f"--tier: {base.name} has no tier {tier!r}; it has {', '.join(names)}")
            ti = names.index(tier)
            groups = {ti: np.ones(k.shape, dtype=bool)}
            spans = outer_tier(base.network, k)
            if np.any(spans < ti):
                bad = sorted({int(x) for x in k[spans < ti]})
                raise InputError(
                    f"--tier {tier}: world sizes {bad} do not cross tier {tier!r}; leave them out "
                    "with --where or choose another tier"
                )
        else:
            spans = outer_tier(base.network, k)
            groups = {int(i): spans == i for i in np.unique(spans)}
        cal["data"] = {"file": m.path, "rows": int(k.size), "comments": list(m.comments)[:6]}
        if use_nccl:
            groups = {}
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
                loss=loss,
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
        for rec in [] if use_nccl else tiers_out:
            ks = np.array(rec["world_sizes"])
            alpha, _, bott = ring_params(network, ks)
            if np.any(bott != rec["index"]):
                warnings.append(
                    f"tier {rec['tier']}: with the fitted values another tier is the bottleneck for "
                    f"k = {sorted({int(x) for x in ks[bott != rec['index']]})}; predictions there use it"
                )
        cal["network"] = [
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
                    "standard_error": (
                        None if r["bandwidth"]["se_Bps"] is None else fmt_rate(r["bandwidth"]["se_Bps"])
                    ),
                    "identified": r["bandwidth"]["identified"],
                },
                "quality": {key: (None if v is None else round(float(v), 5)) for key, v in r["quality"].items()},
                "warnings": r["warnings"],
            }
            for r in tiers_out
        ]
        cal["note"] = "bandwidth is the measured achievable bandwidth (efficiency set to 1.0 on fitted tiers); " + (
            "latency is the tier's Ring/Simple hop latency; NCCL's other per-protocol latencies scale with it"
            if use_nccl
            else "latency is the per-step alpha"
        )

    step_out = None
    device = base.device
    if step_m is not None:
        # --where COLUMN=VALUE keeps step rows too, for the columns a step file has (e.g. world_size=1)
        sm = filter_present(step_m, where)
        k = sm.devices()
        b = sm.number("batch_per_device")
        tc, ts = sm.number("t_compute_s"), sm.number("t_step_s")
        tm = sm.optional("t_comm_s")
        fps = sm.optional("flops_per_sample")
        if fps is None and "params" in sm.header:
            fps = 6.0 * sm.number("params")  # dense layers: 2N forward + 4N backward FLOPs per sample
            flops_note = "6 x params (dense layers)"
        else:
            flops_note = "the file's flops_per_sample column" if fps is not None else None
        dtype = device.default_dtype()
        dts = sm.text("dtype") if "dtype" in sm.header else None
        if dts is not None and not all(dts):
            dts = None
        # device.mfu is the default dtype's: fit it from that dtype's rows only (every row without a dtype column)
        same = np.array([x == dtype for x in dts]) if dts is not None else np.ones(k.shape, dtype=bool)
        peak = device.peak(dtype) if same.any() else None
        if not same.any():
            same = np.ones(k.shape, dtype=bool)
        sf = fit_step(
            k[same],
            b[same],
            tc[same],
            t_comm=tm[same] if tm is not None else np.full(int(same.sum()), np.nan),
            t_step=ts[same],
            flops_per_sample=None if fps is None else fps[same],
            peak_flops=peak,
            what=sm.path,
        )
        warnings.extend(f"{sm.path}: {w}" for w in sf.warnings)
        if sf.mfu is not None and 0 < sf.mfu <= 1:
            device = dataclasses.replace(device, mfu=sf.mfu)
        step_out = {
            "file": sm.path,
            "rows": sf.n_rows,
            "seconds_per_sample": sf.seconds_per_sample,
            "seconds_per_sample_se": sf.seconds_per_sample_se,
            "flops_per_sample_from": flops_note,
            "peak_dtype": dtype,
            "mfu": {"before": base.device.mfu, "after": device.mfu, "fitted": sf.mfu, "se": sf.mfu_se},
            "overlap": sf.overlap,
            "overlap_se": sf.overlap_se,
            "overlap_rows": sf.n_overlap_rows,
            "warnings": list(sf.warnings),
        }
        cal["step"] = {
            "file": sm.path,
            "rows": sf.n_rows,
            "seconds_per_sample": f"{sf.seconds_per_sample:.6g} s"
            + (f" +- {sf.seconds_per_sample_se:.2g}" if sf.seconds_per_sample_se else ""),
            "mfu": {
                "before": base.device.mfu,
                "after": round(device.mfu, 6),
                "standard_error": None if sf.mfu_se is None else round(sf.mfu_se, 6),
                "flops_per_sample": flops_note,
                "peak_dtype": dtype,
            },
            "overlap_fraction": None if sf.overlap is None else round(sf.overlap, 4),
            "overlap_standard_error": None if sf.overlap_se is None else round(sf.overlap_se, 4),
            "overlap_definition": "(T_compute + T_comm - T_step) / min(T_compute, T_comm), mean over k > 1 rows",
        }
        if dts is not None and fps is not None:
            device, by_dtype = _fit_dtypes(
                base, device, sm, dts=dts, k=k, b=b, tc=tc, fps=fps, warnings=warnings, cal=cal
            )
            step_out["by_dtype"] = by_dtype
        if sm.optional("t_update_s") is not None and "params" in sm.header:
            device, step_out["update"] = _fit_update_bandwidth(base, device, sm, k=k, cal=cal)
    spread_out = None
    if scaling is not None:
        device, spread_out = _fit_spread(base, network, device, scaling=scaling, warnings=warnings, cal=cal)
    if run is not None:
        warnings.extend(run.get("warnings", []))
        cal["measured_run"] = {key: v for key, v in run.items() if key != "warnings"}
    cal["warnings"] = warnings
    # the parent's sources describe the parent's numbers: say so, and say what this calibration fitted (issue 12)
    parent = [s if " (the base profile): " in s else f"{base.name} (the base profile): {s}" for s in base.sources]
    fitted = []
    for r in tiers_out:
        what = [n for n in ("latency", "bandwidth") if r.get(n, {}).get("identified")]
        fitted.append(f"tier {r['tier']}: {' and '.join(what) or 'nothing (kept)'}")
    if step_m is not None:
        fitted.append("device: compute rate (mfu)")
        if (step_out or {}).get("update"):
            fitted.append("device: update bandwidth (the optimizer step)")
    if scaling is not None:
        fitted.append("device: speed spread (the slowest of k)")
        if "speedup" not in scaling[0].header:
            fitted.append("device: update bandwidth (the per-update time)")
    if step_m is not None and cal.get("step", {}).get("sources"):
        parent += list(cal["step"].pop("sources"))
    sources = parent + [
        f"calibrated by simcli calibrate on {cal['date']} (host {cal['host']}): fitted {'; '.join(fitted)}; from "
        + ", ".join(x.path for x in (comm_m, step_m, scaling[0] if scaling else None) if x is not None)
        + "; the other values are the base profile's; see the calibration block"
    ]
    new = dataclasses.replace(
        base,
        name=name,
        network=tuple(network),
        device=device,
        sources=tuple(sources),
        calibration=cal,
        origin="calibrated",
        description=(base.description + " (calibrated)").strip(),
    )
    data = profile_to_dict(new)
    from ..io.output import finite_gate

    finite_gate(data, "calibrated profile's")  # a fitted value or its standard error past float64: refused, not .inf
    text = f"# calibrated by simcli calibrate from {base.name}; the calibration block says how\n" + yaml.safe_dump(
        data, sort_keys=False, allow_unicode=True, width=110
    )
    profile_from_dict(yaml.safe_load(text), name)  # check before writing
    return {
        "profile": new,
        "yaml": text,
        "name": name,
        "base": base.name,
        "tiers": tiers_out,
        "step": step_out,
        "spread": spread_out,
        "run": run,
        "method": cal["method"] if base.library == "nccl" and comm_m is not None else None,
        "warnings": warnings,
    }
