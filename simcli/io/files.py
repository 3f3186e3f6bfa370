"""Writing result files: atomic, claimed, never clobbering without ``force``.

``write_atomic`` writes to a temporary file in the target directory and
renames it into place, so a failed run leaves no half-written file and never
clobbers an existing file unless ``force`` is set. What it guarantees (issue 12):

* an existing target that is not a regular file (a named pipe, a character device such as
  ``/dev/null``) is written into directly, never renamed over; block devices and sockets are refused;
* a symbolic link to a regular file is kept: the file it points to is replaced;
* an output that is one of the command's input files is refused: those given as ``inputs=`` (before any
  work), and every file :func:`simcli.io.inputs.read_text` read in the command so far (the CLI tracks them);
* a write that the system refuses (a full disk, a read-only file system, no permission) is one
  :class:`~simcli.base.types.EnvironmentFailure` line (exit 1) naming the file, and nothing is left behind.

Standard output is :mod:`simcli.io.stdout`'s; the formats written are :mod:`simcli.io.formats`'.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

from ..base.types import EnvironmentFailure, InputError
from .inputs import files_read

__all__ = [
    "write_atomic",
    "check_output_path",
    "check_name_length",
    "same_output",
    "claim",
    "claims",
    "Claim",
    "cannot_write",
    "save_aside",
    "write_fd",
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


def same_output(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Do two output names name one file (equal real paths, or one existing file reached by both)?"""
    try:
        return os.path.realpath(a) == os.path.realpath(b) or os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def check_output_path(
    path: str | os.PathLike[str],
    force: bool,
    option: str = "--output",
    *,
    inputs: Iterable[str | os.PathLike[str] | None] = (),
) -> Path:
    """Refuse, before any work is done, an output that would clobber a file, is an input or has no directory;
    then claim it (:func:`claim`), so that a second command writing the same file is refused (exit 2)."""
    if not str(path).strip():
        raise InputError(f"{option}: an empty file name; give a file name (without {option} the answer is printed)")
    p = Path(path)
    check_name_length(p, option)
    if p.is_dir():
        raise InputError(f"{option}: {p} is a directory; give a file name")

    for inp in [*inputs, *files_read()]:  # the command's inputs, given or read so far: never written over
        if inp is not None and _same_file(p, inp):
            raise InputError(
                f"{option}: {p} is also an input of this command ({inp}); writing it would destroy "
                "the input, choose another name"
            )
    if _key(p) in _CLAIMS:  # claimed by this command at its start: its own
        return p
    _check_free(p, force, option)
    claim(p, force, option)
    return p


def _check_free(p: Path, force: bool, option: str) -> None:
    """Refuse an output that exists (without ``force``), is a block device or socket, or has no directory."""
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


def check_name_length(p: Path, option: str) -> None:
    """Refuse (exit 2, one line) an output name the file system cannot hold (ENAMETOOLONG: a part of the path over
    its NAME_MAX, usually 255 bytes, or the whole path over PATH_MAX), before anything is created."""
    try:
        os.lstat(p)
    except OSError as e:
        if e.errno != errno.ENAMETOOLONG:
            return  # missing, or another problem the checks after this one name
        longest = max((part for part in p.parts), key=lambda x: len(os.fsencode(x)), default=str(p))
        size = len(os.fsencode(longest))
        limit = _name_max(p)
        what = (
            f"a part of it is {size:,} bytes long, over the file system's limit of {limit}"
            if limit is not None and size > limit
            else f"the path is {len(os.fsencode(str(p))):,} bytes long, over the file system's limit"
        )
        raise InputError(f"{option}: the file name is too long ({what}); give a shorter name") from None


def _name_max(p: Path) -> int | None:
    """The file system's longest file name (NAME_MAX) where ``p`` would be written, or None when unknown."""
    for d in (p.parent, Path(".")):
        try:
            return int(os.pathconf(d if str(d) else ".", "PC_NAME_MAX"))
        except (OSError, ValueError, AttributeError):
            continue
    return None


# --------------------------------------------------------------------------- claims (issue 27)

#: the outputs claimed by the running command, by their real path
_CLAIMS: dict[str, "Claim"] = {}


def _key(p: Path) -> str:
    return os.path.realpath(p)


