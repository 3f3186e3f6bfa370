"""simcli's DDP model against published data-parallel scaling tables (nothing fitted to them; issue 22).

Each series is predicted from its datasheet profile and the measured step at its smallest k: the optimizer step
(T_k0 = k0 · batch · accum / throughput) is held, and simcli's micro-step time is the one that makes its own step at k0
meet it (so its update, communication and slowest-of-k0 wait are taken out of the measurement before the larger k are
priced). The table prints, per series, the error of the predicted throughput at every larger k for:

* ``before``: the model before issue 22 (no per-update term; the 1.48% spread applied from one device although the
  step was measured at k0; the measured step per micro-step as the compute time);
* ``comm``: communication alone (no update, no spread);
* ``+update``: communication and the per-update cost (simcli.step.update; the series' optimizer and passes);
* ``+spread``: communication and the spread, only its excess over k0;
* ``after``: all three (simcli as it is now).

    python benchmarks/validate_ddp.py [--rows] [--fit] [--write-errors]

``--write-errors`` writes simcli/step/error_table.py again, with validate_fsdp.py's rows (benchmarks/step_errors.py;
it prints nothing else): every row's r = predicted / measured throughput (``after``) with its kind.
``--fit`` adds, per series, the spread σ and the per-update time u at k0 fitted together to its rows
(simcli.fits.fit_update.fit_spread_update, what ``simcli calibrate`` runs on a scaling table), with one
standard error each where the rows leave more than two degrees of freedom: what each series would need, not
what simcli predicts (nothing of it enters the table above).

Sources: the headers of validation/published/ddp/*.csv (NVIDIA DeepLearningExamples' BERT and Transformer-XL
multi-node tables: PyTorch, TensorFlow 1 and 2, PaddlePaddle on DGX A100 and DGX-2H), ../shared's
dle-bert-large-seq128-fp16-a100.csv (the PyTorch BERT table from one GPU) and the project's own DDP check,
validation/published/dlperf-resnet50-fp32-v100.csv.
"""

from __future__ import annotations

import csv
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simcli.base.types import Workload
from simcli.io.profiles import resolve_profile
from simcli.io.workloads import get_model
from simcli.step.engine import Scenario, simulate

ROOT = Path(__file__).resolve().parent.parent
PUB = ROOT / "validation" / "published"
#: ../shared/data/published beside the checkout (the project's layout), else the workplace's copy
SHARED = next(
    (p for p in (ROOT.parent / "shared" / "data" / "published", Path("/work/shared/data/published")) if p.is_dir()),
    ROOT.parent / "shared" / "data" / "published",
)
PROFILES = {"a100": "dgx-a100", "dgx2h": str(PUB / "profiles" / "dgx-2h.yaml")}


@dataclass
class Series:
    name: str
    profile: str
    rows: list[dict]
    workload: Workload
    optimizer: str
    extras: tuple[str, ...]
    grad_dtype: str
    overlap: str


def _bert(seq: int) -> Workload:
    return get_model("bert-large").workload(seq)


def _setup(name: str, precision: str) -> tuple[str, tuple[str, ...], str, str]:
    """(optimizer, extras, grad dtype, overlap) of a series, from what its framework's recipe runs (DESIGN)."""
    half = precision == "fp16"
    if name.startswith("pyt-"):  # run_pretraining.py: FusedLAMB; allreduce_post_accumulation's flat buffer
        grad = "fp16" if name.startswith("pyt-dgx2h") else "fp32"  # 19.07 DGX-2 configs: ..._fp16; 21.11: fp32
        return "lamb", ("flatten",), grad, "none"
    if name.startswith(("tf1-", "tf2-")):  # Horovod after accumulation, fp16 compression with mixed precision
        return "lamb", (), "fp16" if half else "fp32", "none"
    if name.startswith("paddle-"):
        return "lamb", (), "fp32", "none"
    if name.startswith("txl-"):  # DDP buckets during backward, LAMB every step (no accumulation)
        return "lamb", (), "fp16" if half else "fp32", "buckets"
    raise ValueError(name)


