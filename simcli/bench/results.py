"""Benchmark results on disk: a CSV whose rows are appended and flushed as they are measured.

A run that dies keeps every row it measured. The file starts with ``#`` comment
lines (host, torch version, backend, date, ...) and then one header line; the
pinned column sets are :data:`ALLREDUCE_COLUMNS` and :data:`STEP_COLUMNS`.

Unlike the other outputs (written whole with :func:`simcli.output.write_atomic`)
this file is written progressively on purpose; it still never clobbers an
existing file without ``--force``.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import os
import platform
import socket
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..output import _csv_value, check_output_path

__all__ = ["ALLREDUCE_COLUMNS", "STEP_COLUMNS", "ResultWriter", "metadata", "cpu_model", "read_results"]

#: one row per (world_size, bytes); time_s is the median of per-iteration max-over-ranks times
ALLREDUCE_COLUMNS = ("collective", "backend", "world_size", "bytes", "count", "dtype", "iters", "warmup",
                     "time_s", "time_p10_s", "time_p90_s", "time_min_s", "time_max_s", "algbw_GBps",
                     "busbw_GBps", "spread", "source")
#: one row per (world_size, mode)
STEP_COLUMNS = ("world_size", "backend", "mode", "model", "params", "batch_per_device", "steps", "threads",
                "t_compute_s", "t_compute_p10_s", "t_compute_p90_s", "t_comm_s", "t_comm_p10_s", "t_comm_p90_s",
                "t_step_s", "t_step_p10_s", "t_step_p90_s", "t_step_ref_s", "speedup", "efficiency",
                "predicted_t_comm_s", "predicted_t_step_s", "predicted_speedup", "predicted_efficiency",
                "achieved_flops", "grad_max_abs_err", "grad_tolerance", "grad_rank_max_diff",
                "param_rank_max_diff", "profile")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def metadata(command: str, backend: str, torch_version: str | None, extra: Mapping[str, Any] = ()) -> list[str]:
    """The ``key: value`` lines of the header comment."""
    lines = [
        f"simcli {command}",
        f"host: {socket.gethostname()}",
        f"cpu: {cpu_model()} x{os.cpu_count()}",
        f"torch: {torch_version or '-'}",
        f"backend: {backend}",
        f"date: {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')}",
    ]
    lines += [f"{k}: {v}" for k, v in dict(extra).items()]
    return lines


class ResultWriter:
    """Append rows to a CSV as they are measured; every row is flushed and fsynced."""

    def __init__(self, path: str | os.PathLike[str] | None, columns: Sequence[str], comments: Iterable[str],
                 force: bool = False):
        self.columns = list(columns)
        self.rows: list[dict[str, Any]] = []
        self.path: Path | None = None
        self._f = None
        if path is not None:
            self.path = check_output_path(path, force)
            self._f = open(self.path, "w", encoding="utf-8", newline="")
            for c in comments:
                self._f.write(f"# {c}\n")
            self._f.write(",".join(self.columns) + "\n")
            self._sync()

    def append(self, row: Mapping[str, Any]) -> None:
        self.rows.append(dict(row))
        if self._f is not None:
            buf = io.StringIO()
            w = csv.DictWriter(buf, fieldnames=self.columns, extrasaction="ignore", lineterminator="\n")
            w.writerow({k: ("" if row.get(k) is None else _csv_value(row.get(k))) for k in self.columns})
            self._f.write(buf.getvalue())
            self._sync()

    def _sync(self) -> None:
        assert self._f is not None
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def __enter__(self) -> "ResultWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_results(path: str | os.PathLike[str]) -> tuple[list[str], list[dict[str, str]]]:
    """(comment lines without '# ', rows) of a results CSV."""
    comments, body = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                comments.append(line[1:].strip())
            else:
                body.append(line)
    return comments, list(csv.DictReader(body))
