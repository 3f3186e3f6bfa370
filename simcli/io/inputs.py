"""Reading a user's input file: one place for the checks every reader needs.

Each failure is one :class:`~simcli.base.types.InputError` line that names the file and says what to give
instead: a directory, a missing or unreadable file, a file too large to be what it claims, and
binary data (not UTF-8, or NUL bytes). At most ``max_bytes + 1`` bytes are ever read, whatever the file is,
so the size limit holds without trusting ``stat``.

Special files (issue 27): a named pipe, a device (``/dev/zero``, a terminal) or a socket is refused when it is
opened, which is done without blocking: a FIFO with no writer would otherwise hang the command. An anonymous
pipe reached through ``/dev/fd/N`` or ``/proc/self/fd/N`` (a shell's ``<(...)``, ``/dev/stdin`` fed by a pipe)
has a writer by construction and is read.

:func:`load_json` is the one JSON reader of users' files: a key given twice in one object, nesting deeper
than :data:`MAX_JSON_DEPTH` and an integer longer than :data:`MAX_INT_DIGITS` digits are refused before
anything is built.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import json
import os
import re
import stat
import warnings
from pathlib import Path
from typing import Any, Iterator

from ..base.types import EnvironmentFailure, InputError, SimcliError

__all__ = [
    "SkippedFile",
    "skip_special",
    "read_text",
    "cannot_read",
    "check_readable",
    "json_decoder",
    "tracking",
    "files_read",
    "load_json",
    "csv_rows",
    "special_kind",
    "MAX_JSON_DEPTH",
    "MAX_INT_DIGITS",
]

#: JSON nested deeper than this is refused (simcli's own tables are 3 deep; Python's parser recurses per level)
MAX_JSON_DEPTH = 64
#: an integer written with more digits than this is refused (2**63 has 19; Python refuses 4300 with a traceback)
MAX_INT_DIGITS = 30

#: the input files read during the current command (None: not tracking, e.g. library use)
_READ: list[str] | None = None


@contextlib.contextmanager
def tracking() -> Iterator[None]:
    """Record every file :func:`read_text` reads while the block runs (the CLI wraps each command in it), so
    that :func:`simcli.io.files.write_atomic` can refuse to write over one of the command's inputs."""
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
        kind = special_kind(p)
        if kind is not None:
            raise InputError(f"{p}: is {kind}, not a file; give {what} (save it to a file first)")
        # opened without blocking (a FIFO created between the check and the open still cannot hang the
        # command), then read at most max_bytes + 1: stat's size says nothing about an anonymous pipe
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with open(fd, "rb", closefd=True) as f:
            st = os.fstat(fd)
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
                raise InputError(f"{p}: is {_kind_name(st.st_mode)}, not a file; give {what}")
            os.set_blocking(fd, True)
            raw = f.read(max_bytes + 1)
        if _READ is not None:
            _READ.append(str(p))
    except OSError as e:
        raise cannot_read(p, e) from None
    if len(raw) > max_bytes:
        raise InputError(f"{p}: more than {max_bytes:,} bytes is too large for {what}")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{p}: not a text file (not UTF-8); give {what}") from None
    if "\x00" in text:
        raise InputError(f"{p}: contains NUL bytes, not a text file; give {what}")
    return text


#: errors of the path the user gave (exit 2: a name to correct); any other error reading is the environment's
_BAD_NAME = {
    errno.ENOENT: "no such file",
    errno.ENAMETOOLONG: "the file name is too long for the file system",
    errno.ENOTDIR: "a part of the path before the file name is not a directory",
    errno.ELOOP: "too many levels of symbolic links",
}


def cannot_read(p: str | os.PathLike[str], e: OSError) -> SimcliError:
    """The one line for a file that cannot be read: a wrong name is bad input (InputError, exit 2); a file
    that exists and may not be read (EACCES, EPERM) or that the system fails to read (EIO) is an environment
    failure (exit 1), as a full disk is for a write."""
    if e.errno in _BAD_NAME:
        return InputError(f"{p}: {_BAD_NAME[e.errno]}")
    if e.errno in (errno.EACCES, errno.EPERM):
        return EnvironmentFailure(f"{p}: cannot read it (permission denied); make it readable (chmod u+r) or copy it")
    return EnvironmentFailure(f"{p}: cannot read it ({e.strerror or e})")


