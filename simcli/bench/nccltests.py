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

The world size is the number of rank lines (devices); without them, for
all_reduce it follows from busbw/algbw = 2(k-1)/k, or from ``--world-size``.
Pure Python: no torch.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..inputs import read_text
from ..model import InputError
from .stats import summarize

__all__ = ["NCCL_TYPES", "parse_nccl_tests", "parse_text", "parse_json"]

#: nccl-tests type names -> simcli dtype names
NCCL_TYPES = {"float": "fp32", "half": "fp16", "bfloat16": "bf16", "double": "fp64", "int8": "int8",
              "uint8": "uint8", "int32": "int32", "int": "int32", "uint32": "uint32", "int64": "int64",
              "uint64": "uint64", "f8e4m3": "fp8", "f8e5m2": "fp8"}
_PREFIX = re.compile(r"^\s*(?:\d+:\s+|\S+Z\s+)")  # "0: " (srun -l) or a k8s timestamp
_NUM = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")


def parse_nccl_tests(path: str | Path, world_size: int | None = None, placement: str = "out",
                     collective: str | None = None) -> list[dict[str, Any]]:
    """Records (simcli's all-reduce CSV columns) from an nccl-tests text or -J JSON output file."""
    p = Path(path)
    text = read_text(p, "the output file of all_reduce_perf (text or -J JSON)")
    if placement not in ("out", "in"):
        raise InputError(f"--placement: {placement!r} is not 'out' (out-of-place) or 'in' (in-place)")
    if text.lstrip().startswith("{"):
        return parse_json(text, str(p), world_size, placement, collective)
    return parse_text(text, str(p), world_size, placement, collective)


def _collective(name: str | None, fallback: str) -> str:
    if name:
        base = Path(name.strip()).name
        return re.sub(r"_perf(_mpi)?$", "", base)
    return fallback


def _world(source: str, ranks: int, world_size: int | None, rows: list[dict[str, Any]], coll: str) -> int:
    if world_size is not None:
        if world_size < 1:
            raise InputError(f"--world-size: {world_size} must be at least 1")
        return world_size
    if ranks:
        return ranks
    if coll == "all_reduce":
        best = max((r for r in rows if r["algbw_GBps"] and r["busbw_GBps"]), key=lambda r: r["algbw_GBps"],
                   default=None)
        if best is not None:
            ratio = best["busbw_GBps"] / best["algbw_GBps"]  # 2(k-1)/k
            if 0 < ratio < 2:
                return max(1, int(round(2.0 / (2.0 - ratio))))
    raise InputError(f"{source}: no '#  Rank' device lines to count the world size from; give --world-size")


def _finish(rows: list[dict[str, Any]], k: int, coll: str, iters: int | None, warmup: int | None,
            source: str) -> list[dict[str, Any]]:
    for r in rows:
        r.update({"collective": coll, "backend": "nccl", "world_size": k, "iters": iters, "warmup": warmup,
                  "source": source})
    return rows


