"""Parse and format physical quantities.

Inside simcli every number is in SI base units: bytes, seconds, bytes/s and
FLOP/s. Strings with units are converted exactly once, at the edge (profile
loading, command-line options), by :func:`parse`; rendering picks a human unit
with the ``fmt_*`` helpers.

Conventions (as nccl-tests and the SI/IEC standards define them):

* ``GB`` = 1e9 bytes, ``GiB`` = 2**30 bytes.
* ``b`` is a bit, ``B`` a byte: ``400 Gb/s`` = ``400 Gbit/s`` = ``400 Gbps`` = 50e9 B/s.
* ``GB/s`` = 1e9 bytes/s (nccl-tests' algbw and busbw unit).
* nccl-tests' size syntax (``-b 8 -e 16G``): a bare ``K``, ``M``, ``G`` or ``T`` without ``B``, in
  either case, is a binary multiple (``1G`` = ``16g``/16 = 2**30 bytes, ``512M`` = 512 MiB), as
  nccl-tests' ``parsesize`` reads it (src/common.cu). ``1GB`` stays 1e9 bytes.
"""

from __future__ import annotations

import math
import re

from .types import InputError

__all__ = [
    "UnitError",
    "KINDS",
    "parse",
    "fmt_bytes",
    "fmt_time",
    "fmt_rate",
    "fmt_flops",
    "fmt_count",
    "sig4",
]


class UnitError(ValueError):
    """A quantity that cannot be parsed; the message says what would work."""


_SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_IEC = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}


def _table() -> dict[str, dict[str, float]]:
    t: dict[str, dict[str, float]] = {k: {} for k in ("bytes", "bandwidth", "time", "flops")}
    for p, f in _SI.items():
        t["bytes"][p + "B"] = f
        t["bandwidth"][p + "B/s"] = f
        t["bandwidth"][p + "Bps"] = f
        # bits: a bit is an eighth of a byte
        t["bandwidth"][p + "b/s"] = f / 8
        t["bandwidth"][p + "bit/s"] = f / 8
        t["bandwidth"][p + "bps"] = f / 8
        t["flops"][p + "FLOP/s"] = f
        t["flops"][p + "FLOPS"] = f
        t["flops"][p + "flop/s"] = f
    for p, f in _IEC.items():
        t["bytes"][p + "B"] = f
        t["bandwidth"][p + "B/s"] = f
        t["bandwidth"][p + "b/s"] = f / 8
        t["bandwidth"][p + "bit/s"] = f / 8
    t["bytes"]["bytes"] = 1.0
    for p, f in {"K": 2.0**10, "M": 2.0**20, "G": 2.0**30, "T": 2.0**40}.items():  # nccl-tests' -b/-e sizes
        t["bytes"][p] = t["bytes"][p.lower()] = f
    t["time"].update({"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ns": 1e-9, "min": 60.0, "h": 3600.0})
    return t


UNITS = _table()
KINDS = tuple(UNITS)
_EXAMPLES = {
    "bytes": "'80 GB' or '64 GiB'",
    "bandwidth": "'400 Gb/s' or '50 GB/s'",
    "time": "'3 us' or '1.5 ms'",
    "flops": "'989 TFLOP/s'",
}
_NUM = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([^\s\d].*?)?\s*$")