def check_readable(path: str | os.PathLike[str]) -> None:
    """Open ``path`` for reading (without blocking) and close it: the :func:`cannot_read` line when it cannot be
    read; nothing for a directory or a special file (their readers say what they are)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)))
    except OSError as e:
        raise cannot_read(path, e) from None


class SkippedFile(UserWarning):
    """A file a search left out (a named pipe where profiles are looked for); the CLI prints it as one warning."""


def skip_special(path: str | os.PathLike[str], what: str) -> bool:
    """True (with a :class:`SkippedFile` warning) for a search hit that is not a regular file: a stray FIFO on
    ``SIMCLI_PROFILE_PATH`` is skipped, never opened (opening it would wait for a writer forever)."""

    kind = special_kind(path)
    if kind is None and os.path.isdir(path):
        kind = "a directory"
    if kind is None:
        return False
    warnings.warn(SkippedFile(f"{path}: is {kind}, not {what}; skipped"), stacklevel=2)
    return True


def _kind_name(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


_FD_PATH = re.compile(r"^/(?:dev/fd|proc/(?:self|\d+)/fd)/\d+$|^/dev/std(?:in|out|err)$")


def special_kind(path: str | os.PathLike[str]) -> str | None:
    """'a named pipe', 'a character device', ... for a path that is not a regular file or a directory, without
    opening it (so without blocking); None for a regular file, a directory, a missing path and an anonymous pipe
    handed over as ``/dev/fd/N`` (``<(...)``), which has its writer."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return None
    if stat.S_ISFIFO(st.st_mode) and _FD_PATH.match(os.path.abspath(str(path))):
        real = os.path.realpath(path)
        if real.startswith("pipe:") or not os.path.exists(real) or _FD_PATH.match(real):
            return None  # an anonymous pipe, not a named one on disk
    return _kind_name(st.st_mode)


# --------------------------------------------------------------------------- JSON


def load_json(text: str, source: str, hint: str = "") -> Any:
    """Parse JSON text from a user's file: one line naming ``source`` for a syntax error, a key given twice in
    one object, nesting deeper than :data:`MAX_JSON_DEPTH`, or an integer of more than :data:`MAX_INT_DIGITS`
    digits (each checked before Python's parser could recurse or convert without bound)."""

    check_json_depth(text, source)
    try:
        return json_decoder(source).decode(text)
    except InputError:
        raise
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise InputError(f"{source}: JSON nested too deeply (at most {MAX_JSON_DEPTH} levels)") from None
    except ValueError as e:
        raise InputError(f"{source}: not valid JSON ({e}){hint}") from None


def json_decoder(source: str, keys: bool = True) -> Any:
    """The json.JSONDecoder of :func:`load_json`'s checks (a key given twice, an integer of more than
    :data:`MAX_INT_DIGITS` digits, a number past float64, NaN/Infinity), each an InputError naming ``source``:
    for readers that decode record by record (``raw_decode``), as NCCL Inspector's logs are read. ``keys``
    False leaves out the check of repeated keys (a Python call per object: for logs of 10^6 records)."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in items:
            if k in out:
                raise InputError(f"{source}: JSON key {k[:60]!r} is given twice in one object; keep one")
            out[k] = v
        return out

    def integer(s: str) -> int:
        if len(s.lstrip("-")) > MAX_INT_DIGITS:
            raise InputError(
                f"{source}: a JSON integer of {len(s.lstrip('-')):,} digits is beyond any quantity "
                f"simcli reads (at most {MAX_INT_DIGITS} digits)"
            )
        return int(s)

    def real(s: str) -> float:
        x = float(s)
        if x != x or x in (float("inf"), float("-inf")):
            raise InputError(f"{source}: JSON number {s[:40]} is beyond a 64-bit float; give a finite number")
        return x

    def constant(name: str) -> Any:
        raise InputError(f"{source}: JSON {name} is not a number; give a finite number")

    return json.JSONDecoder(
        object_pairs_hook=pairs if keys else None, parse_int=integer, parse_float=real, parse_constant=constant
    )


_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def check_json_depth(text: str, source: str) -> None:
    """Refuse nesting deeper than MAX_JSON_DEPTH by one scan of the brackets outside strings."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return
    depth = 0
    for m in _TOKENS.finditer(text):
        t = m.group()
        if t in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise InputError(
                    f"{source}: JSON nested more than {MAX_JSON_DEPTH} levels deep (offset {m.start()}); no table "
                    "simcli reads is nested like that"
                )
        elif t in "]}":
            depth -= 1


def csv_rows(body: list[str], source: str, lines: list[int] | None = None) -> list[list[str]]:
    """The rows of a CSV's non-comment lines. A line csv cannot read (a field over its 128 KiB limit, a quote left
    open) is an InputError naming the file and line (``lines``: each body line's number in the file), not csv's
    traceback."""

    reader = csv.reader(body)
    out: list[list[str]] = []
    while True:
        try:
            out.append(next(reader))
        except StopIteration:
            return out
        except csv.Error as e:
            at = reader.line_num
            no = lines[at - 1] if lines and 0 < at <= len(lines) else at
            raise InputError(
                f"{source}: line {no}: not a CSV row ({e}); give one value per column, at most 128 KiB each"
            ) from None