class Claim:
    """An output file this command holds from its start (issue 27): a second writer is refused, and a writer
    whose file another command replaced (``--force``) notices instead of writing into a file nobody sees.

    * a file that does not exist is created empty at once with ``O_EXCL`` (``placeholder``): a second
      command naming it is refused (exit 2) before it measures anything; a claim never written is removed;
    * an existing regular file (``--force``) is left as it is until the new content replaces it atomically;
    * a named pipe or a character device is opened at once, without blocking: a pipe nothing reads is refused.
    """

    def __init__(self, path: Path, option: str, force: bool):
        self.path, self.option, self.force = path, option, force
        self.target = Path(_key(path))
        self.fd: int | None = None
        self.ident: tuple[int, int] | None = None  # (device, inode) of the file at target that is this command's
        self.special = False
        self.placeholder = False  # created empty by this claim, and nothing written into it yet
        try:
            st = os.stat(self.target)
        except FileNotFoundError:
            st = None
        except OSError as e:
            raise cannot_write(f"{option}: {path}", e) from None
        if st is not None and not stat.S_ISREG(st.st_mode):
            self.special = True
            self.fd = _open_special(self.target, st, option, shown=path)
            return
        if st is not None:
            return  # --force over an existing file: replaced when the output is ready
        try:
            self.fd = os.open(self.target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        except FileExistsError:
            if not force:
                raise InputError(
                    f"{option}: {path} exists (another command has just created it); pass --force to overwrite "
                    "it or choose another name"
                ) from None
            return
        except OSError as e:
            raise cannot_write(f"{option}: {path}", e) from None
        fs = os.fstat(self.fd)
        self.ident, self.placeholder = (fs.st_dev, fs.st_ino), True

    def ours(self) -> bool:
        """Is the file at the target still the one this command created or published?"""
        if self.special or self.ident is None:
            return True
        try:
            st = os.stat(self.target)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self.ident

    def published(self, fd: int) -> None:
        """``fd`` is now the file at the target (renamed into place by this command)."""
        fs = os.fstat(fd)
        self.ident, self.placeholder = (fs.st_dev, fs.st_ino), False

    def replaced(self, saved: Path | None, what: str) -> EnvironmentFailure:
        """The one line for an output that another command replaced or removed while this one wrote it."""
        where = f"; {what} are in {saved}" if saved is not None else f"; {what} could not be kept"
        return EnvironmentFailure(
            f"{self.option}: {self.path} was replaced or removed by another command while this one wrote it"
            f"{where}; give each run its own --output"
        )

    def release(self) -> None:
        """Close the handle; a placeholder never written (the command failed or wrote nothing) is removed."""
        if self.placeholder and self.ours():
            try:
                os.unlink(self.target)
            except OSError:
                pass
        self.placeholder = False
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None
        if _CLAIMS.get(_key(self.path)) is self:
            del _CLAIMS[_key(self.path)]


def _open_special(target: Path, st: os.stat_result, option: str, *, shown: Path) -> int:
    """Open a named pipe or character device for writing without blocking; a pipe with no reader is refused."""
    if stat.S_ISBLK(st.st_mode) or stat.S_ISSOCK(st.st_mode):
        kind = "a block device" if stat.S_ISBLK(st.st_mode) else "a socket"
        raise InputError(f"{option}: {shown} is {kind}; give a regular file, a named pipe or a character device")
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno == errno.ENXIO:  # a FIFO that no process has open for reading: writing would block forever
            raise InputError(
                f"{option}: {shown} is a named pipe that nothing reads; start its reader first (cat {shown}) "
                "or write to a regular file"
            ) from None
        raise cannot_write(f"{option}: {shown}", e) from None

    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return fd


def claim(path: str | os.PathLike[str], force: bool, option: str = "--output") -> Claim:
    """This command's claim on ``path`` (made now if it has none yet); see :class:`Claim`."""
    p = Path(path)
    held = _CLAIMS.get(_key(p))
    if held is not None:
        return held
    c = Claim(p, option, force)
    _CLAIMS[_key(p)] = c
    return c


@contextlib.contextmanager
def claims() -> Iterator[None]:
    """The CLI wraps each command in this: the outputs it claims are released (unused ones removed) at its end."""
    global _CLAIMS
    old, _CLAIMS = _CLAIMS, {}
    try:
        yield
    finally:
        for c in list(_CLAIMS.values()):
            c.release()
        _CLAIMS = old


def save_aside(target: Path, data: Iterable[bytes]) -> Path | None:
    """Write ``data`` to a new file beside ``target`` (``NAME.PID.saved``): where a replaced writer keeps its work."""
    for i in range(100):
        saved = target.with_name(f"{target.name}.{os.getpid()}{'.' + str(i) if i else ''}.saved")
        try:
            fd = os.open(saved, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        except OSError:
            return None
        try:
            with os.fdopen(fd, "wb") as f:
                for raw in data:
                    f.write(raw)
        except OSError:
            return None
        return saved
    return None


def write_fd(fd: int, data: bytes) -> None:
    """All of ``data`` into ``fd`` (``os.write`` may take part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


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
    *,
    option: str = "--output",
    inputs: Iterable[str | os.PathLike[str] | None] = (),
) -> Path:
    """Write ``data`` to ``path`` atomically (temp file + rename in the same directory).

    ``data`` may be an iterable of text chunks (a table of millions of rows, streamed as it is computed).
    The output is claimed (:class:`Claim`) if the command has not claimed it at its start; a named pipe or
    character device is written into through the claim's handle (never renamed over); ``inputs`` are the
    command's input files, refused as the output. A refused write is an EnvironmentFailure (exit 1); an
    output that another command replaced meanwhile is not written over: the data is kept beside it.
    """
    p = check_output_path(path, force, option, inputs=inputs)
    c = claim(p, force, option)  # made by check_output_path, or before
    if c.special:
        assert c.fd is not None  # a pipe or device is opened when it is claimed
        try:
            for raw in _chunks(data):
                write_fd(c.fd, raw)
        except OSError as e:
            raise cannot_write(f"{option}: {p}", e) from None
        finally:
            c.release()
        return p
    target = c.target  # a symbolic link is kept: what it points to is replaced
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(  # a name near NAME_MAX: the temporary name is shortened, never refused
            prefix=f".{target.name[:100]}.", suffix=".tmp", dir=target.parent if str(target.parent) else "."
        )
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file the permissions open() would
        with os.fdopen(fd, "wb") as f:
            for raw in _chunks(data):
                f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        if not c.ours():  # another command replaced (or removed) the file this one claimed: keep both
            saved = target.with_name(f"{target.name}.{os.getpid()}.saved")
            os.replace(tmp, saved)
            tmp = None
            c.placeholder = False
            raise c.replaced(saved, "this command's results")
        if not force and c.ident is None and p.exists():  # appeared while we worked (no claim could be made)
            raise InputError(f"{option}: {p} exists; pass --force to overwrite it or choose another name")
        os.replace(tmp, target)
        tmp = None
        c.placeholder = False
    except OSError as e:
        raise cannot_write(f"{option}: {p}", e) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        c.release()
    return p
