"""Reading a user's input file: one place for the checks every reader needs.

Each failure is one :class:`~simcli.model.InputError` line that names the file and says what to give
instead: a directory, a missing or unreadable file, a file too large to be what it claims, and
binary data (not UTF-8, or NUL bytes).
"""

from __future__ import annotations

import os
from pathlib import Path

from .model import InputError

__all__ = ["read_text"]


def read_text(path: str | os.PathLike[str], what: str, max_bytes: int = 64 << 20) -> str:
    """The text of ``path`` (UTF-8, a byte-order mark allowed); ``what`` names the expected file."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{p}: is a directory; give {what}")
    try:
        size = p.stat().st_size
        if size > max_bytes:
            raise InputError(f"{p}: {size:,} bytes is too large for {what} (at most {max_bytes:,})")
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except PermissionError:
        raise InputError(f"{p}: permission denied") from None
    except OSError as e:
        raise InputError(f"{p}: cannot read it ({e.strerror})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{p}: not a text file (not UTF-8); give {what}") from None
    if "\x00" in text:
        raise InputError(f"{p}: contains NUL bytes, not a text file; give {what}")
    return text
