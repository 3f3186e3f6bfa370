"""Writing results: CSV and JSON serialisation, and atomic file writes.

``write_atomic`` writes to a temporary file in the target directory and
renames it into place, so a failed run leaves no half-written file and never
clobbers an existing file unless ``force`` is set.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Sequence

from .model import InputError

__all__ = ["write_atomic", "check_output_path", "to_csv", "to_json", "jsonable"]


def check_output_path(path: str | os.PathLike[str], force: bool, option: str = "--output") -> Path:
    """Refuse, before any work is done, an output that would clobber a file or has no directory."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{option}: {p} is a directory; give a file name")
    if p.exists() and not force:
        raise InputError(f"{option}: {p} exists; pass --force to overwrite it or choose another name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{option}: directory {parent} does not exist; create it first")
    return p


def write_atomic(path: str | os.PathLike[str], data: str | bytes, force: bool = False,
                 option: str = "--output") -> Path:
    """Write ``data`` to ``path`` atomically (temp file + rename in the same directory)."""
    p = check_output_path(path, force, option)
    mode = "wb" if isinstance(data, bytes) else "w"
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent if str(p.parent) else ".")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file the permissions open() would
        with os.fdopen(fd, mode, **({} if mode == "wb" else {"encoding": "utf-8", "newline": ""})) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if not force and p.exists():  # appeared while we worked
            raise InputError(f"{option}: {p} exists; pass --force to overwrite it or choose another name")
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return p


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


def to_csv(records: Sequence[dict[str, Any]], columns: Iterable[str] | None = None,
           comments: Iterable[str] = ()) -> str:
    cols = list(columns) if columns is not None else (list(records[0]) if records else [])
    buf = io.StringIO()
    for c in comments:
        buf.write(f"# {c}\n")
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in records:
        w.writerow({k: ("" if r.get(k) is None else _csv_value(r.get(k))) for k in cols})
    return buf.getvalue()


def _csv_value(v: Any) -> Any:
    v = jsonable(v)
    if isinstance(v, float):
        return repr(v)
    return v
