"""The memory model (simcli.step.memory) against published peak-memory figures. Prints; asserts nothing.

1. torchtitan's Llama 3.1 8B FSDP2 rows on 8 and 128 H100s (validation/published/memory-torchtitan-h100.csv):
   the predicted bytes per device with full activation checkpointing and without; a selective-checkpointing row
   is bracketed when the measurement lies between the two. The error is prediction / measurement - 1 (the
   measurement is torch.cuda.max_memory_reserved: the caching allocator's peak, which includes its slack and
   fragmentation, so the model sits below it).
2. The same rows' difference between 8 and 128 GPUs: the activations are the same per device, so what changes is
   the sharded training state alone (parameters, gradients, AdamW state over k) - the cleanest check of that part.
3. The ZeRO paper's model-size limits on 32 GB V100s (validation/published/memory-zero-limits.csv): the largest
   model whose training state alone fits (activations excluded, so an upper bound) against the published limit.

Usage: python benchmarks/validate_memory.py
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from simcli.step import memory as M

ROOT = Path(__file__).resolve().parents[1] / "validation" / "published"
GiB = 2.0**30

#: Llama 3.1 8B (Meta's config.json: hidden_size 4096, num_hidden_layers 32, vocab_size 128256)
LLAMA31_8B = dict(params=8_030_261_248, layers=32, hidden=4096, vocab=128_256)


def rows(name: str) -> list[dict[str, str]]:
    with open(ROOT / name, encoding="utf-8") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def llama_fsdp(k: int, tokens: int, checkpointing: bool) -> M.Memory:
    w = LLAMA31_8B
    act = M.activation_bytes(
        tokens=tokens, hidden=w["hidden"], units=w["layers"], checkpointing=checkpointing, vocab=w["vocab"]
    )
    return M.per_device(
        "fsdp",
        np.array([k]),
        params=w["params"],
        units=w["layers"],
        param_bytes=2,
        grad_bytes=4,
        optimizer="adamw",
        activations=act,
        reshard_after_forward=True,
    )


def torchtitan() -> list[dict]:
    out = []
    print("torchtitan, Llama 3.1 8B, FSDP2 on H100 (measured: max_memory_reserved)")
    print(
        f"{'table':>5} {'k':>4} {'tokens':>7} {'AC':>9} {'technique':<20} {'measured':>9} {'full AC':>8} "
        f"{'no AC':>8} {'error':>8}  reading"
    )
    for r in rows("memory-torchtitan-h100.csv"):
        k, tokens = int(r["k"]), int(r["mb"]) * int(r["seq"])
        meas = float(r["memory_gib"])
        full = float(llama_fsdp(k, tokens, True).total[0]) / GiB
        none = float(llama_fsdp(k, tokens, False).total[0]) / GiB
        if r["act_ckpt"] == "full":
            err = full / meas - 1
            reading = f"full checkpointing: error {100 * err:+.1f}%"
        else:
            err = None
            inside = full <= meas <= none
            reading = "selective: " + ("bracketed" if inside else "NOT bracketed") + f" ({full:.1f}..{none:.1f})"
        out.append({**r, "full": full, "none": none, "error": err})
        e = "" if err is None else f"{100 * err:+.1f}%"
        print(
            f"{r['table']:>5} {k:>4} {tokens:>7} {r['act_ckpt']:>9} {r['technique']:<20} {meas:>9.1f} "
            f"{full:>8.1f} {none:>8.1f} {e:>8}  {reading}"
        )
    print("\nthe sharded state alone: 8 GPUs minus 128 GPUs, same technique (activations cancel)")
    by = {(int(r["k"]), r["technique"]): float(r["memory_gib"]) for r in rows("memory-torchtitan-h100.csv")}
    for tech in ("fsdp", "fsdp+compile"):
        meas = by[(8, tech)] - by[(128, tech)]
        pred = float(llama_fsdp(8, 16384, True).total[0] - llama_fsdp(128, 16384, True).total[0]) / GiB
        print(f"  {tech:<14} measured {meas:.1f} GiB, predicted {pred:.2f} GiB: error {100 * (pred / meas - 1):+.1f}%")
        out.append({"table": "1-3", "technique": tech, "measured": meas, "predicted": pred, "error": pred / meas - 1})
    return out


def zero_limits() -> None:
    print("\nZeRO (SC20) model-size limits on 32 GB V100s, fp16 mixed precision + Adam")
    print(f"{'strategy':<8} {'k':>4} {'published':>10} {'state-only bound':>17} {'error':>8}")
    for r in rows("memory-zero-limits.csv"):
        k, cap = int(r["k"]), float(r["memory_gb"]) * 1e9

        def state(p: float) -> float:
            return float(
                M.per_device(
                    r["strategy"],
                    np.array([k]),
                    params=p,
                    units=48,
                    param_bytes=2,
                    grad_bytes=2,
                    optimizer="adam",
                    reshard_after_forward=True,
                ).state[0]
            )

        lo, hi = 1e6, 1e13
        while hi / lo > 1 + 1e-6:  # the largest P whose state fits: bisection in log space
            mid = (lo * hi) ** 0.5
            lo, hi = (mid, hi) if state(mid) <= cap else (lo, mid)
        pub = float(r["params_limit"])
        print(f"{r['strategy']:<8} {k:>4} {pub / 1e9:>9.1f}B {lo / 1e9:>16.2f}B {100 * (lo / pub - 1):>+7.1f}%")


def main() -> None:
    torchtitan()
    zero_limits()
    print(
        "\nerror = prediction / measurement - 1; the model leaves out the caching allocator's slack, the CUDA "
        "context and NCCL's buffers, so a negative error is the expected sign (docs/sharding.md)."
    )


if __name__ == "__main__":
    main()
