"""Workloads: built-in model presets, workload files and custom ``--params`` workloads.

Training FLOPs per sample (forward + backward), as ``simcli/io/data/models.yaml`` documents:

* CNNs: ``3 x 2 x forward MACs`` (torchvision and the ResNet paper count
  multiply-adds; a multiply-add is two FLOPs; backward costs about twice forward).
* transformers: ``6 * N * seq_len`` (Kaplan et al. 2020, eq. 2.1).
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..base.ranges import MAX_PARAMS
from ..base.types import InputError, Workload
from ..base.units import parse_at
from .profiles import read_yaml
from .stdout import escape_controls

__all__ = [
    "DEFAULT_MODEL",
    "ModelPreset",
    "families",
    "presets",
    "get_model",
    "load_workload",
    "custom_workload",
    "workload_from_dict",
    "build_workload",
    "check_seq_len",
]

DEFAULT_MODEL = "resnet50"
_KEYS = {
    "name",
    "description",
    "kind",
    "params",
    "forward_macs",
    "forward_flops",
    "flops_per_sample",
    "seq_len",
    "batch_per_device",
    "sources",
    "layers",
    "hidden",
    "activation_bytes_per_sample",
    "vocab",
}


@dataclass(frozen=True)
class ModelPreset:
    name: str
    description: str
    kind: str
    params: float
    forward_flops: float | None  #: per sample (CNNs)
    seq_len: int | None  #: tokens per sample (transformers)
    batch_per_device: int
    sources: tuple[str, ...]
    flops_per_sample_fixed: float | None = None
    layers: int | None = None  #: transformer blocks (FSDP's units); the embedding and head spread over them
    hidden: int | None = None  #: hidden size (the activation estimate)
    #: measured activations per sample (replaces the estimate): a size, or a size per compute dtype
    activation_bytes_per_sample: float | dict[str, float] | None = None
    vocab: int | None = None  #: vocabulary size (the logits in the activation estimate)

    def flops_per_sample(self, seq_len: int | None = None) -> float:
        if self.flops_per_sample_fixed is not None:
            return self.flops_per_sample_fixed
        if self.kind == "transformer":
            tokens = seq_len if seq_len is not None else self.seq_len
            assert tokens is not None  # a transformer has seq_len or flops_per_sample (checked where it is read)
            return 6.0 * self.params * tokens
        assert self.forward_flops is not None  # the others have forward_flops or flops_per_sample (likewise)
        return 3.0 * self.forward_flops

    def workload(self, seq_len: int | None = None) -> Workload:
        check_seq_len(seq_len)
        if seq_len is not None and self.kind != "transformer":
            raise InputError(f"--seq-len: {self.name} is not a transformer; a sequence length does not apply")
        s = seq_len if seq_len is not None else self.seq_len
        return Workload(
            name=self.name,
            params=self.params,
            flops_per_sample=self.flops_per_sample(s),
            batch_per_device=self.batch_per_device,
            source="; ".join(self.sources),
            seq_len=s if self.kind == "transformer" else None,
            layers=self.layers,
            hidden=self.hidden,
            activation_bytes_per_sample=self.activation_bytes_per_sample,
            vocab=self.vocab,
            family=self.kind if self.kind in ("cnn", "transformer") else None,
            family_mfu=families().get(self.kind) if self.kind in ("cnn", "transformer") else None,
        )


_FAMILIES: dict[str, Any] | None = None


def families() -> dict[str, Any]:
    """simcli/io/data/families.yaml: the MFU of each workload family per device kind, with its source (read once)."""
    global _FAMILIES
    if _FAMILIES is None:
        path = Path(str(resources.files("simcli.io.data") / "families.yaml"))
        _FAMILIES = read_yaml(path, "family MFU table") or {}
    return _FAMILIES


def check_seq_len(seq_len: Any, option: str = "--seq-len") -> None:
    """Refuse a sequence length that is not a whole number of tokens >= 1 (0 and negatives included)."""
    if seq_len is None:
        return
    if (
        isinstance(seq_len, bool)
        or not isinstance(seq_len, (int, float))
        or math.isnan(seq_len)
        or seq_len < 1
        or int(seq_len) != seq_len
    ):
        raise InputError(
            f"{option}: {seq_len!r} must be a whole number of tokens per sample, at least 1 (for example 1024)"
        )


def _number(v: Any, source: str, field: str, *, integer: bool = False) -> float:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool)
    if isinstance(v, str):
        try:
            v, ok = float(v), True
        except ValueError:
            ok = False
    if not ok or not math.isfinite(v) or v <= 0 or (integer and v != int(v)):
        kind = "a whole number >= 1" if integer else "a positive number"
        raise InputError(f"{source}: {field}: {v!r} is not {kind}")
    return int(v) if integer else float(v)


def _count(v: Any, source: str, field: str) -> int:
    """A whole number >= 1 (layers, tokens, samples), else bad input naming the field."""
    return int(_number(v, source, field, integer=True))


def _activations(v: Any, source: str, field: str) -> float | dict[str, float]:
    """activation_bytes_per_sample: one size (bytes, units allowed), or a size per compute dtype (fp32, bf16)."""

    def one(x: Any, f: str) -> float:
        return parse_at(x, "bytes", f"{source}: {f}")

    if isinstance(v, dict):
        bad = [k for k in v if k not in ("fp32", "bf16")]
        if bad or not v:
            got = ", ".join(sorted(map(str, v))) or "nothing"
            raise InputError(f"{source}: {field}: give a size, or sizes for fp32 and/or bf16 (got {got})")
        return {str(k): one(x, f"{field}.{k}") for k, x in v.items()}
    return one(v, field)


def workload_from_dict(d: Any, source: str, name: str | None = None) -> ModelPreset:
    if not isinstance(d, dict):
        raise InputError(f"{source}: {name or '(top level)'}: expected a mapping, got {d!r:.60}")
    prefix = f"{name}." if name else ""
    for key in d:
        if key not in _KEYS:
            close = difflib.get_close_matches(str(key), sorted(_KEYS), n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"allowed keys: {', '.join(sorted(_KEYS))}"
            raise InputError(f"{source}: {prefix}{key}: unknown key ({hint})")
    name = name or d.get("name")
    if not isinstance(name, str) or not name:
        raise InputError(f"{source}: name: required (a short name for the workload)")

    name = escape_controls(name)  # shown, never obeyed by the terminal (issue 27)
    kind = d.get("kind", "custom")
    if kind not in ("cnn", "transformer", "custom"):
        raise InputError(f"{source}: {prefix}kind: {kind!r} is not cnn, transformer or custom")
    if d.get("params") is None:
        raise InputError(f"{source}: {prefix}params: required (the number of trainable parameters)")
    params = _number(d["params"], source, prefix + "params")
    _check_params(params, f"{source}: {prefix}params")
    fwd = None
    fixed = None
    seq = None
    if d.get("flops_per_sample") is not None:
        fixed = _number(d["flops_per_sample"], source, prefix + "flops_per_sample")
    if d.get("forward_macs") is not None:
        fwd = 2.0 * _number(d["forward_macs"], source, prefix + "forward_macs")
    if d.get("forward_flops") is not None:
        fwd = _number(d["forward_flops"], source, prefix + "forward_flops")
    if d.get("seq_len") is not None:
        seq = _count(d["seq_len"], source, prefix + "seq_len")
    if kind == "transformer" and seq is None and fixed is None:
        raise InputError(f"{source}: {prefix}seq_len: required for a transformer (tokens per sample)")
    if kind != "transformer" and fwd is None and fixed is None:
        raise InputError(
            f"{source}: {prefix}flops_per_sample: required (training FLOPs per sample), or give "
            "forward_flops / forward_macs"
        )
    if kind == "custom" and fwd is not None and fixed is None:
        kind = "cnn"
    layers = _count(d["layers"], source, prefix + "layers") if d.get("layers") is not None else None
    hidden = _count(d["hidden"], source, prefix + "hidden") if d.get("hidden") is not None else None
    vocab = _count(d["vocab"], source, prefix + "vocab") if d.get("vocab") is not None else None
    act = None
    if d.get("activation_bytes_per_sample") is not None:
        act = _activations(d["activation_bytes_per_sample"], source, prefix + "activation_bytes_per_sample")
    batch = _count(d.get("batch_per_device", 32), source, prefix + "batch_per_device")
    sources = d.get("sources") or []
    if isinstance(sources, str):
        sources = [sources]
    if isinstance(sources, list):
        sources = [escape_controls(x) if isinstance(x, str) else x for x in sources]
    return ModelPreset(
        name=name,
        description=str(d.get("description", "")),
        kind=kind,
        params=params,
        forward_flops=fwd,
        seq_len=seq,
        batch_per_device=batch,
        sources=tuple(str(s) for s in sources),
        flops_per_sample_fixed=fixed,
        layers=layers,
        hidden=hidden,
        activation_bytes_per_sample=act,
        vocab=vocab,
    )


_PRESETS: dict[str, ModelPreset] | None = None


def presets() -> dict[str, ModelPreset]:
    """The built-in models (read once from simcli/io/data/models.yaml)."""
    global _PRESETS
    if _PRESETS is None:
        path = Path(str(resources.files("simcli.io.data") / "models.yaml"))
        data = read_yaml(path, "model list")
        _PRESETS = {name: workload_from_dict(entry, str(path), name) for name, entry in data.items()}
    return _PRESETS


def get_model(name: str) -> ModelPreset:
    table = presets()
    if name not in table:
        close = difflib.get_close_matches(name, list(table), n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else "see 'simcli models list'"
        raise InputError(f"--model: unknown model {name!r} ({hint})")
    return table[name]


def load_workload(path: str, seq_len: int | None = None) -> Workload:
    data = read_yaml(Path(path), "workload")
    if data is None:
        raise InputError(f"{path}: the file is empty; a workload needs name and params")
    return workload_from_dict(data, str(path)).workload(seq_len)


def _check_params(params: float, where: str) -> None:
    """A parameter count whose gradients fit simcli's sizes (at most 2**59: 8 B each within 2**62 B), at load."""

    if params > MAX_PARAMS:
        raise InputError(
            f"{where}: {params:g} parameters is more than simcli models (at most 2**59 = {MAX_PARAMS:.3g})"
        )


