"""A measured table read: the measurement files simcli and others write, recognised by their header, their rows
filtered and checked against the profile they are held to (read by validate, check and calibrate).

* ``allreduce``: ``simcli bench allreduce`` and ``simcli bench import`` (nccl-tests)
  CSVs (``world_size, bytes, time_s``, ...), and published nccl-tests tables with
  ``devices, bytes`` and ``time_us`` or only ``busbw_GBps``; where only busbw is
  given the time is ``bytes · 2(k-1)/k / busbw`` (nccl-tests doc/PERFORMANCE.md).
* ``step``: ``simcli bench step`` CSVs (``world_size, t_step_s``, ...).
* ``scaling``: published scaling tables (``devices, speedup``, optionally
  ``batch_per_device`` and ``images_per_s``/``samples_per_s``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ...base.types import InputError, Profile
from ...comm import specs
from .. import rules
from ..formats import csv_value
from ..formats import csv_value as fmt
from ..inputs import csv_rows, read_text
from ..tables import check_measured
from .live import detect, read_live
from .nccltests import looks_like_nccl_tests, measurement_rows

__all__ = ["Measured", "read_measurements", "filter_rows", "filter_present", "placement_notes", "scope_where"]
__all__ += ["live_measured", "trace_step_measured", "apply_rules", "PRIMARY_METRIC", "MAX_FILE_BYTES"]

#: measurement files larger than this are refused
MAX_FILE_BYTES = 64 << 20
#: the metric --max-error holds, per kind of file
PRIMARY_METRIC = {"allreduce": "time_s", "step": "t_step_s", "scaling": "speedup"}
_ALLREDUCE_NAMES = {"allreduce", "all_reduce", "all-reduce", "allreduce_perf", "all_reduce_perf"}


@dataclass(frozen=True)
class Measured:
    """One measurement file: its kind, its rows as raw strings, and the numeric columns simcli uses."""

    path: str
    kind: str
    header: tuple[str, ...]
    rows: tuple[dict[str, str], ...]
    #: 1-based line number of each row in the file
    lines: tuple[int, ...]
    comments: tuple[str, ...] = field(default_factory=tuple)

    def __len__(self) -> int:
        return len(self.rows)

    def number(self, column: str, integer: bool = False, positive: bool = True) -> np.ndarray:
        """A column as floats (or ints); every value checked, errors name the file, line and column."""
        out = np.empty(len(self.rows), dtype=np.int64 if integer else np.float64)
        for i, r in enumerate(self.rows):
            raw = (r.get(column) or "").strip()
            try:
                v = float(raw)
            except ValueError:
                raise InputError(f"{self.path}: line {self.lines[i]}: {column}: {raw!r} is not a number") from None
            if not math.isfinite(v) or (positive and v <= 0) or (integer and v != int(v)):
                need = "a whole number >= 1" if integer else "a positive number" if positive else "a finite number"
                raise InputError(f"{self.path}: line {self.lines[i]}: {column}: {raw!r} must be {need}")
            out[i] = int(v) if integer else v
        return out

    def has(self, *columns: str) -> bool:
        return all(c in self.header for c in columns)

    def optional(self, column: str) -> np.ndarray | None:
        """A numeric column where every row has a value, else None."""
        if column not in self.header or any(not (r.get(column) or "").strip() for r in self.rows):
            return None
        return self.number(column, positive=False)

    def gpus_per_process(self) -> np.ndarray | None:
        """nccl-tests' -g per row (the GPUs one thread launched on; bench import records it), None if absent."""
        g = self.optional("gpus_per_process")
        if g is None:
            return None
        if np.any((g < 1) | (g != np.round(g))):
            i = int(np.argmax((g < 1) | (g != np.round(g))))
            raise InputError(
                f"{self.path}: line {self.lines[i]}: gpus_per_process {g[i]:g} must be a whole number >= 1 "
                "(nccl-tests' -g: the GPUs one thread launched on)"
            )
        return g.astype(np.int64)

    def text(self, column: str, default: str = "") -> list[str]:
        return [(r.get(column) or default).strip() for r in self.rows]

    def subset(self, keep: np.ndarray) -> "Measured":
        idx = np.flatnonzero(keep)
        return Measured(
            self.path,
            self.kind,
            self.header,
            tuple(self.rows[i] for i in idx),
            tuple(self.lines[i] for i in idx),
            self.comments,
        )

    # -- normalised columns -------------------------------------------------
    def devices(self) -> np.ndarray:
        return self.number("world_size" if "world_size" in self.header else "devices", integer=True)

    def allreduce_time(self) -> np.ndarray:
        """Measured time per all-reduce in seconds (from time_s, time_us, or busbw)."""
        if "time_s" in self.header:
            return self.number("time_s")
        if "time_us" in self.header:
            return self.number("time_us") * 1e-6
        k, n = self.devices(), self.number("bytes")
        return n * specs.busbw_factor(k) / (self.number("busbw_GBps") * 1e9)


