"""Hold a profile's predictions against measurements: per-row errors and MAPE summaries.

The measurement tables (read and recognised by their header in :mod:`simcli.io.measured.table`; comment lines
start with ``#``) and what each is held to:

* ``allreduce``: ``simcli bench allreduce`` and ``simcli bench import`` (nccl-tests)
  CSVs (``world_size, bytes, time_s``, ...), and published nccl-tests tables with
  ``devices, bytes`` and ``time_us`` or only ``busbw_GBps``; where only busbw is
  given the time is ``bytes · 2(k-1)/k / busbw`` (nccl-tests doc/PERFORMANCE.md).
  Metric: all-reduce time.
* ``step``: ``simcli bench step`` CSVs (``world_size, t_step_s``, ...). Metrics:
  T_step and, where the file has it, the speedup S(k).
* ``scaling``: published scaling tables (``devices, speedup``, optionally
  ``batch_per_device`` and ``images_per_s``/``samples_per_s``). Metrics: S(k) for
  k > 1 (S(1) = 1 by definition on both sides) and throughput.

The error of a row is ``(predicted - measured) / measured``; summaries give the
median absolute percentage error (MdAPE), the mean and max absolute error and
the median signed error (bias), overall and per world size and per size decade; for
all-reduce files also the median and max absolute error of busbw (``pred/meas - 1``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..base.types import InputError, Profile, Workload
from ..comm import bands, collectives, specs, topology
from ..fits.fitting import rel_error
from ..io.measured.table import PRIMARY_METRIC, Measured, placement_notes
from ..step.engine import Scenario, simulate

__all__ = ["validate", "Validation", "summarise", "size_band", "size_decade", "SIZE_BANDS"]

# --------------------------------------------------------------------------- predictions


@dataclass(frozen=True)
class Validation:
    kind: str
    path: str
    profile: str
    records: list[dict[str, Any]]
    summary: dict[str, Any]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def primary(self) -> str:
        return PRIMARY_METRIC[self.kind]

    def median_error(self, metric: str | None = None) -> float | None:
        s = self.summary.get(metric or self.primary)
        return None if s is None else s["overall"]["mdape"]


def _row(metric: str, k: int, n: float | None, *, pred: float, meas: float, line: int, **extra: Any) -> dict[str, Any]:
    err = float(rel_error(np.float64(pred), np.float64(meas)))
    return {
        "metric": metric,
        "devices": int(k),
        "bytes": None if n is None else float(n),
        "measured": float(meas),
        "predicted": float(pred),
        "error": err,
        "abs_error": abs(err),
        "line": int(line),
        **extra,
    }


def _validate_allreduce(
    m: Measured, profile: Profile, algorithm: str | None, *, protocol: str | None
) -> list[dict[str, Any]]:
    k, n, t = m.devices(), m.number("bytes"), m.allreduce_time()
    if np.any(k < 2):
        i = int(np.argmax(k < 2))
        raise InputError(
            f"{m.path}: line {m.lines[i]}: world size {int(k[i])}: an all-reduce on one device "
            "costs nothing to predict; drop the row"
        )
    topology.check_devices(profile.network, k)
    g = m.gpus_per_process()  # nccl-tests' -g per row; None: one GPU per process
    predicted = collectives.collective(
        profile,
        algorithm,
        k,
        nbytes=n,
        collective="all_reduce",
        protocol=protocol,
        gpus_per_process=1 if g is None else g,
    ).time
    f = specs.busbw_factor(k)
    recs = []
    for i in range(len(m)):
        pred = float(predicted[i])
        bus_m, bus_p = n[i] * f[i] / t[i] / 1e9, n[i] * f[i] / pred / 1e9
        recs.append(
            _row(
                "time_s",
                k[i],
                n[i],
                pred=pred,
                meas=t[i],
                line=m.lines[i],
                busbw_measured_GBps=bus_m,
                busbw_predicted_GBps=bus_p,
                busbw_error=bus_p / bus_m - 1.0,
            )
        )
    return recs


def _scenario(profile: Profile, workload: Workload, opts: Mapping[str, Any], **row: Any):
    """The run's scenario for some rows: the run's options (``opts``, Scenario fields) with the rows' own batch,
    overlap and dtype."""

    return Scenario(profile=profile, workload=workload, **{**opts, **row})


def _groups(m: Measured, columns: Sequence[str]) -> dict[tuple[str, ...], np.ndarray]:
    keys = [tuple(r.get(c, "").strip() for c in columns) for r in m.rows]
    out: dict[tuple[str, ...], list[int]] = {}
    for i, key in enumerate(keys):
        out.setdefault(key, []).append(i)
    return {key: np.array(v) for key, v in out.items()}


def _validate_step(
    m: Measured, profile: Profile, workload: Workload | None, *, opts: Mapping[str, Any], overlap: str, notes: list[str]
) -> list[dict[str, Any]]:
    """bench step rows: predicted T_step and S(k) for the measured model (params from the file)."""

    k = m.devices()
    b = m.number("batch_per_device", integer=True)
    ts = m.number("t_step_s")
    sp = m.optional("speedup")
    params = m.number("params") if "params" in m.header else None
    fps = m.optional("flops_per_sample")
    recs = []
    group_cols = [c for c in ("mode", "backend", "params", "batch_per_device", "model", "dtype") if c in m.header]
    dtype = opts.get("dtype")
    tcm = m.optional("t_compute_s") if opts.get("compute_time_s") is None and "dtype" in m.header else None
    for key, idx in _groups(m, group_cols).items():
        if workload is not None:
            wl = workload
        elif params is not None:
            p = float(params[idx[0]])
            # dense layers: 2 FLOPs per parameter per sample forward, twice that backward (6·N per sample)
            f = float(fps[idx[0]]) if fps is not None else 6.0 * p
            wl = Workload(name="measured", params=p, flops_per_sample=f, batch_per_device=int(b[idx[0]]))
            if fps is None and "6N" not in " ".join(notes):
                notes.append(
                    "FLOPs per sample taken as 6N (dense layers: 2N forward + 4N backward); give --model "
                    "or --compute-time for another model"
                )
        else:
            raise InputError(f"{m.path}: no params column; give the model with --model or --params")
        mode = dict(zip(group_cols, key)).get("mode", "")
        ov = overlap
        if ov == "auto":
            ov = "buckets" if mode.lower() == "ddp" else "none"
        # a bench step --dtype file: each row's compute dtype, where the profile has a peak for it
        row_dtype = dict(zip(group_cols, key)).get("dtype") or None
        dt = dtype if dtype is not None or row_dtype not in profile.device.peak_flops else row_dtype
        # the optimizer the measured step ran (bench step: plain SGD), where the file says
        step_opt = {"optimizer": m.rows[idx[0]]["step_optimizer"]} if m.rows[idx[0]].get("step_optimizer") else {}
        sc = _scenario(profile, wl, opts, batch_per_device=int(b[idx[0]]), overlap=ov, dtype=dt, **step_opt)
        res = simulate(sc, k[idx])
        for j, i in enumerate(idx):
            extra = {"mode": mode} if mode else {}
            if row_dtype:
                extra["dtype"] = row_dtype
            recs.append(_row("t_step_s", k[i], None, pred=float(res.t_step_s[j]), meas=ts[i], line=m.lines[i], **extra))
            if tcm is not None and (mode in ("", "flat") or "flat" not in {r.get("mode") for r in m.rows}):
                # forward + backward alone: what the profile's mfu (mfu_by_dtype) predicts, without the optimizer
                recs.append(
                    _row(
                        "t_compute_s", k[i], None, pred=float(res.t_compute_s[j]), meas=tcm[i], line=m.lines[i], **extra
                    )
                )
            if sp is not None and k[i] > 1:
                recs.append(
                    _row("speedup", k[i], None, pred=float(res.speedup[j]), meas=sp[i], line=m.lines[i], **extra)
                )
    return recs


def _validate_scaling(
    m: Measured, profile: Profile, workload: Workload | None, *, opts: Mapping[str, Any], overlap: str
) -> list[dict[str, Any]]:
    """Published scaling tables: predicted S(k) (k > 1) and throughput for the named model."""

    if workload is None:
        raise InputError(
            f"{m.path}: a scaling table (devices, speedup) does not say which model it measured; "
            "give --model (for example --model resnet50)"
        )
    k = m.devices()
    sp = m.optional("speedup")
    acc = m.number("accum", integer=True) if "accum" in m.header else np.ones(len(m), dtype=np.int64)
    tput_col = next((c for c in ("samples_per_s", "images_per_s") if c in m.header), None)
    tput = m.number(tput_col) if tput_col else None
    if "batch_per_device" in m.header:
        bs = m.number("batch_per_device", integer=True)
    elif opts.get("batch_per_device") is not None:
        bs = np.full(len(m), opts["batch_per_device"])
    else:
        bs = np.full(len(m), workload.batch_per_device)
    recs = []
    ov = "buckets" if overlap == "auto" else overlap  # published scaling runs use DDP/Horovod-style buckets
    for b_val, a_val in sorted({(int(x), int(y)) for x, y in zip(bs, acc)}):
        idx = np.flatnonzero((bs == b_val) & (acc == a_val))
        extra = {"accum": a_val} if "accum" in m.header else {}
        sc = _scenario(profile, workload, opts, batch_per_device=int(b_val), overlap=ov, **extra)
        res = simulate(sc, k[idx])
        for j, i in enumerate(idx):
            if k[i] > 1 and sp is not None:
                recs.append(_row("speedup", k[i], None, pred=float(res.speedup[j]), meas=sp[i], line=m.lines[i]))
            if tput is not None:
                recs.append(
                    _row("samples_per_s", k[i], None, pred=float(res.samples_per_s[j]), meas=tput[i], line=m.lines[i])
                )
    return recs


def validate(
    m: Measured,
    profile: Profile,
    *,
    workload: Workload | None,
    scenario: Mapping[str, Any] | None = None,
) -> Validation:
    """Predict every measured row with ``profile`` and summarise the errors.

    ``scenario``: the :class:`~simcli.step.engine.Scenario` fields the run's options set (every scenario option
    works here: strategy, spread, accumulation, ...; the CLI passes ``ScenarioOptions.scenario_fields()``), with
    the rows' own batch. Its ``overlap`` may also be "auto" (the default): step files by their ``mode`` column
    (ddp: buckets, else none), scaling tables buckets (DDP's).
    """
    notes: list[str] = []
    opts = {k: v for k, v in (scenario or {}).items() if k != "overlap"}
    overlap = (scenario or {}).get("overlap", "auto")
    if m.kind == "allreduce":
        recs = _validate_allreduce(m, profile, opts.get("algorithm"), protocol=opts.get("protocol"))
        notes += placement_notes(m, profile)
    elif m.kind == "step":
        recs = _validate_step(m, profile, workload, opts=opts, overlap=overlap, notes=notes)
    else:
        recs = _validate_scaling(m, profile, workload, opts=opts, overlap=overlap)
        notes.append("S(1) = 1 on both sides by definition: k = 1 rows are left out of the speedup errors")
    if not recs:
        raise InputError(f"{m.path}: no rows to compare (a scaling table needs rows with devices > 1)")
    return Validation(
        kind=m.kind, path=m.path, profile=profile.name, records=recs, summary=summarise(recs), notes=tuple(notes)
    )


# --------------------------------------------------------------------------- summaries


def _stats(err: np.ndarray, bus: np.ndarray | None = None) -> dict[str, Any]:
    a = np.abs(err)
    worst = int(np.argmax(a))
    out = {
        "n": int(err.size),
        "mdape": float(np.median(a)),
        "mean_ape": float(np.mean(a)),
        "max_ape": float(a[worst]),
        "worst_error": float(err[worst]),
        "bias": float(np.median(err)),
    }
    if bus is not None:  # all-reduce rows: the same errors in nccl-tests' busbw (pred/meas - 1)
        out["busbw_mdape"] = float(np.median(np.abs(bus)))
        out["busbw_max_ape"] = float(np.max(np.abs(bus)))
    return out


#: the size bands the NCCL model is held to: label, low, high, low < n <= high (kept in comm, which the error
#: bands of simcli.comm.bands read and which may not import answers)
SIZE_BANDS = bands.SIZE_BANDS


def size_band(n: float) -> str:
    """The size band of a message size in bytes (:data:`SIZE_BANDS`)."""
    return next(label for label, lo, hi in SIZE_BANDS if lo < n <= hi)


def size_decade(n: float) -> str:
    """The decade of a message size in bytes, as a label: '1e5..1e6 B'."""
    d = int(math.floor(math.log10(n)))
    return f"1e{d}..1e{d + 1} B"


def summarise(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per metric: overall, per world size, per size decade and per size band error statistics."""
    out: dict[str, Any] = {}
    for metric in dict.fromkeys(r["metric"] for r in records):
        rs = [r for r in records if r["metric"] == metric]
        err = np.array([r["error"] for r in rs])
        bus = np.array([r["busbw_error"] for r in rs]) if all("busbw_error" in r for r in rs) else None

        def stats(sel: np.ndarray) -> dict[str, Any]:
            return _stats(err[sel], None if bus is None else bus[sel])

        k = np.array([r["devices"] for r in rs])
        s: dict[str, Any] = {"overall": stats(np.ones(err.size, dtype=bool)), "by_devices": {}}
        for kv in np.unique(k):
            s["by_devices"][int(kv)] = stats(k == kv)
        if all(r["bytes"] is not None for r in rs):
            dec = np.array([int(math.floor(math.log10(r["bytes"]))) for r in rs])
            s["by_size_decade"] = {size_decade(10.0**d): stats(dec == d) for d in np.unique(dec)}
            band = np.array([size_band(r["bytes"]) for r in rs])
            s["by_size_band"] = {lab: stats(band == lab) for lab, _, _ in SIZE_BANDS if np.any(band == lab)}
        out[metric] = s
    return out
