"""Read NCCL Inspector output (NVIDIA/nccl ``ext-profiler/inspector``) into collective calls.

The Inspector profiler plugin writes, per process, a file ``<hostname>-pid<pid>.log`` in its dump directory
with one JSON object per collective per communicator (``inspector.cc``: ``inspectorCommInfoDump`` writes the
object, then a newline), output format ``v4.0``::

    {"header": {"id": "0x7f8c496ae9f661", "rank": 2, "n_ranks": 8, "nnodes": 1},
     "metadata": {"inspector_output_format_version": "v4.0", "git_rev": "", "rec_mechanism": "...",
                  "dump_timestamp_us": 1748030377748202, "hostname": "...", "pid": 1639453},
     "coll_perf": {"coll": "AllReduce", "coll_sn": 1407, "coll_msg_size_bytes": 17179869184,
                   "coll_exec_time_us": 61974, "coll_timing_source": "kernel_gpu",
                   "coll_algobw_gbs": 277.210914, "coll_busbw_gbs": 485.119099,
                   "event_trace_sn": {...}, "event_trace_ts": {"coll_start_ts": ..., "coll_stop_ts": ...,
                       "kernel_events": [{"channel_id": 0, "kernel_start_ts": ..., "kernel_stop_ts": ...,
                                          "kernel_record_ts": ...}]}}}

(``event_trace_*`` with ``NCCL_INSPECTOR_DUMP_VERBOSE=1``; timestamps in us). The objects may also be
pretty-printed one after another, as the README shows them. With ``NCCL_INSPECTOR_PROM_DUMP=1`` it writes
Prometheus text files instead (``inspector_prom.cc``), three samples per collective::

    nccl_algorithm_bandwidth_gbs{comm_id="0x..",hostname="..",rank="4",slurm_job="..",slurm_job_id="..",
        nranks="8",n_nodes="1",gpu_device_id="GPU4",collective="AllReduce",coll_sn="228924",
        timestamp="2025-10-17T03:31:47Z",message_size="2.00GB"} 277.2
    nccl_bus_bandwidth_gbs{...} 485.1
    nccl_collective_exec_time_microseconds{...} 61974

``message_size`` is in powers of 1024 printed with two decimals (``inspectorFormatHumanReadableSize``), so
bytes are exact for power-of-two sizes and otherwise rounded; the README spells the label ``n_ranks``, the
source ``nranks`` (both read). A directory of such files (every rank's) is one input.

``coll_msg_size_bytes`` is taken as nccl-tests' size (one rank's buffer); the time is ``coll_exec_time_us``.
Refused, one line naming the file and record: a record that is cut short or not JSON, a missing field
(``coll_perf.coll_exec_time_us``), an output format version other than v4.x (named), a time <= 0; and what
:mod:`simcli.io.rules` refuses of every reader (issue 40): a key or a sample given twice, a number out of range
(a size above 4 EiB, ``n_ranks`` above NCCL's int, 41 digits), a rank outside its communicator, one rank's
collective recorded twice (its log given twice, one ``coll_sn`` twice), ``coll_algobw_gbs`` or ``coll_busbw_gbs``
that size and time contradict. Ranks missing from a communicator are a warning.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ...base.types import InputError
from .. import rules
from .calls import collective_name, files_of, read_log, sniff

__all__ = ["read_inspector", "parse_json_records", "parse_prometheus", "SUPPORTED_VERSIONS"]

#: the output format versions this reader knows (inspector.cc writes "v4.0")
SUPPORTED_VERSIONS = ("v4",)
_WHAT = "NCCL Inspector output (its JSON log or Prometheus file, or the dump directory)"


def read_inspector(path: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    """(calls, notes) of an Inspector file or dump directory (every file in it, JSON or Prometheus)."""
    calls: list[dict[str, Any]] = []
    seen: dict[str, tuple[int, str]] = {}  # communicator id -> (its size, the file that first said so)
    for f in files_of(path, _WHAT):
        text = read_log(f, _WHAT)
        kind = sniff(text)
        if kind in ("inspector", "inspector-prometheus"):
            new = parse_json_records(text, str(f)) if kind == "inspector" else parse_prometheus(text, str(f))
            for c in new:  # one communicator has one size: records that disagree cannot be told apart
                comm = c["rank"][0]
                size, where = seen.setdefault(comm, (c["ranks"], str(f)))
                if c["ranks"] != size:
                    raise InputError(
                        f"{f}: communicator {comm} has {c['ranks']} ranks here and {size} in {where}: records of "
                        "two runs mixed in one input (communicator ids repeat across jobs); give one run's files"
                    )
            calls += new
        elif not text.strip():
            continue  # a rank that had not written yet
        else:
            raise InputError(
                f"{f}: not NCCL Inspector output (no 'coll_perf' JSON records, no 'nccl_...{{collective=...}}' "
                f"Prometheus samples); give {'only Inspector files in ' + str(path) if Path(path).is_dir() else _WHAT}"
            )
    if not calls:
        raise InputError(f"{path}: no collective records; is NCCL_INSPECTOR_ENABLE=1 set and did the job run?")
    return calls, [f"source: NCCL Inspector output {Path(path).name} ({len(calls)} records)"]


def _field(obj: Any, path: str, where: str, *, kind: type | tuple | None = (int, float)) -> Any:
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            raise InputError(
                f"{where}: missing field {path!r}; an Inspector v4.0 record has it (NVIDIA/nccl "
                "ext-profiler/inspector/README.md)"
            )
        cur = cur[part]
    if kind is not None and (isinstance(cur, bool) or not isinstance(cur, kind)):
        shown = "null" if cur is None else json.dumps(cur)[:40]
        raise InputError(f"{where}: {path} {shown} is not {'a number' if kind == (int, float) else 'a string'}")
    return cur


def _time_us(v: float, where: str, name: str) -> float:
    return float(rules.number(v, where, f"{name} (us)", kind="time"))


def _record(rec: Any, where: str) -> dict[str, Any]:
    if not isinstance(rec, dict):
        raise InputError(f"{where}: not a JSON object with header, metadata and coll_perf")
    version = _field(rec, "metadata.inspector_output_format_version", where, kind=str)
    if not any(version.startswith(v + ".") or version == v for v in SUPPORTED_VERSIONS):
        raise InputError(
            f"{where}: inspector_output_format_version {version!r} is not one this reader knows (v4.x); "
            "its fields may differ: convert it, or use an Inspector of output format v4.0"
        )
    k = rules.number(_field(rec, "header.n_ranks", where, kind=int), where, "header.n_ranks", kind="ranks")
    nodes = rules.number(_field(rec, "header.nnodes", where, kind=int), where, "header.nnodes", kind="nodes")
    rank = rules.number(_field(rec, "header.rank", where, kind=int), where, "header.rank", kind="rank")
    comm = str(_field(rec, "header.id", where, kind=None))
    coll = _field(rec, "coll_perf.coll", where, kind=str)
    n = rules.number(
        _field(rec, "coll_perf.coll_msg_size_bytes", where, kind=int),
        where,
        "coll_perf.coll_msg_size_bytes",
        kind="bytes",
    )
    t = _time_us(_field(rec, "coll_perf.coll_exec_time_us", where), where, "coll_perf.coll_exec_time_us")
    sn = rules.number(_field(rec, "coll_perf.coll_sn", where, kind=int), where, "coll_perf.coll_sn", kind="seq")
    if nodes > k:
        raise InputError(f"{where}: header.nnodes {nodes} is more than n_ranks {k}: a node holds at least one rank")
    bw = {f: rec["coll_perf"].get(f) for f in ("coll_algobw_gbs", "coll_busbw_gbs")}
    for f, v in bw.items():
        if v is not None:
            bw[f] = rules.number(v, where, f"coll_perf.{f}", kind="bandwidth")
    out = {
        "collective": collective_name(coll),
        "bytes": int(n),
        "count": None,
        "dtype": None,
        "ranks": int(k),
        "nodes": int(nodes),
        "rank": (comm, int(rank)),
        "instance": (comm, int(sn)),
        "time_s": t * 1e-6,
        "timing_source": rec["coll_perf"].get("coll_timing_source"),
        "hostname": rec["metadata"].get("hostname"),
        "where": where,
        "algbw_GBps": bw["coll_algobw_gbs"],
        "busbw_GBps": bw["coll_busbw_gbs"],
    }
    ts = rec["coll_perf"].get("event_trace_ts")
    if isinstance(ts, dict) and isinstance(ts.get("kernel_events"), list) and ts["kernel_events"]:
        # verbose: each channel's kernel start and stop (us); the kernels' span, and how unevenly channels end
        ev = ts["kernel_events"]
        starts = [_field(e, "kernel_start_ts", f"{where}: event_trace_ts.kernel_events[{i}]") for i, e in enumerate(ev)]
        stops = [_field(e, "kernel_stop_ts", f"{where}: event_trace_ts.kernel_events[{i}]") for i, e in enumerate(ev)]
        span = max(stops) - min(starts)
        if span < 0:
            raise InputError(f"{where}: event_trace_ts: kernels stop ({max(stops)}) before they start ({min(starts)})")
        out["kernel_span_s"] = span * 1e-6
        out["channels"] = len(ev)
        out["channel_stop_spread_s"] = (max(stops) - min(stops)) * 1e-6
    return out


def parse_json_records(text: str, source: str) -> list[dict[str, Any]]:
    """Calls from an Inspector JSON log: one object per line, or objects one after another (pretty-printed)."""
    out = []
    for rec, no, line in rules.json_records(text, source):
        where = f"{source}: record {no} (line {line})"
        if isinstance(rec, list):  # a JSON list of records
            for j, r in enumerate(rec):
                out.append(_record(r, f"{where}[{j}]"))
        else:
            out.append(_record(rec, where))
    return out


_SAMPLE = re.compile(r"^(?P<metric>[A-Za-z_:][A-Za-z0-9_:]*)\{(?P<labels>.*)\}\s+(?P<value>\S+)(?:\s+\d+)?\s*$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(B|KB|MB|GB|TB)\s*$")
_UNITS = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
_METRICS = {
    "nccl_collective_exec_time_microseconds": "time_us",
    "nccl_algorithm_bandwidth_gbs": "algbw",
    "nccl_bus_bandwidth_gbs": "busbw",
}


def _size_label(v: str, where: str) -> int:
    m = _SIZE.match(v)
    if not m:
        raise InputError(
            f"{where}: message_size {v!r} is not a size like '2.00GB' (powers of 1024, as Inspector prints)"
        )
    x = rules.number(m.group(1), where, "message_size", kind="real")
    return rules.number(round(x * _UNITS[m.group(2)]), where, "message_size", kind="bytes")


def parse_prometheus(text: str, source: str) -> list[dict[str, Any]]:
    """Calls from an Inspector Prometheus text file: the three samples of a collective joined by their labels."""
    recs: dict[tuple, dict[str, Any]] = {}
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        where = f"{source}:{no}"
        m = _SAMPLE.match(s)
        if not m:
            raise InputError(f"{where}: not a Prometheus sample 'metric{{labels}} value': {s[:80]!r}")
        field = _METRICS.get(m.group("metric"))
        if field is None:
            continue  # another exporter's metric in the same textfile directory
        labels = dict(_LABEL.findall(m.group("labels")))
        value = rules.number(
            m.group("value"), where, m.group("metric"), kind="time" if field == "time_us" else "bandwidth"
        )
        for need in ("comm_id", "rank", "collective", "coll_sn", "message_size"):
            if need not in labels:
                raise InputError(f"{where}: label {need!r} missing; Inspector writes it on every sample")
        k = labels.get("nranks", labels.get("n_ranks"))
        if k is None:
            raise InputError(f"{where}: label 'nranks' (or 'n_ranks') missing: the communicator's size")
        for name, kind in (("rank", "rank"), ("coll_sn", "seq"), ("n_nodes", "nodes")):  # each sample's numbers
            if name in labels:
                rules.number(labels[name], where, name, kind=kind)
        rules.number(k, where, "nranks", kind="ranks")
        key = (labels["comm_id"], labels["rank"], labels["coll_sn"], labels["collective"])
        rec = recs.setdefault(key, {"labels": labels, "where": where, "nranks": k})
        if field in rec:
            raise InputError(
                f"{where}: a second {m.group('metric')} sample for rank {labels['rank']}'s {labels['collective']} "
                f"#{labels['coll_sn']} (first at {rec['lines'][field]}): a rank's file given twice, or two runs in one "
                "file; give one run's files once"
            )
        rec.setdefault("lines", {})[field] = where
        rec[field] = value
    out = []
    for (comm, rank, sn, coll), rec in recs.items():
        where, labels = rec["where"], rec["labels"]
        if "time_us" not in rec:
            raise InputError(
                f"{where}: collective {coll} #{sn} of rank {rank} has no nccl_collective_exec_time_microseconds "
                "sample (its time); the file was cut while Inspector rewrote it: copy it again"
            )
        k = rules.number(rec["nranks"], where, "nranks", kind="ranks")
        nodes = rules.number(labels["n_nodes"], where, "n_nodes", kind="nodes") if "n_nodes" in labels else 0
        r = rules.number(rank, where, "rank", kind="rank")
        seq = rules.number(sn, where, "coll_sn", kind="seq")
        out.append(
            {
                "collective": collective_name(coll),
                "bytes": _size_label(labels["message_size"], where),
                "count": None,
                "dtype": None,
                "ranks": k,
                "nodes": nodes or None,
                "rank": (comm, r),
                "instance": (comm, seq),
                "time_s": _time_us(rec["time_us"], where, "nccl_collective_exec_time_microseconds") * 1e-6,
                "hostname": labels.get("hostname"),
                "where": where,
                "algbw_GBps": rec.get("algbw"),
                "busbw_GBps": rec.get("busbw"),
            }
        )
    return out
