"""The formats results are written in: CSV and JSON serialisation of records, and the finiteness gate that every
rendered record passes (issue 27).
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from typing import Any, Iterable, Iterator, Sequence

from ..base.types import NonFiniteResult
from .stdout import escape_controls

__all__ = ["to_csv", "to_json", "jsonable", "number_text", "finite_gate", "NonFiniteResult", "csv_value"]


def jsonable(v: Any) -> Any:
    """Plain JSON values: numpy scalars to Python (np.float64 to float), NaN and infinity to None."""
    if isinstance(v, (str, bool)) or v is None:
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        v = float(v)  # np.float64 is a float whose repr is 'np.float64(...)': never let it reach a file
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if hasattr(v, "tolist"):
        return jsonable(v.tolist())
    return v


def number_text(v: Any) -> Any:
    """The one spelling of a value in a CSV cell or a JSON number: shortest round-trip repr of a Python float."""
    v = jsonable(v)
    if isinstance(v, float):
        return repr(v)
    return v


# --------------------------------------------------------------------------- the finiteness gate (issue 27)

#: result keys that are times, rates or ratios: each must be a finite number (None means "not computed")
_MEASURE_SUFFIXES = ("_s", "_GBps", "_Bps", "_bps", "_flops", "_per_s", "_B_per_s")
#: ... and what is computed after the engine: plan's money and durations (cost = device-hours x price)
_MEASURE_KEYS = {
    "speedup",
    "efficiency",
    "time",
    "bandwidth",
    "busbw",
    "algbw",
    "achieved_flops",
    "throughput",
    "cost",
    "device_hours",
    "hours",
    "days",
}
#: of those, the ones that must also be greater than zero: a step, a compute time, a speedup, a rate, and a cost
#: (a positive price times positive device-hours: 0 is an underflow, as --price-per-device-hour 1e-320 gives)
_POSITIVE_KEYS = {
    "speedup",
    "t_step_s",
    "t_compute_s",
    "step_time_s",
    "predicted_t_step_s",
    "samples_per_s",
    "cost",
    "device_hours",
}
#: spreads and fit statistics that may be undefined (shown as '-'), never a result of the model
_FREE_KEYS = {"rse", "spread", "noise", "r2", "r2_log", "target_se", "error", "error_pct", "rel_error"}


def _is_measure(key: str) -> bool:
    return key not in _FREE_KEYS and (key in _MEASURE_KEYS or key.endswith(_MEASURE_SUFFIXES))


def finite_gate(records: Any, what: str = "result") -> None:
    """Refuse (:class:`NonFiniteResult`, exit 2) a record whose time, rate, speedup, cost or duration is NaN,
    infinite, subnormal, or (for a step time, compute time, speedup, cost) not positive; and any other number that is
    infinite (a fitted standard error, a count), wherever it was computed: the engine, plan's cost, a fit.
    NaN elsewhere means "not computed" (written null, '-'); an infinity never does. Every table, CSV, JSON and
    written profile passes here before it is written, so no such number is ever printed with exit 0."""
    for rec in _records(records):
        for k, v in rec.items():
            if not isinstance(k, str) or isinstance(v, (list, tuple, dict)) or v is None or isinstance(v, (bool, str)):
                continue
            measure = _is_measure(k)
            if not measure and (k in _FREE_KEYS or not isinstance(v, (float, _np_floating()))):
                continue
            try:
                x = float(v)
            except (TypeError, ValueError):
                continue
            if not measure and not math.isinf(x):
                continue
            # subnormal (below 2.2e-308, not 0): float64 has lost its precision there, as a cost of 4e-322 has
            bad = not math.isfinite(x) or (k in _POSITIVE_KEYS and x <= 0) or 0 < abs(x) < sys.float_info.min
            if bad:
                at = ", ".join(
                    f"{n}={rec[n]}" for n in ("profile", "model", "devices", "world_size", "bytes") if n in rec
                )
                shown = "NaN" if x != x else ("infinite" if math.isinf(x) else f"{x:g}")
                if 0 < abs(x) < sys.float_info.min:
                    shown += " (below float64's smallest normal number, 2.2e-308)"
                raise NonFiniteResult(
                    f"the {what} {k} is {shown}{' at ' + at if at else ''}, not a "
                    f"{'positive ' if k in _POSITIVE_KEYS else ''}finite number: the inputs are each valid "
                    "but their result is beyond what simcli computes; give values in a realistic range"
                )


def _np_floating() -> type:
    """numpy's floating type when numpy is loaded (it always is under the engine), else float."""
    np = sys.modules.get("numpy")
    return np.floating if np is not None else float


def _records(obj: Any) -> Iterator[dict]:
    if isinstance(obj, dict):
        yield obj
        for v in obj.values():
            if isinstance(v, (dict, list, tuple)):
                yield from _records(v)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            if isinstance(x, (dict, list, tuple)):
                yield from _records(x)


def to_json(obj: Any) -> str:
    """JSON text; a list of records is written one record per line (json's C encoder; indent would not use it)."""
    finite_gate(obj)
    obj = jsonable(obj)
    if isinstance(obj, list) and obj and all(isinstance(r, dict) for r in obj):
        return "[\n" + ",\n".join(json.dumps(r, allow_nan=False) for r in obj) + "\n]\n"
    return json.dumps(obj, indent=2, allow_nan=False) + "\n"


def to_csv(
    records: Sequence[dict[str, Any]], columns: Iterable[str] | None = None, comments: Iterable[str] = ()
) -> str:
    finite_gate(records)
    cols = list(columns) if columns is not None else (list(records[0]) if records else [])
    buf = io.StringIO()
    for c in comments:
        buf.write(f"# {escape_controls(c)}\n")
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in records:
        w.writerow({k: ("" if r.get(k) is None else csv_value(r.get(k))) for k in cols})
    return buf.getvalue()


def csv_value(v: Any) -> Any:
    return number_text(v)
