"""Frozen, validated data that the engine works on: hardware and workloads.

Everything here is in SI base units (bytes, seconds, bytes/s, FLOP/s). Objects
are built by :mod:`simcli.io.profiles` (from YAML) and :mod:`simcli.io.workloads`
(from presets or options); the engine never reads files.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = [
    "Tier",
    "Device",
    "Profile",
    "NcclSpec",
    "LIBRARIES",
    "TUNED_LIBRARIES",
    "Workload",
    "DTYPE_BYTES",
    "COMPUTE_DTYPES",
    "SimcliError",
    "InputError",
    "EnvironmentFailure",
]


class SimcliError(Exception):
    """Base of every error simcli reports to a user (exit code 1 unless a subclass says otherwise)."""

    exit_code = 1


class InputError(SimcliError):
    """Bad input (a file, a field, an option value): exit code 2, one line naming what and how to fix it."""

    exit_code = 2
    #: every error of an input checked as a whole (a profile file), where the message names the first
    all_errors: tuple[str, ...] = ()


class NonFiniteResult(InputError):
    """A result that is not a finite (or not a positive) number: the inputs were each valid, their result is not
    (exit 2). The engine raises it where a step is computed (:func:`simcli.step.engine.simulate`) and the writers
    where a record is rendered (:func:`simcli.io.formats.finite_gate`); the CLI adds the inputs the command was given
    to the line (:func:`simcli.cli.common.handle_errors`)."""


class EnvironmentFailure(SimcliError):
    """The environment failed, not the input (a full disk, a read-only file system, a closed stdout): exit 1.

    Named so as not to shadow Python's builtin ``EnvironmentError`` (an alias of OSError).
    """

    exit_code = 1


#: bytes per element of a gradient or tensor dtype
DTYPE_BYTES: Mapping[str, int] = {"fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
#: dtypes a device may list under peak_flops, in the order simcli prefers them by default
COMPUTE_DTYPES = ("bf16", "fp16", "tf32", "fp32", "fp8", "fp64")


@dataclass(frozen=True)
class Tier:
    """One level of the network, innermost first.

    ``size`` is the number of devices in one domain of this tier (a node for
    the innermost tier); ``None`` on the outermost tier (unbounded).
    ``per == "device"``: every device has its own link of ``bandwidth_Bps``
    into this tier; ``per == "node"``: one link is shared by all devices of
    the domain below it (see :func:`simcli.comm.topology.tier_bandwidth`).
    """

    name: str
    bandwidth_Bps: float
    latency_s: float
    size: int | None = None
    per: str = "device"
    efficiency: float = 1.0
    #: link kind (simcli.comm.specs.LINK_KINDS: nvlink, nvswitch, mnnvl, pcie, infiniband, roce, efa, ethernet; the
    #: old "net" reads as infiniband); None: guessed from the name and place
    kind: str | None = None
    #: in-network reduction NCCL's CollNet algorithms use across this tier: "sharp" (the switches reduce, NCCL's
    #: SHARP plugin is loaded and NCCL_COLLNET_ENABLE=1), None or "none": not there (simcli.comm.collnet)
    collnet: str | None = None
    #: the fields the profile left to the kind's defaults (latency, efficiency)
    defaulted: tuple[str, ...] = field(default=(), compare=False)

    @property
    def effective_Bps(self) -> float:
        return self.bandwidth_Bps * self.efficiency

    @property
    def inner_size(self) -> int:
        """``size`` of a tier inside another: a profile gives it on every tier but the outermost."""
        if self.size is None:
            raise ValueError(f"tier {self.name} has no size; only the outermost tier may leave it out")
        return self.size


@dataclass(frozen=True)
class Device:
    name: str
    peak_flops: Mapping[str, float]
    mfu: float
    memory_bytes: float | None = None
    memory_bandwidth_Bps: float | None = None
    #: optional reduction rate gamma (bytes reduced per second); None = free
    reduce_Bps: float | None = None
    #: optional achieved fraction of peak per compute dtype, where it differs from ``mfu``
    mfu_by_dtype: Mapping[str, float] = field(default_factory=dict)
    #: spread of the devices' speed (a fraction of the step): every synchronised step waits for the slowest of k
    #: (simcli.step.straggler); None = the default of the device's kind (simcli.step.straggler.default_spread)
    spread: float | None = None
    #: the device count of the run the mfu was measured in (its slowest-of-k wait is in it); None: 1
    mfu_at_k: int | None = None
    #: the workload family the mfu was measured on (cnn or transformer); None: transformer
    mfu_family: str | None = None
    #: the memory bandwidth an optimizer step achieves (calibrated, bytes/s); None: memory_bandwidth_Bps
    update_Bps: float | None = None

    def mfu_for(self, dtype: str) -> float:
        return self.mfu_by_dtype.get(dtype, self.mfu)

    def peak(self, dtype: str) -> float:
        return self.peak_flops[dtype]

    def default_dtype(self) -> str:
        for d in COMPUTE_DTYPES:
            if d in self.peak_flops:
                return d
        return next(iter(self.peak_flops))


#: the collective libraries a profile can model: NCCL's cost model, or the textbook alpha-beta formulas (gloo
#: runs the textbook ring)
LIBRARIES = ("nccl", "textbook", "gloo", "rccl")
#: the libraries priced by a tuner model of (algorithm, protocol) pairs: NCCL (simcli.comm.nccl) and AMD's RCCL
#: (simcli.comm.rccl; issue 37) -- rccl hook
TUNED_LIBRARIES = ("nccl", "rccl")


#: the default NCCL release: the one a profile that names none (and no --nccl-version) is priced as, and every
#: built-in NCCL profile names. Every carried release is a row of simcli.comm.releases. It is what current PyTorch
#: CUDA wheels install: torch 2.13.0's wheel on PyPI (torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl, read with
#: ``pip install --dry-run --report``, 2026-12-06) declares ``Requires-Dist: nvidia-nccl-cu13==2.29.7;
#: platform_system == "Linux"`` (docs/nccl.md, "Carried releases")
NCCL_TABLES_VERSION = "2.29.7"
#: why it is the default, as the headers of ``simcli comm``, ``speedup`` and ``explain`` say it
NCCL_DEFAULT_WHY = "what torch 2.13's CUDA wheels install"
#: the same, where a header has one line's room left (``speedup``)
NCCL_DEFAULT_SHORT = "torch 2.13's"


@dataclass(frozen=True)
class NcclSpec:
    """What NCCL's cost model needs beyond the tiers (see :mod:`simcli.comm.nccl`; the tables are ``version``'s,
    simcli.comm.releases).

    ``generation`` picks NCCL's per-generation caps; ``channels`` is the ring/tree channel count
    (``comm->nChannels``), ``nvls_channels`` NVLS's; ``cpu`` the host CPU vendor (NCCL's network overhead and
    multi-node LL cap depend on it). ``defaulted`` names the fields the profile did not give.
    """

    generation: str = "hopper"
    channels: int = 16
    nvls: bool = False
    nvls_channels: int = 16
    ll128: bool = True
    cpu: str = "intel"
    version: str = NCCL_TABLES_VERSION
    defaulted: tuple[str, ...] = ()
    #: the protocols NCCL may run (a network plugin can restrict them process-wide, e.g. EFA without 128-byte
    #: in-order delivery: aws-ofi-nccl sets NCCL_PROTO=simple); from the tiers' link kinds
    protocols: tuple[str, ...] = ("ll", "ll128", "simple")
    #: LL128 also runs on graphs that cross the network (tuning.cc: only while the GPU-NIC path is at most PXB,
    #: or PXN on Hopper and later with NCCL_LL128_C2C); False where the NIC sits beyond that (PHB, SYS)
    ll128_net: bool = True
    #: NCCL_MIN_CTAS / NCCL_MAX_CTAS (the communicator's config.minCTAs/maxCTAs): the least and most channels
    #: (CTAs) each collective's kernel may run on; None: NCCL's default (simcli.comm.ctas)
    min_ctas: int | None = None
    max_ctas: int | None = None
    #: whose choice of (algorithm, protocol) runs: "nccl", NCCL's own tuner; "fastest", a tuner plugin that the
    #: platform tuned by measurement replaces it (NCCL_TUNER_PLUGIN; e.g. GCP's libnccl-tuner.so beside TCPXO), and
    #: simcli takes the pair its own cost prices fastest (docs/nccl.md, "Tuner plugins")
    tuner: str = "nccl"


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    sources: tuple[str, ...]
    device: Device
    network: tuple[Tier, ...]
    #: where the profile came from: "built-in", or the path of the file
    origin: str = "built-in"
    #: optional calibration record (free-form mapping, written by `simcli calibrate`)
    calibration: Mapping[str, Any] | None = None
    #: which collective library's costs to model: "nccl" (NCCL's algorithms, protocols and choice) or
    #: "textbook"/"gloo" (the alpha-beta formulas); see simcli.comm.collectives
    library: str = "textbook"
    #: NCCL's constants (None: defaults by GPU generation and link kind, see simcli.comm.nccl.default_spec)
    nccl: NcclSpec | None = None

    @property
    def node_size(self) -> int | None:
        """Devices in one domain of the innermost tier (one node), or None for a single tier."""
        return self.network[0].size

    @property
    def max_devices(self) -> int | None:
        """The most devices the profile describes (the outermost tier's size), or None if unbounded."""
        return self.network[-1].size

    def replace(self, **changes: Any) -> "Profile":
        return dataclasses.replace(self, **changes)


#: activation figures by the size of the compute dtype: tf32 keeps fp32 tensors, fp16 what bf16 keeps
_ACT_DTYPE = {"fp32": "fp32", "tf32": "fp32", "bf16": "bf16", "fp16": "bf16"}


def activations_for(value: float | dict[str, float] | None, dtype: str) -> float | None:
    """The activation figure for a compute dtype: the size itself, or the entry of the dtype's width (else the
    other entry, scaled by the ratio of the element sizes)."""
    if value is None or not isinstance(value, dict):
        return value
    want = _ACT_DTYPE.get(dtype, "fp32")
    if want in value:
        return value[want]
    other, x = next(iter(value.items()))
    return x * (2.0 if other == "bf16" else 0.5)


@dataclass(frozen=True)
class Workload:
    """What one sample costs and how many gradient values an all-reduce carries."""

    name: str
    params: float
    flops_per_sample: float | None
    batch_per_device: int = 32
    source: str = ""
    seq_len: int | None = None
    #: measured compute seconds per step on one device (replaces the FLOP model when set)
    compute_time_s: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: layers (transformer blocks): FSDP's wrapped units; None: unknown (one unit)
    layers: int | None = None
    #: hidden size, for the activation estimate (transformers); None: activations not estimated
    hidden: int | None = None
    #: activations kept for backward per sample (bytes), as measured; replaces the estimate when set. A size,
    #: or a size per compute dtype ({"fp32": ..., "bf16": ...}; activations_for picks one)
    activation_bytes_per_sample: float | dict[str, float] | None = None
    #: vocabulary size (transformers): the fp32 logits the loss keeps, in the activation estimate; None: unknown
    vocab: int | None = None
    #: the workload family (cnn, transformer) whose MFU applies (simcli.io.workloads.families); None: custom
    family: str | None = None
    #: the family's MFU per device kind (simcli/io/data/families.yaml: generation -> {dtype: mfu, at_k, source})
    family_mfu: Mapping[str, Mapping[str, Any]] | None = None

    def grad_bytes(self, grad_dtype: str) -> float:
        return self.params * DTYPE_BYTES[grad_dtype]
