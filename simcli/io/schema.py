"""The hardware profile's schema, written once: every YAML field, its type, unit, attribute and help.

:mod:`simcli.io.profiles` validates (``profile_from_dict``), serialises (``profile_to_dict``) and describes
(``describe``) profiles from these tables, ``simcli profiles schema`` prints them as a JSON Schema (draft
2020-12) that editors with a YAML language server use to complete and check a profile as it is typed, and
``simcli plan solve FIELD`` finds the solvable fields here. Adding a hardware field is one row.

Kinds: ``text``; ``quantity`` (a number with a unit, parsed by :func:`simcli.base.units.parse` with ``unit`` as
its kind and stored in SI); ``fraction`` (0 < x <= 1); ``count`` (a whole number >= 1); ``choice`` (one of
``choices``); ``bool``; ``dtype_map`` (compute dtype -> a quantity or a fraction); ``list`` (of text);
``mapping`` (free-form).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..base.types import COMPUTE_DTYPES, LIBRARIES, NCCL_TABLES_VERSION
from ..base.units import UNITS
from ..comm.specs import GENERATIONS, KIND_ALIASES, LINK_KINDS

__all__ = ["Field", "TOP", "DEVICE", "TIER", "NCCL", "SECTIONS", "keys", "required", "json_schema", "solvable"]

#: the link kinds (simcli.comm.specs.LINK_KIND_SPECS), then the old names still read
KINDS = (*LINK_KINDS, *KIND_ALIASES)
CPUS = ("intel", "amd", "arm")
#: whose choice of NCCL's (algorithm, protocol) runs (simcli.base.types.NcclSpec.tuner)
TUNERS = ("nccl", "fastest")


@dataclass(frozen=True)
class Field:
    """One YAML key of a profile section."""

    key: str
    kind: str
    help: str
    attr: str | None = None  #: the attribute of the model object (None: the same as ``key``)
    unit: str | None = None  #: units.parse kind of a quantity (or of a dtype_map's values)
    required: bool = False
    choices: tuple[Any, ...] = ()
    example: Any = None
    #: may ``simcli plan solve`` find the value of this field that reaches a goal?
    solvable: bool = False
    #: the message after the value when a ``choice`` is not one of ``choices`` (None: a generic one)
    invalid: str | None = None

    def bad_choice(self, shown: str) -> str:
        if self.invalid:
            return f"{shown} {self.invalid}"
        return f"{shown} is not one of {', '.join(map(str, self.choices))} ({self.help})"

    @property
    def name(self) -> str:
        return self.attr or self.key


TOP: tuple[Field, ...] = (
    Field("name", "text", "profile name (what --profile finds)", required=True, example="my-cluster"),
    Field("description", "text", "one line: what the system is"),
    Field("sources", "list", "where every number comes from (datasheet, paper, measurement)", required=True),
    Field(
        "library",
        "choice",
        "collective library whose costs to model: nccl (NCCL's algorithms, protocols and "
        "choice), rccl (AMD's RCCL: its tuner, protocols and MSCCL kernels), textbook or gloo (the alpha-beta "
        "formulas) [default: nccl for a GPU, else textbook]",
        choices=LIBRARIES,
        invalid="is not a collective library simcli models; use one of " + ", ".join(LIBRARIES),
    ),
    Field("nccl", "section", "NCCL's constants beyond the tiers (each optional; defaults by GPU generation)"),
    Field("device", "section", "one device (GPU) of the system", required=True),
    Field(
        "network", "tiers", "the network's tiers, innermost first (for example nvlink, then infiniband)", required=True
    ),
    Field("calibration", "mapping", "written by simcli calibrate: what was fitted, from what, when"),
)

DEVICE: tuple[Field, ...] = (
    Field("name", "text", "device name (the GPU generation is read from it)", required=True, example="H100 SXM5"),
    Field(
        "peak_flops",
        "dtype_map",
        "dense peak per compute dtype",
        unit="flops",
        required=True,
        example={"bf16": "989 TFLOP/s"},
    ),
    Field("memory", "quantity", "device memory", attr="memory_bytes", unit="bytes", example="80 GB", solvable=True),
    Field(
        "memory_bandwidth",
        "quantity",
        "device memory bandwidth",
        attr="memory_bandwidth_Bps",
        unit="bandwidth",
        example="3.35 TB/s",
        solvable=True,
    ),
    Field(
        "mfu",
        "fraction",
        "achieved fraction of peak (model FLOPs utilisation)",
        required=True,
        example=0.4,
        solvable=True,
    ),
    Field(
        "mfu_by_dtype",
        "dtype_map",
        "achieved fraction of peak per compute dtype, where it differs from mfu",
        example={"fp32": 0.57},
    ),
    Field(
        "spread",
        "fraction",
        "spread of the devices' speed, a fraction of the step: each synchronised step waits for the slowest of "
        "k (T_compute x (1 + spread x E[max of k standard normals])) [default: the default of the device's "
        "kind, the same for a built-in and a user-written GPU profile (0.0148, the same-SKU GPU spread Sinha et al. "
        "measured, SC22); none for a device that is not a GPU]",
        example=0.03,
    ),
    Field(
        "mfu_at_k",
        "count",
        "the device count of the run the mfu was measured in: its wait for the slowest of that many devices is in "
        "the mfu, so only the excess slowest-of-k factor is applied [default: 1]",
        example=16384,
    ),
    Field(
        "mfu_family",
        "choice",
        "the workload family the mfu was measured on; a workload of another family takes its family's MFU on "
        "this device kind where simcli/io/data/families.yaml has one [default: transformer]",
        choices=("transformer", "cnn"),
        invalid="is not a workload family; use transformer or cnn",
    ),
    Field(
        "update_bandwidth",
        "quantity",
        "the memory bandwidth an optimizer step achieves (simcli calibrate fits it from a bench step file's "
        "optimizer step or a scaling table's per-update time) [default: memory_bandwidth]",
        attr="update_Bps",
        unit="bandwidth",
        example="2.9 TB/s",
    ),
    Field(
        "reduce_bandwidth",
        "quantity",
        "rate at which a device reduces (adds) gradient bytes (gamma)",
        attr="reduce_Bps",
        unit="bandwidth",
        solvable=True,
    ),
)

TIER: tuple[Field, ...] = (
    Field("name", "text", "tier name (for example nvlink, infiniband)", required=True),
    Field("size", "count", "devices in one domain of this tier (a node for the first); every tier but the last"),
    Field(
        "bandwidth",
        "quantity",
        "link bandwidth, one direction (Gb/s is bits: 400 Gb/s = 50 GB/s)",
        attr="bandwidth_Bps",
        unit="bandwidth",
        required=True,
        example="400 Gb/s",
        solvable=True,
    ),
    Field(
        "per",
        "choice",
        "device: a link per device; node: one link shared by the domain below [default: device]",
        choices=("device", "node"),
        invalid="is neither 'device' (one link per device) nor 'node' (one link shared by the domain)",
    ),
    Field(
        "latency",
        "quantity",
        "per-hop latency (NCCL: the Ring/Simple hop latency of this link kind) [default: the kind's, when the "
        "tier names its kind]",
        attr="latency_s",
        unit="time",
        example="14 us",
        solvable=True,
    ),
    Field(
        "efficiency",
        "fraction",
        "achieved fraction of the link bandwidth [default: the kind's when the tier names its kind, else 1]",
        example=0.92,
        solvable=True,
    ),
    Field(
        "kind",
        "choice",
        "link kind: NCCL's hardware class, the transport's constants and the defaults for latency and efficiency "
        "(simcli.comm.specs.LINK_KINDS; docs/profiles.md) [default: guessed from the name]",
        choices=KINDS,
        invalid="is not a link kind; use one of "
        + ", ".join(LINK_KINDS)
        + " (mnnvl: a multi-node NVLink domain such as a GB200 NVL72 rack)",
    ),
    Field(
        "collnet",
        "choice",
        "in-network reduction NCCL's CollNet algorithms use across this tier: sharp (the switches reduce, NCCL's "
        "SHARP plugin is loaded and NCCL_COLLNET_ENABLE=1; simcli.comm.collnet) or none [default: none]",
        choices=("sharp", "none"),
        invalid="is neither 'sharp' (the switches reduce: NCCL's CollNet runs) nor 'none'",
    ),
)

NCCL: tuple[Field, ...] = (
    Field(
        "version",
        "text",
        "the NCCL release whose tuner prices choices and costs (quote a two-part one: '2.27'): a carried release "
        "(simcli.comm.releases) as itself, one between two carried as the earlier (said on stderr), one before "
        f"the oldest is refused; default {NCCL_TABLES_VERSION}",
        example="2.20.3",
    ),
    Field(
        "generation",
        "choice",
        "GPU generation: picks NCCL's per-generation caps",
        choices=GENERATIONS,
        invalid="is not a GPU generation; use one of " + ", ".join(GENERATIONS),
    ),
    Field(
        "cpu",
        "choice",
        "host CPU vendor (NCCL's network overhead and multi-node LL cap)",
        choices=CPUS,
        invalid="is not a host CPU vendor; use one of " + ", ".join(CPUS),
    ),
    Field("channels", "count", "ring/tree channels (comm->nChannels)", example=24),
    Field("nvls", "bool", "NVLink SHARP available (NVSwitch, Hopper or later)"),
    Field("nvls_channels", "count", "NVLS channels (16 on SM90)", example=16),
    Field("ll128", "bool", "the LL128 protocol runs (NVLink on Volta/Ampere/Hopper)"),
    Field(
        "ll128_net",
        "bool",
        "LL128 also runs across the network (NCCL: only while the GPU-NIC path is at most PXB, PXN on Hopper+) "
        "[default: true]",
    ),
    Field(
        "min_ctas",
        "count",
        "NCCL_MIN_CTAS: the least channels (CTAs) NCCL's kernels run on, at most 32 (simcli.comm.ctas) "
        "[default: NCCL's own]",
        example=24,
    ),
    Field(
        "max_ctas",
        "count",
        "NCCL_MAX_CTAS: the most channels (CTAs) NCCL's kernels run on, at most 32 [default: NCCL's own]",
        example=32,
    ),
    Field(
        "tuner",
        "choice",
        "whose choice of algorithm and protocol runs: nccl (NCCL's own tuner) or fastest (a tuner plugin the "
        "platform tuned by measurement replaces it, e.g. GCP's beside TCPXO; simcli takes the pair its cost prices "
        "fastest) [default: nccl]",
        choices=TUNERS,
        invalid="is not a tuner simcli models; use one of " + ", ".join(TUNERS),
    ),
)

SECTIONS: Mapping[str, tuple[Field, ...]] = {"": TOP, "device": DEVICE, "network[]": TIER, "nccl": NCCL}


def keys(section: tuple[Field, ...]) -> set[str]:
    """The YAML keys a section allows."""
    return {f.key for f in section}


def required(section: tuple[Field, ...]) -> list[str]:
    return [f.key for f in section if f.required]


def field(section: tuple[Field, ...], key: str) -> Field:
    return next(f for f in section if f.key == key)


def solvable(section: tuple[Field, ...]) -> dict[str, tuple[str, str]]:
    """``plan solve`` fields of a section: YAML key -> (attribute, unit kind or "fraction")."""
    return {f.key: (f.name, f.unit if f.kind == "quantity" and f.unit else "fraction") for f in section if f.solvable}


def _pattern(unit: str) -> str:
    """The strings units.parse accepts for a quantity kind, as a regular expression (from its unit table)."""

    alts = "|".join(re.escape(u) for u in sorted(UNITS[unit], key=len, reverse=True))
    return rf"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*({alts})?\s*$"


def _json(f: Field, sections: Mapping[str, Any]) -> dict[str, Any]:
    d: dict[str, Any] = {"description": f.help}
    if f.kind == "text":
        d.update(type="string", minLength=1)
    elif f.kind == "list":
        d.update(anyOf=[{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}])
    elif f.kind == "quantity":
        d.update(
            anyOf=[
                {"type": "string", "pattern": _pattern(f.unit or "bytes")},
                {"type": "number", "exclusiveMinimum": 0},
            ]
        )
    elif f.kind == "fraction":
        d.update(type="number", exclusiveMinimum=0, maximum=1)
    elif f.kind == "count":
        d.update(type="integer", minimum=1)
    elif f.kind == "choice":
        d.update(enum=list(f.choices))
    elif f.kind == "bool":
        d.update(type="boolean")
    elif f.kind == "dtype_map":
        value = (
            _json(Field("v", "quantity", f.help, unit=f.unit), {})
            if f.unit
            else {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
        )
        value.pop("description", None)
        d.update(
            type="object", propertyNames={"enum": list(COMPUTE_DTYPES)}, additionalProperties=value, minProperties=1
        )
    elif f.kind == "mapping":
        d.update(type="object")
    elif f.kind == "section":
        d.update(sections[f.key])
    elif f.kind == "tiers":
        d.update(type="array", minItems=1, items=sections["network[]"])
    if f.example is not None:
        d["examples"] = [f.example]
    return d


def _object(fields: tuple[Field, ...], sections: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {f.key: _json(f, sections) for f in fields},
        "required": required(fields),
    }


def json_schema() -> dict[str, Any]:
    """The profile format as a JSON Schema (draft 2020-12), from the tables above."""
    subs = {"device": _object(DEVICE, {}), "nccl": _object(NCCL, {}), "network[]": _object(TIER, {})}
    out = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "simcli hardware profile",
        "description": "A simcli hardware profile (YAML). Units: bandwidths in B/s or b/s (GB/s = 1e9 B/s, "
        "Gb/s is bits), times in s/ms/us/ns, sizes in B/kB/GB/GiB, FLOP/s with SI prefixes.",
    }
    out.update(_object(TOP, subs))
    return out
