"""The models ``simcli bench step --model`` trains, and their analytic parameter and FLOP counts.

Built from plain torch (no extra dependency, no downloaded weights); torch is imported only inside
:func:`build` and the batch/loss helpers, so the counts below are plain arithmetic that the command
line (and the tests) use without torch.

* ``mlp``: ``depth`` layers ``Linear(width, width)`` with ReLU between them, MSE loss (the default).
* ``gpt``: a GPT-2-style decoder: token and learned position embeddings, ``layers`` pre-LN blocks
  (LayerNorm, causal self-attention through ``torch.nn.functional.scaled_dot_product_attention`` with
  ``heads`` heads, output projection, residual; LayerNorm, 4x MLP with GELU, residual), a final LayerNorm
  and a head **tied** to the token embedding (as GPT-2), cross-entropy on random tokens.
* ``resnet``: ResNet-style bottleneck blocks (1x1, 3x3, 1x1 convolutions, BatchNorm, ReLU, projection
  shortcut where the shape changes; stride in the 3x3 convolution, ResNet v1.5 as torchvision), in stages of
  ``blocks`` blocks, base width ``width`` doubling per stage (expansion 4), global average pool, a linear
  classifier, cross-entropy. The stem is ResNet-50's (7x7/2 convolution, 3x3/2 max pool) for images of 64
  pixels or more, else a 3x3/1 convolution (He et al. 2016, sec. 4.2, CIFAR). ``--model-width 64 --blocks 3,4,6,3
  --image-size 224 --classes 1000`` is torchvision's ResNet-50 (25,557,032 parameters, 4.09 GMACs).

FLOPs per sample, forward + backward:

* ``flops_per_sample`` is what simcli's workload presets assume (``simcli/io/data/models.yaml``), so that an
  MFU fitted from it transfers to ``simcli speedup``/``plan`` unchanged: 6·N (mlp: 2 FLOPs per weight and
  sample forward, twice that backward); 6·N·seq_len for the transformer (Kaplan et al. 2020, eq. 2.1,
  with N all parameters; with tied embeddings the head's matmul is counted by the embedding's V·H);
  3 x 2 x forward MACs for the CNN (convolutions and the classifier, counted layer by layer).
* ``flops_per_sample_exact`` adds what the preset formula leaves out, so that achieved FLOP/s is what the
  hardware did: for the transformer the attention scores and their weighted sum, 2·S²·H each forward per
  layer (QKᵀ and AV over all heads), x3 for training: 12·layers·hidden·seq² per sample (counted in full, as
  Megatron (Narayanan et al. 2021) and torch's FlopCounterMode count it; a causal kernel skips about half).
  For the resnet it equals ``flops_per_sample``; for the mlp it counts the matmuls exactly (no bias, no
  input gradient of the first layer: 2·w²·(3·depth - 1)). It agrees with FlopCounterMode on CPU within
  :data:`FLOP_COUNTER_RTOL` (tests/bench/test_bench_models.py), the rest being biases, LayerNorm and position
  embedding parameters (in N, not in a matmul) and the first layer's input gradient (never computed).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "KINDS",
    "DTYPES",
    "CPU_DTYPES",
    "ModelSpec",
    "params",
    "forward_macs",
    "flops_per_sample",
    "flops_per_sample_exact",
    "attention_flops_per_sample",
    "memory_estimate",
    "describe",
    "build",
    "make_batches",
    "loss",
    "batch_dependent",
    "resnet_final_size",
    "activation_bytes",
    "FLOP_COUNTER_RTOL",
    "autocast_settings",
    "grad_rtol",
]

KINDS = ("mlp", "gpt", "resnet")
#: compute dtypes of a step (CUDA: all four; CPU: fp32 and bf16 autocast)
DTYPES = ("fp32", "tf32", "bf16", "fp16")
CPU_DTYPES = ("fp32", "bf16")
#: how close the analytic exact count is to torch.utils.flop_counter.FlopCounterMode on the default shapes
FLOP_COUNTER_RTOL = 0.05


@dataclass(frozen=True)
class ModelSpec:
    """One bench model's shape (plain data: it travels to the ranks as JSON via :meth:`to_dict`)."""

    kind: str = "mlp"
    width: int = 0  #: mlp: layer width (default 1024); resnet: the first stage's bottleneck width (default 16)
    depth: int = 8  #: mlp layers
    layers: int = 2  #: gpt blocks
    hidden: int = 128
    heads: int = 4
    seq_len: int = 128
    vocab: int = 1024
    blocks: tuple[int, ...] = field(default=(1, 1, 1, 1))  #: resnet bottleneck blocks per stage
    image_size: int = 32
    classes: int = 10

    def __post_init__(self) -> None:
        object.__setattr__(self, "blocks", tuple(int(b) for b in self.blocks))
        if not self.width:
            object.__setattr__(self, "width", 16 if self.kind == "resnet" else 1024)

    def to_dict(self) -> dict[str, Any]:
        """Every field, in order (``blocks`` a list, as JSON has it)."""
        return {**dataclasses.asdict(self), "blocks": list(self.blocks)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ModelSpec":
        fields: dict[str, Any] = {k: (tuple(v) if k == "blocks" else v) for k, v in d.items()}
        return cls(**fields)


# --------------------------------------------------------------------------- counts (no torch)


def _conv_out(size: int, k: int, stride: int, *, pad: int) -> int:
    return (size + 2 * pad - k) // stride + 1


def _resnet_layers(s: ModelSpec) -> list[tuple[str, int, int, int, int, int]]:
    """Every convolution and the classifier: (kind, c_in, c_out, kernel, out_size, bn) in order."""
    out: list[tuple[str, int, int, int, int, int]] = []
    size = s.image_size
    if s.image_size >= 64:
        size = _conv_out(size, 7, 2, pad=3)
        out.append(("conv", 3, s.width, 7, size, 1))
        size = _conv_out(size, 3, 2, pad=1)  # max pool
    else:
        size = _conv_out(size, 3, 1, pad=1)
        out.append(("conv", 3, s.width, 3, size, 1))
    cin = s.width
    for i, n in enumerate(s.blocks):
        mid = s.width * 2**i
        for j in range(n):
            stride = 2 if (i > 0 and j == 0) else 1
            cout = 4 * mid
            out.append(("conv", cin, mid, 1, size, 1))
            size2 = _conv_out(size, 3, stride, pad=1)
            out.append(("conv", mid, mid, 3, size2, 1))
            out.append(("conv", mid, cout, 1, size2, 1))
            if stride != 1 or cin != cout:
                out.append(("conv", cin, cout, 1, size2, 1))
            cin, size = cout, size2
    out.append(("fc", cin, s.classes, 1, 1, 0))
    return out


def resnet_final_size(s: ModelSpec) -> int:
    """Side in pixels of the last stage's feature map."""
    return _resnet_layers(s)[-2][4]


def params(s: ModelSpec) -> int:
    """Trainable parameters (biases, norms and embeddings included; the tied head counted once)."""
    if s.kind == "mlp":
        return s.depth * (s.width * s.width + s.width)
    if s.kind == "gpt":
        h = s.hidden
        block = 12 * h * h + 13 * h  # qkv 3h²+3h, proj h²+h, fc 4h²+4h, out 4h²+h, two LayerNorms 4h
        return s.vocab * h + s.seq_len * h + s.layers * block + 2 * h
    if s.kind == "resnet":
        n = 0
        for kind, cin, cout, k, _size, bn in _resnet_layers(s):
            n += cin * cout * k * k + (cout if kind == "fc" else 0) + 2 * cout * bn
        return n
    raise ValueError(f"unknown model kind {s.kind!r}")


def forward_macs(s: ModelSpec) -> float:
    """Multiply-adds of one sample's forward pass in the matmuls and convolutions (what torchvision counts)."""
    if s.kind == "mlp":
        return float(s.depth * s.width * s.width)
    if s.kind == "gpt":
        h, sl = s.hidden, s.seq_len
        return float(sl * (s.layers * 12 * h * h + s.vocab * h) + s.layers * 2 * sl * sl * h)
    if s.kind == "resnet":
        return float(sum(cin * cout * k * k * size * size for _, cin, cout, k, size, _ in _resnet_layers(s)))
    raise ValueError(f"unknown model kind {s.kind!r}")


def attention_flops_per_sample(s: ModelSpec) -> float:
    """Training FLOPs of attention's QKᵀ and AV per sample: 3 x (2 x 2·S²·H) per layer = 12·L·H·S²."""
    return 12.0 * s.layers * s.hidden * s.seq_len**2 if s.kind == "gpt" else 0.0


def flops_per_sample(s: ModelSpec) -> float:
    """Training FLOPs per sample as simcli's workload presets count them (see the module docstring)."""
    if s.kind == "mlp":
        return 6.0 * params(s)
    if s.kind == "gpt":
        return 6.0 * params(s) * s.seq_len
    return 3.0 * 2.0 * forward_macs(s)


def flops_per_sample_exact(s: ModelSpec) -> float:
    """What the hardware computes: the preset count plus attention's S² term (transformer); for the MLP the
    matmuls exactly, 2·w²·(3·depth - 1) (the first layer's input gradient is never computed)."""
    if s.kind == "mlp":
        return 2.0 * s.width * s.width * (3 * s.depth - 1)
    return flops_per_sample(s) + attention_flops_per_sample(s)


def activation_bytes(s: ModelSpec, batch: int, elem_bytes: int = 4) -> float:
    """A rough upper estimate of the activations autograd keeps for one step of ``batch`` samples.

    gpt: Korthikanti et al. 2022, eq. 2: s·b·h·(34 + 5·a·s/h) bytes per layer with 16-bit activations
    (doubled for 4-byte ones), plus the logits and their gradient (2·s·b·V elements); mlp: two tensors per
    layer; resnet: three per convolution (its output, BatchNorm's, ReLU's).
    """
    if s.kind == "mlp":
        return float(batch * s.width * 2 * s.depth * elem_bytes)
    if s.kind == "gpt":
        sl, h = s.seq_len, s.hidden
        per_layer = sl * batch * h * (34 + 5 * s.heads * sl / h) * (elem_bytes / 2)
        return float(s.layers * per_layer + 2 * sl * batch * s.vocab * 4)
    return float(sum(3 * cout * size * size * batch * elem_bytes for _, _, cout, _, size, _ in _resnet_layers(s)))


def memory_estimate(s: ModelSpec, batch: int) -> float:
    """Bytes one rank needs: parameters x 4 B x 4 (weights, gradients, the flat/DDP copies) + activations."""
    return params(s) * 4.0 * 4 + activation_bytes(s, batch)


def describe(s: ModelSpec) -> str:
    if s.kind == "mlp":
        return f"mlp {s.depth}x{s.width}"
    if s.kind == "gpt":
        return f"gpt {s.layers}x{s.hidden} ({s.heads} heads, seq {s.seq_len}, vocab {s.vocab}, tied)"
    return (
        f"resnet w{s.width} blocks {','.join(str(b) for b in s.blocks)} ({s.image_size}x{s.image_size}, "
        f"{s.classes} classes)"
    )


def batch_dependent(s: ModelSpec) -> bool:
    """Does a sample's gradient depend on the other samples of its batch (BatchNorm)?"""
    return s.kind == "resnet"


def grad_rtol(dtype: str) -> float:
    """Tolerance of the averaged gradient against one process's, relative to its largest element.

    fp32 sums in another order differ by ~1e-7 relative; tf32 keeps 10 mantissa bits, bf16 7 and fp16 10,
    and a gradient summed over a rank's samples in 16 bits differs from one summed over the global batch by
    a few units of the last place.
    """
    return {"fp32": 1e-4, "tf32": 1e-2, "bf16": 5e-2, "fp16": 2e-2}[dtype]


def autocast_settings(dtype: str, device_type: str) -> dict[str, Any]:
    """How a step runs in ``dtype`` on ``device_type``: autocast on or off, its dtype name, TF32 matmuls.

    fp32: no autocast, TF32 off (true fp32 matmuls, also in cuDNN); tf32: no autocast, TF32 matmuls and
    convolutions (CUDA only); bf16/fp16: ``torch.autocast`` to that dtype (fp16 and tf32 only on CUDA).
    Raises ValueError for a dtype the device cannot run; the command line refuses those first.
    """
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}")
    if device_type != "cuda" and dtype not in CPU_DTYPES:
        raise ValueError(f"{dtype} needs a CUDA device")
    return {
        "autocast": dtype in ("bf16", "fp16"),
        "autocast_dtype": {"bf16": "bfloat16", "fp16": "float16"}.get(dtype),
        "allow_tf32": dtype == "tf32",
    }


