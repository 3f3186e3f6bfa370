"""Standard output and the terminal: ``write_stdout`` is the one writer of results to standard output, with
:mod:`simcli.io.files`' guarantees for a closed stdout, ``> /dev/full`` and a stdout that cannot encode a
character; control characters escaped before they reach a terminal.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from typing import Any, Callable

from ..base.types import EnvironmentFailure
from .files import cannot_write

__all__ = ["write_stdout", "StdoutClosed", "GuardedStream", "guard_stdio", "stdout_usable", "to_ascii"]
__all__ += ["escape_controls"]


class StdoutClosed(EnvironmentFailure):
    """Standard output is closed (``>&-``): nothing can be printed."""


#: ASCII spellings of the non-ASCII characters simcli prints, for a stdout that cannot encode them
ASCII_SPELLINGS = {
    "α": "alpha",
    "β": "beta",
    "γ": "gamma",
    "µ": "u",
    "μ": "u",
    "·": "*",
    "×": "x",
    "≤": "<=",
    "≥": ">=",
    "−": "-",
    "–": "-",
    "—": "-",
    "…": "...",
    "→": "->",
    "²": "^2",
    "³": "^3",
    "≈": "~",
    "│": "|",
    "─": "-",
    "┃": "|",
    "━": "-",
    "┏": "+",
    "┓": "+",
    "┗": "+",
    "┛": "+",
    "┡": "+",
    "┩": "+",
    "┳": "+",
    "┻": "+",
    "╇": "+",
    "┼": "+",
    "├": "+",
    "┤": "+",
    "┬": "+",
    "┴": "+",
    "┌": "+",
    "┐": "+",
    "└": "+",
    "┘": "+",
    "╭": "+",
    "╮": "+",
    "╰": "+",
    "╯": "+",
    "‖": "||",
    "∞": "inf",
    "σ": "sigma",
    "Σ": "sum",
    "±": "+/-",
}


def to_ascii(text: str) -> str:
    """``text`` with simcli's non-ASCII characters spelled in ASCII (alpha, us, x) and any other replaced by '?'."""
    out = "".join(ASCII_SPELLINGS.get(c, c) for c in text)
    return out.encode("ascii", "replace").decode("ascii")


class GuardedStream:
    """The process's stdout (or stderr) behind the guarantees of :func:`write_stdout`, for every writer.

    Installed by the CLI's entry point (:func:`guard_stdio`), so rich tables, ``sys.stdout.write`` and
    ``typer.echo`` alike: spell non-ASCII characters in ASCII when the stream cannot encode them, raise
    :class:`StdoutClosed` when stdout is closed, and turn a refused write (``> /dev/full``) into one
    EnvironmentFailure line. BrokenPipeError passes through, for the entry point to end quietly.
    """

    def __init__(self, stream: Any, name: str = "standard output"):
        self._stream = stream
        self._name = name
        enc = getattr(stream, "encoding", None) or "utf-8"
        try:
            "αµ·×│".encode(enc)
            self._ascii = False
        except (UnicodeEncodeError, LookupError):
            self._ascii = True

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", None) or "utf-8"

    def _closed(self) -> StdoutClosed:
        return StdoutClosed(f"{self._name} is closed; nothing can be printed (use --output FILE)")

    def write(self, text: str) -> int:
        if self._stream is None:
            raise self._closed()
        if self._ascii:
            try:
                text.encode(self.encoding)
            except (UnicodeEncodeError, LookupError):
                text = to_ascii(text)
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._quiet()
            raise
        except ValueError:  # "I/O operation on closed file"
            raise self._closed() from None
        except OSError as e:
            if e.errno == errno.EBADF:
                raise self._closed() from None
            raise cannot_write(self._name, e) from None

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._quiet()
            raise
        except ValueError:
            pass
        except OSError as e:
            if e.errno == errno.EBADF:
                raise self._closed() from None
            raise cannot_write(self._name, e) from None

    def _quiet(self) -> None:
        """The reader went away: point the descriptor at /dev/null, so that the last flush at exit stays quiet."""
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass

    def isatty(self) -> bool:
        return bool(self._stream is not None and self._stream.isatty())

    @property
    def closed(self) -> bool:
        return self._stream is None or bool(getattr(self._stream, "closed", False))

    def __getattr__(self, name: str) -> Any:
        if self._stream is None:
            raise AttributeError(name)
        return getattr(self._stream, name)


def stdout_usable() -> bool:
    """Can results be printed? False when stdout is closed (``>&-``): check before a long measurement."""
    out = sys.stdout
    if out is None or getattr(out, "closed", False):
        return False
    try:
        os.fstat(out.fileno())  # a descriptor closed under Python (os.close(1)) is EBADF here
    except (io.UnsupportedOperation, AttributeError):  # an in-memory stream (a test runner's): usable
        return True
    except (OSError, ValueError):
        return False
    return True


def guard_stdio() -> Callable[[], None]:
    """Install :class:`GuardedStream` as sys.stdout (and an ASCII-safe sys.stderr); returns an undo function."""
    old_out, old_err = sys.stdout, sys.stderr
    if not isinstance(old_out, GuardedStream):
        sys.stdout = GuardedStream(old_out)
    if old_err is not None and not isinstance(old_err, GuardedStream):
        sys.stderr = GuardedStream(old_err, "standard error")

    def undo() -> None:
        sys.stdout, sys.stderr = old_out, old_err

    return undo


def write_stdout(text: str, stream: Any = None) -> None:
    """Write ``text`` to stdout and flush it: the one place results reach a terminal or a pipe.

    * stdout closed (``>&-``): :class:`StdoutClosed` (exit 1, one line);
    * ``> /dev/full`` or another refused write: :class:`~simcli.base.types.EnvironmentFailure` (exit 1);
    * a reader that went away (``| head -1``): BrokenPipeError propagates for the CLI to end quietly;
    * an encoding without some character (``PYTHONIOENCODING=ascii``): the ASCII spelling is written.
    """
    out = sys.stdout if stream is None else stream
    if out is None or getattr(out, "closed", False):
        raise StdoutClosed("standard output is closed; nothing can be printed (use --output FILE)")
    enc = getattr(out, "encoding", None) or "utf-8"
    try:
        text.encode(enc)
    except (UnicodeEncodeError, LookupError):
        text = to_ascii(text)
    try:
        out.write(text)
        out.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        if e.errno == errno.EBADF:
            raise StdoutClosed("standard output is closed; nothing can be printed (use --output FILE)") from None
        raise cannot_write("standard output", e) from None


# --------------------------------------------------------------------------- the terminal (issue 27)

_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)] if c != 0x0A}


def escape_controls(text: str, keep_newlines: bool = True) -> str:
    """``text`` (a name, a description, a source read from a file) with its control characters escaped as
    ``\\x1b``: an escape code in a profile's device name is shown, never obeyed by the terminal."""
    table = _CONTROL if keep_newlines else {**_CONTROL, 0x0A: "\\x0a"}
    return text.translate(table)
