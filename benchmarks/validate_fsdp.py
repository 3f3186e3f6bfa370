"""simcli's sharded model against llm-foundry's published FSDP weak-scaling rows (nothing fitted to them).

For each model: the file's profile (A100 40GB: ``dgx-a100``, 8 GPUs per node and 8x 200 Gb/s per node, as the
cluster measured; H100 80GB: ``dgx-h100``, whose 8x 400 Gb/s the source does not state), ``--strategy fsdp``
with the run's reduction dtype (bf16 PURE: ``--grad-dtype bf16``; Composer's DEFAULT reduces in fp32), ``--units``
= the model's layers, ``--accum`` = its gradient accumulation, and the measured micro-step time at the model's
smallest GPU count as ``--compute-time`` (micro-batch x 2048 tokens / tokens per second per GPU). It then
prints the measured tokens/s per GPU relative to that smallest k beside simcli's E(k)/E(k0) from the profile
as built in (``datasheet``: its device.spread, the 1.48% GPU speed spread of Sinha et al., included) and with
communication alone (``--spread 0``), and the errors of both.

    python benchmarks/validate_fsdp.py

Sources: the headers of validation/published/fsdp-llm-foundry-a100-small.csv (125M-760M),
fsdp-llm-foundry-a100-large.csv (1B-13B), fsdp-llm-foundry-h100.csv (760M-13B on H100) and
fsdp-torchtitan-h100.csv (torchtitan's Llama 3.1 8B with FSDP2 on 8 and 128 H100s; its grad_dtype column gives
the reduction dtype).
"""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from simcli.answers.fit_compute import minimise_scalar
from simcli.io.profiles import resolve_profile
from simcli.step import straggler

ROOT = Path(__file__).resolve().parent.parent
#: file -> the profile its cluster is priced on
FILES = {
    "fsdp-llm-foundry-a100-small.csv": "dgx-a100",
    "fsdp-llm-foundry-a100-large.csv": "dgx-a100",
    "fsdp-llm-foundry-h100.csv": "dgx-h100",
    "fsdp-torchtitan-h100.csv": "dgx-h100",
}
#: Composer's mixed-precision modes -> the reduction dtype (composer/trainer/mosaic_fsdp_utils.py)
GRAD_DTYPE = {"PURE": "bf16", "DEFAULT": "fp32"}
#: layers of the small models (llm-foundry scripts/train/yamls/pretrain/mpt-{125m,350m,760m}.yaml: n_layers)
SMALL_LAYERS = {"125m": 12, "350m": 24, "760m": 24}


def rows() -> dict[tuple[str, str], list[dict]]:
    """The rows by (GPU, model), each with the profile its file is priced on."""
    out: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for name, profile in FILES.items():
        with open(ROOT / "validation" / "published" / name) as f:
            for r in csv.DictReader(line for line in f if not line.startswith("#")):
                if not r.get("layers"):
                    r["layers"] = str(SMALL_LAYERS[r["model"]])
                r["profile"] = profile
                out[(r["gpu"], r["model"])].append(r)
    return out


def predict(r: dict, compute_s: float, ks: list[int], spread: float | None = None) -> dict[int, dict]:
    """simcli's records per k; ``spread`` None: the profile's own device.spread (the datasheet's)."""
    cmd = [
        sys.executable,
        "-m",
        "simcli",
        "speedup",
        "-p",
        r["profile"],
        "--params",
        r["params"],
        "--compute-time",
        repr(compute_s),
        "--units",
        r["layers"],
        "--strategy",
        "fsdp",
        "--grad-dtype",
        r.get("grad_dtype") or GRAD_DTYPE[r["mp_mode"]],
        "--accum",
        r["accum"],
        "-k",
        ",".join(map(str, ks)),
        "-f",
        "json",
    ]
    if r["act_ckpt"] != "True":
        cmd.append("--no-activation-checkpointing")
    if spread is not None:
        cmd += ["--spread", repr(spread)]
    d = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    recs = d["records"] if isinstance(d, dict) else d
    return {int(x["devices"]): x for x in recs}


def _log_ratio(sigma: float, k0: np.ndarray, k: np.ndarray) -> np.ndarray:
    """log of the slowest-of-k throughput ratio (1 + sigma·m_k0) / (1 + sigma·m_k)."""
    return np.log(straggler.slowdown(k0, sigma) / straggler.slowdown(k, sigma))


def cluster_spread(points: list[tuple[int, int, float]]) -> float:
    """One spread for a set of (k0, k, measured/predicted ratio) points: least squares on the log ratio."""
    k0, k, r = (np.array(x, dtype=np.float64) for x in zip(*points))
    return minimise_scalar(lambda sg: float(np.sum((_log_ratio(sg, k0, k) - np.log(r)) ** 2)), 0.0, 0.9)


def _summary(label: str, e: list[float]) -> str:
    a = [abs(x) for x in e]
    return (
        f"{label}: {len(e)} rows: median |error| {statistics.median(a):.1%}, max {max(a):.1%}, "
        f"mean error {statistics.mean(e):+.1%}"
    )


