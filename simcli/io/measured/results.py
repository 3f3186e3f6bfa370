"""Benchmark results on disk: a CSV whose rows are appended and flushed as they are measured.

A run that dies keeps every row it measured. The file starts with ``#`` comment
lines (host, torch version, backend, date, ...) and then one header line; the
pinned column sets are :data:`ALLREDUCE_COLUMNS` and :data:`STEP_COLUMNS`.

Unlike the other outputs (written whole with :func:`simcli.io.files.write_atomic`)
this file is written progressively on purpose; it still never clobbers an
existing file without ``--force``, rows are appended whole or not at all, and a
file that got no row is removed. The file is claimed when the command starts
(:class:`simcli.io.files.Claim`): a second bench naming it is refused before it
measures, rows go into the claimed handle only, and a bench whose file another
command replaced keeps its rows in ``NAME.PID.saved`` and stops with one line.
"""

from __future__ import annotations

import csv
import datetime as _dt
import errno
import io
import json
import os
import platform
import socket
import stat
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..files import Claim, cannot_write, check_output_path, claim, save_aside
from ..formats import csv_value, jsonable
from ..inputs import csv_rows

__all__ = ["ALLREDUCE_COLUMNS", "STEP_COLUMNS", "ResultWriter", "metadata", "cpu_model", "read_results"]

#: one row per (world_size, bytes); time_s is the ``stat`` (p10 by default, see simcli.bench.allreduce) of the
#: per-iteration max-over-ranks times; noise = p90/p10; rse = relative standard error of time_s (iters is
#: the number of timed iterations, at least --iters, more where rse stayed above target_se); times_s (JSON
#: only) every iteration's time
ALLREDUCE_COLUMNS = (
    "collective",
    "backend",
    "world_size",
    "bytes",
    "count",
    "dtype",
    "iters",
    "warmup",
    "time_s",
    "time_p10_s",
    "time_p90_s",
    "time_min_s",
    "time_max_s",
    "algbw_GBps",
    "busbw_GBps",
    "spread",
    "source",
    "stat",
    "rounds",
    "time_median_s",
    "time_mean_s",
    "noise",
    "rse",
    "target_se",
    "gpus_per_process",
)
#: one row per (world_size, mode)
STEP_COLUMNS = (
    "world_size",
    "backend",
    "mode",
    "model",
    "params",
    "batch_per_device",
    "steps",
    "threads",
    "t_compute_s",
    "t_compute_p10_s",
    "t_compute_p90_s",
    "t_comm_s",
    "t_comm_p10_s",
    "t_comm_p90_s",
    "t_step_s",
    "t_step_p10_s",
    "t_step_p90_s",
    "t_step_ref_s",
    "speedup",
    "efficiency",
    "predicted_t_comm_s",
    "predicted_t_step_s",
    "predicted_speedup",
    "predicted_efficiency",
    "achieved_flops",
    "grad_max_abs_err",
    "grad_tolerance",
    "grad_rank_max_diff",
    "param_rank_max_diff",
    "profile",
    # bench step --model/--dtype (simcli.bench.models): what calibrate fits mfu_by_dtype and the
    # backward fraction from; flops_per_sample as the presets count it, _exact with attention's S²
    "dtype",
    "flops_per_sample",
    "flops_per_sample_exact",
    "t_forward_s",
    "t_backward_s",
    "backward_fraction",
    "peak_flops",
    "mfu",
    "device",
    # bench step: the optimizer step alone (torch.optim.AdamW's default implementation on the device), what
    # calibrate fits device.update_bandwidth from (simcli.step.update)
    "step_optimizer",
    "t_update_s",
    "update_optimizer",
    "update_bytes_per_param",
    "update_Bps",
)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def metadata(
    command: str, backend: str, torch_version: str | None, *, extra: Mapping[str, Any] | None = None
) -> list[str]:
    """The ``key: value`` lines of the header comment."""
    lines = [
        f"simcli {command}",
        f"host: {socket.gethostname()}",
        f"cpu: {cpu_model()} x{os.cpu_count()}",
        f"torch: {torch_version or '-'}",
        f"backend: {backend}",
        f"date: {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')}",
    ]
    lines += [f"{k}: {v}" for k, v in dict(extra or {}).items()]
    return lines


