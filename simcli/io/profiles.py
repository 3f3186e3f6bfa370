"""Hardware profiles: YAML files -> validated, frozen :class:`~simcli.base.types.Profile` objects.

Search order for ``--profile NAME`` (a value that names an existing file, or
ends in ``.yaml``/``.yml``, is read as a path instead):

1. each directory in ``SIMCLI_PROFILE_PATH`` (separated by ``os.pathsep``),
2. the user's config directory (``platformdirs.user_config_dir("simcli")/profiles``;
   on Linux ``~/.config/simcli/profiles``),
3. the built-in profiles shipped inside the package (``simcli.hardware_profiles``).

Validation is strict: every error names the file, the field path and the bad
value; unknown keys are refused so that a typo such as ``bandwith`` is never
silently ignored.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import warnings
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable

from ..base.ranges import MAX_DEVICES
from ..base.types import COMPUTE_DTYPES, TUNED_LIBRARIES, Device, InputError, NcclSpec, Profile, Tier
from ..base.units import UnitError, fmt_bytes, fmt_flops, fmt_rate, fmt_time, parse
from ..comm import rccl, releases
from ..comm.ctas import MAX_CHANNELS
from ..comm.nccl import default_spec, known_gpu, tier_defaulted, tier_kind
from ..comm.specs import link_kind
from . import schema as S
from .inputs import read_text, skip_special
from .stdout import escape_controls

__all__ = [
    "DEFAULT_PROFILE",
    "load_profile",
    "resolve_profile",
    "list_profiles",
    "ProfileEntry",
    "profile_from_dict",
    "profile_to_dict",
    "read_yaml",
    "search_dirs",
    "MAX_FILE_BYTES",
]

#: the profile used when --profile is not given
DEFAULT_PROFILE = "dgx-h100"
#: YAML files larger than this are refused (a profile is a few KB)
MAX_FILE_BYTES = 1 << 20

# the allowed keys of each section, from the one schema (simcli.io.schema)
_TOP, _DEVICE, _TIER, _NCCL = (S.keys(x) for x in (S.TOP, S.DEVICE, S.TIER, S.NCCL))


# --------------------------------------------------------------------------- YAML


_DIGITS = re.compile(r"^[-+]?[0-9_,.:eE+-]+$")
#: YAML nested deeper than this is refused before it is built (a profile is 3 levels deep)
_MAX_DEPTH = 32


def _loader() -> Any:
    """The safe YAML loader, reading '5e-1' and '1e3' as numbers (YAML 1.2 does; PyYAML's 1.1 wants a dot)."""
    import yaml  # lazy

    global _LOADER
    if _LOADER is None:
        base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available: fast

        class Loader(base):  # type: ignore[misc, valid-type]  # a base picked at run time (libyaml's if built)
            pass

        Loader.add_implicit_resolver(
            "tag:yaml.org,2002:float",
            re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
            list("-+0123456789"),
        )
        _LOADER = Loader
    return _LOADER


_LOADER: Any = None


def read_yaml(path: str | Path, what: str = "file") -> Any:
    """Safely read one YAML document; aliases (the 'billion laughs' vector) and huge files are refused."""
    import yaml  # lazy

    p = Path(path)
    text = read_text(p, f"a YAML {what} (a .yaml file)", MAX_FILE_BYTES)

    loader = _loader()
    try:
        # one pass over the event stream before anything is built: aliases (*name) are refused (the "billion
        # laughs" vector), and so is a key given twice in one mapping (YAML would keep the last silently)
        stack: list[list] = []  # per open collection: [is_mapping, expecting_a_key, {key: line}]
        for event in yaml.parse(text, Loader=loader):
            line = event.start_mark.line + 1 if event.start_mark is not None else 0  # the parser marks every event
            if isinstance(event, yaml.AliasEvent):
                raise InputError(
                    f"{p}: line {line}: YAML aliases (*name) are not allowed in a {what}; write the value out"
                )
            if isinstance(event, yaml.ScalarEvent) and len(event.value) > 40 and _DIGITS.match(event.value):
                raise InputError(
                    f"{p}: line {line}: a number of {len(event.value):,} characters is beyond "
                    f"any quantity a {what} holds; write it with an exponent (1e12)"
                )
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)) and len(stack) >= _MAX_DEPTH:
                raise InputError(
                    f"{p}: line {line}: nested more than {_MAX_DEPTH} levels deep; a {what} "
                    "is a few levels of mappings and lists"
                )
            if isinstance(event, (yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                if stack and stack[-1][0]:
                    frame = stack[-1]
                    if frame[1] and isinstance(event, yaml.ScalarEvent):
                        if event.value in frame[2]:
                            raise InputError(
                                f"{p}: line {line}: key {event.value!r} is given twice in one "
                                f"mapping (first on line {frame[2][event.value]}); keep one"
                            )
                        frame[2][event.value] = line
                    frame[1] = not frame[1]
                if isinstance(event, yaml.MappingStartEvent):
                    stack.append([True, True, {}])
                elif isinstance(event, yaml.SequenceStartEvent):
                    stack.append([False, False, {}])
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                stack.pop()
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except InputError:
        raise
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InputError(f"{p}: {where}not valid YAML ({problem})") from None


# --------------------------------------------------------------------------- validation


class _V:
    """Collects the context (file and field path) for one-line error messages."""

    def __init__(self, source: str, errors: list[InputError] | None = None):
        self.source = source
        #: when a list: unknown and missing keys are recorded here and the check goes on (all errors reported)
        self.errors = errors

    def fail(self, field: str, msg: str) -> InputError:
        return InputError(f"{self.source}: {field}: {msg}")

    def mapping(self, value: Any, field: str, allowed: set[str], *, required: Iterable[str]) -> dict:
        if not isinstance(value, dict):
            raise self.fail(field or "(top level)", f"expected a mapping of keys to values, got {_show(value)}")
        for key in value:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), sorted(allowed), n=1)
                hint = f"did you mean '{close[0]}'?" if close else f"allowed keys: {', '.join(sorted(allowed))}"
                self._soft(self.fail(_join(field, str(key)), f"unknown key ({hint})"))
        for key in required:
            if key not in value or value[key] is None:
                self._soft(self.fail(_join(field, key), "required but missing"))
        return value

    def _soft(self, e: InputError) -> None:
        if self.errors is None:
            raise e
        self.errors.append(e)

    def text(self, value: Any, field: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(field, f"{_show(value)} is not a non-empty string")

        return escape_controls(value.strip())  # an escape code in a name is shown, never obeyed (issue 27)

    def quantity(self, value: Any, field: str, kind: str) -> float:
        try:
            x = parse(value, kind)
        except UnitError as e:
            raise self.fail(field, str(e)) from None
        if not x > 0:
            raise self.fail(field, f"{_show(value)} must be greater than zero")
        if kind == "bandwidth" and x < MIN_BANDWIDTH_BPS and _bare(value):  # issue 40: 'memory_bandwidth: 3.35'
            raise self.fail(
                field,
                f"{_show(value)} has no unit and reads as {x:g} B/s, slower than any link or memory; write it with "
                "its unit ('3.35 TB/s', '400 Gb/s')",
            )
        return x

    def fraction(self, value: Any, field: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            text = " (the YAML file gives it as text: write it unquoted, as 0.5)" if _numeric_text(value) else ""
            raise self.fail(field, f"{_show(value)} is not a number{text} (give a fraction such as 0.8)")
        if not 0 < value <= 1:
            raise self.fail(field, f"{_show(value)} is not in (0, 1] (give a fraction such as 0.8)")
        return float(value)

    def count(self, value: Any, field: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.fail(field, f"{_show(value)} is not a whole number of devices >= 1")
        if value > MAX_DEVICES:  # refused at load: beyond int64 arithmetic in the engine (issue 27)
            raise self.fail(field, f"{value:.4g} devices is more than simcli models (at most 2**53)")
        return value

    def value(self, f: S.Field, raw: Any, path: str) -> Any:
        """One value of a schema field, validated and in SI."""
        if f.kind == "text":
            return self.text(raw if not isinstance(raw, (int, float)) or isinstance(raw, bool) else str(raw), path)
        if f.kind == "quantity":
            return self.quantity(raw, path, f.unit or "bytes")
        if f.kind == "fraction":
            return self.fraction(raw, path)
        if f.kind == "count":
            return self.count(raw, path)
        if f.kind == "choice":
            if raw not in f.choices:
                raise self.fail(path, f.bad_choice(_show(raw)))
            return raw
        if f.kind == "bool":
            if not isinstance(raw, bool):
                raise self.fail(path, f"{_show(raw)} is not true or false")
            return raw
        raise AssertionError(f"no generic parser for {f.kind}")  # pragma: no cover

    def fields(self, d: dict, section: tuple[S.Field, ...], prefix: str, *, kinds: tuple[str, ...]) -> dict[str, Any]:
        """attribute -> value for the section's simple fields (``kinds``) that ``d`` gives."""
        return {
            f.name: self.value(f, d[f.key], _join(prefix, f.key))
            for f in section
            if f.kind in kinds and d.get(f.key) is not None
        }


_SIMPLE = ("text", "quantity", "fraction", "count", "choice", "bool")


#: a bandwidth given as a bare number below this (B/s) is a unit left out, not a link: the slowest link a profile
#: models (a 1 Gb/s Ethernet port) moves 1.25e8 B/s; ``simcli profiles validate`` refuses every bare bandwidth
MIN_BANDWIDTH_BPS = 1e6


def _bare(value: Any) -> bool:
    """A number, or a number written as text, with no unit."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    return _numeric_text(value)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _numeric_text(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


def _show(value: Any) -> str:
    s = repr(value)
    return s if len(s) <= 60 else s[:57] + "..."


class _Section:
    """Run one part of a profile's check; an error is recorded and the check goes on with the next part."""

    def __init__(self, errors: list[InputError]):
        self.errors = errors

    def __enter__(self) -> "_Section":
        return self

    def __exit__(self, kind: Any, e: Any, tb: Any) -> bool:
        if isinstance(e, InputError):
            self.errors.append(e)
            return True
        # a key the mapping check already reported as missing: nothing more to say about this part
        return isinstance(e, (KeyError, TypeError)) and bool(self.errors)


def profile_from_dict(data: Any, source: str, origin: str = "built-in") -> Profile:
    """Validate a parsed YAML document and build a :class:`Profile` (SI units inside).

    Every error is found, not only the first: each part (name, sources, device, each tier, calibration,
    library) is checked on its own. The raised InputError's message is the first error; its ``all_errors``
    lists every one, in file order (``simcli profiles validate`` prints them all).
    """
    errors: list[InputError] = []
    v = _V(source, errors)
    if data is None:
        raise InputError(f"{source}: the file is empty; a profile needs name, sources, device and network")
    top = v.mapping(data, "", _TOP, required=S.required(S.TOP))
    name = description = sources = device = calibration = None
    tiers: list[Tier] = []
    with _Section(errors):
        name = v.text(top["name"], "name")
    with _Section(errors):
        description = _profile_description(v, top)
    with _Section(errors):
        sources = _profile_sources(v, top)
    with _Section(errors):
        device = _profile_device(v, top)
    with _Section(errors):
        tiers = _profile_network(v, top, errors)
    with _Section(errors):
        calibration = top.get("calibration")
        if calibration is not None and not isinstance(calibration, dict):
            raise v.fail("calibration", f"{_show(calibration)} is not a mapping")
    if not errors:
        assert device is not None  # its section recorded no error
        with _Section(errors):
            library = (
                v.value(S.field(S.TOP, "library"), top["library"], "library")
                if top.get("library") is not None
                else _default_library(device.name, tiers)
            )
            spec = (
                _nccl_spec(v, top.get("nccl"), device.name, tiers=tiers, nccl_release=library == "nccl")
                if library in TUNED_LIBRARIES
                else None
            )
            if (
                library == "rccl" and spec is not None
            ):  # rccl hook: nccl.version names an RCCL release (simcli.comm.rccl)
                spec = _rccl_version(v, spec, top.get("nccl"))
            if library not in TUNED_LIBRARIES and top.get("nccl") is not None:
                raise v.fail(
                    "nccl", f"NCCL constants on a profile with library: {library}; remove them or set library: nccl"
                )
    if errors:
        first = InputError(str(errors[0]))
        first.all_errors = tuple(str(e) for e in errors)
        raise first
    # every section recorded no error, so each set its value
    assert name is not None and description is not None and sources is not None and device is not None
    return Profile(
        name=name,
        description=description.strip(),
        sources=sources,
        device=device,
        network=tuple(tiers),
        origin=origin,
        calibration=calibration,
        library=library,
        nccl=spec,
    )


def _profile_description(v: "_V", top: dict) -> str:
    description = top.get("description") or ""
    if not isinstance(description, str):
        raise v.fail("description", f"{_show(description)} is not a string")

    return escape_controls(description)


def _profile_sources(v: "_V", top: dict) -> tuple[str, ...]:
    sources = top["sources"]
    if isinstance(sources, str):
        sources = [sources]
    if not isinstance(sources, list) or not sources:
        raise v.fail("sources", "give a list of where each number comes from (datasheet, paper, measurement)")
    return tuple(v.text(s, f"sources[{i}]") for i, s in enumerate(sources))


def _by_dtype(
    v: "_V",
    raw: Any,
    field: str,
    *,
    what: str,
    unknown: Callable[[str], str | None],
    read: Callable[[Any, str], float],
    empty: bool = False,
) -> dict[str, float]:
    """A profile mapping of dtype to a number (``field``: device.peak_flops, device.mfu_by_dtype), each value read
    by ``read``; refused where it is no mapping (an empty one too, unless ``empty``), or where ``unknown(dtype)``
    says what is wrong with a key."""
    if not isinstance(raw, dict) or not (raw or empty):
        raise v.fail(field, f"{_show(raw)} is not a mapping of dtype to {what}")
    out = {}
    for dt, val in raw.items():
        why = unknown(dt)
        if why is not None:
            raise v.fail(f"{field}.{dt}", why)
        out[dt] = read(val, f"{field}.{dt}")
    return out


def _unknown_dtype(dt: Any) -> str | None:
    """What is wrong with a peak_flops key (None: a compute dtype), with the closest name where there is one."""
    if dt in COMPUTE_DTYPES:
        return None
    close = difflib.get_close_matches(str(dt), COMPUTE_DTYPES, n=1)
    hint = f"did you mean '{close[0]}'?" if close else f"use one of {', '.join(COMPUTE_DTYPES)}"
    return f"unknown dtype ({hint})"


def _profile_device(v: "_V", top: dict) -> Device:
    d = v.mapping(top["device"], "device", _DEVICE, required=S.required(S.DEVICE))
    peaks = _by_dtype(
        v,
        d["peak_flops"],
        "device.peak_flops",
        what="FLOP/s (for example bf16: 989 TFLOP/s)",
        unknown=_unknown_dtype,
        read=lambda val, where: v.quantity(val, where, "flops"),
    )
    mfu_by_dtype = _by_dtype(
        v,
        d.get("mfu_by_dtype") or {},
        "device.mfu_by_dtype",
        what="fraction (for example fp32: 0.57)",
        unknown=lambda dt: None if dt in peaks else f"{dt!r} has no peak_flops entry; add one or remove this",
        read=v.fraction,
        empty=True,
    )
    return Device(peak_flops=peaks, mfu_by_dtype=mfu_by_dtype, **v.fields(d, S.DEVICE, "device", kinds=_SIMPLE))


def _profile_network(v: "_V", top: dict, errors: list[InputError]) -> list[Tier]:
    net = top["network"]
    if not isinstance(net, list) or not net:
        raise v.fail("network", "give a list of tiers, innermost first (for example nvlink, then infiniband)")
    tiers: list[Tier] = []
    names: set[str] = set()
    for i, raw in enumerate(net):
        with _Section(errors):  # each tier on its own: one bad tier does not hide the next one's error
            _profile_tier(v, raw, i, n_tiers=len(net), tiers=tiers, names=names)
    return tiers


def _profile_tier(v: "_V", raw: Any, i: int, *, n_tiers: int, tiers: list[Tier], names: set[str]) -> None:
    f = f"network[{i}]"
    t = v.mapping(raw, f, _TIER, required=S.required(S.TIER))
    tname = v.text(t["name"], f"{f}.name")
    if tname in names:
        raise v.fail(f"{f}.name", f"{tname!r} names two tiers; give each tier its own name")
    names.add(tname)
    last = i == n_tiers - 1
    size = t.get("size")
    if size is None:
        if not last:
            raise v.fail(
                f"{f}.size", "required on every tier but the last (devices in one domain, for example 8 for one node)"
            )
    else:
        size = v.count(size, f"{f}.size")
        if tiers and (size <= tiers[-1].inner_size or size % tiers[-1].inner_size):
            raise v.fail(
                f"{f}.size",
                f"{size} must be a multiple of, and larger than, the size of the tier inside it ({tiers[-1].size})",
            )
    simple = v.fields(t, S.TIER, f, kinds=("quantity", "fraction", "choice"))
    if simple.get("collnet") == "none":
        del simple["collnet"]
    defaulted = []
    if "kind" in simple:
        # a datasheet profile: the link kind it names supplies what the tier leaves out (simcli.comm.specs)

        lk = link_kind(simple["kind"])
        for key, attr, value in (("latency", "latency_s", lk.latency_us * 1e-6), ("efficiency", "efficiency", None)):
            if attr not in simple:
                simple[attr] = lk.efficiency if value is None else value
                defaulted.append(key)
    elif "latency_s" not in simple:
        raise v.fail(f"{f}.latency", "required unless the tier names its kind (whose default it then takes)")
    tiers.append(Tier(name=tname, size=size, defaulted=tuple(defaulted), **simple))


def _rccl_version(v: "_V", spec: NcclSpec, raw: Any) -> NcclSpec:
    """An RCCL profile's release: the one ``nccl.version`` names (checked against simcli.comm.rccl's rows), else
    the newest numbered release simcli carries (rccl hook, issue 37)."""

    given = isinstance(raw, dict) and raw.get("version") is not None
    if not given:
        return dataclasses.replace(spec, version=rccl.DEFAULT_RCCL.version)
    try:
        rccl.select(spec.version)
    except InputError as e:
        raise v.fail("nccl.version", str(e).split(": ", 1)[1]) from None
    return spec


def _default_library(device_name: str, tiers: list[Tier]) -> str:
    """A profile that does not say: NCCL for a GPU (known by its name or its links), else the textbook formulas."""

    names = " ".join(t.name.lower() for t in tiers)
    gpu_links = any(w in names for w in ("nvlink", "nvswitch", "nvl", "infiniband", "roce", "xgmi", "pcie"))
    return "nccl" if known_gpu(device_name) or gpu_links else "textbook"


def _nccl_spec(v: "_V", raw: Any, device_name: str, *, tiers: list[Tier], nccl_release: bool = True) -> NcclSpec:
    """The profile's ``nccl:`` block over the defaults for its GPU generation (simcli.comm.nccl.default_spec);
    ``nccl_release``: its version names an NCCL release (an RCCL profile's names RCCL's: :func:`_rccl_version`)."""

    base = default_spec(device_name, tiers)
    if raw is None:
        return base
    d = v.mapping(raw, "nccl", _NCCL, required=[])
    if isinstance(d.get("version"), (int, float)) and not isinstance(d.get("version"), bool):
        raise v.fail(
            "nccl.version", f'{d["version"]!r} was read as a number (2.20 reads as 2.2); quote it: version: "2.20.3"'
        )
    given = v.fields(d, S.NCCL, "nccl", kinds=_SIMPLE)
    if "version" in given and not re.fullmatch(r"\d+\.\d+(\.\d+)*", given["version"]):
        raise v.fail("nccl.version", f"{_show(given['version'])} is not an NCCL release (give one such as 2.20.3)")
    if "version" in given and nccl_release:
        why = releases.problem(given["version"])
        if why:
            raise v.fail("nccl.version", why)
        said = releases.note(given["version"])
        if said:
            warnings.warn(ReleaseNote(f"{v.source}: nccl.version: {said}"), stacklevel=2)
    for key in ("min_ctas", "max_ctas"):
        if key in given and given[key] > 32:  # NCCL's MAXCHANNELS (src/include/device.h); init.cc caps it
            raise v.fail(f"nccl.{key}", f"{given[key]} is more channels than NCCL has (at most 32, MAXCHANNELS)")
    defaulted = tuple(f for f in base.defaulted if f not in given and f != "version")
    return dataclasses.replace(base, defaulted=defaulted, **given)


def _dump(f: S.Field, x: Any) -> Any:
    """A value in the units a person writes (the inverse of :meth:`_V.value`)."""
    if f.kind == "quantity":
        return {
            "bytes": f"{x / 1e9:.6g} GB",
            "bandwidth": f"{x / 1e9:.6g} GB/s",
            "time": f"{x * 1e6:.6g} us",
            "flops": _flops_str(x),
        }[f.unit or "bytes"]
    if f.kind == "fraction":
        return float(f"{x:.6g}")
    if f.kind == "dtype_map":
        return {k: (_flops_str(v) if f.unit == "flops" else float(f"{v:.6g}")) for k, v in x.items()}
    return x


def _dump_section(obj: Any, section: tuple[S.Field, ...], skip: tuple[str, ...] = ()) -> dict[str, Any]:
    out = {}
    for f in section:
        x = getattr(obj, f.name, None)
        if f.key in skip or x is None or (f.kind == "dtype_map" and not x):
            continue
        out[f.key] = _dump(f, x)
    return out


def profile_to_dict(p: Profile) -> dict[str, Any]:
    """The inverse of :func:`profile_from_dict`: a YAML-ready mapping with human units (from the schema)."""
    out: dict[str, Any] = {
        "name": p.name,
        "description": p.description,
        "sources": list(p.sources),
        "library": p.library,
        "device": _dump_section(p.device, S.DEVICE),
        "network": [_dump_section(t, S.TIER, _defaulted(t)) for t in p.network],
    }
    if p.nccl is not None:
        out["nccl"] = {
            f.key: getattr(p.nccl, f.name)
            for f in S.NCCL
            if f.name not in p.nccl.defaulted and getattr(p.nccl, f.name) is not None
        }
    if p.calibration is not None:
        out["calibration"] = p.calibration
    return out


def _flops_str(x: float) -> str:
    return f"{x / 1e12:.6g} TFLOP/s"


def load_profile(path: str | os.PathLike[str], origin: str | None = None) -> Profile:
    """Read and validate one profile file."""
    p = Path(path)
    data = read_yaml(p, "profile")
    return profile_from_dict(data, str(p), origin or str(p))


# --------------------------------------------------------------------------- search path


@dataclass(frozen=True)
class ProfileEntry:
    name: str
    path: str
    origin: str  #: "built-in" or "user"


def search_dirs() -> list[Path]:
    """User directories searched before the built-ins, in order."""
    dirs = [Path(d) for d in os.environ.get("SIMCLI_PROFILE_PATH", "").split(os.pathsep) if d.strip()]
    try:
        from platformdirs import user_config_dir  # compat

        dirs.append(Path(user_config_dir("simcli")) / "profiles")
    except ImportError:  # pragma: no cover - platformdirs is a dependency
        dirs.append(Path.home() / ".config" / "simcli" / "profiles")
    return dirs


def _builtin_dir() -> Path:
    return Path(str(resources.files("simcli.hardware_profiles")))


def list_profiles() -> list[ProfileEntry]:
    """Every profile name that --profile can find; a user profile hides a built-in of the same name."""
    seen: dict[str, ProfileEntry] = {}
    for d in search_dirs():
        if d.is_dir():
            for f in sorted(d.glob("*.y*ml")):
                if skip_special(f, "a profile on the search path"):
                    continue
                seen.setdefault(f.stem, ProfileEntry(f.stem, str(f), "user"))
    for f in sorted(_builtin_dir().glob("*.yaml")):
        seen.setdefault(f.stem, ProfileEntry(f.stem, str(f), "built-in"))
    return sorted(seen.values(), key=lambda e: (e.origin != "built-in", e.name))


def _by_yaml_name(ref: str, entries: list[ProfileEntry]) -> ProfileEntry | None:
    """The user profile whose YAML ``name`` is ``ref`` (its file may be called otherwise); two are refused."""
    found = []
    for e in entries:
        try:
            if load_profile(e.path, origin=e.path).name == ref:
                found.append(e)
        except InputError:
            continue
    if len(found) > 1:
        raise InputError(
            f"--profile: {ref!r} is the name of {len(found)} profiles on the search path "
            f"({', '.join(x.path for x in found)}); give the file's path or rename one"
        )
    return found[0] if found else None


class ReleaseNote(UserWarning):
    """A profile's or --nccl-version's NCCL release that simcli prices as another (the CLI prints it as one line)."""


def nccl_version_note(version: str) -> str:
    """Which carried release prices ``version`` and what it is (``simcli profiles show``'s nccl.version row)."""

    said = releases.note(version)
    if said:
        return said
    default = ", the default" if version.strip() == releases.DEFAULT_RELEASE.version else ""
    return f"carried{default}: its tuner prices choices and costs"


def with_nccl_version(p: Profile, version: str | None, where: str = "--nccl-version") -> Profile:
    """``p`` priced as NCCL ``version`` (``--nccl-version``; None: as its own ``nccl.version``). InputError for a
    release simcli cannot price; a :class:`ReleaseNote` warning where a carried release before it prices it.
    A profile that does not model NCCL is returned as it is."""
    if version is None or p.nccl is None:
        return p

    releases.select(version, where)  # refuses what cannot be priced
    said = releases.note(version)
    if said:
        warnings.warn(ReleaseNote(f"{where}: {said}"), stacklevel=2)
    defaulted = tuple(f for f in p.nccl.defaulted if f != "version")
    return dataclasses.replace(p, nccl=dataclasses.replace(p.nccl, version=version.strip(), defaulted=defaulted))


def with_nccl_min_ctas(p: Profile, min_ctas: int | None, where: str = "--nccl-min-ctas") -> Profile:
    """``p`` with NCCL_MIN_CTAS = ``min_ctas`` (None: as the profile says). InputError for a value outside 1..32
    (NCCL's MAXCHANNELS); a profile that does not model NCCL is returned as it is."""
    if min_ctas is None or p.nccl is None:
        return p

    if isinstance(min_ctas, bool) or not isinstance(min_ctas, int) or not 1 <= min_ctas <= MAX_CHANNELS:
        raise InputError(f"{where}: {min_ctas!r} is not a channel count from 1 to {MAX_CHANNELS} (NCCL's MAXCHANNELS)")
    return dataclasses.replace(p, nccl=dataclasses.replace(p.nccl, min_ctas=min_ctas))


def resolve_profile(name_or_path: str | None) -> Profile:
    """Load ``--profile``: a path to a YAML file, or a name on the search path."""
    ref = name_or_path or DEFAULT_PROFILE
    p = Path(ref)
    if p.suffix in (".yaml", ".yml") or os.sep in ref or p.exists():
        return load_profile(p)
    entries = {e.name: e for e in list_profiles()}
    e = entries.get(ref)
    if e is None:  # a profile on the search path is found by its file name or by the name its YAML gives
        e = _by_yaml_name(ref, [x for x in entries.values() if x.origin != "built-in"])
    if e is None:
        close = difflib.get_close_matches(ref, list(entries), n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else "see 'simcli profiles list'"
        raise InputError(f"--profile: unknown profile {ref!r} ({hint})")
    return load_profile(e.path, origin=e.origin if e.origin == "built-in" else e.path)


def _human(f: S.Field, x: Any) -> str:
    """A value with units for `simcli profiles show`."""
    if f.kind == "quantity":
        if f.unit == "bytes":
            return f"{fmt_bytes(x, binary=False)} ({fmt_bytes(x)})"
        return {"bandwidth": fmt_rate, "time": fmt_time, "flops": fmt_flops}[f.unit or "bandwidth"](x)
    if f.kind == "fraction":
        return f"{x:g}"
    return str(x)


def _defaulted(t: Tier) -> tuple[str, ...]:
    return tier_defaulted(t)


def kind_text(t: Tier, index: int) -> str:
    """A tier's link kind as the tables say it: the name, how it was known, NCCL's class, what it changes."""

    kd = tier_kind(t, index)
    lk = link_kind(kd)
    note = lk.tuner_note()
    return kd + ("" if t.kind else " (guessed from the name)") + f"; NCCL class {lk.hw}" + (f", {note}" if note else "")


def _describe_tier(p: Profile, t: Any, i: int) -> list[tuple[str, str]]:
    """``describe``'s rows of one network tier, in the schema's order."""
    pre, rows = f"network[{i}]", []
    for f in S.TIER:
        x = getattr(t, f.name)
        dflt = " (default of its kind)" if f.key in _defaulted(t) else ""
        if f.key == "size":
            rows.append((f"{pre}.size", "unbounded" if x is None else f"{x} devices"))
        elif f.key == "bandwidth":
            rows.append((f"{pre}.bandwidth", f"{fmt_rate(x)} ({x * 8 / 1e9:.4g} Gb/s) per {t.per}, one direction"))
        elif f.key == "per":
            continue  # said with the bandwidth
        elif f.key == "efficiency":
            rows.append((f"{pre}.efficiency", f"{x:g} (effective {fmt_rate(t.effective_Bps)})" + dflt))
        elif f.key == "kind":
            if p.library == "nccl" or t.kind:
                rows.append((f"{pre}.kind", kind_text(t, i)))
        elif x is not None:
            rows.append((f"{pre}.{f.key}", _human(f, x) + dflt))
    return rows


def describe(p: Profile) -> list[tuple[str, str]]:
    """(field, value with units) rows for `simcli profiles show`, in the schema's order."""
    rows = [("name", p.name), ("description", p.description), ("origin", p.origin), ("library", p.library)]
    for f in S.DEVICE:
        x = getattr(p.device, f.name)
        if x is None:
            continue
        if f.kind == "dtype_map":
            rows += [(f"device.{f.key}.{dt}", fmt_flops(v) if f.unit == "flops" else f"{v:g}") for dt, v in x.items()]
        else:
            rows.append((f"device.{f.key}", _human(f, x)))
    for i, t in enumerate(p.network):
        rows += _describe_tier(p, t, i)
    if p.nccl is not None:
        for f in S.NCCL:
            note = " (default)" if f.name in p.nccl.defaulted else ""
            if f.name == "version":
                note = f" ({nccl_version_note(p.nccl.version)})"
            if getattr(p.nccl, f.name) is None:
                continue  # not set: NCCL's own (min_ctas, max_ctas)
            rows.append((f"nccl.{f.key}", f"{getattr(p.nccl, f.name)}{note}"))
    for i, src in enumerate(p.sources):
        rows.append((f"sources[{i}]", src))
    if p.calibration:
        rows.append(
            ("calibration", ", ".join(f"{k}={v}" for k, v in p.calibration.items() if not isinstance(v, (dict, list))))
        )
    return rows