# --------------------------------------------------------------------------- torch


def build(s: ModelSpec, seed: int, device: Any) -> Any:
    """The torch module, initialised from ``seed`` (every rank builds the same one)."""
    import torch  # heavy
    from torch import nn  # heavy

    torch.manual_seed(seed)
    if s.kind == "mlp":
        layers: list[Any] = []
        for i in range(s.depth):
            layers.append(nn.Linear(s.width, s.width))
            if i < s.depth - 1:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers).to(device)
    if s.kind == "gpt":
        return _gpt(s).to(device)
    if s.kind == "resnet":
        return _resnet(s).to(device)
    raise ValueError(f"unknown model kind {s.kind!r}")


def _gpt(s: ModelSpec) -> Any:
    import torch  # heavy
    from torch import nn  # heavy
    from torch.nn import functional as F  # heavy

    class Block(nn.Module):
        def __init__(self, h: int, heads: int):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
            self.fc, self.out = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

        def forward(self, x):
            b, sl, h = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(h, dim=2)
            q, k, v = (t.view(b, sl, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, sl, h))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(s.vocab, s.hidden), nn.Embedding(s.seq_len, s.hidden)
            self.blocks = nn.ModuleList(Block(s.hidden, s.heads) for _ in range(s.layers))
            self.ln_f = nn.LayerNorm(s.hidden)
            self.register_buffer("pos", torch.arange(s.seq_len), persistent=False)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(self.pos[: idx.shape[1]])
            for blk in self.blocks:
                x = blk(x)
            return F.linear(self.ln_f(x), self.wte.weight)  # the head tied to the token embedding

    return GPT()


