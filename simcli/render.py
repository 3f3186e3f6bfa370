"""Rendering for the terminal: rich tables with a display unit picked per column.

Results stay in SI until here; this module only formats them.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["console", "time_unit", "Column", "table", "print_table", "kv_table", "render_text"]

console = Console(highlight=False, soft_wrap=False)
if not console.is_terminal and console.width <= 80:  # piped or captured: do not squeeze columns to 80
    console = Console(highlight=False, soft_wrap=False, width=140)

_TIME_UNITS = [(1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")]


def time_unit(values: Sequence[float] | np.ndarray) -> tuple[float, str]:
    """(factor, name) of the display unit for a column of times: the unit of the median magnitude."""
    arr = np.asarray(values, dtype=float)
    arr = arr[np.isfinite(arr) & (arr > 0)]
    if arr.size == 0:
        return 1e-3, "ms"
    med = float(np.median(arr))
    for f, name in _TIME_UNITS:
        if med >= f:
            return f, name
    return _TIME_UNITS[-1]


class Column:
    """One table column: a header and a formatter of a record's value."""

    def __init__(
        self, header: str, key: str | Callable[[dict], Any], fmt: Callable[[Any], str] = str, justify: str = "right"
    ):
        self.header, self.key, self.fmt, self.justify = header, key, fmt, justify

    def cell(self, rec: dict) -> Any:
        v = self.key(rec) if callable(self.key) else rec.get(self.key)
        if v is None:
            return "-"
        out = self.fmt(v)
        return _safe(out)


def table(
    records: Sequence[dict],
    columns: Sequence[Column],
    title: str | None = None,
    caption: str | None = None,
    max_rows: int = 0,
    total: int | None = None,
) -> Table:
    """A rich table; with ``max_rows`` > 0 and more records than that, the middle rows are elided.

    ``total``: how many rows there are when ``records`` holds only the first and last ``max_rows`` of them
    (a caller that computed only what is shown); the elision line counts the rows left out.
    """
    from .output import finite_gate

    finite_gate(list(records))  # no table shows a time, rate or speedup that is not a finite number
    t = Table(
        title=_safe(title),
        caption=_safe(caption),
        title_justify="left",
        caption_justify="left",
        show_edge=False,
        pad_edge=False,
        header_style="bold",
    )
    for c in columns:
        t.add_column(
            c.header,
            justify=c.justify,
            no_wrap=c.justify == "right",
            min_width=len(c.header) if c.justify == "right" else None,
        )
    n = len(records)
    hidden = (total - n) if total is not None and total > n else 0
    if max_rows and (n > max_rows or hidden):
        head = max_rows // 2
        tail = max_rows - head
        for r in records[:head]:
            t.add_row(*(c.cell(r) for c in columns))
        left_out = n - head - tail + hidden
        t.add_row(*([Text(f"… {left_out} rows", style="dim")] + [Text("…", style="dim")] * (len(columns) - 1)))
        for r in records[n - tail :]:
            t.add_row(*(c.cell(r) for c in columns))
    else:
        for r in records:
            t.add_row(*(c.cell(r) for c in columns))
    return t


def kv_table(rows: Sequence[tuple[str, str]], title: str | None = None) -> Table:
    t = Table(title=_safe(title), title_justify="left", show_header=False, show_edge=False, pad_edge=False)
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    for k, v in rows:
        t.add_row(_safe(k), _safe(v))
    return t


def _safe(text: Any) -> Any:
    """Text read from a file, for the terminal: control characters escaped (an ESC in a device name is shown as
    ``\\x1b``, never obeyed) and rich markup in it shown as written, not interpreted."""
    if not isinstance(text, str):
        return text
    from .output import escape_controls

    clean = escape_controls(text)
    return Text(clean) if ("[" in clean or clean != text) else clean


def print_table(t: Table) -> None:
    console.print(t)


def render_text(renderable: object, width: int = 120) -> str:
    """Plain text of a renderable, as a table written to a file with --output."""
    import io

    buf = io.StringIO()
    Console(file=buf, width=width, highlight=False, color_system=None).print(renderable)
    return buf.getvalue()
