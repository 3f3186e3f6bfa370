"""A live job's own measurements (NCCL Inspector output, PyTorch profiler traces) as simcli's measured table.

:func:`detect` tells the format of a file or directory from its content; :func:`read_live` reads it into the
rows ``bench import`` writes and ``validate``, ``calibrate`` and ``check`` read (:mod:`simcli.bench.calls`),
with the traces themselves when the input is a trace. Pure Python: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..model import InputError
from .calls import EXTRA_COLUMNS, peek, sniff, table

__all__ = ["Live", "detect", "read_live", "columns"]


def columns() -> tuple[str, ...]:
    from .results import ALLREDUCE_COLUMNS

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
        text = peek(files[0])
    elif text is None:
        text = peek(p)
    kind = sniff(text)
    return None if kind is None else ("kineto" if kind == "kineto" else "inspector")


def read_live(path: str | Path, kind: str | None = None) -> Live:
    kind = kind or detect(path)
    if kind == "inspector":
        from .inspector import read_inspector

        calls, notes = read_inspector(path)
        return Live("inspector", str(path), table(calls, f"nccl inspector {Path(path).name}", "nccl"), notes)
    if kind == "kineto":
        from .kineto import read_traces

        traces = read_traces(path)
        calls = [c for t in traces for c in t.calls]
        backend = traces[0].backend or ("nccl" if traces[0].device == "gpu" else "gloo")
        notes = [n for t in traces for n in t.notes]
        n = f"{len(traces)} rank(s), {len(calls)} collectives"
        notes.append(f"source: PyTorch profiler trace {Path(path).name} ({n})")
        return Live("kineto", str(path), table(calls, f"torch.profiler {Path(path).name}", backend), notes, traces)
    raise InputError(f"{path}: neither NCCL Inspector output nor a PyTorch profiler trace")


def step_measured(live: Live, flops_per_sample: float, params: float, batch: int, dtype: str) -> Any:
    """A trace's steps as a 'bench step' file (simcli.validate.Measured, kind 'step'): one row per rank, the
    median over its steps of forward + backward (t_compute_s), p10/p90 over the steps; what calibrate fits
    mfu_by_dtype and the backward fraction from."""
    import numpy as np

    from ..output import _csv_value
    from ..validate import Measured

    cols = (
        "world_size", "backend", "mode", "model", "params", "batch_per_device", "steps", "t_compute_s",
        "t_compute_p10_s", "t_compute_p90_s", "t_comm_s", "t_step_s", "dtype", "flops_per_sample",
        "t_forward_s", "t_backward_s", "rank",
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
        }
        rows.append({c: str(_csv_value(r[c])) for c in cols})
    return Measured(live.path, "step", cols, tuple(rows), tuple(range(1, len(rows) + 1)), tuple(live.notes))
