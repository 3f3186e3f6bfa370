"""Calibration: fit a profile's tiers (and compute rate) to measurements and build the calibrated profile.

A pure function of its inputs: the base profile, the measurements read by :mod:`simcli.checks.validate`, the
options, the clock and the host name. The fitting maths is :mod:`simcli.fits.fitting`'s; this module
applies it tier by tier, rebuilds the profile, and returns the report and the YAML text to write.
The command line (:mod:`simcli.cli.calibrate`) reads the files, writes the YAML and renders the report.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from ..base.types import InputError
from ..base.units import fmt_flops
from ..comm.bands import Z80, fitted_tiers
from ..comm.collectives import default_algorithm
from ..io.formats import finite_gate
from ..io.measured.table import filter_present
from ..io.profiles import profile_from_dict, profile_to_dict
from ..version import __version__
from .fit_comm import CalibrationOptions, fit_comm
from .fit_compute import fit_mfu_by_dtype, fit_spread, fit_step

if TYPE_CHECKING:  # pragma: no cover
    from ..base.types import Profile
    from ..io.measured.table import Measured

__all__ = ["CalibrationOptions", "calibrate_profile"]


def band_record(profile: Any) -> dict[str, Any] | None:
    """Why simcli's band (docs/model.md#how-sure-is-a-step) is narrower on a calibrated profile, for its calibration
    block: per fitted tier (both latency and bandwidth identified) the relative standard error of a time on it, the
    band it gives (time -+ Z80 of them, where narrower than the published curves' p10-p90) and the world sizes it
    holds at; where the fits cover k the published training runs' band gives way to them; σ's standard error. None
    where nothing was fitted with a standard error."""

    tiers = fitted_tiers(profile)
    cal = profile.calibration or {}
    sigma_se = (cal.get("spread") or {}).get("standard_error")
    if not tiers and sigma_se is None:
        return None
    names = [t.name for t in profile.network]
    out: dict[str, Any] = {
        "why": "simcli's band on this profile is read from these fits' standard errors, not only from the published "
        "runs of other clusters (docs/model.md#how-sure-is-a-step)",
        "tiers": [
            {
                "tier": names[i],
                "up_to_devices": k_max,
                "relative_standard_error": round(rel, 5),
                "time_band": f"-+ {min(Z80 * rel, 1.0):.1%} (time -+ {Z80} standard errors, where narrower than the "
                "published curves' p10-p90)",
            }
            for i, (rel, k_max) in sorted(tiers.items())
        ],
    }
    if tiers:
        out["training_runs"] = (
            "at the k these fits cover, the published training runs' band (other clusters) gives way to the fits"
        )
    if sigma_se is not None:
        out["spread"] = f"σ -+ {Z80} x its standard error {sigma_se:g}, within half to twice σ"
    return out


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
    """device.spread from a scaling table (simcli.fits.fit_compute.fit_spread), on the profile calibrated so far."""
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
    from .fit_update import fit_update_bandwidth  # lazy

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
    (simcli.fits.fit_update: both at once, with standard errors; a warning when they cannot be told apart)."""
    from .fit_update import fit_spread_update  # lazy

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
            "seconds per byte) by least squares on log(predicted / measured) (simcli.fits.fit_update); "
            "standard errors and their correlation from the Jacobian"
        ),
        "median_rel_error": _before_after(out),
    }
    return device, out


def _calibration_block(base: Profile, opts: CalibrationOptions, algorithm: str) -> dict[str, Any]:
    """The calibration block's head: tool, date, host, base profile and the textbook fit's method."""
    loss = opts.loss
    return {
        "tool": f"simcli {__version__} calibrate",
        "date": opts.now.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": opts.host,
        "base_profile": f"{base.name} ({base.origin})",
        "method": (
            f"{algorithm} alpha-beta model, weighted least squares on relative error, alpha >= 0, B > 0, "
            f"loss {loss}"
            + (" (Huber IRLS, c = 1.345 x 1.4826 MAD)" if loss == "huber" else "")
            + "; standard errors from the fit's covariance"
        ),
    }