def custom_workload(params: float, flops_per_sample: float | None, batch_per_device: int) -> Workload:
    if not (params > 0 and math.isfinite(params)):
        raise InputError(f"--params: {params!r} must be a positive number of parameters")
    _check_params(params, "--params")
    if flops_per_sample is not None and not (flops_per_sample > 0 and math.isfinite(flops_per_sample)):
        raise InputError(f"--flops-per-sample: {flops_per_sample!r} must be a positive number of FLOPs")
    if isinstance(batch_per_device, bool) or not batch_per_device >= 1 or int(batch_per_device) != batch_per_device:
        raise InputError(f"--batch-per-device: {batch_per_device!r} must be a whole number of samples, at least 1")
    return Workload(
        name=f"custom ({params:.4g} params)",
        params=float(params),
        flops_per_sample=flops_per_sample,
        batch_per_device=batch_per_device,
        source="command line",
    )


def build_workload(
    model: str | None = None,
    params: float | None = None,
    flops_per_sample: float | None = None,
    *,
    workload_file: str | None = None,
    seq_len: int | None = None,
    compute_time: float | None = None,
) -> Workload:
    """One workload from the mutually exclusive ways of naming one (the CLI's --model/--params/--workload).

    Every length is checked here, whichever command asks: ``seq_len`` must be >= 1 (0 is not "the default").
    """
    check_seq_len(seq_len)
    given = [n for n, v in (("--model", model), ("--params", params), ("--workload", workload_file)) if v is not None]
    if len(given) > 1:
        raise InputError(f"{' and '.join(given)} exclude each other: name the workload one way")
    if flops_per_sample is not None and params is None:
        raise InputError(
            "--flops-per-sample goes with --params (a custom workload); a --model or --workload already has its FLOPs"
        )
    if workload_file is not None:
        return load_workload(workload_file, seq_len)
    if params is not None:
        if flops_per_sample is None and compute_time is None:
            raise InputError(
                "--params needs --flops-per-sample (FLOPs per sample, forward + backward) or "
                "--compute-time (measured seconds per step)"
            )
        # the workload's own batch is Workload's default (a scenario's --batch-per-device overrides it)
        return custom_workload(params, flops_per_sample, Workload.batch_per_device)
    return get_model(model or DEFAULT_MODEL).workload(seq_len)
