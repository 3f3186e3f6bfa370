"""Activations a training step keeps for backward, per sample, measured on the CPU build of torch.

A model from ``simcli.bench.models`` (plain torch, no torchvision) runs one forward pass under
``torch.autograd.graph.saved_tensors_hooks``. Every tensor autograd saves for backward is counted once per
storage (in-place ReLUs and ops that save their input share one). Parameters are not counted (they are memory
of their own), and the per-sample figure is the slope between two batch sizes (b and 2b), so that what does
not grow with the batch (autocast's bf16 copies of the weights) stays out. The count is framework-level and
the same on a GPU: what the caching allocator must hold from forward to backward, without temporaries or
allocator overhead.

    python measurements/activation_bytes.py [--batch 2]    # measures at 2 and 4 samples

ResNet-50 is ``--model resnet --model-width 64 --blocks 3,4,6,3 --image-size 224 --classes 1000`` (v1.5: the
stride sits on the 3x3 convolution, as torchvision's), ResNet-101 the same with blocks 3,4,23,3. Prints fp32 and
bf16 autocast (what AMP training keeps) per model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simcli.bench.models import ModelSpec, build  # noqa: E402

MODELS = {
    "resnet50": ModelSpec(kind="resnet", width=64, blocks=(3, 4, 6, 3), image_size=224, classes=1000),
    "resnet101": ModelSpec(kind="resnet", width=64, blocks=(3, 4, 23, 3), image_size=224, classes=1000),
}


def saved_bytes(spec: ModelSpec, batch: int, dtype: str) -> tuple[float, float]:
    """(bytes saved for backward, parameters) for one forward pass of ``batch`` samples."""
    import torch

    model = build(spec, seed=0, device=torch.device("cpu"))
    params = {p.data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr not in params:
            seen[ptr] = max(seen.get(ptr, 0), st.nbytes())
        return t

    x = torch.randn(batch, 3, spec.image_size, spec.image_size)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        if dtype == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = model(x)
        else:
            out = model(x)
    del out
    return sum(seen.values()), sum(p.numel() for p in model.parameters())


def per_sample(spec: ModelSpec, batch: int, dtype: str) -> tuple[float, float]:
    """(bytes per sample: the slope from ``batch`` to 2 x ``batch`` samples, parameters)."""
    s1, n = saved_bytes(spec, batch, dtype)
    s2, _ = saved_bytes(spec, 2 * batch, dtype)
    return (s2 - s1) / batch, n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=2)
    a = ap.parse_args()
    print("model      params        fp32 MB/sample  bf16 autocast MB/sample")
    for name, spec in MODELS.items():
        f32, n = per_sample(spec, a.batch, "fp32")
        b16, _ = per_sample(spec, a.batch, "bf16")
        print(f"{name:10s} {n:12,d}  {f32 / 1e6:14.1f}  {b16 / 1e6:23.1f}")


if __name__ == "__main__":
    main()