def _flops_per_sample(sm: Measured) -> tuple[np.ndarray | None, str | None]:
    """A step file's FLOPs per sample and where they come from: its column, else 6 x params, else none."""
    fps = sm.optional("flops_per_sample")
    if fps is None and "params" in sm.header:
        return 6.0 * sm.number("params"), "6 x params (dense layers)"  # dense layers: 2N forward + 4N backward
    return fps, "the file's flops_per_sample column" if fps is not None else None


def _fit_step_file(
    base: Profile, step_m: Measured, where: list[str], *, warnings: list[str], cal: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """The step file's fit: the compute rate (device.mfu, and mfu_by_dtype from a ``--dtype`` file), the overlap,
    the update bandwidth where the file timed the optimizer step; returns the device and the report's record."""
    device = base.device
    # --where COLUMN=VALUE keeps step rows too, for the columns a step file has (e.g. world_size=1)
    sm = filter_present(step_m, where)
    k = sm.devices()
    b = sm.number("batch_per_device")
    tc, ts = sm.number("t_compute_s"), sm.number("t_step_s")
    tm = sm.optional("t_comm_s")
    fps, flops_note = _flops_per_sample(sm)
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
        device, by_dtype = _fit_dtypes(base, device, sm, dts=dts, k=k, b=b, tc=tc, fps=fps, warnings=warnings, cal=cal)
        step_out["by_dtype"] = by_dtype
    if sm.optional("t_update_s") is not None and "params" in sm.header:
        device, step_out["update"] = _fit_update_bandwidth(base, device, sm, k=k, cal=cal)
    return device, step_out


def _sources(
    base: Profile,
    cal: dict[str, Any],
    tiers_out: list[dict[str, Any]],
    *,
    step_out: dict[str, Any] | None,
    comm_m: Measured | None,
    step_m: Measured | None,
    scaling: "tuple[Measured, Any] | None",
) -> list[str]:
    """The new profile's sources: the parent's, said to be the parent's, the step fit's per-dtype lines (taken out
    of the calibration block) and one line on what this calibration fitted from which files (issue 12)."""
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
    return parent + [
        f"calibrated by simcli calibrate on {cal['date']} (host {cal['host']}): fitted {'; '.join(fitted)}; from "
        + ", ".join(x.path for x in (comm_m, step_m, scaling[0] if scaling else None) if x is not None)
        + "; the other values are the base profile's; see the calibration block"
    ]


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

    name = opts.name
    algorithm = opts.algorithm or default_algorithm(base)
    warnings: list[str] = []
    network = list(base.network)
    tiers_out: list[dict[str, Any]] = []
    cal = _calibration_block(base, opts, algorithm)
    if comm_m is None and step_m is None and scaling is None and run is None:
        raise InputError("calibrate: nothing to fit")
    if comm_m is not None:
        fit_comm(
            base, comm_m, opts, algorithm=algorithm, network=network, tiers_out=tiers_out, warnings=warnings, cal=cal
        )
    step_out = None
    device = base.device
    if step_m is not None:
        device, step_out = _fit_step_file(base, step_m, list(opts.where), warnings=warnings, cal=cal)
    spread_out = None
    if scaling is not None:
        device, spread_out = _fit_spread(base, network, device, scaling=scaling, warnings=warnings, cal=cal)
    if run is not None:
        warnings.extend(run.get("warnings", []))
        cal["measured_run"] = {key: v for key, v in run.items() if key != "warnings"}
    cal["warnings"] = warnings
    sources = _sources(base, cal, tiers_out, step_out=step_out, comm_m=comm_m, step_m=step_m, scaling=scaling)
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
    band = band_record(new)
    if band is not None:
        cal["band"] = band
    data = profile_to_dict(new)

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