def main() -> None:
    # per (gpu, model): its rows, the measured ratios to the smallest k and simcli's without a spread
    groups = {}
    for key, rs in rows().items():
        rs = sorted(rs, key=lambda r: int(r["k"]))
        ks = [int(r["k"]) for r in rs]
        tps0 = float(rs[0]["tps_gpu"])
        compute = int(rs[0]["mb"]) * int(rs[0]["seq"]) / tps0  # one micro-step
        rec = predict(rs[0], compute, ks, spread=0.0)  # communication alone
        sheet = predict(rs[0], compute, ks)  # the datasheet profile as it is, its device.spread included
        meas = {int(r["k"]): float(r["tps_gpu"]) / tps0 for r in rs}
        pred = {k: rec[k]["efficiency"] / rec[ks[0]]["efficiency"] for k in ks}
        dsh = {k: sheet[k]["efficiency"] / sheet[ks[0]]["efficiency"] for k in ks}
        sigma = resolve_profile(rs[0]["profile"]).device.spread or 0.0
        groups[key] = dict(rs=rs, ks=ks, compute=compute, rec=rec, meas=meas, pred=pred, sheet=dsh, sigma=sigma)

    def ratio_of(g: dict, spread: float) -> dict[int, float]:
        r = predict(g["rs"][0], g["compute"], g["ks"], spread=spread)
        return {k: r[k]["efficiency"] / r[g["ks"][0]]["efficiency"] for k in g["ks"]}

    errs: dict[str, list[float]] = defaultdict(list)
    errs0: list[float] = []
    errs2: list[float] = []
    errs3: list[float] = []
    # the datasheet's prediction (the profile's device.spread, Sinha et al.'s GPU spread) and its error; the
    # same with communication alone (--spread 0); beside them: how much the measured step grew from the
    # smallest k, and how much simcli's whole communication time grew (hidden or not): what exposing every
    # collective as priced could add at most;
    # the per-device spread the slowest-of-k model (simcli.step.straggler) would need for the row alone; for
    # models measured at three or more k, the prediction with the spread that the two smallest k give; and
    # the prediction with one spread for the cluster, fitted on the other models of the same GPU's table
    print(
        f"{'gpu':>9} {'model':>5} {'k':>4} {'measured':>9} {'datasheet':>9} {'error':>7} {'comm alone':>16} "
        f"{'step growth ms':>15} {'T_comm growth ms':>17} {'spread alone':>13} {'from 2 k':>15} "
        f"{'other models':>21}"
    )
    for (gpu, model), g in groups.items():
        ks, meas, pred, rec = g["ks"], g["meas"], g["pred"], g["rec"]
        k0 = ks[0]
        m = int(g["rs"][0]["accum"])
        two = None
        if len(ks) >= 3:  # the spread that the model needs at the second k, then every larger k with it
            sigma2 = max(0.0, straggler.spread_from(meas[ks[1]] / pred[ks[1]], k0, ks[1]))
            two = ratio_of(g, sigma2)
        others = [
            (h["ks"][0], k, h["meas"][k] / h["pred"][k])
            for (gg, mm), h in groups.items()
            if gg == gpu and mm != model
            for k in h["ks"][1:]
        ]
        sigma3 = cluster_spread(others)
        three = ratio_of(g, sigma3)
        for r in g["rs"][1:]:
            k = int(r["k"])
            errs[gpu].append(g["sheet"][k] / meas[k] - 1)
            errs0.append(pred[k] / meas[k] - 1)
            errs3.append(three[k] / meas[k] - 1)
            grew = m * (int(r["mb"]) * int(r["seq"]) / float(r["tps_gpu"]) - g["compute"]) * 1e3
            comm = (rec[k]["t_comm_s"] - rec[k0]["t_comm_s"]) * 1e3
            alone = straggler.spread_from(meas[k], k0, k)
            col2 = ""
            if two is not None and k == ks[1]:
                col2 = f"spread {sigma2:.1%}"
            elif two is not None:
                errs2.append(two[k] / meas[k] - 1)
                col2 = f"{two[k]:.3f} {two[k] / meas[k] - 1:+.1%}"
            col3 = f"{sigma3:.1%}: {three[k]:.3f} {three[k] / meas[k] - 1:+.1%}"
            print(
                f"{gpu:>9} {model:>5} {k:>4} {meas[k]:9.3f} {g['sheet'][k]:9.3f} {g['sheet'][k] / meas[k] - 1:+7.1%} "
                f"{pred[k]:9.3f} {pred[k] / meas[k] - 1:+6.1%} {grew:15.0f} "
                f"{comm:17.1f} {alone:13.1%} {col2:>15} {col3:>21}"
            )
    sigmas = sorted({g["sigma"] for g in groups.values()})
    print(f"datasheet: each profile as built in, device.spread {', '.join(f'{s:.2%}' for s in sigmas)}")
    for name, e in [*errs.items(), ("all", [x for v in errs.values() for x in v])]:
        print(_summary(name, e))
    print(_summary("communication alone (--spread 0)", errs0))
    print(_summary("from the two smallest k (--spread fitted there, models with 3+ k)", errs2))
    print(_summary("one spread per cluster, fitted on its other models (leave one model out)", errs3))


if __name__ == "__main__":
    main()
