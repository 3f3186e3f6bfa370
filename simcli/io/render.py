"""Rendering for the terminal: rich tables with a display unit picked per column.

Results stay in SI until here; this module only formats them.
"""

from __future__ import annotations

import io
import os
from typing import Any, Callable, Sequence

import numpy as np
from rich.cells import cell_len
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from .formats import finite_gate
from .stdout import escape_controls

__all__ = ["console", "time_unit", "Column", "FitTable", "Wide", "table", "print_table", "kv_table", "render_text"]


class _Console(Console):
    """rich's Console, with COLUMNS read when it draws rather than once when it is made: a width asked for in the
    environment (COLUMNS=80 simcli ..., or a test's CliRunner(env=...)) is the width tables fit."""

    @property
    def _width(self) -> int | None:
        cols = os.environ.get("COLUMNS", "")
        return int(cols) if cols.isdigit() and int(cols) > 0 else self._fixed_width

    @_width.setter
    def _width(self, value: int | None) -> None:
        self._fixed_width = value


console = _Console(highlight=False, soft_wrap=False)
if not console.is_terminal and console.width <= 80 and "COLUMNS" not in os.environ:
    # piped or captured with no width asked for: do not squeeze columns to 80 (COLUMNS=80 does)
    console = _Console(highlight=False, soft_wrap=False, width=140)