def series() -> list[Series]:
    out: list[Series] = []
    by: dict[str, list[dict]] = {}
    for f in sorted((PUB / "ddp").glob("*.csv")):
        with open(f) as fh:
            for r in csv.DictReader(line for line in fh if not line.startswith("#")):
                r["_file"] = f"ddp/{f.name}"
                by.setdefault(r["series"], []).append(r)
    shared = SHARED / "dle-bert-large-seq128-fp16-a100.csv"
    if shared.exists():  # the same table from one GPU: the DDP series the issue holds the model to
        with open(shared) as fh:
            rs = [r for r in csv.DictReader(line for line in fh if not line.startswith("#"))]
        rs = [r for r in rs if not (r["devices"] == "8" and r["table"] == "single-node")]
        for r in rs:
            r.update(
                series="dle-shared-s128-fp16 (from k=1)", precision="fp16", seq="128", _file=f"shared:{shared.name}"
            )
        by["dle-shared-s128-fp16 (from k=1)"] = rs
    for name, rs in by.items():
        rs.sort(key=lambda r: int(r["devices"]))
        prec = rs[0]["precision"]
        key = "pyt-a100" if name.startswith("dle-shared") else name
        opt, extras, grad, overlap = _setup(key, prec)
        prof = PROFILES["dgx2h" if "dgx2h" in name else "a100"]
        if name.startswith("txl-"):
            wl = Workload("transformer-xl-large", params=2.57e8, flops_per_sample=6 * 2.57e8 * 384, batch_per_device=4)
        else:
            wl = _bert(int(rs[0]["seq"]))
        out.append(Series(name, prof, rs, wl, opt, extras, grad, overlap))
    with open(PUB / "dlperf-resnet50-fp32-v100.csv") as fh:
        rs = [r for r in csv.DictReader(line for line in fh if not line.startswith("#"))]
    for r in rs:
        r.update(accum="1", samples_per_s=r["images_per_s"], _file="dlperf-resnet50-fp32-v100.csv")
    out.append(
        Series(
            "dlperf-resnet50-fp32-v100 (project)",
            str(PUB / "profiles" / "dgx-v100-1xedr.yaml"),
            rs,
            get_model("resnet50").workload(),
            "sgd-momentum",
            (),
            "fp32",
            "none",
        )
    )
    return out


def _scenario(s: Series, micro_s: float, **kw) -> Scenario:
    r0 = s.rows[0]
    return Scenario(
        profile=resolve_profile(s.profile),
        workload=s.workload,
        dtype="fp32" if s.rows[0].get("precision") == "fp32" or "fp32" in s.name else None,
        grad_dtype=s.grad_dtype,
        compute_time_s=micro_s,
        batch_per_device=int(r0["batch_per_device"]),
        overlap=s.overlap,
        **kw,
    )


def _step(sc: Scenario, k: int, accum: int) -> float:
    return float(simulate(sc.replace(accum=accum), [k]).t_step_s[0])


def predict(s: Series, variant: str) -> dict[int, float]:
    """Predicted throughput (samples/s) per row's k, with the micro-step solved at the smallest k (DESIGN)."""
    r0 = s.rows[0]
    k0, m0, b0 = int(r0["devices"]), int(r0["accum"]), int(r0["batch_per_device"])
    t0 = k0 * b0 * m0 / float(r0["samples_per_s"])
    kw: dict = {}
    if variant == "before":
        kw = dict(spread=0.0148, update_time_s=0.0)
        micro = t0 / m0
    else:
        kw = dict(
            spread=None if variant in ("+spread", "after") else 0.0,
            optimizer=s.optimizer,
            update_extras=s.extras,
            update_time_s=None if variant in ("+update", "after") else 0.0,
            compute_time_at_k=k0,
        )
        micro = t0 / m0
        for _ in range(6):  # T(k0) is affine in the micro-step but for the overlap: a few secant steps
            got = _step(_scenario(s, micro, **kw), k0, m0)
            micro = max(micro - (got - t0) / m0, 1e-9)
    sc = _scenario(s, micro, **kw)
    out = {}
    for r in s.rows:
        k, m = int(r["devices"]), int(r["accum"])
        out[id(r)] = k * int(r["batch_per_device"]) * m / _step(sc, k, m)
    return out


VARIANTS = ("before", "comm", "+update", "+spread", "after")


