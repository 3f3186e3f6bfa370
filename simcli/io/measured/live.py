"""A live job's own measurements (NCCL Inspector output, PyTorch profiler traces) as simcli's measured table.

:func:`detect` tells the format of a file or directory from its content; :func:`read_live` reads it into the
rows ``bench import`` writes and ``validate``, ``calibrate`` and ``check`` read (:mod:`simcli.io.measured.calls`),
with the traces themselves when the input is a trace. Pure Python: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...base.types import InputError
from ..inputs import check_readable
from .calls import EXTRA_COLUMNS, peek, sniff, table

__all__ = ["Live", "detect", "read_live", "columns"]


def columns() -> tuple[str, ...]:
    from .results import ALLREDUCE_COLUMNS  # lazy

    return tuple(ALLREDUCE_COLUMNS) + tuple(c for c in EXTRA_COLUMNS if c not in ALLREDUCE_COLUMNS)


@dataclass(frozen=True)
class Live:
    kind: str  # "inspector" or "kineto"
    path: str
    rows: list[dict[str, Any]]
    notes: list[str]
    traces: list[Any] = field(default_factory=list)

    @property
    def columns(self) -> tuple[str, ...]:
        return columns()


def detect(path: str | Path, text: str | None = None) -> str | None:
    """'inspector' or 'kineto' for a live job's file or directory (told by the content: ``text``, or the
    file's first bytes, or a directory's first file's), else None."""
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith("."))
        if not files:
            return None

        check_readable(files[0])  # a log that may not be read is named (exit 1), not taken for no format at all
        text = peek(files[0])
    elif text is None:
        check_readable(p)
        text = peek(p)
    kind = sniff(text)
    return None if kind is None else ("kineto" if kind == "kineto" else "inspector")


def read_live(path: str | Path, kind: str | None = None) -> Live:
    kind = kind or detect(path)
    if kind == "inspector":
        from .inspector import read_inspector  # lazy

        calls, notes = read_inspector(path)
        return Live(
            "inspector", str(path), table(calls, f"nccl inspector {Path(path).name}", "nccl", path=str(path)), notes
        )
    if kind == "kineto":
        from .kineto import read_traces  # lazy

        traces = read_traces(path)
        calls = [c for t in traces for c in t.calls]
        backend = traces[0].backend or ("nccl" if traces[0].device == "gpu" else "gloo")
        notes = [n for t in traces for n in t.notes]
        n = f"{len(traces)} rank(s), {len(calls)} collectives"
        notes.append(f"source: PyTorch profiler trace {Path(path).name} ({n})")
        return Live(
            "kineto",
            str(path),
            table(calls, f"torch.profiler {Path(path).name}", backend, path=str(path)),
            notes,
            traces,
        )
    raise InputError(f"{path}: neither NCCL Inspector output nor a PyTorch profiler trace")