def parse_text(text: str, source: str, world_size: int | None = None, placement: str = "out",
               collective: str | None = None) -> list[dict[str, Any]]:
    iters = warmup = None
    ranks = 0
    coll = collective
    cols: list[str] | None = None
    rows: list[dict[str, Any]] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = _PREFIX.sub("", raw, count=1) if not raw.lstrip().startswith("#") else raw.strip()
        if line.startswith("#"):
            body = line.lstrip("#").strip()
            m = re.search(r"\bwarmup iters:\s*(\d+)\s+iters:\s*(\d+)", body)
            if m:
                warmup, iters = int(m.group(1)), int(m.group(2))
            if re.match(r"Rank\s+\d+\s+Group", body):
                ranks += 1
            m = re.match(r"Collective test starting:\s*(\S+)", body)
            if m and coll is None:
                coll = _collective(m.group(1), "all_reduce")
            toks = body.split()
            if toks[:2] == ["size", "count"]:
                cols = toks
            continue
        toks = line.split()
        if len(toks) < 5 or not _NUM.match(toks[0]) or not _NUM.match(toks[1]):
            continue
        names = cols or ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                         "time", "algbw", "busbw", "#wrong"]
        # out-of-place columns start at the first "time"; in-place at the second
        t_idx = [i for i, c in enumerate(names) if c in ("time", "cputime")]
        if not t_idx:
            raise InputError(f"{source}: the column header has no 'time' column: {' '.join(names)}")
        start = t_idx[1] if placement == "in" and len(t_idx) > 1 else t_idx[0]
        try:
            t_us, alg, bus = (float(toks[start]), float(toks[start + 1]), float(toks[start + 2]))
            size, count = int(toks[0]), int(toks[1])
        except (ValueError, IndexError):
            raise InputError(f"{source}:{lineno}: not an nccl-tests result row: {raw.strip()[:80]!r}") from None
        ntype = toks[2] if len(toks) > 2 else "float"
        rows.append({"bytes": size, "count": count, "dtype": NCCL_TYPES.get(ntype, ntype), "time_s": t_us * 1e-6,
                     "time_p10_s": None, "time_p90_s": None, "algbw_GBps": alg, "busbw_GBps": bus})
    if not rows:
        raise InputError(f"{source}: no nccl-tests result rows found (expected lines like "
                         "'  1048576  262144  float  sum  -1  101.9  10.29  18.00  0 ...' from all_reduce_perf)")
    coll = coll or "all_reduce"
    k = _world(source, ranks, world_size, rows, coll)
    return _finish(rows, k, coll, iters, warmup, f"nccl-tests {Path(source).name}")


def parse_json(text: str, source: str, world_size: int | None = None, placement: str = "out",
               collective: str | None = None) -> list[dict[str, Any]]:
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise InputError(f"{source}: not valid JSON ({e}); give the file nccl-tests wrote with -J") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise InputError(f"{source}: no 'results' list; is this an nccl-tests -J report?")
    cfg = doc.get("config") or {}
    devices = cfg.get("devices") or doc.get("devices") or []
    args = doc.get("args") or []
    coll = collective or _collective(args[0] if args else None, "all_reduce")
    key = "out_of_place" if placement == "out" else "in_place"
    other = "in_place" if placement == "out" else "out_of_place"
    rows = []
    for i, r in enumerate(doc["results"]):
        res = r.get(key) or r.get(other)
        if not isinstance(res, dict):
            raise InputError(f"{source}: results[{i}] has neither out_of_place nor in_place timings")
        t_us = res.get("time", res.get("cpu_time"))
        try:
            rec = {"bytes": int(r["size"]), "count": int(r["count"]),
                   "dtype": NCCL_TYPES.get(str(r.get("type", "float")), str(r.get("type"))),
                   "time_s": float(t_us) * 1e-6, "time_p10_s": None, "time_p90_s": None,
                   "algbw_GBps": float(res["alg_bw"]), "busbw_GBps": float(res["bus_bw"])}
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"{source}: results[{i}]: missing or bad field ({e})") from None
        per_iter = r.get(f"{key}_per_iter") if r.get(key) else r.get(f"{other}_per_iter")
        if isinstance(per_iter, dict) and per_iter.get("times_us"):
            s = summarize([float(x) * 1e-6 for x in per_iter["times_us"]])
            ratio = rec["busbw_GBps"] / rec["algbw_GBps"] if rec["algbw_GBps"] else 0.0
            alg = rec["bytes"] / s.median / 1e9 if s.median > 0 else float("nan")
            rec.update({"time_s": s.median, "time_p10_s": s.p10, "time_p90_s": s.p90, "time_min_s": s.min,
                        "time_max_s": s.max, "spread": s.spread, "algbw_GBps": alg, "busbw_GBps": alg * ratio})
        rows.append(rec)
    if not rows:
        raise InputError(f"{source}: the results list is empty")
    k = _world(source, len(devices), world_size, rows, coll)
    return _finish(rows, k, coll, cfg.get("iterations"), cfg.get("warmup_iters"), f"nccl-tests {Path(source).name}")