def _resnet(s: ModelSpec) -> Any:
    from torch import nn  # heavy

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, mid: int, stride: int):
            super().__init__()
            cout = 4 * mid
            self.body = nn.Sequential(
                nn.Conv2d(cin, mid, 1, bias=False),
                nn.BatchNorm2d(mid),
                nn.ReLU(inplace=True),
                nn.Conv2d(mid, mid, 3, stride, 1, bias=False),
                nn.BatchNorm2d(mid),
                nn.ReLU(inplace=True),
                nn.Conv2d(mid, cout, 1, bias=False),
                nn.BatchNorm2d(cout),
            )
            self.down = (
                nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                if stride != 1 or cin != cout
                else None
            )
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            return self.relu(self.body(x) + (x if self.down is None else self.down(x)))

    if s.image_size >= 64:
        stem = [
            nn.Conv2d(3, s.width, 7, 2, 3, bias=False),
            nn.BatchNorm2d(s.width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        ]
    else:
        stem = [nn.Conv2d(3, s.width, 3, 1, 1, bias=False), nn.BatchNorm2d(s.width), nn.ReLU(inplace=True)]
    mods: list[Any] = list(stem)
    cin = s.width
    for i, n in enumerate(s.blocks):
        mid = s.width * 2**i
        for j in range(n):
            mods.append(Bottleneck(cin, mid, 2 if (i > 0 and j == 0) else 1))
            cin = 4 * mid
    mods += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, s.classes)]
    return nn.Sequential(*mods)


