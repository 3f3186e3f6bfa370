"""Saved tables read back: the CSV and JSON files that simcli writes, recognised by their columns.

``simcli plot FILE`` redraws such a file. This module reads it (pandas for CSV, imported lazily),
says what it holds (:func:`detect_kind`), and turns its rows into the records the figures draw
(SI units; busbw from :func:`simcli.comm.specs.busbw_factor`). No drawing and no terminal here.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..base.ranges import MAX_BYTES, MAX_DEVICES
from ..base.types import InputError
from ..comm.specs import busbw_factor
from .inputs import load_json, read_text

__all__ = [
    "read_table",
    "check_measured",
    "ELEMENT_BYTES",
    "detect_kind",
    "STEP_KEYS",
    "step_key",
    "numeric",
    "busbw_GBps",
    "allreduce_measured",
    "algorithm_grid",
    "validation_series",
]


def read_table(path: str) -> list[dict[str, Any]]:
    """Records of a CSV or JSON table that simcli wrote (JSON: a list of objects; CSV: a header row)."""

    p = Path(path)
    what = "a .csv or .json file that simcli wrote"
    if p.is_dir() or not p.exists():
        read_text(p, what)  # says which
    suffix = p.suffix.lower()
    if suffix == ".json":
        data = load_json(read_text(p, what), str(p), "; write it with --format json")
        if isinstance(data, dict):  # {"records": [...], "explain": ...} or `simcli algorithms`' {"grid": [...]}
            data = next((data[k] for k in ("records", "grid") if isinstance(data.get(k), list)), data)
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise InputError(f"{p}: expected a JSON list of records (as --format json writes)")
        return data
    if suffix == ".csv":
        import pandas as pd  # heavy

        text = read_text(p, what)  # the one reader: special files refused, size bounded
        runs = sum(1 for ln in text.splitlines() if ln.startswith("# simcli bench"))
        if runs > 1:
            raise InputError(f"{p}: holds {runs} runs ({runs} 'simcli bench' headers): one run per file; split it")
        try:
            df = pd.read_csv(io.StringIO(text), comment="#")
        except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
            raise InputError(f"{p}: not a CSV table ({str(e).splitlines()[0]}); write it with --format csv") from None
        df = df.astype(object).where(df.notna(), None)
        return df.to_dict(orient="records")
    raise InputError(f"{p}: suffix {suffix or '(none)'!r}: give a .csv or .json file (simcli's --format csv|json)")


#: the step-time column of a 'bench step' table, by the names it has had
STEP_KEYS = ("t_step_s", "step_time_s", "time_s", "measured_s", "measured_step_s", "time_per_step_s")


def step_key(cols: set[str]) -> str | None:
    return next((k for k in STEP_KEYS if k in cols), None)


def detect_kind(records: Sequence[Mapping[str, Any]], source: str) -> str:
    """What a table holds, from its columns: validation, speedup, algorithms, comm (model), bench (measured
    all-reduce) or step."""
    cols = set(records[0]) if records else set()
    if {"metric", "measured", "predicted"} <= cols and ({"world_size", "devices"} & cols):
        return "validation"
    if {"devices", "speedup"} <= cols:
        return "speedup"
    if {"devices", "bytes", "fastest"} <= cols:
        return "algorithms"
    if {"devices", "bytes", "time_s"} <= cols:
        return "comm"
    if {"world_size", "bytes", "time_s"} <= cols:
        return "bench"
    if ({"world_size", "devices"} & cols) and (step_key(cols) is not None):
        return "step"
    raise InputError(
        f"{source}: columns {', '.join(sorted(cols)) or '(none)'} are not a table simcli draws; "
        "expected devices+speedup (speedup), devices+bytes+time_s (comm), world_size+bytes+time_s "
        "(bench allreduce) or world_size+a step time (bench step)"
    )


def numeric(records: list[dict[str, Any]], keys: Sequence[str], source: str) -> None:
    """Make ``keys`` floats and devices/world_size/bytes ints, in place; one line naming a bad cell."""
    for i, r in enumerate(records):
        for k in keys:
            v = r.get(k)
            if v is None:
                continue
            try:
                r[k] = float(v)
            except (TypeError, ValueError):
                raise InputError(f"{source}: row {i + 1}: {k}: {v!r} is not a number") from None
        for k in ("devices", "world_size", "bytes"):
            if r.get(k) is not None:
                r[k] = int(r[k])


def busbw_GBps(nbytes: float, k: int, t: float | None) -> float | None:
    """nccl-tests' all-reduce bus bandwidth in GB/s: size/time · 2(k-1)/k; None without a time."""
    return nbytes / t / 1e9 * float(busbw_factor(k)) if t else None


