"""Writing results: CSV and JSON serialisation, and atomic file writes.

``write_atomic`` writes to a temporary file in the target directory and
renames it into place, so a failed run leaves no half-written file and never
clobbers an existing file unless ``force`` is set. What it guarantees (issue 12):

* an existing target that is not a regular file (a named pipe, a character device such as
  ``/dev/null``) is written into directly, never renamed over; block devices and sockets are refused;
* a symbolic link to a regular file is kept: the file it points to is replaced;
* an output that is one of the command's input files is refused: those given as ``inputs=`` (before any
  work), and every file :func:`simcli.inputs.read_text` read in the command so far (the CLI tracks them);
* a write that the system refuses (a full disk, a read-only file system, no permission) is one
  :class:`~simcli.model.EnvironmentFailure` line (exit 1) naming the file, and nothing is left behind.

``write_stdout`` is the one writer of results to standard output, with the same guarantees for a
closed stdout, ``> /dev/full`` and a stdout that cannot encode a character.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import math
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from .model import EnvironmentFailure, InputError

__all__ = [
    "write_atomic",
    "check_output_path",
    "write_stdout",
    "StdoutClosed",
    "GuardedStream",
    "guard_stdio",
    "stdout_usable",
    "to_csv",
    "to_json",
    "jsonable",
    "cannot_write",
    "to_ascii",
]


def cannot_write(what: str, e: OSError) -> EnvironmentFailure:
    """The one line for a write the system refused (ENOSPC, EROFS, EACCES, EIO, ...)."""
    hint = {
        errno.ENOSPC: "; free some space or write elsewhere",
        errno.EROFS: "; the file system is read-only, write elsewhere",
        errno.EDQUOT: "; the disk quota is used up, write elsewhere",
        errno.EACCES: "; you may not write there, choose another place",
        errno.EPERM: "; you may not write there, choose another place",
    }.get(e.errno or 0, "")
    return EnvironmentFailure(f"{what}: cannot write it ({e.strerror or e}){hint}")


def _same_file(a: Path, b: str | os.PathLike[str]) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_output_path(
    path: str | os.PathLike[str],
    force: bool,
    option: str = "--output",
    inputs: Iterable[str | os.PathLike[str] | None] = (),
) -> Path:
    """Refuse, before any work is done, an output that would clobber a file, is an input or has no directory."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{option}: {p} is a directory; give a file name")
    from .inputs import files_read

    for inp in [*inputs, *files_read()]:  # the command's inputs, given or read so far: never written over
        if inp is not None and _same_file(p, inp):
            raise InputError(
                f"{option}: {p} is also an input of this command ({inp}); writing it would destroy "
                "the input, choose another name"
            )
    try:
        st = os.stat(p)  # follows links: /dev/stdout is whatever it points to
    except FileNotFoundError:
        st = None
    except NotADirectoryError:  # the file system refuses the path (issue 12 counts it with a full disk: exit 1)
        raise EnvironmentFailure(
            f"{option}: {p}: cannot write it (a part of the path before the file name is a "
            "file, not a directory); write elsewhere"
        ) from None
    except OSError as e:
        raise cannot_write(f"{option}: {p}", e) from None
    if st is not None:
        if stat.S_ISBLK(st.st_mode) or stat.S_ISSOCK(st.st_mode):
            kind = "a block device" if stat.S_ISBLK(st.st_mode) else "a socket"
            raise InputError(f"{option}: {p} is {kind}; give a regular file, a named pipe or a character device")
        if not force:
            raise InputError(f"{option}: {p} exists; pass --force to overwrite it or choose another name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        if parent.exists():
            raise EnvironmentFailure(
                f"{option}: {p}: cannot write it ({parent} is a file, not a directory); write elsewhere"
            )
        raise InputError(f"{option}: directory {parent} does not exist; create it first")
    return p


def _is_special(p: Path) -> bool:
    """An existing target that is not a regular file (a pipe, a character device): written into, not replaced."""
    try:
        return not stat.S_ISREG(os.stat(p).st_mode)
    except OSError:
        return False


def _chunks(data: str | bytes | Iterable[str]) -> Iterable[bytes]:
    if isinstance(data, (str, bytes)):
        yield data.encode("utf-8") if isinstance(data, str) else data
        return
    for chunk in data:
        yield chunk.encode("utf-8") if isinstance(chunk, str) else chunk


def write_atomic(
    path: str | os.PathLike[str],
    data: str | bytes | Iterable[str],
    force: bool = False,
    option: str = "--output",
    inputs: Iterable[str | os.PathLike[str] | None] = (),
) -> Path:
    """Write ``data`` to ``path`` atomically (temp file + rename in the same directory).

    ``data`` may be an iterable of text chunks (a table of millions of rows, streamed as it is computed).
    A named pipe or character device is written into directly (never renamed over); ``inputs`` are the
    command's input files, refused as the output. A refused write is an EnvironmentFailure (exit 1).
    """
    p = check_output_path(path, force, option, inputs)
    if _is_special(p):
        try:
            with open(p, "wb") as f:
                for raw in _chunks(data):
                    f.write(raw)
        except OSError as e:
            raise cannot_write(f"{option}: {p}", e) from None
        return p
    target = Path(os.path.realpath(p)) if p.is_symlink() else p  # keep the link, replace what it points to
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".tmp", dir=target.parent if str(target.parent) else "."
        )
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file the permissions open() would
        with os.fdopen(fd, "wb") as f:
            for raw in _chunks(data):
                f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        if not force and p.exists():  # appeared while we worked
            raise InputError(f"{option}: {p} exists; pass --force to overwrite it or choose another name")
        os.replace(tmp, target)
        tmp = None
    except OSError as e:
        raise cannot_write(f"{option}: {p}", e) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return p


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
    * ``> /dev/full`` or another refused write: :class:`~simcli.model.EnvironmentFailure` (exit 1);
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


def jsonable(v: Any) -> Any:
    """Plain JSON values: numpy scalars to Python, NaN and infinity to None."""
    if isinstance(v, (str, int, bool)) or v is None:
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if hasattr(v, "tolist"):
        return jsonable(v.tolist())
    return v


def to_json(obj: Any) -> str:
    """JSON text; a list of records is written one record per line (json's C encoder; indent would not use it)."""
    obj = jsonable(obj)
    if isinstance(obj, list) and obj and all(isinstance(r, dict) for r in obj):
        return "[\n" + ",\n".join(json.dumps(r, allow_nan=False) for r in obj) + "\n]\n"
    return json.dumps(obj, indent=2, allow_nan=False) + "\n"


def to_csv(
    records: Sequence[dict[str, Any]], columns: Iterable[str] | None = None, comments: Iterable[str] = ()
) -> str:
    cols = list(columns) if columns is not None else (list(records[0]) if records else [])
    buf = io.StringIO()
    for c in comments:
        buf.write(f"# {c}\n")
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in records:
        w.writerow({k: ("" if r.get(k) is None else csv_value(r.get(k))) for k in cols})
    return buf.getvalue()


def csv_value(v: Any) -> Any:
    v = jsonable(v)
    if isinstance(v, float):
        return repr(v)
    return v
