"""Range syntax shared by ``--devices``, ``--size`` and ``--world-sizes``.

A range list is comma-separated items, each one of::

    8            a single value
    1..64        every integer from 1 to 64 (sizes: every byte, so give a step)
    1..64:x2     geometric: 1, 2, 4, ... while <= 64 (as nccl-tests' -f 2)
    8..64:+8     arithmetic: 8, 16, 24, ... while <= 64

The result is sorted and de-duplicated. Sizes accept units (``1KiB..1GiB:x4``).
"""

from __future__ import annotations

import math
import re

import numpy as np

from .types import InputError
from .units import UnitError, parse

__all__ = [
    "parse_devices",
    "parse_sizes",
    "check_combinations",
    "MAX_POINTS",
    "MAX_DEVICES",
    "MAX_BYTES",
    "MAX_COMBINATIONS",
    "MAX_UNITS",
    "MAX_PARAMS",
]

#: more points than this in one range list is refused (it would only exhaust memory)
MAX_POINTS = 5_000_000
#: the largest device count: 2**53, the largest integer a float64 (the engine's arithmetic) holds exactly
MAX_DEVICES = 2**53
#: the largest size in bytes: 4 EiB (2**62), so every size and every step fits int64 and float64 exactly
MAX_BYTES = 2**62
#: the most parameters a workload may have: its fp64 gradients (8 B each) stay within MAX_BYTES
MAX_PARAMS = 2**59
#: more combinations than this (comma lists of --profile, --model, ... in speedup and compare) are refused
MAX_COMBINATIONS = 1000
#: more FSDP units (wrapped modules) than this are refused: the per-unit timeline is a loop over them
MAX_UNITS = 100_000
_ITEM = re.compile(r"^(?P<lo>(?:(?!\.\.)[^:])+)(?:\.\.(?P<hi>[^:]*))?(?::(?P<op>[x+*])(?P<step>.+))?$")


def parse_devices(text: str, option: str = "--devices") -> np.ndarray:
    """Parse a device-count range list into a sorted int64 array of k >= 1."""
    return _parse(text, option, _int_value, noun="device count", example="'1..64', '1..64:x2' or '1,2,8,32'")


def parse_sizes(text: str, option: str = "--size") -> np.ndarray:
    """Parse a message-size range list (bytes, units allowed) into a sorted float64 array."""
    return _parse(text, option, _size_value, noun="size", example="'1KiB..1GiB:x4' or '32MiB,1GiB'").astype(np.float64)


#: a whole number with more digits than this is refused before it is converted (2**53 has 16)
MAX_DIGITS = 30


def _int_value(s: str, option: str) -> int:
    s = s.strip()
    if not re.fullmatch(r"[-+]?\d+", s):
        raise InputError(f"{option}: {s[:40]!r} is not a whole number of devices (try '8' or '1..64')")
    if len(s.lstrip("+-")) > MAX_DIGITS:
        raise InputError(
            f"{option}: a number of {len(s.lstrip('+-')):,} digits is more than simcli models (at most 2**53 = "
            f"{MAX_DEVICES:,})"
        )
    v = int(s)
    if v > MAX_DEVICES:
        raise InputError(f"{option}: {s} devices is more than simcli models (at most 2**53 = {MAX_DEVICES:,})")
    return v


def _size_value(s: str, option: str) -> int:
    if len(s) > 64:
        raise InputError(f"{option}: {s[:40]!r}... is not a size simcli reads (at most 64 characters)")
    try:
        v = parse(s.strip(), "bytes")
    except UnitError as e:
        raise InputError(f"{option}: {e}") from None
    if v != math.floor(v):
        raise InputError(f"{option}: {s!r} is not a whole number of bytes")
    if v > MAX_BYTES:
        raise InputError(f"{option}: {s!r} is more than simcli models (at most 2**62 bytes = 4 EiB)")
    return int(v)