def parse(value: object, kind: str) -> float:
    """Convert ``value`` (a number in SI base units, or a string with a unit) to SI.

    ``kind`` is one of ``bytes``, ``bandwidth``, ``time``, ``flops``. A bare
    number (int, float or numeric string) is taken to be in SI base units.
    Raises :class:`UnitError` for anything else, including NaN and infinity.
    Sign is not checked here; callers decide what range is valid.
    """
    if kind not in UNITS:
        raise ValueError(f"unknown quantity kind {kind!r}")
    if isinstance(value, bool) or value is None:
        raise UnitError(f"{value!r} is not a {_noun(kind)} (try {_EXAMPLES[kind]})")
    if isinstance(value, (int, float)):
        x = float(value)
    elif isinstance(value, str):
        m = _NUM.match(value)
        if not m:
            raise UnitError(f"{value!r} is not a {_noun(kind)} (try {_EXAMPLES[kind]})")
        number, unit = m.group(1), (m.group(2) or "")
        if unit == "":
            x = float(number)
        else:
            factor = UNITS[kind].get(unit)
            if factor is None:
                raise UnitError(f"{value!r} is not a {_noun(kind)} (try {_EXAMPLES[kind]})")
            x = float(number) * factor
    else:
        raise UnitError(f"{value!r} is not a {_noun(kind)} (try {_EXAMPLES[kind]})")
    if not math.isfinite(x):
        raise UnitError(f"{value!r} is not a finite {_noun(kind)}")
    return x


def parse_at(value: object, kind: str, where: str, *, positive: bool = False) -> float:
    """:func:`parse` for input that names its place (an option, a file and field): anything that is not a
    ``kind``, is negative, or (``positive``) is 0 raises InputError as one line starting with ``where``."""

    try:
        x = parse(value, kind)
    except UnitError as e:
        raise InputError(f"{where}: {e}") from None
    if x < 0 or (positive and x == 0):
        raise InputError(f"{where}: {value!r} must {f'be a positive {_noun(kind)}' if positive else 'not be negative'}")
    return x


def _noun(kind: str) -> str:
    return {"bytes": "size", "bandwidth": "bandwidth", "time": "time", "flops": "FLOP rate"}[kind]


def _scaled(x: float, steps: list[tuple[float, str]], digits: int = 3) -> str:
    ax = abs(x)
    for factor, unit in steps:
        if ax >= factor:
            return f"{_sig(x / factor, digits)} {unit}"
    factor, unit = steps[-1]
    return f"{_sig(x / factor, digits)} {unit}"


def _sig(v: float, digits: int) -> str:
    if v == 0:
        return "0"
    s = f"{v:.{digits}g}"
    if "e" in s:  # a mantissa of 1000 or more, or a tiny value: write it out while that stays short
        if 1 <= abs(v) < 1e15:
            s = f"{v:.0f}"
        elif abs(v) < 1:
            short = f"{v:.{digits + 3}f}".rstrip("0")
            s = short if short.rstrip(".") not in ("0", "-0") else s
    return s


def fmt_bytes(n: float, binary: bool = True) -> str:
    """Format a size: ``fmt_bytes(2**30) == '1 GiB'``; ``binary=False`` gives GB."""
    if binary:
        steps = [(2.0**40, "TiB"), (2.0**30, "GiB"), (2.0**20, "MiB"), (2.0**10, "KiB"), (1.0, "B")]
    else:
        steps = [(1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB"), (1.0, "B")]
    return _scaled(n, steps, 4)


def fmt_time(t: float) -> str:
    """Format a time: ``fmt_time(1.5e-3) == '1.5 ms'``."""
    if t == 0:
        return "0 s"
    return _scaled(t, [(3600.0 * 24, "d"), (3600.0, "h"), (1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")])


def fmt_rate(bps: float) -> str:
    """Format a bandwidth in bytes/s with decimal prefixes (``GB/s`` = 1e9 B/s)."""
    return _scaled(bps, [(1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "KB/s"), (1.0, "B/s")])


def fmt_flops(f: float) -> str:
    return _scaled(f, [(1e15, "PFLOP/s"), (1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1.0, "FLOP/s")])


def fmt_count(n: float) -> str:
    """Format a count with decimal prefixes: ``fmt_count(124e6) == '124 M'``."""
    return _scaled(n, [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]).strip()


def sig4(v: float) -> str:
    """Four significant digits without scientific notation, for table cells: 0.2838, 7.935, 1,209, 120,934."""
    if abs(v) >= 1e15 or not math.isfinite(v):  # past a quadrillion: scientific, not a 300-digit number
        return f"{v:.4g}"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"
