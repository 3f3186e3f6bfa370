"""Read nccl-tests output (``all_reduce_perf`` and friends) into simcli's benchmark records.

Two formats (NVIDIA/nccl-tests, src/util.cu):

* the text table printed to stdout: ``#`` header lines (``# nThread 1 nGpus 8
  ... iters: 20 ...``, one ``#  Rank  N Group ... device ...`` line per rank),
  the column header ``#  size count type redop root time algbw busbw #wrong
  time algbw busbw #wrong`` (out-of-place, then in-place; times in us,
  bandwidths in GB/s = 1e9 B/s), one row per size, and ``# Avg bus bandwidth``;
  rows may carry a launcher prefix such as ``0:`` (srun);
* the ``-J FILE`` JSON report: ``config`` (nthreads, ngpus, iterations,
  warmup_iters, devices[]), ``results[]`` with ``size``, ``count``, ``type``,
  ``out_of_place``/``in_place`` {``time`` (us), ``alg_bw``, ``bus_bw``} and,
  with per-iteration timing, ``out_of_place_per_iter.times_us``.

Every file is checked against itself (issue 27): one run per file (a second ``# nThread`` header or a rank
listed twice is refused), one row per (size, type, operation), a known type, ``count`` x the type's size =
``size``, a size within 2**62 B, and a ``--world-size`` that contradicts the file's rank lines is refused.

Every row is checked (issue 12): a time <= 0, a bandwidth < 0, a ``#wrong`` > 0 (nccl-tests'
failed data check: the row is refused, not dropped, since the whole run is suspect), a row cut
short or a missing in-place/out-of-place column (named), a JSON field of the wrong shape or
``null`` (named by its path, ``results[3].out_of_place.time``), and a text run cut before its
``# Avg bus bandwidth`` footer are one :class:`~simcli.base.types.InputError` line each.

The world size is the number of rank lines (devices); without them, for
all_reduce it follows from busbw/algbw = 2(k-1)/k, or from ``--world-size``.
Pure Python: no torch.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...base.ranges import MAX_BYTES
from ...base.types import InputError
from .. import rules
from ..formats import csv_value
from ..inputs import load_json, read_text
from ..tables import ELEMENT_BYTES
from .stats import summarize

__all__ = ["NCCL_TYPES", "parse_nccl_tests", "parse_text", "parse_json", "looks_like_nccl_tests", "measurement_rows"]

#: nccl-tests type names -> simcli dtype names
NCCL_TYPES = {
    "float": "fp32",
    "half": "fp16",
    "bfloat16": "bf16",
    "double": "fp64",
    "int8": "int8",
    "uint8": "uint8",
    "int32": "int32",
    "int": "int32",
    "uint32": "uint32",
    "int64": "int64",
    "uint64": "uint64",
    "f8e4m3": "fp8",
    "f8e5m2": "fp8",
}
_PREFIX = re.compile(r"^\s*(?:\d+:\s+|\S+Z\s+)")  # "0: " (srun -l) or a k8s timestamp
_NUM = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")


def parse_nccl_tests(
    path: str | Path, world_size: int | None = None, placement: str = "out", *, collective: str | None = None
) -> list[dict[str, Any]]:
    """Records (simcli's all-reduce CSV columns) from an nccl-tests text or -J JSON output file."""
    p = Path(path)
    text = read_text(p, "the output file of all_reduce_perf (text or -J JSON)")
    if placement not in ("out", "in"):
        raise InputError(f"--placement: {placement!r} is not 'out' (out-of-place) or 'in' (in-place)")
    if text.lstrip().startswith("{"):
        return parse_json(text, str(p), world_size, placement=placement, collective=collective)
    return parse_text(text, str(p), world_size, placement=placement, collective=collective)


def looks_like_nccl_tests(text: str) -> bool:
    """Is ``text`` nccl-tests output (its text table or its -J JSON) rather than a CSV?"""
    head = text.lstrip()[:4096]
    if head.startswith("{"):
        return '"results"' in text
    for line in head.splitlines():
        body = line.strip().lstrip("#").strip()
        if line.lstrip().startswith("#") and (
            body.startswith("nThread") or body.startswith("Collective test") or body.split()[:2] == ["size", "count"]
        ):
            return True
    return False


def measurement_rows(text: str, source: str) -> tuple[tuple[str, ...], list[dict[str, str]], list[str]]:
    """(header, rows as CSV strings, comments) of nccl-tests output, as 'bench import' would write them: what
    ``simcli validate`` and ``calibrate`` read when given nccl-tests' own output instead of a CSV."""
    from .results import ALLREDUCE_COLUMNS  # lazy

    recs = parse_json(text, source) if text.lstrip().startswith("{") else parse_text(text, source)
    rows = [{c: "" if r.get(c) is None else str(csv_value(r[c])) for c in ALLREDUCE_COLUMNS} for r in recs]
    names = device_names(text)
    return (
        tuple(ALLREDUCE_COLUMNS),
        rows,
        ["backend: nccl", f"source: nccl-tests output {Path(source).name}, read as 'simcli bench import' would"]
        + ([f"devices: {'; '.join(names)}"] if names else []),
    )


_DEVICE = re.compile(r"#\s*Rank\s+\d+\s+Group.*?device\s+\d+\s+\[[^\]]*\]\s+(.+?)\s*$")


def device_names(text: str) -> list[str]:
    """The distinct GPU names of an nccl-tests run ('#  Rank ... device 0 [0x07] NVIDIA A100-SXM4-80GB' lines, or
    the -J report's config.devices[].device_info), in order of first appearance."""
    found: list[str] = []
    if text.lstrip().startswith("{"):
        for m in re.finditer(r'"device_info"\s*:\s*"([^"]{1,80})"', text[: 1 << 20]):
            found.append(m.group(1))
    else:
        for line in text.splitlines()[:4096]:
            hit = _DEVICE.search(line)
            if hit:
                found.append(hit.group(1)[:80])
    return list(dict.fromkeys(found))


def _collective(name: str | None, fallback: str) -> str:
    if name:
        base = Path(name.strip()).name
        return re.sub(r"_perf(_mpi)?$", "", base)
    return fallback


def _world(source: str, ranks: int, world_size: int | None, *, rows: list[dict[str, Any]], coll: str) -> int:
    """The world size: the file's rank lines (devices) when it has them, and a --world-size that contradicts
    them is refused (issue 27: it silently won before); else --world-size; else busbw/algbw for all_reduce."""
    if world_size is not None and world_size < 1:
        raise InputError(f"--world-size: {world_size} must be at least 1")
    if ranks:
        if world_size is not None and world_size != ranks:
            raise InputError(
                f"--world-size: {world_size} contradicts {source}, which lists {ranks} ranks; leave --world-size "
                "out (the file's count is used) or give the file of that run"
            )
        return ranks
    if world_size is not None:
        return world_size
    if coll == "all_reduce":
        best = max(
            (r for r in rows if r["algbw_GBps"] and r["busbw_GBps"]), key=lambda r: r["algbw_GBps"], default=None
        )
        if best is not None:
            ratio = best["busbw_GBps"] / best["algbw_GBps"]  # 2(k-1)/k
            if 0 < ratio < 2:
                return max(1, int(round(2.0 / (2.0 - ratio))))
    raise InputError(f"{source}: no '#  Rank' device lines to count the world size from; give --world-size")


def _finish(
    rows: list[dict[str, Any]],
    k: int,
    coll: str,
    *,
    iters: int | None,
    warmup: int | None,
    source: str,
    gpus: int | None = None,
    wheres: list[str] | None = None,
) -> list[dict[str, Any]]:
    """``gpus``: nccl-tests' nGpus (-g), the GPUs one thread launches on; None where the output does not say.
    The rows pass through :func:`simcli.io.rules.rows` (``wheres``: each row's file and line, for its messages)."""
    for r in rows:
        r.update(
            {
                "collective": coll,
                "backend": "nccl",
                "world_size": k,
                "iters": iters,
                "warmup": warmup,
                "source": source,
                "gpus_per_process": gpus,
            }
        )
    return rules.rows(rows, "" if wheres else source, wheres)


_PLACEMENT = {"out": "out-of-place", "in": "in-place"}


def _check_row(where: str, size: int, count: int, *, ntype: str) -> None:
    """One result row against itself (issue 27): a known type, count x the type's size = size, a size simcli reads."""

    if size > MAX_BYTES:
        raise InputError(f"{where}: size {size} B is more than simcli reads (at most 2**62 B = 4 EiB)")
    esize = ELEMENT_BYTES.get(ntype)
    if esize is None:
        raise InputError(f"{where}: type {ntype[:40]!r} is not an nccl-tests type ({', '.join(sorted(NCCL_TYPES))})")
    if count * esize != size:
        raise InputError(
            f"{where}: count {count} x {esize} B ({ntype}) = {count * esize} B, not the row's size {size} B; "
            "the row contradicts itself (the file is damaged or edited)"
        )


def _check_repeats(keys: list[tuple[tuple, str]], source: str) -> None:
    """One row per (size, type, operation): nccl-tests writes each once per run (issue 27)."""
    seen: dict[tuple, str] = {}
    for key, where in keys:
        if key in seen:
            raise InputError(
                f"{where}: a second row for size {key[0]} B, {key[1]}, {key[2]} (first at {seen[key]}): one "
                "nccl-tests run writes each size once; split the runs into files of their own"
            )
        seen[key] = where.rsplit(": ", 1)[-1] if ": " in where else where


def _positive_time(t: float, where: str) -> float:
    if not (t > 0 and math.isfinite(t)):
        raise InputError(
            f"{where}: time {t:g} us is not a positive time; nccl-tests never writes one, so the "
            "file is damaged or edited"
        )
    return t


def _bandwidth(v: float, where: str, name: str) -> float:
    if not (v >= 0 and math.isfinite(v)):
        raise InputError(f"{where}: {name} {v:g} GB/s is not a bandwidth >= 0")
    return v


def _wrong(v: Any, where: str, label: str) -> None:
    """nccl-tests' #wrong: results that failed its data check. Such a row measured a broken run: refused."""
    if v is None or (isinstance(v, str) and v.strip().upper() in ("N/A", "NA", "")):
        return  # validation was off (-c 0)
    try:
        n = float(v)
    except (TypeError, ValueError):
        raise InputError(f"{where}: #wrong {v!r} is not a count") from None
    if n != 0:
        raise InputError(
            f"{where}: nccl-tests counted {n:g} wrong results ({label}): that run failed its data "
            "check, so its times are not a measurement; fix the setup and rerun nccl-tests"
        )


#: the text table's columns when the file has no column header line (all_reduce_perf's: out-of-place, in-place)
_TEXT_COLUMNS = [
    "size",
    "count",
    "type",
    "redop",
    "root",
    "time",
    "algbw",
    "busbw",
    "#wrong",
    "time",
    "algbw",
    "busbw",
    "#wrong",
]


@dataclass
class _TextRun:
    """What a text table's ``#`` lines said so far: the run's header, its ranks, its column names, its footer."""

    collective: str | None
    iters: int | None = None
    warmup: int | None = None
    gpus: int | None = None
    ranks: int = 0
    rank_ids: dict[int, int] = field(default_factory=dict)
    runs: int = 0
    cols: list[str] | None = None
    started: bool = False
    finished: bool = False


def _read_run_header(body: str, run: _TextRun, source: str, *, lineno: int) -> None:
    """A header line of the run: its iterations, its processes' GPUs, its start (a second start is refused) and
    its footer."""
    m = re.search(r"\bwarmup iters:\s*(\d+)\s+iters:\s*(\d+)", body)
    if m:
        run.warmup, run.iters = int(m.group(1)), int(m.group(2))
    m = re.match(r"nThread\s+\d+\s+nGpus\s+(\d+)", body)
    if m:
        run.gpus = int(m.group(1))
    if body.startswith("nThread"):
        run.runs += 1
        if run.runs > 1:
            raise InputError(
                f"{source}:{lineno}: a second run's header ('# nThread ...'): one nccl-tests run per file; "
                "split the runs into files of their own"
            )
    if body.startswith("nThread") or body.startswith("Collective test starting"):
        run.started = True
    if (
        body.startswith("Avg bus bandwidth")
        or body.startswith("Out of bounds values")
        or body.startswith("Collective test concluded")
    ):
        run.finished = True


def _read_comment(body: str, run: _TextRun, source: str, *, lineno: int) -> None:
    """One ``#`` line: the run's header and footer, a rank line (a rank listed twice is refused), the
    collective's name, the column header."""
    _read_run_header(body, run, source, lineno=lineno)
    m = re.match(r"Rank\s+(\d+)\s+Group", body)
    if m:
        run.ranks += 1
        rid = int(m.group(1)[:20])
        if rid in run.rank_ids:
            raise InputError(
                f"{source}:{lineno}: rank {rid} is listed twice (first on line {run.rank_ids[rid]}): one run "
                "lists each rank once; split the runs into files of their own"
            )
        run.rank_ids[rid] = lineno
    m = re.match(r"Collective test starting:\s*(\S+)", body)
    if m and run.collective is None:
        run.collective = _collective(m.group(1), "all_reduce")
    toks = body.split()
    if toks[:2] == ["size", "count"]:
        run.cols = toks


def _time_column(names: list[str], placement: str, source: str) -> int:
    """Where the placement's columns (time, algbw, busbw) start: the first "time" out-of-place, the second in-place."""
    t_idx = [i for i, c in enumerate(names) if c in ("time", "cputime")]
    if not t_idx:
        raise InputError(f"{source}: the column header has no 'time' column: {' '.join(names)}")
    if placement == "in" and len(t_idx) < 2:
        raise InputError(f"{source}: the column header has no in-place columns (one 'time' only); pass --placement out")
    return t_idx[1] if placement == "in" else t_idx[0]


def _read_result_row(
    toks: list[str], raw: str, names: list[str], *, start: int, label: str, where: str
) -> tuple[dict[str, Any], tuple[int, str, str]]:
    """One result row, checked (issue 12, 27): its record and its (size, type, operation) key."""
    need = start + 3
    if len(toks) < need:
        raise InputError(
            f"{where}: the row is cut short ({len(toks)} of {len(names)} columns): the {label} "
            f"columns time, algbw and busbw are missing: {raw.strip()[:80]!r}"
        )
    try:
        t_us, alg, bus = (float(toks[start]), float(toks[start + 1]), float(toks[start + 2]))
        if len(toks[0]) > 20 or len(toks[1]) > 20:  # digits beyond any int64: refused before int() works on them
            raise InputError(f"{where}: size {toks[0][:24]} or count {toks[1][:24]} is more than simcli reads")
        size, count = int(toks[0]), int(toks[1])
    except ValueError:
        raise InputError(
            f"{where}: not an nccl-tests result row ({label} time, algbw, busbw are not numbers): {raw.strip()[:80]!r}"
        ) from None
    if size < 0 or count < 0:
        raise InputError(f"{where}: size {size} and count {count} must be >= 0")
    _positive_time(t_us, where)
    _bandwidth(alg, where, "algbw")
    _bandwidth(bus, where, "busbw")
    wrong_i = start + 3
    if wrong_i < len(names) and names[wrong_i] == "#wrong" and wrong_i < len(toks):
        _wrong(toks[wrong_i], f"{where}: size {size}", label)
    ntype = toks[2] if len(toks) > 2 and not _NUM.match(toks[2]) else "float"
    redop = toks[3] if len(toks) > 3 and not _NUM.match(toks[3]) else "sum"
    _check_row(f"{where}", size, count, ntype=ntype)
    row = {
        "bytes": size,
        "count": count,
        "dtype": NCCL_TYPES.get(ntype, ntype),
        "time_s": t_us * 1e-6,
        "time_p10_s": None,
        "time_p90_s": None,
        "algbw_GBps": alg,
        "busbw_GBps": bus,
    }
    return row, (size, ntype, redop)


def parse_text(
    text: str, source: str, world_size: int | None = None, *, placement: str = "out", collective: str | None = None
) -> list[dict[str, Any]]:
    """Rows of nccl-tests' text table. Refused (one line naming the line): a row cut short, a column the
    placement needs that is missing, a time <= 0, a #wrong > 0, and a run cut before its footer."""
    run = _TextRun(collective=collective)
    keys: list[tuple[tuple, str]] = []
    rows: list[dict[str, Any]] = []
    label = _PLACEMENT[placement]
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = _PREFIX.sub("", raw, count=1) if not raw.lstrip().startswith("#") else raw.strip()
        if line.startswith("#"):
            _read_comment(line.lstrip("#").strip(), run, source, lineno=lineno)
            continue
        toks = line.split()
        if len(toks) < 2 or not _NUM.match(toks[0]) or not _NUM.match(toks[1]):
            continue
        names = run.cols or _TEXT_COLUMNS
        start = _time_column(names, placement, source)
        row, key = _read_result_row(toks, raw, names, start=start, label=label, where=f"{source}:{lineno}")
        keys.append((key, f"{source}: line {lineno}"))
        rows.append(row)
    if not rows:
        raise InputError(
            f"{source}: no nccl-tests result rows found (expected lines like "
            "'  1048576  262144  float  sum  -1  101.9  10.29  18.00  0 ...' from all_reduce_perf)"
        )
    if run.started and not run.finished:
        raise InputError(
            f"{source}: the run was cut before its end (no '# Avg bus bandwidth' line after the "
            f"last row, size {rows[-1]['bytes']}); rerun nccl-tests, or delete the header lines to "
            "import the rows it has"
        )
    _check_repeats(keys, source)
    coll = run.collective or "all_reduce"
    k = _world(source, run.ranks, world_size, rows=rows, coll=coll)
    wheres = [w for _, w in keys]
    return _finish(
        rows,
        k,
        coll,
        iters=run.iters,
        warmup=run.warmup,
        source=f"nccl-tests {Path(source).name}",
        gpus=run.gpus,
        wheres=wheres,
    )


def _num(v: Any, where: str, integer: bool = False) -> float:
    """A JSON number (or a numeric string, as nccl-tests writes some), named when it is not one."""
    if isinstance(v, bool) or v is None or isinstance(v, (list, dict)):
        shown = "null" if v is None else json.dumps(v)[:40]
        raise InputError(f"{where}: {shown} is not a number")
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise InputError(f"{where}: {str(v)[:40]!r} is not a number") from None
    if not math.isfinite(x):
        raise InputError(f"{where}: {x} is not a finite number")
    if integer:
        if x != int(x) or x < 0:
            raise InputError(f"{where}: {v!r} is not a whole number >= 0")
        return int(x)
    return x


def _int(v: Any, where: str) -> int:
    """A JSON whole number >= 0 (sizes, counts, iterations), named when it is not one."""
    return int(_num(v, where, integer=True))


def _obj(v: Any, where: str, kind: type, *, what: str) -> Any:
    if not isinstance(v, kind):
        shown = "null" if v is None else json.dumps(v)[:40]
        raise InputError(f"{where}: expected {what}, got {shown}; is this an nccl-tests -J report?")
    return v


def parse_json(
    text: str, source: str, world_size: int | None = None, *, placement: str = "out", collective: str | None = None
) -> list[dict[str, Any]]:
    """Rows of an nccl-tests -J report; every field is checked for its shape and named when it is wrong."""

    doc = load_json(
        text,
        source,
        "; give the file nccl-tests wrote with -J (a file cut mid-run is not valid JSON either: rerun)",
    )
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise InputError(f"{source}: no 'results' list; is this an nccl-tests -J report?")
    cfg = _obj(doc.get("config") or {}, f"{source}: config", dict, what="a mapping")
    devices = _obj(
        cfg.get("devices") or doc.get("devices") or [], f"{source}: config.devices", list, what="a list of devices"
    )
    args = _obj(doc.get("args") or [], f"{source}: args", list, what="a list of the command's arguments")
    coll = collective or _collective(str(args[0]) if args else None, "all_reduce")
    key = "out_of_place" if placement == "out" else "in_place"
    other = "in_place" if placement == "out" else "out_of_place"
    label = _PLACEMENT[placement]
    iters = cfg.get("iterations")
    warmup = cfg.get("warmup_iters")
    iters = None if iters is None else _int(iters, f"{source}: config.iterations")
    warmup = None if warmup is None else _int(warmup, f"{source}: config.warmup_iters")
    rows = []
    keys: list[tuple[tuple, str]] = []
    for i, r in enumerate(doc["results"]):
        where = f"{source}: results[{i}]"
        _obj(r, where, dict, what="a mapping with size, count, type and the timings")
        res = r.get(key)
        if res is None:
            hint = (
                f"; it has {other} timings: pass --placement {'in' if placement == 'out' else 'out'}"
                if isinstance(r.get(other), dict)
                else ""
            )
            raise InputError(f"{where}: no {key} ({label}) timings{hint}")
        _obj(res, f"{where}.{key}", dict, what="a mapping with time, alg_bw and bus_bw")
        for f in ("size", "count"):
            if f not in r:
                raise InputError(f"{where}: missing field {f!r}")
        for f in ("alg_bw", "bus_bw"):
            if f not in res:
                raise InputError(f"{where}.{key}: missing field {f!r}")
        if "time" not in res and "cpu_time" not in res:
            raise InputError(f"{where}.{key}: missing field 'time'")
        tf = "time" if "time" in res else "cpu_time"
        t_us = _positive_time(_num(res[tf], f"{where}.{key}.{tf}"), f"{where}.{key}")
        size = _int(r["size"], f"{where}.size")
        rec: dict[str, Any] = {
            "bytes": size,
            "count": _int(r["count"], f"{where}.count"),
            "dtype": NCCL_TYPES.get(str(r.get("type", "float")), str(r.get("type"))),
            "time_s": t_us * 1e-6,
            "time_p10_s": None,
            "time_p90_s": None,
            "algbw_GBps": _bandwidth(_num(res["alg_bw"], f"{where}.{key}.alg_bw"), where, "algbw"),
            "busbw_GBps": _bandwidth(_num(res["bus_bw"], f"{where}.{key}.bus_bw"), where, "busbw"),
        }
        ntype = str(r.get("type", "float"))
        _check_row(where, rec["bytes"], rec["count"], ntype=ntype)
        keys.append(((rec["bytes"], ntype, str(r.get("redop", r.get("op", "sum")))), where))
        for wf in ("nwrong", "wrong", "#wrong"):
            if wf in res:
                _wrong(res[wf], f"{where}.{key}: size {size}", label)
        per_iter = r.get(f"{key}_per_iter")
        if per_iter is not None:
            pi = _obj(per_iter, f"{where}.{key}_per_iter", dict, what="a mapping with times_us")
            times = _obj(pi.get("times_us") or [], f"{where}.{key}_per_iter.times_us", list, what="a list of times")
            if times:
                ts = [
                    _positive_time(
                        _num(x, f"{where}.{key}_per_iter.times_us[{j}]"), f"{where}.{key}_per_iter.times_us[{j}]"
                    )
                    * 1e-6
                    for j, x in enumerate(times)
                ]
                s = summarize(ts)
                ratio = rec["busbw_GBps"] / rec["algbw_GBps"] if rec["algbw_GBps"] else 0.0
                alg = rec["bytes"] / s.median / 1e9
                rec.update(
                    {
                        "time_s": s.median,
                        "time_p10_s": s.p10,
                        "time_p90_s": s.p90,
                        "time_min_s": s.min,
                        "time_max_s": s.max,
                        "spread": s.spread,
                        "algbw_GBps": alg,
                        "busbw_GBps": alg * ratio,
                    }
                )
        rows.append(rec)
    if not rows:
        raise InputError(f"{source}: the results list is empty")
    _check_repeats(keys, source)
    k = _world(source, len(devices), world_size, rows=rows, coll=coll)
    gpus = cfg.get("ngpus")
    gpus = None if gpus is None else _int(gpus, f"{source}: config.ngpus")
    wheres = [w for _, w in keys]
    return _finish(
        rows, k, coll, iters=iters, warmup=warmup, source=f"nccl-tests {Path(source).name}", gpus=gpus, wheres=wheres
    )
