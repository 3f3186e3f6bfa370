"""Reading a user's input file: one place for the checks every reader needs.

Each failure is one :class:`~simcli.model.InputError` line that names the file and says what to give
instead: a directory, a missing or unreadable file, a file too large to be what it claims, and
binary data (not UTF-8, or NUL bytes). At most ``max_bytes + 1`` bytes are ever read, whatever the file is
(a pipe, a process substitution, ``/dev/zero``), so the size limit holds without trusting ``stat``.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

from .model import InputError

__all__ = ["read_text", "tracking", "files_read"]

#: the input files read during the current command (None: not tracking, e.g. library use)
_READ: list[str] | None = None


@contextlib.contextmanager
def tracking() -> Iterator[None]:
    """Record every file :func:`read_text` reads while the block runs (the CLI wraps each command in it), so
    that :func:`simcli.output.write_atomic` can refuse to write over one of the command's inputs."""
    global _READ
    old, _READ = _READ, []
    try:
        yield
    finally:
        _READ = old


def files_read() -> tuple[str, ...]:
    """The files read so far in the current :func:`tracking` block (empty outside one)."""
    return tuple(_READ or ())


def read_text(path: str | os.PathLike[str], what: str, max_bytes: int = 64 << 20) -> str:
    """The text of ``path`` (UTF-8, a byte-order mark allowed); ``what`` names the expected file."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{p}: is a directory; give {what}")
    try:
        # read at most max_bytes + 1: stat's size says nothing about a pipe, a process substitution or a
        # device (/dev/zero, /dev/urandom would otherwise be read until memory runs out)
        with open(p, "rb") as f:
            raw = f.read(max_bytes + 1)
        if _READ is not None:
            _READ.append(str(p))
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except PermissionError:
        raise InputError(f"{p}: permission denied") from None
    except OSError as e:
        raise InputError(f"{p}: cannot read it ({e.strerror})") from None
    if len(raw) > max_bytes:
        raise InputError(f"{p}: more than {max_bytes:,} bytes is too large for {what}")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{p}: not a text file (not UTF-8); give {what}") from None
    if "\x00" in text:
        raise InputError(f"{p}: contains NUL bytes, not a text file; give {what}")
    return text
