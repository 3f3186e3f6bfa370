"""Writes simcli/step/error_table.py: every row validate_ddp.py and validate_fsdp.py score, as r = predicted /
measured throughput per device relative to the series' smallest k, with its kind and provenance.

    python benchmarks/validate_ddp.py --write-errors      (or validate_fsdp.py --write-errors: the same file)

Both scripts' rows go in every time (one writer, one file): neither can drop the other's.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from validate_nccl import _commit, table_source  # noqa: E402

OUT = ROOT / "simcli" / "step" / "error_table.py"


def error_rows() -> tuple[list[tuple], list[tuple]]:
    """(series, rows): each series as (name, file, profile, rows), each row as (series index, devices, devices per
    node, nodes, strategy, base, r), DDP's series first."""
    import validate_ddp
    import validate_fsdp

    series: list[tuple] = []
    rows: list[tuple] = []
    index: dict[str, int] = {}
    for name, file, profile, k, per_node, strategy, base, ratio in (
        validate_ddp.error_rows() + validate_fsdp.error_rows()
    ):
        if name not in index:
            index[name] = len(series)
            series.append([name, file, profile, 0])
        series[index[name]][3] += 1
        rows.append((index[name], k, per_node, -(-k // per_node), strategy, base, ratio))
    return [tuple(s) for s in series], rows


def source(series: list[tuple], rows: list[tuple], commit: str) -> str:
    """The text of simcli/step/error_table.py."""
    doc = '''"""Every row of the published DDP and FSDP scaling series benchmarks/validate_ddp.py and validate_fsdp.py
price, as r = predicted / measured throughput per device relative to the series' smallest k, with its kind
(simcli.step.errors). Written by `python benchmarks/validate_ddp.py --write-errors` (or validate_fsdp.py's:
the same file, both scripts' rows); never edit it by hand (tests/step/test_step_errors.py prices the series
again and fails where this table and the model part)."""'''
    return table_source(
        doc,
        commit=commit,
        groups=(
            "SERIES",
            "the series: name, file under validation/published/ ('shared:': ../shared/data/published/), profile, rows",
            series,
        ),
        fields=(
            "the fields of each row of ROWS (series: an index into SERIES; base: how the step at k0 was known)",
            ("series", "devices", "per_node", "nodes", "strategy", "base", "ratio"),
        ),
        rows=rows,
    )


def write() -> Path:
    series, rows = error_rows()
    OUT.write_text(source(series, rows, _commit()), encoding="utf-8")
    return OUT