def _kind(header: Sequence[str], path: str) -> str:
    h = set(header)
    has_k = bool(h & {"world_size", "devices"})
    if has_k and "bytes" in h and h & {"time_s", "time_us", "busbw_GBps"}:
        return "allreduce"
    if has_k and "t_step_s" in h:
        return "step"
    if has_k and ("speedup" in h or {"samples_per_s", "accum"} <= h):
        return "scaling"
    raise InputError(
        f"{path}: header {', '.join(header) or '(empty)'} is not a measurement file simcli knows; "
        "expected 'bench allreduce' columns (world_size, bytes, time_s), 'bench step' columns "
        "(world_size, t_step_s) or a scaling table (devices, speedup; or devices, samples_per_s, accum)"
    )


def read_measurements(path: str | Path) -> Measured:
    """Read a measurement CSV (comment lines start with '#'); the kind is told by the header."""
    p = Path(path)

    live = detect(p)
    if live is not None:  # NCCL Inspector output or a profiler trace: its collectives as 'bench import' writes them
        return live_measured(read_live(p, live), "all_reduce")
    text = read_text(p, "a measurement CSV file", MAX_FILE_BYTES)

    if looks_like_nccl_tests(text):  # nccl-tests' own output: read as 'bench import' would (issue 12)
        header, nrows, notes = measurement_rows(text, str(p))
        return Measured(str(p), "allreduce", header, tuple(nrows), tuple(range(1, len(nrows) + 1)), tuple(notes))
    comments, body, lines = [], [], []
    for no, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            comments.append(s.lstrip("#").strip())
            continue
        body.append(line)
        lines.append(no)
    if not body:
        raise InputError(f"{p}: no header and no rows; give a CSV with a header line")
    records = csv_rows(body, str(p), lines)
    header = tuple(c.strip() for c in records[0])
    kind = _kind(header, str(p))
    rows = []
    for i, values in enumerate(records[1:], start=1):
        if len(values) != len(header):
            raise InputError(f"{p}: line {lines[i]}: {len(values)} values for {len(header)} columns")
        rows.append(dict(zip(header, values)))
    m = Measured(str(p), kind, header, tuple(rows), tuple(lines[1:]), tuple(comments))

    check_measured(m.rows, str(p), m.lines, comments=m.comments)  # one run, one collective, one row per (size, ranks)
    if kind == "allreduce" and "collective" in header:
        keep = np.array([c.lower() in _ALLREDUCE_NAMES for c in m.text("collective")], dtype=bool)
        if len(m) and not keep.any():
            raise InputError(
                f"{p}: collective: no all-reduce rows (found {', '.join(sorted(set(m.text('collective'))))})"
            )
        m = m.subset(keep)
    if not len(m):
        raise InputError(f"{p}: a header but no measurement rows")
    apply_rules(m)
    return m