_TIME_UNITS = [(1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")]


def time_unit(values: Sequence[float] | np.ndarray) -> tuple[float, str]:
    """(factor, name) of the display unit for a column of times: the unit of the median magnitude."""
    arr = np.asarray(values, dtype=float)
    arr = arr[np.isfinite(arr) & (arr > 0)]
    if arr.size == 0:
        return 1e-3, "ms"
    arr = np.sort(arr)  # the median by hand: np.median's first call imports numpy.ma (8 ms of a start-up)
    med = 0.5 * float(arr[(arr.size - 1) // 2] + arr[arr.size // 2])
    for f, name in _TIME_UNITS:
        if med >= f:
            return f, name
    return _TIME_UNITS[-1]


class Column:
    """One table column: a header and a formatter of a record's value.

    ``priority`` 0 (the default) is never left out: give it to the columns that carry the answer (the names a
    row is about, the result, a marker). A table too wide for the terminal first shortens the headers that have a
    ``short`` form, then leaves out columns from the highest priority number down (:class:`FitTable`), naming
    each by its ``label`` (the header unless given).
    """

    def __init__(
        self,
        header: str,
        key: str | Callable[[dict], Any],
        fmt: Callable[[Any], str] = str,
        *,
        justify: JustifyMethod = "right",
        priority: int = 0,
        short: str | None = None,
        label: str | None = None,
    ):
        self.header, self.key, self.fmt, self.justify = header, key, fmt, justify
        self.priority, self.short = priority, short
        self.label = label or header  #: its name in the line that says it was left out

    def cell(self, rec: dict) -> Any:
        v = self.key(rec) if callable(self.key) else rec.get(self.key)
        if v is None:
            return "-"
        out = self.fmt(v)
        return _safe(out)


#: what rich puts between two columns of a table without edges: " │ "
_SEPARATOR = 3
#: the least width of a left-justified key column (priority 0) when even the key columns do not fit: its text wraps
KEY_MIN_WIDTH = 12


class FitTable:
    """A rich table that fits the width it is drawn at, without cutting a cell.

    Drawn at ``max_width`` columns, it keeps every column whole when they fit; otherwise it shortens the
    headers that have a short form, then leaves out the lowest-priority columns (highest ``priority``
    number; priority 0 never) and says in one line under the table which ones and how to see them.
    """

    def __init__(self, rows: list[list[Any]], columns: Sequence[Column], title: str | None, *, caption: str | None):
        self.rows, self.columns, self.title, self.caption = rows, list(columns), title, caption

    def _widths(self, short: bool) -> list[int]:
        """Each column's natural width: its widest cell or header."""

        out = []
        for j, c in enumerate(self.columns):
            head = (c.short or c.header) if short else c.header
            cells = (x.plain if isinstance(x, Text) else str(x) for x in (r[j] for r in self.rows))
            out.append(max([cell_len(head)] + [cell_len(x) for x in cells]))
        return out

    def fit(self, width: int) -> tuple[list[int], bool, list[str]]:
        """(the columns kept, whether their headers are shortened, the headers of those left out) at ``width``."""
        long_w, short_w = self._widths(False), self._widths(True)

        def total(ws: list[int], cols: list[int]) -> int:
            return sum(ws[j] for j in cols) + _SEPARATOR * (len(cols) - 1)

        keep = list(range(len(self.columns)))
        if total(long_w, keep) <= width:
            return keep, False, []
        dropped: list[int] = []
        for j in sorted((j for j in keep if self.columns[j].priority > 0), key=lambda j: -self.columns[j].priority):
            if total(short_w, keep) <= width:
                break
            keep.remove(j)
            dropped.append(j)
        return keep, total(long_w, keep) > width, [self.columns[j].label for j in sorted(dropped)]

    def __rich_console__(self, console: Any, options: Any) -> Any:
        width = options.max_width
        keep, short, dropped = self.fit(width)
        natural = self._widths(short)
        t = Table(
            title=_safe(self.title),
            caption=_safe(self.caption),
            title_justify="left",
            caption_justify="left",
            show_edge=False,
            pad_edge=False,
            header_style="bold",
        )
        for j in keep:
            c = self.columns[j]
            head = (c.short or c.header) if short else c.header
            right = c.justify == "right"
            # a key column that is still too wide wraps its text, never shrinks to nothing (KEY_MIN_WIDTH at least)
            least = len(head) if right else min(natural[j], KEY_MIN_WIDTH) if c.priority == 0 else None
            t.add_column(head, justify=c.justify, no_wrap=right, min_width=least, overflow="fold")
        for r in self.rows:  # cells as Text: no markup or emoji parsing per cell (and '[...]' shown as written)
            t.add_row(*(Text(r[j]) if isinstance(r[j], str) else r[j] for j in keep))
        yield t
        if dropped:
            yield Text(
                f"left out to fit {width} columns: {', '.join(dropped)} (--wide shows every column; -f csv holds "
                "them all)"
            )


class Wide:
    """Draws what it holds as on a terminal wide enough for every column (``--wide``): nothing left out."""

    WIDTH = 10_000

    def __init__(self, renderable: Any):
        self.renderable = renderable

    def __rich_console__(self, console: Any, options: Any) -> Any:
        yield from console.render(self.renderable, options.update_width(self.WIDTH))


def table(
    records: Sequence[dict],
    columns: Sequence[Column],
    title: str | None = None,
    *,
    caption: str | None = None,
    max_rows: int = 0,
    total: int | None = None,
) -> FitTable:
    """A table that fits the terminal (:class:`FitTable`); with ``max_rows`` > 0 and more records than that,
    the middle rows are elided.

    ``total``: how many rows there are when ``records`` holds only the first and last ``max_rows`` of them
    (a caller that computed only what is shown); the elision line counts the rows left out.
    """

    finite_gate(list(records))  # no table shows a time, rate or speedup that is not a finite number
    n = len(records)
    hidden = (total - n) if total is not None and total > n else 0
    rows: list[list[Any]] = []
    if max_rows and (n > max_rows or hidden):
        head = max_rows // 2
        tail = max_rows - head
        rows += [[c.cell(r) for c in columns] for r in records[:head]]
        left_out = n - head - tail + hidden
        rows.append([Text(f"… {left_out} rows", style="dim")] + [Text("…", style="dim")] * (len(columns) - 1))
        rows += [[c.cell(r) for c in columns] for r in records[n - tail :]]
    else:
        rows += [[c.cell(r) for c in columns] for r in records]
    return FitTable(rows, columns, title, caption=caption)


def labelled(lines: Sequence[tuple[str, str]]) -> Table:
    """A header block of 'label  text' lines whose text wraps at word boundaries under itself, not under the label."""
    t = Table.grid(padding=(0, 1))
    t.add_column(no_wrap=True, min_width=9)
    t.add_column(overflow="fold")
    for k, v in lines:
        t.add_row(Text(k), Text(v))  # Text: a '[max of k]' in the text is not rich markup
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

    clean = escape_controls(text)
    return Text(clean) if ("[" in clean or clean != text) else clean


def print_table(t: Any) -> None:
    console.print(t)


def render_text(renderable: object, width: int = 120) -> str:
    """Plain text of a renderable drawn ``width`` columns wide, as a table written to a file with --output."""

    buf = io.StringIO()
    Console(file=buf, width=width, highlight=False, color_system=None).print(renderable, crop=False)
    return buf.getvalue()
