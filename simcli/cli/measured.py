"""What `simcli calibrate` and `simcli validate` share: the options that select measured rows, and the profile the
measurements belong to."""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, Any, Optional

import numpy as np
import typer

from ..base.types import InputError
from ..comm.specs import COLLECTIVES, busbw_factor
from ..io import rules
from ..io.profiles import resolve_profile, with_nccl_version
from . import options as o

__all__ = [
    "Where",
    "MinSize",
    "MaxSize",
    "RowOptions",
    "MeasuredProfile",
    "BACKEND_PROFILES",
    "parse_size",
    "pct",
    "backend_of",
    "profile_for_measurements",
    "held_profile",
    "r2_cell",
    "hold_to_profile",
    "devices_of",
]


Where = Annotated[
    Optional[list[str]],
    o.option(
        "--where",
        help="Keep only rows whose COLUMN equals VALUE (COLUMN=VALUE, repeatable), e.g. --where system=nd-h100-v5; "
        "FILE:COLUMN=VALUE keeps rows of that file only.",
    ),
]
MinSize = Annotated[
    str, o.option("--min-size", help="Leave out all-reduce rows smaller than this (bytes, units allowed: '64MiB').")
]
MaxSize = Annotated[
    Optional[str], o.option("--max-size", help="Leave out all-reduce rows larger than this (bytes, units allowed).")
]


#: a size option ('64MiB') in bytes
parse_size = o.parse_bytes


@dataclasses.dataclass(frozen=True)
class RowOptions(o.OptionGroup):
    """Which measured rows a command reads: --where, --min-size, --max-size."""

    where: Where = None
    min_size: MinSize = "0"
    max_size: MaxSize = None

    def sizes(self) -> tuple[float, float | None]:
        """--min-size and --max-size in bytes (0 and None where not given)."""
        return parse_size(self.min_size, "--min-size") or 0.0, parse_size(self.max_size, "--max-size")


def pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


# --------------------------------------------------------------------------- the profile measurements belong to

#: the profile each backend's measurements default to, as bench step picks its prediction profile: gloo runs
#: on this host's CPU cores (cpu-loopback); nccl could be any GPU system, so it needs --profile
BACKEND_PROFILES = {"gloo": "cpu-loopback"}

MeasuredProfile = Annotated[
    Optional[str],
    o.option(
        "--profile",
        "-p",
        help="Built-in profile name or path "
        "to a YAML profile [default: from the file's backend: "
        "cpu-loopback for gloo; nccl and unknown backends need "
        "--profile].",
    ),
]


def backend_of(m) -> str | None:
    for c in m.comments:
        if c.startswith("backend:"):
            return c.split(":", 1)[1].strip() or None
    if "backend" in m.header:
        found = {b for b in m.text("backend") if b}
        if len(found) == 1:
            return found.pop()
    return None


def profile_for_measurements(profile: str | None, measured: list, nccl_version: str | None = None) -> Any:
    """--profile, or the profile the measurements' backend implies; refused with a hint when it cannot tell.
    ``nccl_version``: --nccl-version, the release that prices it (None: the profile's own)."""

    if profile is not None:
        return with_nccl_version(resolve_profile(profile), nccl_version)
    backends = {b for b in (backend_of(m) for m in measured)}
    paths = ", ".join(m.path for m in measured)
    if len(backends) == 1 and None not in backends:
        (backend,) = backends
        if backend in BACKEND_PROFILES:
            name = BACKEND_PROFILES[backend]
            typer.echo(f"simcli: --profile {name} (the measurements' backend is {backend})", err=True)
            return with_nccl_version(resolve_profile(name), nccl_version)
        raise InputError(
            f"--profile: {paths} was measured with {backend}, on hardware simcli cannot tell from the "
            "file; give --profile (for example dgx-a100, dgx-h100; see 'simcli profiles list')"
        )
    raise InputError(
        f"--profile: {paths} does not say which backend measured it; give --profile (the hardware "
        "the measurements were taken on; see 'simcli profiles list')"
    )


def held_profile(profile: str | None, measured: list, nccl_version: str | None = None) -> Any:
    """The profile the measured files are priced on (:func:`profile_for_measurements`), each file held to it
    (:func:`hold_to_profile`)."""
    prof = profile_for_measurements(profile, measured, nccl_version)
    for m in measured:
        hold_to_profile(m, prof)
    return prof


def devices_of(m) -> list[str]:
    """The device names a measured file states (nccl-tests' '#  Rank' lines, kept as a 'devices:' comment)."""
    return [d.strip() for c in m.comments if c.startswith("devices:") for d in c.split(":", 1)[1].split(";")]


def hold_to_profile(m, prof, *, backend: str | None = None, devices: list[str] | None = None) -> None:
    """A measured file against the profile it is priced on (simcli.io.rules): a warning where its backend or device
    names contradict the profile; an all-reduce file's bus bandwidths against the line rate of the slowest link
    each row's ranks span (refused above what any algorithm gets: a unit slip, or a file of other hardware)."""

    rules.hardware(m.path, prof, backend=backend or backend_of(m), devices=devices or devices_of(m))
    if m.kind != "allreduce" or not len(m):
        return
    k, n, t = m.devices(), m.number("bytes"), m.allreduce_time()
    colls = m.text("collective", "all_reduce") if "collective" in m.header else ["all_reduce"] * len(m)
    bus = [
        float(n[i] * busbw_factor(np.array([k[i]]), c)[0] / t[i] / 1e9) if c in COLLECTIVES else None
        for i, c in enumerate(colls)
    ]
    where = [f"{m.path}: k = {int(k[i])}, {int(n[i])} B" for i in range(len(m))]
    rules.line_rate(prof, [int(x) for x in k], bus, where=where, field="busbw (size x factor / time)")


def r2_cell(r2: float | None) -> str:
    """R² for the fit-quality table: 'undefined' where the points have no spread of times to explain (their R² is
    0/0, NaN), never 'nan'."""
    return f"{r2:.4f}" if r2 is not None and math.isfinite(r2) else "undefined"
