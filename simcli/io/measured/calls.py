"""Collective calls measured in a live job (NCCL Inspector records, profiler traces) -> simcli's measured table.

A *call* is one collective on one rank: its collective (nccl-tests' name, ``all_reduce``), bytes (nccl-tests'
size: the buffer of one rank, count x element size), element count and dtype, the communicator's size
(``ranks``) and nodes, the rank, an ``instance`` key that is the same on every rank of one collective
(communicator and sequence number), and its time in seconds.

:func:`table` turns calls into the rows ``bench allreduce`` and ``bench import`` write (one row per
(collective, bytes, ranks, nodes); :data:`simcli.io.measured.results.ALLREDUCE_COLUMNS` plus ``nodes``, ``calls``
and ``rank_spread``), which ``simcli validate``, ``calibrate`` and ``check`` read. As ``bench allreduce``
does, one instance's time is its slowest rank's (a collective ends when its last rank ends); the row's
statistics are over the instances (the repeats): median ``time_s``, p10, p90, min, max. ``rank_spread`` is the
median over instances of (slowest - fastest rank) / slowest, where several ranks recorded the instance.

:func:`sniff` tells the formats apart by their content, never by the file name. Pure Python: no torch.
"""

from __future__ import annotations

import os
import stat
import zlib
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ...base.types import InputError
from ...comm.specs import busbw_factor
from .. import rules
from ..inputs import read_text
from .stats import summarize

__all__ = ["EXTRA_COLUMNS", "table", "sniff", "collective_name", "DTYPE_BYTES", "files_of", "read_log", "peek"]

#: columns a live job's table adds to ALLREDUCE_COLUMNS
EXTRA_COLUMNS = ("nodes", "calls", "ranks_seen", "rank_spread")

#: bytes per element of simcli's dtype names
DTYPE_BYTES = {
    "fp64": 8,
    "fp32": 4,
    "tf32": 4,
    "fp16": 2,
    "bf16": 2,
    "fp8": 1,
    "int64": 8,
    "uint64": 8,
    "int32": 4,
    "uint32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}

_NAMES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "allgatherintotensor": "all_gather",
    "allgatherintotensorcoalesced": "all_gather",
    "allgatherbase": "all_gather",
    "reducescatter": "reduce_scatter",
    "reducescattertensor": "reduce_scatter",
    "reducescattertensorcoalesced": "reduce_scatter",
    "reducescatterbase": "reduce_scatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "alltoall": "all_to_all",
    "alltoallbase": "all_to_all",
    "alltoallv": "all_to_all",
    "sendrecv": "send_recv",
    "send": "send",
    "recv": "recv",
    "barrier": "barrier",
    "gather": "gather",
    "scatter": "scatter",
}


def collective_name(name: str) -> str:
    """nccl-tests' name of a collective named the NCCL way (``AllReduce``), torch's (``_allgather_base``,
    ``allreduce_coalesced``) or gloo's (``all_reduce``); an unknown one is kept, lower-cased."""
    key = name.strip().lower().replace("_", "").replace("-", "").replace(":", "")
    for suffix in ("coalesced",):
        if key.endswith(suffix) and key[: -len(suffix)] in _NAMES:
            key = key[: -len(suffix)]
    return _NAMES.get(key, name.strip().lower())


def files_of(path: str | os.PathLike[str], what: str) -> list[Path]:
    """The regular files of ``path``: itself, or every file under a directory (sorted; hidden files left out)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file or directory")
    if not p.is_dir():
        return [p]
    out = sorted(f for f in p.rglob("*") if f.is_file() and not any(part.startswith(".") for part in f.parts[-1:]))
    if not out:
        raise InputError(f"{p}: an empty directory; give {what}")
    return out


def read_log(path: str | os.PathLike[str], what: str, max_bytes: int = 1 << 30) -> str:
    """The text of a log or trace, gzip-compressed or not (``*.log.gz``, ``*.pt.trace.json.gz``): the content
    says which, as the gzip magic bytes. Limits and errors as :func:`simcli.io.inputs.read_text`'s."""
    p = Path(path)
    magic = peek_bytes(p, 2)
    if magic != b"\x1f\x8b":
        return read_text(p, what, max_bytes)
    import gzip  # lazy

    try:
        with gzip.open(p, "rb") as f:
            raw = f.read(max_bytes + 1)
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(f"{p}: a gzip file that does not decompress ({e}); copy it again") from None
    if len(raw) > max_bytes:
        raise InputError(f"{p}: more than {max_bytes:,} bytes uncompressed is too large for {what}")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{p}: decompresses to something that is not text (not UTF-8); give {what}") from None