def apply_rules(m: Measured) -> None:
    """A measured CSV through :mod:`simcli.io.rules`, as every reader's rows: each number's digits and range,
    all-reduce rows' bandwidths against their sizes and times (out-of-place and in-place), a scaling table's
    efficiency, its speedup against its throughput and its global batch."""

    for i, r in enumerate(m.rows):
        for c, v in r.items():
            cell = (v or "").strip()
            if cell and _looks_numeric(cell):
                rules.number(cell, f"{m.path}: line {m.lines[i]}", c, kind="real")
    if m.kind == "allreduce":
        kcol = "world_size" if "world_size" in m.header else "devices"
        for suffix, tcol in (("", "time_s"), ("", "time_us"), ("_inplace", "time_inplace_us")):
            if tcol not in m.header:
                continue
            scale = 1.0 if tcol == "time_s" else 1e-6
            recs = [
                {
                    "world_size": _cell(r.get(kcol)),
                    "bytes": _cell(r.get("bytes")),
                    "time_s": float(r[tcol]) * scale if _looks_numeric((r.get(tcol) or "").strip()) else None,
                    "algbw_GBps": _cell(r.get(f"algbw{suffix}_GBps")),
                    "busbw_GBps": _cell(r.get(f"busbw{suffix}_GBps")),
                    "collective": (r.get("collective") or "all_reduce").strip().lower().replace("-", "_"),
                }
                for r in m.rows
            ]
            for rec in recs:
                if rec["collective"] in ("allreduce", "all_reduce_perf"):
                    rec["collective"] = "all_reduce"
            rules.rows(recs, m.path, [f"line {n}" for n in m.lines])
    elif m.kind == "scaling":
        k = m.devices()
        opt = {c: m.optional(c) for c in ("speedup", "efficiency", "batch_per_device", "accum", "global_batch")}
        tp_col = next((c for c in ("samples_per_s", "images_per_s", "tokens_per_s") if c in m.header), None)
        tput = m.optional(tp_col) if tp_col else None
        rules.scaling(
            [int(x) for x in k],
            m.lines,
            m.path,
            speedup=opt["speedup"],
            throughput=(tp_col, tput) if tp_col is not None and tput is not None else None,
            efficiency=opt["efficiency"],
            batch=opt["batch_per_device"],
            accum=opt["accum"],
            global_batch=opt["global_batch"],
            series=[
                tuple(v for v in r.values() if (v or "").strip() and not _looks_numeric(v.strip())) for r in m.rows
            ],
        )


def _cell(v: str | None) -> str | None:
    """A numeric cell for the rules, or None: a cell that is not a number is named later, where it is read."""
    v = (v or "").strip()
    return v if v and _looks_numeric(v) else None


