"""Memory per device: the one model that `speedup`, `compare`, `plan` and `explain` read.

Pure numpy, vectorised: every argument that varies (k, the per-device micro-batch's activations) broadcasts,
so `plan best` prices a whole grid in one call per strategy. No typer, yaml or torch.

Bytes per device of one data-parallel rank, P parameters, k devices, shard group d
(:func:`simcli.step.strategies.shard_divisor`:
1 for ddp, k for zero1/zero2/fsdp, G for hsdp), L units (FSDP's wrapped modules), p = bytes per parameter in
the param dtype, g = bytes per gradient value (the grad dtype), o = optimizer state bytes per parameter:

=============  ===================  ===================  ===================  ===================
part           ddp                  zero1                zero2                fsdp / hsdp
=============  ===================  ===================  ===================  ===================
weights        P·p                  P·p                  P·p                  (P·4)/d (fp32 shard)
master (fp32)  P·4 (p < 4)          P·4/d                P·4/d                -- (the shard is it)
gradients      P·g                  P·g                  P·g/d                P·g/d
optimizer      P·o                  P·o/d                P·o/d                P·o/d
gathered       --                   --                   --                   2·P/L·p (P·p unresharded)
buffers        P·g (DDP buckets)    min(P, 5e8)·(g + p)  min(P, 5e8)·(g + p)  P/L·g (reduce-scatter input)
activations    per micro-batch, the same for every strategy (below)
=============  ===================  ===================  ===================  ===================

* weights, master, optimizer: ZeRO's accounting (Rajbhandari et al. 2020, sec. 3.1): with a 16-bit param dtype
  an fp32 master copy (4 B) is kept beside the 16-bit weights; with fp32 parameters there is none. Optimizer
  state per parameter, fp32: Adam/AdamW m and v (8 B), SGD with momentum (4 B), plain SGD (0), LAMB m and v
  (8 B) (torch.optim's state_dict; :data:`OPTIMIZER_STATE_BYTES`). PyTorch FSDP (FSDP1's FlatParameter,
  FSDP2's DTensor shards) keeps only the fp32 shard, cast to the param dtype when it is all-gathered
  (torch.distributed.fsdp MixedPrecision / MixedPrecisionPolicy): the shard is the master copy, so fsdp/hsdp
  hold 4 B/d of weights and no separate low-precision shard (DeepSpeed's ZeRO-3 keeps both; not modelled).
* gradients: in the grad dtype (``--grad-dtype``), whole (ddp, zero1) or sharded (zero2, fsdp, hsdp).
* buffers: PyTorch DDP copies the gradients into flat buckets for its all-reduces (``gradient_as_bucket_view``
  False, its default; torch docs: setting it True "saves memory equal to the total gradients size"), one more
  copy of P·g. DeepSpeed ZeRO-1/2 reduce into a bucket of reduce_bucket_size elements and all-gather through
  one of allgather_bucket_size (both 5e8 by default). FSDP reduce-scatters each unit's unsharded gradient,
  one unit at a time in the grad dtype (its gathered parameters are the all-gather's output: ``gathered``).
* gathered: fsdp/hsdp hold the current unit and the one prefetched (two units; all of them without
  reshard_after_forward); k = 1 (or a group of 1) holds the whole parameters already.
* activations (:func:`activation_bytes`, transformers with a hidden size): per token and block 34·h bytes
  (Korthikanti et al. 2022, eq. 2, without the 5·a·s/h attention-score term, which FlashAttention does not
  store); with full activation checkpointing 2·h per token and block (each block's bf16 input) plus one block's
  34·h being recomputed; plus, where the vocabulary v is known, the loss's tensors at the end of the forward,
  when every kept activation is alive: PyTorch's cross-entropy on fp32 logits (``logits.float()``, as torchtitan's
  loss does) holds the bf16 logits (2 B), their fp32 copy (4 B) and the fp32 log-probabilities log_softmax keeps
  for backward (4 B; aten's cross_entropy = log_softmax + nll_loss): 10·v bytes per token (Korthikanti et al.
  count the kept 4·v only, sec. 4.3; a fused or vocab-parallel loss keeps less). A measured figure per sample
  (``--activations``, a workload's activation_bytes_per_sample) replaces the estimate.

Not counted: the CUDA context and NCCL's own buffers (outside the allocator), fragmentation and the caching
allocator's reserve, and other transient tensors (the unsharded gradient of a unit while its backward runs, the
loss's gradient in backward, after the forward's tensors are freed). A measured peak
(``torch.cuda.max_memory_reserved``) is therefore above this model; how far above is what
``benchmarks/validate_memory.py`` measures against published runs (docs/sharding.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base.types import DTYPE_BYTES, InputError, activations_for
from ..base.units import fmt_bytes
from .strategies import SPECS, shard_divisor
from .update import OPTIMIZER_SPECS

__all__ = [
    "OPTIMIZER_STATE_BYTES",
    "OPTIMIZERS",
    "MASTER_BYTES",
    "ZERO_BUCKET_ELEMENTS",
    "ACT_BYTES_PER_TOKEN_HIDDEN",
    "Memory",
    "bytes_per_param",
    "shard_divisor",
    "activation_bytes",
    "per_device",
    "smallest_fitting",
    "scenario_kwargs",
    "for_scenario",
    "check_optimizer",
    "PARTS",
    "micro_batch",
    "MemoryCheck",
    "check",
    "part_label",
    "describe_parts",
]

#: optimizer state in bytes per parameter, kept in fp32 (torch.optim: Adam/AdamW exp_avg and exp_avg_sq,
#: SGD momentum_buffer; LAMB as DeepSpeed's and apex's FusedLAMB, m and v): the optimizers' rows
#: (simcli.step.update.OPTIMIZER_SPECS, which also price their step)
OPTIMIZER_STATE_BYTES: dict[str, float] = {s.name: s.state_bytes for s in OPTIMIZER_SPECS}
OPTIMIZERS = tuple(OPTIMIZER_STATE_BYTES)
#: the fp32 master copy kept beside 16-bit (or 8-bit) weights (ZeRO sec. 3.1, mixed-precision training)
MASTER_BYTES = 4.0
#: DeepSpeed ZeRO-1/2's reduce_bucket_size and allgather_bucket_size defaults, in elements
ZERO_BUCKET_ELEMENTS = 5e8
#: bytes of activations per token and transformer block without checkpointing (Korthikanti et al. 2022)
ACT_BYTES_PER_TOKEN_HIDDEN = 34.0
#: bytes per token and vocabulary entry at the loss: bf16 logits 2 + their fp32 copy 4 + fp32 log-probabilities 4
LOGIT_BYTES = 10.0
#: the parts of :class:`Memory`, in the order they are shown (records: memory_<part>_bytes)
PARTS = ("weights", "master", "grads", "optimizer", "gathered", "buffers", "activations")


def check_optimizer(optimizer: str) -> str:
    if optimizer not in OPTIMIZER_STATE_BYTES:
        raise InputError(f"--optimizer: unknown optimizer {optimizer!r}; choose one of {', '.join(OPTIMIZERS)}")
    return optimizer


def bytes_per_param(strategy: str, *, param_bytes: float, grad_bytes: float, optimizer: str) -> dict[str, float]:
    """Unsharded bytes per parameter of each part of the training state (before dividing by the shard group):
    ``weights``, ``master``, ``grads``, ``optimizer`` (see the module docstring). fsdp/hsdp keep the fp32 shard
    as their weights and no separate master. The state a per-update optimizer step reads and writes is
    ``master`` (or fsdp's fp32 ``weights``) + ``grads`` + ``optimizer``."""
    check_optimizer(optimizer)
    opt = OPTIMIZER_STATE_BYTES[optimizer]
    if SPECS[strategy].shards_weights:  # the parameters are sharded: their fp32 shard is the weights
        return {"weights": MASTER_BYTES, "master": 0.0, "grads": float(grad_bytes), "optimizer": opt}
    master = MASTER_BYTES if param_bytes < MASTER_BYTES else 0.0
    return {"weights": float(param_bytes), "master": master, "grads": float(grad_bytes), "optimizer": opt}


@dataclass(frozen=True)
class Memory:
    """Bytes per device, arrays (over k, or a whole grid) of the parts in :data:`PARTS`."""

    weights: np.ndarray
    master: np.ndarray
    grads: np.ndarray
    optimizer: np.ndarray
    gathered: np.ndarray
    buffers: np.ndarray
    activations: np.ndarray

    @property
    def params(self) -> np.ndarray:
        """Parameters held: the (sharded) weights plus fsdp/hsdp's gathered units."""
        return self.weights + self.gathered

    @property
    def state(self) -> np.ndarray:
        """The training state without activations."""
        return self.weights + self.master + self.grads + self.optimizer + self.gathered + self.buffers

    @property
    def total(self) -> np.ndarray:
        return self.state + self.activations

    def parts(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in PARTS}


def activation_bytes(
    *, tokens: Any, hidden: int | None, units: int, checkpointing: bool, vocab: int | None = None
) -> np.ndarray:
    """Activations kept for backward by one device (transformers; 0 where ``hidden`` is unknown)."""
    tokens = np.asarray(tokens, dtype=np.float64)
    if not hidden:
        return np.zeros(tokens.shape)
    per_block = ACT_BYTES_PER_TOKEN_HIDDEN * hidden * tokens
    out = 2.0 * hidden * tokens * units + per_block if checkpointing else per_block * units
    if vocab:
        out = out + LOGIT_BYTES * vocab * tokens
    return out


def per_device(
    strategy: str,
    k: Any,
    *,
    params: float,
    units: int,
    param_bytes: float,
    grad_bytes: Any,
    optimizer: str,
    activations: Any = 0.0,
    group: int | None = None,
    node_size: int | None = None,
    reshard_after_forward: bool,
) -> Memory:
    """Bytes per device for ``strategy`` at each k (the module docstring's table). ``k``, ``grad_bytes`` and
    ``activations`` broadcast against each other."""
    k = np.asarray(k, dtype=np.int64)
    g = np.asarray(grad_bytes, dtype=np.float64)
    shape = np.broadcast_shapes(k.shape, g.shape, np.shape(activations))
    d = np.broadcast_to(shard_divisor(strategy, k, group, node_size=node_size).astype(np.float64), shape)
    P = float(params)
    per = bytes_per_param(strategy, param_bytes=param_bytes, grad_bytes=1.0, optimizer=optimizer)
    spec = SPECS[strategy]
    sh_w, sh_m, sh_g, sh_o = spec.shards
    one = np.ones(shape)

    def div(on: bool) -> np.ndarray:
        return d if on else one

    zero = np.zeros(shape)
    gathered = zero
    if spec.timeline == "units":
        L = max(int(units), 1)
        whole = P * param_bytes * (min(2, L) / L if reshard_after_forward else 1.0)
        gathered = np.where(d > 1, whole, 0.0)  # k = 1: the parameters are whole already
        buffers = np.where(d > 1, P / L * g, 0.0) * one
    elif spec.timeline == "buckets":
        buffers = P * g * one
    else:
        buffers = min(P, ZERO_BUCKET_ELEMENTS) * (g + param_bytes) * one
    return Memory(
        weights=P * per["weights"] / div(sh_w),
        master=P * per["master"] / div(sh_m),
        grads=P * g / div(sh_g),
        optimizer=P * per["optimizer"] / div(sh_o),
        gathered=gathered,
        buffers=buffers,
        activations=np.broadcast_to(np.asarray(activations, dtype=np.float64), shape).copy(),
    )


def smallest_fitting(capacity: float, k: Any, strategies: tuple[str, ...], **kwargs: Any) -> list[str | None]:
    """Per k, the first of ``strategies`` whose memory fits ``capacity`` bytes (None: none fits).

    ``kwargs`` are :func:`per_device`'s."""
    k = np.asarray(k, dtype=np.int64)
    out: list[str | None] = [None] * k.size
    for s in strategies:
        fits = (per_device(s, k, **kwargs).total <= capacity).ravel().tolist()
        out = [o if o is not None else (s if f else None) for o, f in zip(out, fits)]
    return out


def scenario_kwargs(sc: Any, b: Any) -> dict[str, Any]:
    """:func:`per_device`'s arguments for a scenario (b: samples per device per micro-step, broadcasts; the
    optimizer state is the scenario's ``optimizer``)."""
    w = sc.workload
    given = sc.activation_bytes_per_sample
    if given is None:
        given = activations_for(w.activation_bytes_per_sample, sc.compute_dtype)
    units = int(sc.units or w.layers or 1)
    if given is not None:
        act = np.asarray(b, dtype=np.float64) * given
    else:
        act = activation_bytes(
            tokens=np.asarray(b, dtype=np.float64) * (w.seq_len or 0),
            hidden=w.hidden,
            units=int(w.layers or units),
            checkpointing=sc.activation_checkpointing,
            vocab=getattr(w, "vocab", None),
        )
    return dict(
        params=w.params,
        units=units,
        param_bytes=DTYPE_BYTES[sc.param_dtype],
        grad_bytes=DTYPE_BYTES[sc.grad_dtype],
        optimizer=sc.optimizer,
        activations=act,
        group=sc.shard_group,
        node_size=sc.profile.network[0].size,
        reshard_after_forward=sc.reshard_after_forward,
    )


def micro_batch(sc: Any, k: np.ndarray) -> np.ndarray:
    """Samples per device per micro-step at each k: the batch per device (weak), or B/(k·accum) (strong)."""
    k = np.asarray(k, dtype=np.int64)
    if sc.strong:
        return sc.batch / (k * int(sc.accum))
    return np.full(k.shape, float(sc.batch))


def for_scenario(sc: Any, k: Any, *, b: Any = None) -> Memory:
    """Bytes per device of ``sc``'s strategy at each k (``b``: the micro-batch per k; default the scenario's)."""
    k = np.asarray(k, dtype=np.int64).ravel()
    b = micro_batch(sc, k) if b is None else b
    return per_device(sc.strategy, k, **scenario_kwargs(sc, b))


# --------------------------------------------------------------------------- the check commands print

#: how a part is named in messages
_LABELS = {
    "weights": "weights",
    "master": "fp32 master",
    "grads": "gradients",
    "optimizer": "{optimizer} state",
    "gathered": "gathered units",
    "buffers": "{buffers}",
    "activations": "activations",
}


def part_label(part: str, strategy: str, optimizer: str) -> str:
    """How a part of :class:`Memory` is named in messages and tables."""
    return _LABELS[part].format(optimizer=optimizer, buffers=SPECS[strategy].buffers)


def describe_parts(parts: dict[str, float], strategy: str, optimizer: str) -> str:
    """'weights 13.48 GB + fp32 master 26.95 GB + ...': the parts that are not zero."""

    return " + ".join(
        f"{part_label(p, strategy, optimizer)} {fmt_bytes(v, binary=False)}" for p, v in parts.items() if v > 0
    )


@dataclass(frozen=True)
class MemoryCheck:
    """The memory per device of one scenario at the device counts an answer names, against the device's."""

    strategy: str
    optimizer: str
    devices: tuple[int, ...]
    per_device_bytes: tuple[float, ...]
    #: the parts at the k that needs the most
    parts: dict[str, float]
    params: float
    capacity_bytes: float | None

    @property
    def total_bytes(self) -> float:
        return max(self.per_device_bytes)

    @property
    def at(self) -> int:
        return self.devices[int(np.argmax(self.per_device_bytes))]

    @property
    def fits(self) -> bool | None:
        if self.capacity_bytes is None:
            return None
        return self.total_bytes <= self.capacity_bytes

    def breakdown(self) -> str:

        return describe_parts(self.parts, self.strategy, self.optimizer)

    def message(self) -> str:
        ks, need = self.devices, self.per_device_bytes
        at = (
            f"{fmt_bytes(need[0], binary=False)} per device at k = {ks[0]}"
            if len(ks) == 1
            else f"{fmt_bytes(need[0], binary=False)} per device at every k = {ks[0]}..{ks[-1]}"
            if max(need) - min(need) <= 1e-9 * max(need)
            else f"{fmt_bytes(max(need), binary=False)} to {fmt_bytes(min(need), binary=False)} per device over "
            f"k = {ks[0]}..{ks[-1]}"
        )
        what = f"{self.strategy} with {self.optimizer} needs {at} ({self.breakdown()} at k = {self.at})"
        if self.capacity_bytes is None:
            return f"{what}; the profile gives no device memory, so it is not checked"
        cap = fmt_bytes(self.capacity_bytes, binary=False)
        if self.fits:
            return f"fits: {what}, of {cap}"
        bad = [k for k, b in zip(ks, need) if b > self.capacity_bytes]
        hint = (
            "; plain data parallelism keeps a full replica on every device, so more devices do not help: try "
            "--strategy zero1, zero2, fsdp or hsdp"
            if SPECS[self.strategy].group == "none"
            else ""
        )
        return (
            f"DOES NOT FIT: {what}, but the device has {cap}; it does not fit at k = "
            f"{', '.join(str(k) for k in bad[:8])}{' ...' if len(bad) > 8 else ''}{hint}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "checked": self.capacity_bytes is not None,
            "fits": self.fits,
            "strategy": self.strategy,
            "optimizer": self.optimizer,
            "devices": list(self.devices),
            "per_device_bytes": list(self.per_device_bytes),
            "total_bytes": self.total_bytes,
            "parts_bytes": dict(self.parts),
            "bytes_per_param": (self.total_bytes - self.parts["activations"]) / self.params,
            "capacity_bytes": self.capacity_bytes,
            "message": self.message(),
        }


def check(sc: Any, devices: Any) -> MemoryCheck:
    """:class:`MemoryCheck` of ``sc`` at ``devices`` (every strategy, activations included; the scenario's
    optimizer state)."""
    k = np.asarray(devices, dtype=np.int64).ravel()
    mem = for_scenario(sc, k)
    tot = mem.total
    i = int(np.argmax(tot))
    return MemoryCheck(
        strategy=sc.strategy,
        optimizer=sc.optimizer,
        devices=tuple(int(x) for x in k),
        per_device_bytes=tuple(float(x) for x in tot),
        parts={p: float(v[i]) for p, v in mem.parts().items()},
        params=float(sc.workload.params),
        capacity_bytes=sc.profile.device.memory_bytes,
    )