def peek_bytes(path: str | os.PathLike[str], size: int) -> bytes:
    """The first ``size`` bytes of a regular file (b"" for anything else, or when it cannot be read)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return b""
        with open(path, "rb") as f:
            return f.read(size)
    except OSError:
        return b""


def peek(path: str | os.PathLike[str], size: int = 65536) -> str:
    """The first ``size`` bytes of a file (decompressed if it is gzip), as text: enough for :func:`sniff`, and
    never more read, whatever the file is ('' when it cannot be read: the full read names the problem). Only a
    regular file is peeked at: a pipe would lose what was read, and a named pipe with no writer would block."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return ""
        with open(path, "rb") as f:
            raw = f.read(size)
        if raw[:2] == b"\x1f\x8b":  # what decompresses of the start, even of a file cut short
            with open(path, "rb") as f:
                raw = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(f.read(1 << 20), size)
    except (OSError, EOFError, ValueError, zlib.error):
        return ""
    return raw.decode("utf-8", errors="replace")


def sniff(text: str) -> str | None:
    """'inspector', 'inspector-prometheus', 'kineto' or None (another format), from the content alone."""
    head = text.lstrip()[:65536]
    if head.startswith("{") or head.startswith("["):
        if '"traceEvents"' in head:
            return "kineto"
        if '"coll_perf"' in head or ('"header"' in head and '"inspector_output_format_version"' in head):
            return "inspector"
        return None
    for line in head.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        return "inspector-prometheus" if s.startswith("nccl_") and "{" in s and "collective=" in s else None
    return None


def table(
    calls: Iterable[dict[str, Any]], source: str, backend: str, *, path: str | None = None
) -> list[dict[str, Any]]:
    """One row per (collective, bytes, ranks, nodes): statistics over the instances of each instance's slowest
    rank, in the columns of ``bench allreduce`` (plus :data:`EXTRA_COLUMNS`), sorted by collective, ranks, bytes.

    The calls and the rows pass through :mod:`simcli.io.rules` (``path`` names the input in its messages): ranks in
    range, each rank's collective once, bandwidths that the sizes and times give, numbers in range."""
    calls = list(calls)
    rules.calls(calls, path or source)
    groups: dict[tuple, dict[Any, list[float]]] = {}
    meta: dict[tuple, dict[str, Any]] = {}
    ranks_seen: dict[tuple, set] = {}
    for c in calls:
        key = (c["collective"], int(c["bytes"]), int(c["ranks"]), int(c.get("nodes") or 0))
        groups.setdefault(key, {}).setdefault(c["instance"], []).append(float(c["time_s"]))
        meta.setdefault(key, {"count": c.get("count"), "dtype": c.get("dtype")})
        ranks_seen.setdefault(key, set()).add(c.get("rank"))
    rows = []
    sorted_keys = sorted(groups, key=lambda g: (g[0], g[2], g[1], g[3]))
    for key in sorted_keys:
        coll, n, k, nodes = key
        per = list(groups[key].values())
        slowest = np.array([max(ts) for ts in per])
        spreads = [(max(ts) - min(ts)) / max(ts) for ts in per if len(ts) > 1 and max(ts) > 0]
        s = summarize(slowest)
        alg = n / s.median / 1e9
        try:
            bus = alg * float(busbw_factor(np.array([k]), coll)[0])
        except InputError:
            bus = None  # a collective nccl-tests has no bus-bandwidth factor for
        rows.append(
            {
                "collective": coll,
                "backend": backend,
                "world_size": k,
                "bytes": n,
                "count": meta[key]["count"],
                "dtype": meta[key]["dtype"],
                "iters": len(per),
                "warmup": None,
                "time_s": s.median,
                "time_p10_s": s.p10,
                "time_p90_s": s.p90,
                "time_min_s": s.min,
                "time_max_s": s.max,
                "algbw_GBps": alg,
                "busbw_GBps": bus,
                "spread": s.spread,
                "source": source,
                "stat": "median",
                "time_median_s": s.median,
                "time_mean_s": s.mean,
                "noise": s.noise,
                "gpus_per_process": 1,
                "nodes": nodes or None,
                "calls": int(sum(len(ts) for ts in per)),
                "ranks_seen": len(ranks_seen[key] - {None}) or None,
                "rank_spread": float(np.median(spreads)) if spreads else None,
            }
        )
    return rules.rows(rows, path or source, [f"{c} of {k} ranks, {n} B" for c, n, k, _ in sorted_keys])