def fit(s: Series) -> str:
    """σ and u (at k0) fitted together to the series' rows, as ``simcli calibrate`` fits a scaling table."""
    from simcli.fits.fit_update import fit_spread_update

    r0 = s.rows[0]
    sc = _scenario(s, 1.0, optimizer=s.optimizer, update_extras=s.extras, compute_time_at_k=int(r0["devices"]))
    f = fit_spread_update(
        sc,
        [int(r["devices"]) for r in s.rows],
        [float(r["samples_per_s"]) for r in s.rows],
        accum=[int(r["accum"]) for r in s.rows],
        batch=float(r0["batch_per_device"]),
    )
    se = lambda x, unit=1.0, fmt=".1f": "" if x is None else f" ± {x * unit:{fmt}}"  # noqa: E731
    told = "" if f.separable else " (not told apart)" if f.correlation is not None else " (no standard errors)"
    return f"σ {f.spread:.1%}{se(f.spread_se, 100.0)}, u {f.update_s * 1e3:.0f}{se(f.update_se, 1e3, '.0f')} ms{told}"


def per_node(s: Series) -> int:
    """Devices per node of a series' profile (its innermost tier)."""
    return int(resolve_profile(s.profile).network[0].size or 1)


def error_rows() -> list[tuple]:
    """One row per validated row (k > k0) of every series: (series, file, profile, devices, devices per node,
    strategy, base, r = predicted / measured throughput as ``after`` scores it). The base is "measured": each
    series' step at k0 is the published throughput."""
    out = []
    for s in series():
        files = sorted({r.get("_file", "") for r in s.rows})
        pred = predict(s, "after")
        g = per_node(s)
        for r in s.rows[1:]:
            ratio = pred[id(r)] / float(r["samples_per_s"])
            out.append(
                (
                    s.name,
                    files[0],
                    s.profile.removeprefix(str(ROOT) + "/"),
                    int(r["devices"]),
                    g,
                    "ddp",
                    "measured",
                    float(ratio),
                )
            )
    return out


def main(argv: list[str]) -> None:
    show_rows = "--rows" in argv
    show_fit = "--fit" in argv
    allerr: dict[str, list[float]] = {v: [] for v in VARIANTS}
    print(f"{'series':38} {'k0':>4} {'rows':>4} " + " ".join(f"{v + ' med/max':>17}" for v in VARIANTS))
    per_series: dict[str, dict[str, list[float]]] = {}
    for s in series():
        preds = {v: predict(s, v) for v in VARIANTS}
        errs: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for r in s.rows[1:]:
            meas = float(r["samples_per_s"])
            line = f"    k={int(r['devices']):5d} m={int(r['accum']):4d} meas {meas:10.1f}"
            for v in VARIANTS:
                e = preds[v][id(r)] / meas - 1
                errs[v].append(e)
                line += f" {v} {e:+6.1%}"
            if show_rows:
                print(line)
        per_series[s.name] = errs
        cells = []
        for v in VARIANTS:
            a = [abs(x) for x in errs[v]]
            allerr[v] += errs[v]
            cells.append(f"{statistics.median(a):6.1%} / {max(a, key=abs):+6.1%}".rjust(17))
        worst = lambda e: max(e, key=abs)  # noqa: E731
        cells = [
            f"{statistics.median([abs(x) for x in errs[v]]):5.1%} / {worst(errs[v]):+6.1%}".rjust(17) for v in VARIANTS
        ]
        print(
            f"{s.name:38} {int(s.rows[0]['devices']):4d} {len(s.rows) - 1:4d} "
            + " ".join(cells)
            + (f"   fitted: {fit(s)}" if show_fit else "")
        )
    print()
    for v in VARIANTS:
        a = np.abs(allerr[v])
        print(
            f"{v:8}: {len(a)} rows: median |error| {np.median(a):.1%}, p90 {np.percentile(a, 90):.1%}, "
            f"worst {max(allerr[v], key=abs):+.1%}, mean {np.mean(allerr[v]):+.1%}"
        )
    held = [n for n in per_series if n.startswith(("dle-shared", "dlperf"))]
    for v in VARIANTS:
        e = [x for n in held for x in per_series[n][v]]
        a = np.abs(e)
        print(f"held ({', '.join(held)}) {v}: median |error| {np.median(a):.1%}, worst {max(e, key=abs):+.1%}")


if __name__ == "__main__" and "--write-errors" in sys.argv:
    import step_errors

    print(f"wrote {step_errors.write().relative_to(ROOT)}")
elif __name__ == "__main__":
    main(sys.argv[1:])
