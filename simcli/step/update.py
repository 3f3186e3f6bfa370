"""Per-update costs: what runs once per optimizer step, not once per micro-step (issue 22).

Pure numpy; no typer, yaml or torch. The optimizer step and the work around it (unscaling, clipping, the copies of
an all-reduce after accumulation) are elementwise passes over parameter-sized tensors: about one FLOP per byte, far
below any GPU's ridge point, so memory-bound. Each pass reads and writes its tensors once; the step's time is the
bytes moved over the device's memory bandwidth::

    t_update = params held · Σ_passes (bytes read + written per parameter) / memory bandwidth

``params held`` is the parameters whose optimizer state a device holds: every one for ddp, its shard for a
strategy that shards the optimizer state (:func:`simcli.step.strategies.update_divisor`, read from the strategy's
row: zero1, zero2, fsdp divide by k, hsdp by its shard group). The step runs once per optimizer step, after the
last micro-step's gradients are reduced, so it adds to T_step once, whatever ``--accum``.

Every state is fp32, 4 B per element: mixed precision keeps fp32 parameters (torch.autocast) or fp32 master
weights (apex O2, DeepSpeed) and fp32 optimizer state, and FSDP's ``MixedPrecision`` keeps the fp32 shard its
optimizer steps. The rows of :data:`OPTIMIZER_SPECS` list each implementation's kernels pass by pass, with the bytes
read and written per parameter; docs/model.md repeats them with their sources. ``--optimizer adamw`` is torch's
default implementation on CUDA: ``torch.optim.AdamW`` with neither ``foreach`` nor ``fused`` given runs
``_default_to_fused_or_foreach(params, differentiable, use_fused=False)`` (torch/optim/adam.py: "we want to give
the fused impl bake-in time before making it the default"), i.e. the ``foreach`` kernels, 80 B per parameter;
``adamw-fused`` (``fused=True``, torchtitan's default) moves 28 B.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base.types import InputError
from . import strategies

__all__ = [
    "Pass",
    "OptimizerSpec",
    "OPTIMIZER_SPECS",
    "OPTIMIZERS",
    "ExtraSpec",
    "EXTRA_SPECS",
    "EXTRAS",
    "check_optimizer",
    "check_extras",
    "bytes_per_param",
    "params_held",
    "update_time",
    "describe",
]


@dataclass(frozen=True)
class Pass:
    """One kernel over parameter-sized tensors: bytes read and written per parameter (fp32: 4 B per tensor)."""

    kernel: str
    read: float
    written: float

    @property
    def bytes(self) -> float:
        return self.read + self.written


@dataclass(frozen=True)
class OptimizerSpec:
    """One optimizer implementation: its fp32 state per parameter (the memory model) and the passes of one step."""

    name: str
    label: str
    #: optimizer state per parameter, fp32 (simcli.step.memory: Adam's exp_avg and exp_avg_sq, SGD's momentum)
    state_bytes: float
    passes: tuple[Pass, ...]
    source: str

    @property
    def bytes_per_param(self) -> float:
        """Bytes read and written per parameter held by one step: the sum over its passes."""
        return float(sum(p.bytes for p in self.passes))


_ADAM_FOREACH = (
    Pass("_foreach_lerp_(exp_avgs, grads, 1-beta1)", 8, 4),
    Pass("_foreach_mul_(exp_avg_sqs, beta2)", 4, 4),
    Pass("_foreach_addcmul_(exp_avg_sqs, grads, grads, 1-beta2)", 8, 4),
    Pass("_foreach_sqrt(exp_avg_sqs)", 4, 4),
    Pass("_foreach_div_(denom, bias_correction2_sqrt)", 4, 4),
    Pass("_foreach_add_(denom, eps)", 4, 4),
    Pass("_foreach_addcdiv_(params, exp_avgs, denom, step_size)", 12, 4),
)
_FUSED_ADAM = (Pass("_fused_adamw_ (p, g, exp_avg, exp_avg_sq read; p, exp_avg, exp_avg_sq written)", 16, 12),)
#: Composer's DecoupledAdamW.adamw, one tensor at a time (composer/optim/decoupled_weight_decay.py)
_DECOUPLED = (
    Pass("exp_avg.mul_(beta1)", 4, 4),
    Pass(".add_(grad, alpha=1-beta1)", 8, 4),
    Pass("exp_avg_sq.mul_(beta2)", 4, 4),
    Pass(".addcmul_(grad, grad, value=1-beta2)", 8, 4),
    Pass("exp_avg_sq.sqrt()", 4, 4),
    Pass("/ math.sqrt(bias_correction2)", 4, 4),
    Pass(".add_(eps)", 4, 4),
    Pass("param.addcdiv_(exp_avg, denom, value=-step_size)", 12, 4),
)

OPTIMIZER_SPECS: tuple[OptimizerSpec, ...] = (
    OptimizerSpec(
        name="adam",
        label="Adam (torch foreach)",
        state_bytes=8.0,
        passes=_ADAM_FOREACH,
        source="torch.optim.Adam, torch's default on CUDA (foreach): torch/optim/adam.py _multi_tensor_adam",
    ),
    OptimizerSpec(
        name="adamw",
        label="AdamW (torch foreach)",
        state_bytes=8.0,
        passes=(Pass("_foreach_mul_(params, 1-lr*weight_decay)", 4, 4), *_ADAM_FOREACH),
        source="torch.optim.AdamW, torch's default on CUDA: _default_to_fused_or_foreach(..., use_fused=False) picks "
        "foreach (torch/optim/optimizer.py, adam.py _multi_tensor_adam; weight_decay 1e-2 by default). The "
        "per-tensor loop (foreach=False, _single_tensor_adam) launches the same passes per tensor: the same bytes",
    ),
    OptimizerSpec(
        name="adam-fused",
        label="Adam (torch fused)",
        state_bytes=8.0,
        passes=_FUSED_ADAM,
        source="torch.optim.Adam(fused=True): torch._fused_adam_, one kernel (torch/optim/adam.py _fused_adam)",
    ),
    OptimizerSpec(
        name="adamw-fused",
        label="AdamW (torch fused)",
        state_bytes=8.0,
        passes=_FUSED_ADAM,
        source="torch.optim.AdamW(fused=True): torch._fused_adamw_, one kernel (torch/optim/adam.py _fused_adam); "
        "torchtitan's default (--optimizer.implementation fused); apex FusedAdam has the same shape",
    ),
    OptimizerSpec(
        name="decoupled-adamw",
        label="Composer DecoupledAdamW",
        state_bytes=8.0,
        passes=(Pass("param.mul_(1-decay_factor*weight_decay)", 4, 4), *_DECOUPLED),
        source="mosaicml/composer composer/optim/decoupled_weight_decay.py DecoupledAdamW.adamw: a Python loop over "
        "the "
        "tensors, nine passes each with weight decay (its default 1e-5), and a host sync per tensor "
        "(state_steps[i].item()), not priced",
    ),
    OptimizerSpec(
        name="decoupled-adamw-wd0",
        label="Composer DecoupledAdamW, weight_decay 0",
        state_bytes=8.0,
        passes=_DECOUPLED,
        source="as decoupled-adamw with weight_decay 0.0, whose decay pass is skipped (if weight_decay != 0): the MPT "
        "configurations llm-foundry benchmarks (scripts/train/yamls/pretrain/mpt-*.yaml: decoupled_adamw, "
        "weight_decay 0.0)",
    ),
    OptimizerSpec(
        name="lamb",
        label="LAMB (apex FusedLAMB)",
        state_bytes=8.0,
        passes=(
            Pass("multi_tensor_l2norm(grads): the global gradient norm", 4, 0),
            Pass("multi_tensor_lamb stage 1: g, p, m, v -> m, v, update", 16, 12),
            Pass("per-tensor norms of p and of the update", 8, 0),
            Pass("multi_tensor_lamb stage 2: update, p -> p", 8, 4),
        ),
        source="NVIDIA/apex apex/optimizers/fused_lamb.py FusedLAMB.step (NVIDIA's BERT and Transformer-XL recipes)",
    ),
    OptimizerSpec(
        name="sgd-momentum",
        label="SGD with momentum (torch foreach)",
        state_bytes=4.0,
        passes=(
            Pass("_foreach_mul_(bufs, momentum)", 4, 4),
            Pass("_foreach_add_(bufs, grads)", 8, 4),
            Pass("_foreach_add_(params, bufs, alpha=-lr)", 8, 4),
        ),
        source="torch.optim.SGD(momentum>0), torch's default on CUDA (foreach): torch/optim/sgd.py _multi_tensor_sgd",
    ),
    OptimizerSpec(
        name="sgd-momentum-fused",
        label="SGD with momentum (torch fused)",
        state_bytes=4.0,
        passes=(Pass("_fused_sgd_ (p, g, buf read; p, buf written)", 12, 8),),
        source="torch.optim.SGD(momentum>0, fused=True): torch._fused_sgd_ (torch/optim/sgd.py _fused_sgd)",
    ),
    OptimizerSpec(
        name="sgd",
        label="SGD (torch foreach)",
        state_bytes=0.0,
        passes=(Pass("_foreach_add_(params, grads, alpha=-lr)", 8, 4),),
        source="torch.optim.SGD(momentum=0): torch/optim/sgd.py _multi_tensor_sgd (fused: the same bytes)",
    ),
)
#: the rows by name; values of Scenario.optimizer and of --optimizer
SPECS: dict[str, OptimizerSpec] = {s.name: s for s in OPTIMIZER_SPECS}
OPTIMIZERS: tuple[str, ...] = tuple(SPECS)


@dataclass(frozen=True)
class ExtraSpec:
    """One pass around the optimizer step (--update-extras), its own kernels over the gradients."""

    name: str
    summary: str  #: what runs it, in a few words (--update-extras' help)
    passes: tuple[Pass, ...]
    source: str


#: passes around the optimizer step (--update-extras), each its own kernel over the gradients
EXTRA_SPECS: tuple[ExtraSpec, ...] = (
    ExtraSpec(
        name="unscale",
        summary="AMP's GradScaler",
        passes=(Pass("_amp_foreach_non_finite_check_and_unscale_(grads)", 4, 4),),
        source="torch/amp/grad_scaler.py: _amp_foreach_non_finite_check_and_unscale_ (g read and written)",
    ),
    ExtraSpec(
        name="clip",
        summary="clip_grad_norm_",
        passes=(Pass("_foreach_norm(grads)", 4, 0), Pass("_foreach_mul_(grads, clip_coef)", 4, 4)),
        source="torch/nn/utils/clip_grad.py clip_grad_norm_ and FSDP's: the norms, then grads * clip_coef",
    ),
    ExtraSpec(
        name="flatten",
        summary="an all-reduce after accumulation on one flat buffer",
        passes=(Pass("multi_tensor_scale(grads -> flat buffer)", 4, 4), Pass("multi_tensor_scale(back)", 4, 4)),
        source="NVIDIA BERT run_pretraining.py allreduce_post_accumulation: multi_tensor_scale into the flat buffer "
        "and back",
    ),
)
EXTRAS: dict[str, float] = {e.name: float(sum(p.bytes for p in e.passes)) for e in EXTRA_SPECS}


def check_optimizer(name: str) -> OptimizerSpec:
    """The optimizer's row, or an InputError that lists the choices."""
    spec = SPECS.get(name)
    if spec is None:
        raise InputError(f"--optimizer: unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZERS)}")
    return spec


