"""Progress on long work: a rich progress bar on stderr when stderr is a terminal, nothing otherwise.

A bar appears only once the work has run for :data:`DELAY_S` (about a second), so quick commands never
flicker, and it is transient: when the work ends it is erased and the answer is printed as before. A pipe,
a file or a test's captured stderr gets nothing at all, so scripts and ``2>log`` see exactly what they did.

    with progress("simulating", total=n_chunks) as bar:
        for chunk in chunks:
            ...
            bar.advance()

This module imports no other module of :mod:`simcli.cli`.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Any, Iterator

__all__ = ["DELAY_S", "Progress", "progress", "suspended", "enabled"]

#: seconds of work before a bar is drawn
DELAY_S = 1.0
#: the bars entered and not yet left: one inside another draws nothing (the outer one is already on screen)
_ACTIVE: list["Progress"] = []


def enabled() -> bool:
    """A bar is drawn only when stderr is a terminal."""
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):  # closed or replaced stderr
        return False


class Progress:
    """A progress bar (``total`` known) or a spinner (``total`` None) with elapsed time, drawn after DELAY_S.

    ``advance``, ``update`` and ``describe`` are cheap before and without the bar: they only record."""

    def __init__(self, description: str, total: float | None = None, console: Any = None, *, delay: float = DELAY_S):
        self.description, self.total, self.completed = description, total, 0.0
        self._console, self._delay = console, delay
        self._on = enabled() if console is None else True
        self._bar: Any = None
        self._task: Any = None
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._t0 = 0.0

    def __enter__(self) -> "Progress":
        self._t0 = time.monotonic()
        if _ACTIVE:
            self._on = False
        _ACTIVE.append(self)
        if self._on:
            self._timer = threading.Timer(self._delay, self._start)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            if self._bar is not None:
                self._bar.stop()
                self._bar = None
            self._on = False

    def _start(self) -> None:
        from rich.console import Console  # lazy
        from rich.progress import (  # lazy
            BarColumn,
            MofNCompleteColumn,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import (  # lazy
            Progress as RichProgress,
        )

        with self._lock:
            if not self._on or self._bar is not None:
                return
            console = self._console or Console(stderr=True)
            cols: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
            if self.total is not None:
                cols += [BarColumn(), MofNCompleteColumn()]
            cols.append(TimeElapsedColumn())
            # stdout and stderr stay as they are: what a command prints goes through suspend(), not rich's proxy
            self._bar = RichProgress(
                *cols, console=console, transient=True, redirect_stdout=False, redirect_stderr=False
            )
            self._task = self._bar.add_task(self.description, total=self.total, completed=self.completed)
            self._bar.start()

    @contextlib.contextmanager
    def suspend(self) -> Iterator[None]:
        """Take the bar off the screen while the command prints (a table, a warning), then draw it again."""
        with self._lock:
            bar = self._bar
            if bar is not None:
                bar.stop()
        try:
            yield
        finally:
            with self._lock:
                if bar is not None and self._bar is bar:
                    bar.start()

    @property
    def shown(self) -> bool:
        """Whether the bar is on screen now."""
        return self._bar is not None

    def advance(self, n: float = 1) -> None:
        with self._lock:
            self.completed += n
            if self._bar is not None:
                self._bar.update(self._task, completed=self.completed)

    def update(self, completed: float | None = None, total: float | None = None, description: str | None = None):
        with self._lock:
            if completed is not None:
                self.completed = completed
            if total is not None:
                self.total = total
            if description is not None:
                self.description = description
            if self._bar is not None:
                self._bar.update(self._task, completed=self.completed, total=self.total, description=self.description)


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """The bar on screen (if any) taken off while the command prints a line or its answer."""
    if not _ACTIVE:
        yield
        return
    with _ACTIVE[0].suspend():
        yield


def progress(description: str, total: float | None = None, when: bool = True, **kw: Any) -> Progress:
    """A :class:`Progress` for ``with``: a bar on a terminal's stderr after about a second, else nothing.

    ``when`` False: nothing either (say, while the answer itself streams to the same terminal)."""
    bar = Progress(description, total, **kw)
    if not when:
        bar._on = False
    return bar