def allreduce_measured(recs: list[dict[str, Any]], name: str) -> tuple[list[dict[str, Any]], list[str]]:
    """A bench table's all-reduce rows as (devices, bytes, time_s, busbw_GBps) records, and its backends."""
    check_measured(recs, name)
    numeric(recs, ("time_s", "busbw_GBps", "algbw_GBps"), name)
    colls = {str(r.get("collective") or "all_reduce") for r in recs}
    ar = [
        r
        for r in recs
        if str(r.get("collective") or "all_reduce").replace("-", "_").replace(" ", "_") in ("all_reduce", "allreduce")
    ]
    if not ar:
        raise InputError(
            f"{name}: no all-reduce rows (collectives: {', '.join(sorted(colls))}); simcli draws "
            "all-reduce measurements"
        )
    from . import rules  # lazy

    rules.rows(  # the rules every reader applies: numbers in range, bandwidths against size and time
        [
            {
                "world_size": r.get("world_size"),
                "bytes": r.get("bytes"),
                "time_s": r.get("time_s"),
                "algbw_GBps": r.get("algbw_GBps"),
                "busbw_GBps": r.get("busbw_GBps"),
                "collective": "all_reduce",
            }
            for r in ar
        ],
        name,
    )
    measured = []
    for r in ar:
        k, n, t = r["world_size"], r["bytes"], r["time_s"]
        busbw = r.get("busbw_GBps")
        if busbw is None:
            busbw = busbw_GBps(n, k, t)
        measured.append({"devices": k, "bytes": n, "time_s": t, "busbw_GBps": busbw})
    return measured, sorted({str(r.get("backend")) for r in ar if r.get("backend")})


def algorithm_grid(recs: list[dict[str, Any]], name: str):
    """`simcli algorithms` grid records (devices, bytes, fastest) as (ks, sizes, names, winner index matrix)."""

    numeric(recs, (), name)
    ks = sorted({r["devices"] for r in recs})
    ns = sorted({r["bytes"] for r in recs})
    names = list(dict.fromkeys(str(r["fastest"]) for r in recs))
    winner = np.full((len(ks), len(ns)), -1)
    for r in recs:
        winner[ks.index(r["devices"]), ns.index(r["bytes"])] = names.index(str(r["fastest"]))
    if (winner < 0).any():
        raise InputError(f"{name}: the (devices, bytes) grid has holes; redraw a whole 'simcli algorithms' table")
    return ks, ns, names, winner