class ResultWriter:
    """Append rows to a CSV as they are measured; every row is flushed and fsynced.

    The file is created (and an existing one replaced, with ``force``) when the first row arrives, so a
    run that measures nothing leaves no file, never an empty or header-only one. Each row is one
    ``os.write`` of the whole line; a write the system refuses part-way (a full disk) is cut back to the
    last whole row and raised as one EnvironmentFailure line (exit 1). The rows are also kept in memory
    (``rows``), for a caller whose other output fails.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        columns: Sequence[str],
        comments: Iterable[str],
        *,
        force: bool = False,
        inputs: Iterable[str | os.PathLike[str] | None] = (),
        fmt: str = "csv",
    ):
        if fmt not in ("csv", "json"):
            raise ValueError(f"fmt must be csv or json, not {fmt!r}")
        self.fmt = fmt
        self.columns = list(columns)
        self.rows: list[dict[str, Any]] = []
        self.path: Path | None = None
        self._claim: Claim | None = None
        self._fd: int | None = None
        self._open = False
        self._written = 0  # bytes of whole lines on disk
        self._head = "".join(f"# {c}\n" for c in comments) + ",".join(self.columns) + "\n" if fmt == "csv" else ""
        if path is not None:
            self.path = check_output_path(path, force, inputs=inputs)
            self._claim = claim(self.path, force)

    def _first(self, text: str) -> None:
        """The first row: into the claimed file (the placeholder, the pipe), or a new file renamed over the old."""

        c = self._claim
        assert c is not None and self.path is not None
        if c.fd is not None:
            if not c.ours():
                raise self._replaced()
            self._fd, c.fd = c.fd, None
            return
        target = c.target
        try:  # --force over an existing file: the old one stays until the first row is ready, then is replaced
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)
        except OSError as e:
            raise cannot_write(f"--output: {self.path}", e) from None
        try:
            _write_all(fd, text.encode("utf-8"))
            os.fsync(fd)
            os.replace(tmp, target)
        except OSError as e:
            os.close(fd)
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise cannot_write(f"--output: {self.path}", e) from None
        c.published(fd)
        self._fd = fd
        self._written = len(text.encode("utf-8"))

    def _replaced(self) -> Exception:
        """Another command replaced (or removed) the file: the rows are kept beside it, and the bench stops."""
        assert self._claim is not None
        self._claim.placeholder = False
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        saved = save_aside(self._claim.target, [self._document().encode("utf-8")])
        return self._claim.replaced(saved, f"the {len(self.rows)} rows measured")

    def _document(self) -> str:
        """The whole file as it would be with every row kept in memory."""
        if self.fmt == "json":
            return "[\n" + ",\n".join(json.dumps(jsonable(r), allow_nan=False) for r in self.rows) + _JSON_END.decode()
        return self._head + "".join(self._csv_line(r) for r in self.rows)

    def _csv_line(self, row: Mapping[str, Any]) -> str:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=self.columns, extrasaction="ignore", lineterminator="\n")
        w.writerow({k: ("" if row.get(k) is None else csv_value(row.get(k))) for k in self.columns})
        return buf.getvalue()

    def _write(self, text: str, at: int | None = None) -> None:
        """Append ``text`` (or write it at byte ``at``, replacing what follows): whole, or cut back."""
        if not self._open:
            self._open = True
            text = self._head + text
            self._first(text)
            if self._written:  # the new file already holds it
                return
        if self._fd is None:  # an earlier write failed: the rows stay in memory only
            return
        data = text.encode("utf-8")
        keep = self._written if at is None else at
        try:
            if at is not None:
                os.lseek(self._fd, at, os.SEEK_SET)
            _write_all(self._fd, data)
            try:
                os.fsync(self._fd)
            except OSError as e:
                if e.errno not in (errno.EINVAL, errno.EROFS):  # a pipe or a device cannot be synced
                    raise
        except OSError as e:
            try:  # cut back to the last whole row: a row is on disk whole or not at all
                os.ftruncate(self._fd, self._written)
                if at is not None:  # JSON: put back the closing bracket that the new row was to replace
                    os.pwrite(self._fd, _JSON_END, at)
            except OSError:
                pass
            fd, self._fd = self._fd, None
            os.close(fd)
            if (
                self._written == 0
                and self.path is not None
                and _regular(self.path)
                and self._claim is not None
                and self._claim.ours()
            ):
                try:  # not even the header: leave no empty file
                    os.unlink(self.path)
                except OSError:
                    pass
            raise cannot_write(f"--output: {self.path}", e) from None
        self._written = keep + len(data)
        if self._claim is not None and not self._claim.ours():  # replaced while this row was written
            raise self._replaced()

    def append(self, row: Mapping[str, Any]) -> None:
        self.rows.append(dict(row))
        if self.path is not None and self.fmt == "json":
            # a JSON list that is valid after every row: '[\n' row '\n]\n', then ',\n' row '\n]\n' over the end
            rec = json.dumps(jsonable(dict(row)), allow_nan=False)
            if not self._open or self._written == 0:
                self._write("[\n" + rec + _JSON_END.decode())
            else:
                self._write(",\n" + rec + _JSON_END.decode(), at=self._written - len(_JSON_END))
        elif self.path is not None:
            self._write(self._csv_line(row))

    def close(self) -> None:
        """Close the file; a claim that got no row is released (its empty placeholder removed)."""
        replaced = self._fd is not None and self._claim is not None and not self._claim.ours()
        if replaced:
            raise self._replaced()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._claim is not None:
            if self._written:
                self._claim.placeholder = False
            self._claim.release()

    def __enter__(self) -> "ResultWriter":
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
            return
        try:
            self.close()
        except Exception:  # noqa: S110 - the exception already on its way out is the one to report
            pass


_JSON_END = b"\n]\n"


def _write_all(fd: int, data: bytes) -> None:
    done = 0
    while done < len(data):
        done += os.write(fd, data[done:])


def _regular(p: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(p).st_mode)
    except OSError:
        return False


def read_results(path: str | os.PathLike[str]) -> tuple[list[str], list[dict[str, str]]]:
    """(comment lines without '# ', rows) of a results CSV."""
    comments, body = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                comments.append(line[1:].strip())
            else:
                body.append(line)
    records = [r for r in csv_rows(body, str(path)) if r]  # as csv.DictReader: blank rows skipped
    if not records:
        return comments, []
    head, n = records[0], len(records[0])
    out = []
    for r in records[1:]:  # csv.DictReader's rule: missing values None, extra ones under the key None
        row: dict = dict(zip(head, r + [None] * (n - len(r))))
        if len(r) > n:
            row[None] = r[n:]
        out.append(row)
    return comments, out