def check_extras(extras: tuple[str, ...]) -> tuple[str, ...]:
    """The extra passes, each once, in the order given; an InputError for one simcli does not know."""
    bad = [e for e in extras if e not in EXTRAS]
    if bad:
        raise InputError(f"--update-extras: unknown pass {bad[0]!r}; choose from {', '.join(EXTRAS)}")
    return tuple(dict.fromkeys(extras))


def bytes_per_param(optimizer: str, extras: tuple[str, ...] = ()) -> float:
    """Bytes read and written per parameter held, by the optimizer step and the extra passes."""
    return check_optimizer(optimizer).bytes_per_param + sum(EXTRAS[e] for e in check_extras(extras))


def params_held(
    strategy: str, k: np.ndarray, params: float, *, group: int | None = None, node_size: int | None = None
) -> np.ndarray:
    """Parameters whose optimizer step one device runs at each k: params / the strategy's update divisor (its row:
    1 for ddp, k for zero1/zero2/fsdp, the shard group for hsdp)."""
    return float(params) / strategies.update_divisor(strategy, k, group, node_size=node_size).astype(np.float64)


def update_time(
    strategy: str,
    k: np.ndarray | list[int],
    params: float,
    *,
    bandwidth_Bps: float | None,
    optimizer: str,
    extras: tuple[str, ...] = (),
    group: int | None = None,
    node_size: int | None = None,
) -> np.ndarray:
    """Seconds of one optimizer step per device at each k: bytes moved over the bandwidth (0 without one)."""
    k = np.asarray(k, dtype=np.int64)
    per = bytes_per_param(optimizer, extras)
    if not bandwidth_Bps:
        return np.zeros(k.shape)
    return params_held(strategy, k, params, group=group, node_size=node_size) * per / float(bandwidth_Bps)


def describe(sc: object) -> str:
    """What a scenario's update term prices, in words (the header line and explain's row; duck-typed on
    :class:`simcli.step.engine.Scenario`)."""
    s: Any = sc
    if s.update_time_s is not None:
        return "measured (--update-time), the same at every k"
    bw, field = s.update_bandwidth
    passes = s.optimizer + "".join(f" + {e}" for e in s.update_extras)
    if not bw:
        return f"{passes}: not priced (the profile gives no device.memory_bandwidth)"
    held = "all parameters" if not strategies.SPECS[s.strategy].shards_update else "the device's shard"
    return (
        f"{passes}: {bytes_per_param(s.optimizer, s.update_extras):g} B per parameter read and written, for {held}, "
        f"over {bw / 1e9:g} GB/s ({field}), once per optimizer step"
    )