def validation_series(recs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """`simcli validate` records (metric, devices, [bytes,] predicted, measured) as the lines and markers to draw.

    Returns ``{"kind": "comm"|"speedup"|"step", "metric", "k_key", "line", "measured"}``: all-reduce times
    (with busbw) when the rows have sizes, else speedup or step time per k.
    """
    numeric(recs, ("predicted", "measured"), name)
    k_key = "devices" if "devices" in recs[0] else "world_size"
    metrics = [m for m in dict.fromkeys(str(r["metric"]) for r in recs)]
    metric = next((m for m in ("time_s", "speedup", "t_step_s") if m in metrics), metrics[0])
    rs = [r for r in recs if str(r["metric"]) == metric]
    out: dict[str, Any] = {"metric": metric, "k_key": k_key}
    if rs and rs[0].get("bytes") is not None:
        line, meas = (
            [
                {
                    "devices": r[k_key],
                    "bytes": r["bytes"],
                    "time_s": r[which],
                    "busbw_GBps": busbw_GBps(r["bytes"], r[k_key], r[which]),
                }
                for r in rs
            ]
            for which in ("predicted", "measured")
        )
        return {**out, "kind": "comm", "line": line, "measured": meas}
    rs = sorted(rs, key=lambda r: r[k_key])
    if metric == "speedup":
        line = [{"devices": r[k_key], "speedup": r["predicted"], "efficiency": r["predicted"] / r[k_key]} for r in rs]
        meas = [{"devices": r[k_key], "speedup": r["measured"], "efficiency": r["measured"] / r[k_key]} for r in rs]
        return {**out, "kind": "speedup", "line": line, "measured": meas}
    meas = [{k_key: r[k_key], "t_step_s": r["measured"]} for r in rs]
    line = [{"devices": r[k_key], "t_step_s": r["predicted"], "t_compute_s": None} for r in rs]
    return {**out, "kind": "step", "line": line, "measured": meas}


# --------------------------------------------------------------------------- measured tables' consistency (issue 27)

#: bytes per element of every type a measured table may name: simcli's dtype names and nccl-tests' own
ELEMENT_BYTES = {
    "fp64": 8,
    "fp32": 4,
    "tf32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "int8": 1,
    "uint8": 1,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "float": 4,
    "half": 2,
    "bfloat16": 2,
    "double": 8,
    "int": 4,
    "f8e4m3": 1,
    "f8e5m2": 1,
}
#: columns that make rows of one (size, ranks) distinct measurements rather than repeats of one
_DISTINCT = (
    "collective",
    "backend",
    "dtype",
    "mode",
    "model",
    "batch_per_device",
    "profile",
    "placement",
    "redop",
    "nodes",
    "gpus_per_process",
    "seq_len",
    "threads",
    "params",
)
#: a column that declares rows as repeats of one measurement (each repeat numbered)
REPEAT_COLUMNS = ("repeat", "run", "trial")


def _is_number(v: Any) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


def _int_cell(v: Any, where: str, column: str, *, limit: int, what: str) -> int | None:
    if v is None or (isinstance(v, str) and not v.strip()):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise InputError(f"{where}: {column}: {str(v)[:40]!r} is not a number") from None
    if x != x or x in (float("inf"), float("-inf")) or x < 0 or x != int(x):
        raise InputError(f"{where}: {column}: {str(v)[:40]!r} is not a whole number >= 0")
    if x > limit:
        raise InputError(f"{where}: {column}: {str(v)[:40]} is more than simcli reads ({what})")
    return int(x)


def check_measured(
    rows: Sequence[Mapping[str, Any]],
    source: str,
    lines: Sequence[int] | None = None,
    *,
    comments: Sequence[str] = (),
) -> None:
    """Refuse (one line naming the file and row) a measured table that contradicts itself, where it is read:

    * two runs in one file (two header blocks, ``simcli bench`` or nccl-tests, concatenated);
    * more than one collective in one table;
    * two rows for one (size, ranks) and the same other settings, unless a ``repeat`` column numbers them;
    * a ``count`` that is not ``bytes`` / the type's size; a type no table names;
    * a size beyond :data:`simcli.base.ranges.MAX_BYTES` or a world size beyond :data:`simcli.base.ranges.MAX_DEVICES`.
    """

    starts = [c for c in comments if str(c).startswith("simcli bench")]
    if len(starts) > 1:
        raise InputError(
            f"{source}: holds {len(starts)} runs ({len(starts)} 'simcli bench' headers): one run per file; split it"
        )
    colls = {str(r.get("collective")).strip() for r in rows if r.get("collective") not in (None, "")}
    norm = {c.lower().replace("-", "_").replace(" ", "_") for c in colls}
    if len(norm) > 1:
        raise InputError(
            f"{source}: holds more than one collective ({', '.join(sorted(colls))}): one collective per table; split it"
        )
    repeat = next((c for r in rows[:1] for c in REPEAT_COLUMNS if c in r), None)
    seen: dict[tuple, int] = {}
    for i, r in enumerate(rows):
        line = lines[i] if lines is not None and i < len(lines) else i + 1
        where = f"{source}: {'line' if lines is not None else 'row'} {line}"
        k_col = "world_size" if "world_size" in r else "devices" if "devices" in r else None
        k = _int_cell(r.get(k_col), where, k_col, limit=MAX_DEVICES, what="at most 2**53 ranks") if k_col else None
        n = (
            _int_cell(r.get("bytes"), where, "bytes", limit=MAX_BYTES, what="at most 2**62 bytes = 4 EiB")
            if "bytes" in r
            else None
        )
        dtype = r.get("dtype")
        dtype = str(dtype).strip() if dtype not in (None, "") else None
        if dtype is not None and dtype.lower() not in ELEMENT_BYTES:
            raise InputError(
                f"{where}: dtype {dtype[:40]!r} is not a type simcli knows ({', '.join(sorted(ELEMENT_BYTES))})"
            )
        count = (
            _int_cell(r.get("count"), where, "count", limit=MAX_BYTES, what="at most 2**62") if "count" in r else None
        )
        if count is not None and n is not None and dtype is not None:
            esize = ELEMENT_BYTES[dtype.lower()]
            if count * esize != n:
                raise InputError(
                    f"{where}: count {count} x {esize} B ({dtype}) = {count * esize} B, not the row's {n} bytes; "
                    "the row contradicts itself"
                )
        if k is None and n is None:
            continue
        # the other settings of a row: the known ones, and every text label (a system's or a GPU's name)
        labels = tuple(
            f"{c}={str(v).strip().lower()}"
            for c, v in r.items()
            if c not in (k_col, "bytes") and v not in (None, "") and (c in _DISTINCT or not _is_number(v))
        )
        key = (k, n, *labels)
        if repeat is not None:
            key += (str(r.get(repeat) or "").strip(),)
        if key in seen:
            what = f"world size {k}" + (f", {n} bytes" if n is not None else "")
            raise InputError(
                f"{where}: a second row for {what} (first at {'line' if lines is not None else 'row'} {seen[key]}): "
                f"one row per (size, ranks); number repeats in a '{REPEAT_COLUMNS[0]}' column, or split the runs"
            )
        seen[key] = line
