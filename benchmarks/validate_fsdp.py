"""simcli's sharded model against llm-foundry's published FSDP weak-scaling rows (nothing fitted to them).

For each model: the file's profile (A100 40GB: ``dgx-a100``, 8 GPUs per node and 8x 200 Gb/s per node, as the
cluster measured; H100 80GB: ``dgx-h100``, whose 8x 400 Gb/s the source does not state), ``--strategy fsdp``
with the run's reduction dtype (bf16 PURE: ``--grad-dtype bf16``; Composer's DEFAULT reduces in fp32), ``--units``
= the model's layers, ``--accum`` = its gradient accumulation, and the measured micro-step time at the model's
smallest GPU count as ``--compute-time`` measured at that k (``--compute-time-at-k``: its wait for the slowest
device is in it), and the optimizer step the runs took (``--optimizer``, ``--update-extras clip``): llm-foundry's
MPT configurations step Composer's DecoupledAdamW with weight_decay 0.0 (``decoupled-adamw-wd0``: eight passes,
80 B per parameter of the shard) after FSDP's clip_grad_norm_ (``gradient_clipping: norm``: 12 B); torchtitan's
default is torch's fused AdamW (28 B) with clip_grad_norm_ (max_norm 1.0). It then prints the measured tokens/s
per GPU relative to that smallest k beside simcli's samples/s per device relative to k0 from the profile as built
in (``datasheet``: the default spread of its device kind, only its excess over k0) and with communication and the
update alone (``--spread 0``), and the errors of both. ``--no-update`` prints the table without the update term
(the model before issue 22's per-update cost).

Each scenario is built in-process (``simcli.cli.options.ScenarioOptions(...).build()``, what ``simcli speedup``
builds from the same options) and priced with ``simcli.step.engine.simulate``.

    python benchmarks/validate_fsdp.py [--no-update] [--write-errors]

``--write-errors`` writes simcli/step/error_table.py again, with validate_ddp.py's rows (benchmarks/step_errors.py;
it prints nothing else): every row's r = predicted / measured per-GPU throughput relative to the smallest k
(``datasheet``) with its kind.

Sources: the headers of validation/published/fsdp-llm-foundry-a100-small.csv (125M-760M),
fsdp-llm-foundry-a100-large.csv (1B-13B), fsdp-llm-foundry-h100.csv (760M-13B on H100) and
fsdp-torchtitan-h100.csv (torchtitan's Llama 3.1 8B with FSDP2 on 8 and 128 H100s; its grad_dtype column gives
the reduction dtype).
"""

from __future__ import annotations

import csv
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from simcli.cli.options import OptimizerChoice, ScenarioOptions
from simcli.fits.fit_compute import minimise_scalar
from simcli.io.profiles import resolve_profile
from simcli.step import straggler
from simcli.step.engine import simulate

ROOT = Path(__file__).resolve().parent.parent
#: file -> the profile its cluster is priced on
FILES = {
    "fsdp-llm-foundry-a100-small.csv": "dgx-a100",
    "fsdp-llm-foundry-a100-large.csv": "dgx-a100",
    "fsdp-llm-foundry-h100.csv": "dgx-h100",
    "fsdp-torchtitan-h100.csv": "dgx-h100",
}
#: the optimizer step each GPU's runs take and the passes around it (simcli.step.update; docs/sharding.md):
#: llm-foundry's MPT yamls (scripts/train/yamls/pretrain/mpt-*.yaml) name decoupled_adamw with weight_decay 0.0
#: and gradient_clipping (clipping_type norm: FSDP's clip_grad_norm_, composer/algorithms/gradient_clipping);
#: torchtitan's default --optimizer.implementation is fused, with clip_grad_norm_ (--training.max_norm 1.0)
OPTIMIZER = {"h100_96gb": "adamw-fused"}
DEFAULT_OPTIMIZER = "decoupled-adamw-wd0"
EXTRAS = "clip"
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
                r["_file"] = name
                out[(r["gpu"], r["model"])].append(r)
    return out


def predict(
    r: dict, compute_s: float, ks: list[int], spread: float | None = None, update: bool = True
) -> dict[int, dict]:
    """simcli's records per k; ``spread`` None: the default of the profile's device kind (its excess over k0);
    ``update`` False: no per-update term (--update-time 0)."""
    sc = ScenarioOptions(
        profile=r["profile"],
        params=float(r["params"]),
        compute_time=repr(compute_s),
        compute_time_at_k=ks[0],
        units=int(r["layers"]),
        strategy="fsdp",
        grad_dtype=r.get("grad_dtype") or GRAD_DTYPE[r["mp_mode"]],
        accum=int(r["accum"]),
        optimizer=OptimizerChoice(OPTIMIZER.get(r["gpu"], DEFAULT_OPTIMIZER)),
        update_extras=EXTRAS,
        update_time=None if update else "0",
        no_activation_checkpointing=r["act_ckpt"] != "True",
        spread=None if spread is None else repr(spread),
    ).build()
    return {int(x["devices"]): x for x in simulate(sc, ks).records()}