def _parse(text: str, option: str, value, *, noun: str, example: str) -> np.ndarray:
    if text is None or not str(text).strip():
        raise InputError(f"{option}: empty {noun} list (try {example})")
    parts: list[np.ndarray] = []
    total = 0
    for raw in str(text).split(","):
        item = raw.strip().replace(" ", "")
        if not item:
            raise InputError(f"{option}: empty item in {text!r} (try {example})")
        m = _ITEM.match(item)
        if not m:
            raise InputError(f"{option}: {item!r} is not a {noun} or range (try {example})")
        lo = value(m.group("lo"), option)
        hi_s, op, step_s = m.group("hi"), m.group("op"), m.group("step")
        if hi_s is None:
            if op:
                raise InputError(f"{option}: {item!r} has a step but no range (try {example})")
            arr = np.array([lo], dtype=np.int64)
        else:
            if hi_s == "":
                raise InputError(f"{option}: {item!r} has no upper end (try {example})")
            hi = value(hi_s, option)
            _positive(lo, item, option, noun=noun)
            _positive(hi, item, option, noun=noun)
            if hi < lo:
                raise InputError(
                    f"{option}: {item!r} runs backwards; write it as {hi_s}..{m.group('lo')} with the smaller end first"
                )
            arr = _expand(lo, hi, op, step_s=step_s, item=item, option=option)
        _positive(int(arr.min()), item, option, noun=noun)
        total += arr.size
        if total > MAX_POINTS:
            raise InputError(
                f"{option}: {text!r} has more than {MAX_POINTS:,} points; use a geometric step"
                f" (':x2') or a narrower range"
            )
        parts.append(arr)
    return sorted_unique(parts)


def sorted_unique(parts: list[np.ndarray]) -> np.ndarray:
    """Sorted, de-duplicated concatenation. A sort and a neighbour comparison: numpy's hash-based np.unique
    took 4.6 s for 1..5000000 (issue 12), this takes 0.05 s; one increasing range is returned as it is. (Nor
    does it import numpy.ma, as np.unique's first call does: 8 ms of a command's start-up.)"""
    arr = parts[0] if len(parts) == 1 else np.concatenate(parts)
    if arr.size > 1 and not bool(np.all(arr[1:] > arr[:-1])):
        arr = np.sort(arr, kind="stable")
        arr = arr[np.concatenate(([True], arr[1:] != arr[:-1]))]
    return arr


def _positive(v: int, item: str, option: str, *, noun: str) -> None:
    if v < 1:
        raise InputError(f"{option}: {item!r}: a {noun} must be at least 1")


def _expand(lo: int, hi: int, op: str | None, *, step_s: str | None, item: str, option: str) -> np.ndarray:
    if op is None:
        if hi - lo + 1 > MAX_POINTS:
            raise InputError(f"{option}: {item!r} has {hi - lo + 1:,} points; add a step such as ':x2'")
        return np.arange(lo, hi + 1, dtype=np.int64)
    step_s = step_s or ""  # the pattern gives a step wherever it gives an op
    if len(step_s) > 64:
        raise InputError(f"{option}: {item[:40]!r}...: step is not a number (try ':x2' or ':+8')")
    try:
        step = float(step_s) if op in "x*" else float(parse(step_s, "bytes"))
    except (ValueError, UnitError):
        raise InputError(f"{option}: {item!r}: step {step_s!r} is not a number (try ':x2' or ':+8')") from None
    if op in "x*":
        if not step > 1 or not math.isfinite(step):
            raise InputError(f"{option}: {item!r}: a geometric step must be greater than 1 (try ':x2')")
        n = int(math.floor(math.log(hi / lo) / math.log(step) + 1e-9)) + 1
        if n > MAX_POINTS:  # counted before anything is allocated (1..2:x1.0000000001 is 7e9 points)
            raise InputError(f"{option}: {item!r} has {n:,} points (at most {MAX_POINTS:,}); use a bigger step")
        vals = np.rint(lo * step ** np.arange(n, dtype=np.float64))
        return vals[vals <= hi].astype(np.int64)  # filtered in float64, so nothing past int64 is cast
    if not step >= 1 or step != math.floor(step):
        raise InputError(f"{option}: {item!r}: an arithmetic step must be a whole number >= 1 (try ':+8')")
    n = (hi - lo) // int(step) + 1
    if n > MAX_POINTS:
        raise InputError(f"{option}: {item!r} has {n:,} points; use a bigger step")
    return np.arange(lo, hi + 1, int(step), dtype=np.int64)


def check_combinations(counts: dict[str, int]) -> int:
    """The number of combinations of the listed values (option -> how many), refused beyond
    :data:`MAX_COMBINATIONS` before any scenario is built."""
    total = 1
    for n in counts.values():
        total *= max(1, int(n))
    if total > MAX_COMBINATIONS:
        given = " x ".join(f"{n} {opt}" for opt, n in counts.items() if n > 1)
        raise InputError(
            f"{', '.join(o for o, n in counts.items() if n > 1)}: {given} values make {total:,} combinations, "
            f"more than {MAX_COMBINATIONS:,}; list fewer values"
        )
    return total