def make_batches(s: ModelSpec, rows: int, n: int, *, gen: Any, device: Any) -> list[tuple[Any, Any]]:
    """``n`` synthetic global batches of ``rows`` samples: (inputs, targets), drawn from ``gen``."""
    import torch  # heavy

    out = []
    for _ in range(n):
        if s.kind == "mlp":
            x = torch.randn(rows, s.width, generator=gen)
            y = torch.randn(rows, s.width, generator=gen)
        elif s.kind == "gpt":
            x = torch.randint(0, s.vocab, (rows, s.seq_len), generator=gen)
            y = torch.randint(0, s.vocab, (rows, s.seq_len), generator=gen)
        else:
            x = torch.randn(rows, 3, s.image_size, s.image_size, generator=gen)
            y = torch.randint(0, s.classes, (rows,), generator=gen)
        out.append((x.to(device), y.to(device)))
    return out


def loss(s: ModelSpec, out: Any, y: Any) -> Any:
    """The mean loss over the batch (so the mean of k equal-sized per-rank losses is the global one)."""
    from torch.nn import functional as F  # heavy

    if s.kind == "mlp":
        return F.mse_loss(out.float(), y)
    if s.kind == "gpt":
        return F.cross_entropy(out.float().reshape(-1, s.vocab), y.reshape(-1))
    return F.cross_entropy(out.float(), y)