def per_device(recs: dict[int, dict], k: int) -> float:
    """simcli's samples/s per device at k (E(k) leaves a sharded update's gain out: issue 22)."""
    return recs[k]["samples_per_s"] / k


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
        f"{label}: {len(e)} rows: median |error| {statistics.median(a):.1%}, p90 {np.percentile(a, 90):.1%}, "
        f"max {max(a):.1%}, "
        f"mean error {statistics.mean(e):+.1%}"
    )


def error_rows() -> list[tuple]:
    """One row per validated row (k > k0) of every (GPU, model): (series, file, profile, devices, devices per
    node, strategy, base, r = the ``datasheet`` prediction of per-GPU throughput relative to k0 / the measured).
    The base is "measured": the micro-step at k0 is the published tokens/s per GPU."""
    out = []
    for (gpu, model), rs in rows().items():
        rs = sorted(rs, key=lambda r: int(r["k"]))
        ks = [int(r["k"]) for r in rs]
        tps0 = float(rs[0]["tps_gpu"])
        sheet = predict(rs[0], int(rs[0]["mb"]) * int(rs[0]["seq"]) / tps0, ks)
        g = int(resolve_profile(rs[0]["profile"]).network[0].size or 1)
        for r in rs[1:]:
            k = int(r["k"])
            ratio = (per_device(sheet, k) / per_device(sheet, ks[0])) / (float(r["tps_gpu"]) / tps0)
            out.append((f"{gpu} {model}", rs[0]["_file"], rs[0]["profile"], k, g, "fsdp", "measured", float(ratio)))
    return out


def main(argv: list[str]) -> None:
    update = "--no-update" not in argv
    # per (gpu, model): its rows, the measured ratios to the smallest k and simcli's without a spread
    groups = {}
    for key, rs in rows().items():
        rs = sorted(rs, key=lambda r: int(r["k"]))
        ks = [int(r["k"]) for r in rs]
        tps0 = float(rs[0]["tps_gpu"])
        compute = int(rs[0]["mb"]) * int(rs[0]["seq"]) / tps0  # one micro-step
        rec = predict(rs[0], compute, ks, spread=0.0, update=update)  # communication (and the update) alone
        sheet = predict(rs[0], compute, ks, update=update)  # the datasheet profile, its kind's spread included
        meas = {int(r["k"]): float(r["tps_gpu"]) / tps0 for r in rs}
        pred = {k: per_device(rec, k) / per_device(rec, ks[0]) for k in ks}
        dsh = {k: per_device(sheet, k) / per_device(sheet, ks[0]) for k in ks}
        prof = resolve_profile(rs[0]["profile"])
        sigma = prof.device.spread if prof.device.spread is not None else straggler.default_spread(prof)[0]
        groups[key] = dict(rs=rs, ks=ks, compute=compute, rec=rec, meas=meas, pred=pred, sheet=dsh, sigma=sigma)

    def ratio_of(g: dict, spread: float) -> dict[int, float]:
        r = predict(g["rs"][0], g["compute"], g["ks"], spread=spread, update=update)
        return {k: per_device(r, k) / per_device(r, g["ks"][0]) for k in g["ks"]}

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
    print(
        f"datasheet: each profile as built in, spread {', '.join(f'{s:.2%}' for s in sigmas)} above k0; update: "
        + (f"{DEFAULT_OPTIMIZER} (torchtitan: {OPTIMIZER['h100_96gb']}) + {EXTRAS}" if update else "none")
    )
    for name, e in [*errs.items(), ("all", [x for v in errs.values() for x in v])]:
        print(_summary(name, e))
    print(_summary("communication" + (" and the update" if update else "") + " alone (--spread 0)", errs0))
    print(_summary("from the two smallest k (--spread fitted there, models with 3+ k)", errs2))
    print(_summary("one spread per cluster, fitted on its other models (leave one model out)", errs3))


if __name__ == "__main__" and "--write-errors" in sys.argv:
    import step_errors

    print(f"wrote {step_errors.write().relative_to(ROOT)}")
elif __name__ == "__main__":
    main(sys.argv[1:])