def _looks_numeric(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def live_measured(live: Any, collective: str | None = "all_reduce") -> Measured:
    """A live job's table (:func:`simcli.io.measured.live.read_live`) as a Measured all-reduce file; ``collective``
    None keeps every collective's rows (``simcli check``)."""
    rows = [r for r in live.rows if collective is None or r["collective"] == collective]
    if not rows:
        found = ", ".join(sorted({r["collective"] for r in live.rows}))
        raise InputError(f"{live.path}: no {collective} collectives (found {found})")

    srows = tuple({c: "" if r.get(c) is None else str(fmt(r[c])) for c in live.columns} for r in rows)
    notes = (f"backend: {rows[0]['backend']}", *live.notes)
    return Measured(live.path, "allreduce", live.columns, srows, tuple(range(1, len(srows) + 1)), notes)


def placement_notes(m: Measured, profile: Profile) -> list[str]:
    """Where a file says how many nodes a row's ranks were on (Inspector's nnodes) and the profile would place
    them otherwise (it fills a node before the next): a note naming the rows, since the prediction prices the
    profile's placement."""
    node = profile.network[0].size if profile.network and len(profile.network) > 1 else None
    if "nodes" not in m.header or not node:
        return []
    bad = set()
    for r in m.rows:
        k, nodes = (r.get("world_size") or "").strip(), (r.get("nodes") or "").strip()
        if k and nodes and int(float(nodes)) != -(-int(float(k)) // node):
            bad.add((int(float(k)), int(float(nodes))))
    return [
        f"k = {k} ran on {n} node(s), but {profile.name} puts {node} devices on a node before the next: the "
        f"prediction prices {-(-k // node)} node(s)"
        for k, n in sorted(bad)
    ]


def trace_step_measured(
    live: Any, flops_per_sample: float, params: float, *, batch: int, dtype: str, update_bytes_per_param: float
) -> Any:
    """A trace's steps as a 'bench step' file (simcli.io.measured.table.Measured, kind 'step'): one row per rank, the
    median over its steps of forward + backward (t_compute_s), p10/p90 over the steps, and of the optimizer's step
    (t_update_s, with the bytes per parameter the run's optimizer moves); what calibrate fits mfu_by_dtype, the
    backward fraction and device.update_bandwidth from."""

    cols = (
        "world_size", "backend", "mode", "model", "params", "batch_per_device", "steps", "t_compute_s",
        "t_compute_p10_s", "t_compute_p90_s", "t_comm_s", "t_step_s", "dtype", "flops_per_sample",
        "t_forward_s", "t_backward_s", "rank", "t_update_s", "update_bytes_per_param",
    )  # fmt: skip
    rows = []
    for t in live.traces:
        if not t.steps:
            continue
        comp = np.array([s.compute_s for s in t.steps])
        med = lambda name: float(np.median([getattr(s, name) for s in t.steps]))  # noqa: E731
        r = {
            "world_size": t.world_size or len(live.traces),
            "backend": t.backend or "",
            "mode": "ddp",
            "model": "trace",
            "params": params,
            "batch_per_device": batch,
            "steps": len(t.steps),
            "t_compute_s": float(np.median(comp)),
            "t_compute_p10_s": float(np.quantile(comp, 0.1)),
            "t_compute_p90_s": float(np.quantile(comp, 0.9)),
            "t_comm_s": med("comm_s"),
            "t_step_s": med("step_s"),
            "dtype": dtype,
            "flops_per_sample": flops_per_sample,
            "t_forward_s": med("forward_s"),
            "t_backward_s": med("backward_s"),
            "rank": "" if t.rank is None else t.rank,
            "t_update_s": med("optimizer_s"),
            "update_bytes_per_param": update_bytes_per_param,
        }
        rows.append({c: str(csv_value(r[c])) for c in cols})
    return Measured(live.path, "step", cols, tuple(rows), tuple(range(1, len(rows) + 1)), tuple(live.notes))


def filter_rows(
    m: Measured,
    where: Sequence[str] = (),
    min_size: float = 0.0,
    *,
    max_size: float | None = None,
    option: str = "--where",
) -> Measured:
    """Rows matching every ``COLUMN=VALUE`` of ``where`` and, for all-reduce files, within the size bounds."""
    keep = np.ones(len(m), dtype=bool)
    for cond in where:
        col, sep, val = cond.partition("=")
        col, val = col.strip(), val.strip()
        if not sep or not col:
            raise InputError(f"{option}: {cond!r} is not COLUMN=VALUE (for example system=nd-h100-v5)")
        if col not in m.header:
            raise InputError(f"{option}: {m.path} has no column {col!r}; it has {', '.join(m.header)}")
        keep &= np.array([v == val for v in m.text(col)], dtype=bool)
    if m.kind == "allreduce" and (min_size > 0 or max_size is not None):
        n = m.number("bytes")
        keep &= n >= min_size
        if max_size is not None:
            keep &= n <= max_size
    if not keep.any():
        raise InputError(f"{m.path}: no rows left after {option}/--min-size/--max-size; loosen the filter")
    return m.subset(keep)


def filter_present(m: Measured, where: Sequence[str]) -> Measured:
    """``filter_rows`` with only the ``COLUMN=VALUE`` conditions whose column ``m`` has: one ``--where`` that
    names columns of several files (calibrate's step and scaling files) keeps each file's rows by its own."""
    mine = [c for c in where if c.partition("=")[0].strip() in m.header]
    return filter_rows(m, mine) if mine else m


def scope_where(where: Sequence[str], paths: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
    """Split ``--where`` into the conditions for every file and those scoped to one: ``FILE:COLUMN=VALUE``
    (FILE as given on the command line, or its name alone) keeps rows of that file only."""

    every: list[str] = []
    scoped: dict[str, list[str]] = {str(p): [] for p in paths}
    for cond in where:
        lhs, sep, val = cond.partition("=")
        if ":" not in lhs:
            every.append(cond)
            continue
        name, _, col = lhs.rpartition(":")
        hits = [str(p) for p in paths if name.strip() in (str(p), Path(p).name)]
        if not hits:
            raise InputError(
                f"--where: {cond!r} names {name.strip()!r}, which is none of the files given "
                f"({', '.join(str(p) for p in paths)}); write FILE:COLUMN=VALUE with one of them"
            )
        for h in hits:
            scoped[h].append(f"{col}{sep}{val}")
    return every, scoped
