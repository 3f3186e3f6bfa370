"""The slowest of k devices: a synchronised step runs at the pace of its slowest device.

Pure numpy; no typer, yaml or torch. If each of k devices computes a step in T·(1 + σ·Z), Z a standard normal
drawn per device (σ: the spread of the devices' speed, as a fraction of T), and every step waits for all k
(DDP's all-reduce, FSDP's all-gathers), the step's compute takes the expected slowest of them::

    T_compute(k) = T · (1 + σ · m_k),   m_k = E[max of k standard normals]

m_1 = 0 and m_2 = 1/√π = 0.5642; m_10 = 1.5388, m_100 = 2.5076, m_1000 = 3.2414 (L. H. C. Tippett, "On the
extreme individuals and the range of samples taken from a normal population", Biometrika 17, 1925; the same
values in H. L. Harter, "Expected values of normal order statistics", Biometrika 48, 1961). m_k grows like
√(2 ln k), so the loss is front-loaded: each doubling of k costs less than the one before.

Where σ comes from. GPUs of one SKU do not run at one speed: power management and manufacturing variability
spread them. P. Sinha et al. ("Not All GPUs Are Created Equal", SC22; arXiv:2208.11035v3) measured more than
90% of the GPUs of five clusters and found 8% variation on average (max 22%), defined in their artifact
(hal-uw/gpu_variability_sc22_artifact, plot_script/plot_aggregated.py) as 4·IQR / median: 5.40 σ for a normal
spread, so σ = 1.48%. It is the default of every GPU kind (:data:`DEFAULT_SPREAD`, :func:`default_spread`) for
every GPU profile that states no ``device.spread``, built in or written by a user (no A100/H100 population was
measured with a spread, so it is one number for all; docs/model.md gives the evidence). A cluster's own σ
differs: ``simcli calibrate`` fits it from a training run's scaling table (simcli.fits.fit_compute.fit_spread,
and with the per-update time simcli.fits.fit_update), and :func:`spread_from` solves it from two measured
throughputs of one weak-scaling run; ``--spread`` overrides both (``--spread 0``: none). Only the excess over the
k0 a speed was measured at is applied: (1 + σ·m_k) / (1 + σ·m_k0).
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..comm.nccl import generation

__all__ = ["expected_max", "spread_from", "slowdown", "default_spread", "DEFAULT_SPREAD", "SPREAD_SOURCE"]

#: the default σ of a GPU's speed per device kind (the GPU generation simcli.comm.nccl reads from the device's name),
#: for every GPU profile that states no device.spread, built in or written by a user. Sinha et al. (SC22) measured
#: 8% variation (4·IQR/median = 5.40 σ) between same-SKU GPUs over >90% of five clusters' GPUs (V100, RTX 5000,
#: MI60): σ = 1.48%. No A100, H100 or later population was found measured with a spread (the ICPP'22 study of 856
#: P100/V100/A100 devices reports a "non-negligible" variation that depends on the kernel and the generation;
#: Llama 3's 1-2% diurnal variation moves all GPUs together, which no slowest-of-k wait sees), so every kind carries
#: the measured figure until one is measured (docs/model.md).
SPREAD_SOURCE = "Sinha et al. SC22: 8% same-SKU variation = 5.4 σ"
DEFAULT_SPREAD: dict[str, float] = {
    "volta": 0.0148,
    "ampere": 0.0148,
    "ada": 0.0148,
    "hopper": 0.0148,
    "blackwell": 0.0148,
    "cdna3": 0.0148,
    "cdna4": 0.0148,
    "gpu": 0.0148,  # a GPU whose generation simcli does not read from its name (a profile with library: nccl)
}


def default_spread(profile: object) -> tuple[float, str]:
    """(σ, its source) for a profile that states no device.spread: the default of its device kind; 0 for a device
    that is not a GPU (cpu-loopback: gloo processes on one host)."""

    gen = generation(getattr(profile, "device").name)
    if gen is None and getattr(profile, "library", None) == "nccl":
        gen = "gpu"
    if gen is None:
        return 0.0, "not a GPU: none"
    return DEFAULT_SPREAD[gen], f"default for {gen} GPUs, {SPREAD_SOURCE}"


#: the integration grid (midpoint rule on [-10, 10]); the integrand is smooth and negligible beyond
_H = 2e-3
#: the table's device counts: every k up to 64, then geometric to 1e12 (m_k is smooth in log k there)
_K_MAX = 1e12


@lru_cache(maxsize=1)
def _grid() -> tuple[np.ndarray, np.ndarray]:
    x = np.arange(-10.0 + _H / 2, 10.0, _H)
    cdf = 0.5 * (1.0 + np.array([math.erf(v / math.sqrt(2.0)) for v in x.tolist()]))
    return x, np.log(np.clip(cdf, 1e-300, 1.0))


def _exact(k: np.ndarray) -> np.ndarray:
    """m_k = ∫ (1 - Φ^k) dx over x > 0 minus ∫ Φ^k dx over x < 0, for each (real) k, by the midpoint rule."""
    x, log_cdf = _grid()
    pk = np.exp(np.outer(np.asarray(k, dtype=np.float64), log_cdf))  # Φ(x)^k, one row per k
    pos = x > 0
    return ((1.0 - pk[:, pos]).sum(axis=1) - pk[:, ~pos].sum(axis=1)) * _H


def _table_k() -> np.ndarray:
    """The table's device counts: every k up to 64, then 400 geometric steps to 1e12 (64 once: not np.unique,
    whose first call imports numpy.ma, 8 ms of a start-up)."""
    return np.concatenate([np.arange(1.0, 65.0), np.geomspace(64.0, _K_MAX, 400)[1:]])


@lru_cache(maxsize=1)
def _table() -> tuple[np.ndarray, np.ndarray]:
    """(log k, m_k) at the table's k: the values :func:`_exact` integrates, stored in
    simcli/step/straggler_table.py so that no run pays the integration (42 ms);
    :func:`write_table` writes that file again."""
    from .straggler_table import M_K  # lazy

    return np.log(_table_k()), np.asarray(M_K, dtype=np.float64)


def write_table() -> None:
    """Write simcli/step/straggler_table.py again (after a change to the grid):
    ``python -c 'import simcli.step.straggler as s; s.write_table()'``."""

    Path(__file__).with_name("straggler_table.py").write_text(table_source(), encoding="utf-8")


def table_source() -> str:
    """The text of simcli/step/straggler_table.py: m_k integrated at every device count of the table."""
    values = ",\n".join(f"    {v!r}" for v in _exact(_table_k()).tolist())
    head = (
        "m_k = E[max of k standard normals] at simcli.step.straggler._table_k(),\n"
        "written by simcli.step.straggler.write_table()\n"
        "(the midpoint rule of simcli.step.straggler._exact on [-10, 10]);\n"
        "a test checks it against the integration."
    )
    return f'"""{head}"""\n\nM_K = (\n{values},\n)\n'


def expected_max(k: np.ndarray | list[int] | int) -> np.ndarray:
    """E[max of k standard normals] for every k (k >= 1; k above 1e12 is priced at 1e12), vectorised.

    Exact (to 1e-6) at k <= 64, interpolated in log k above, where consecutive table points are 7% apart."""
    kk = np.asarray(k, dtype=np.float64)
    logk, m = _table()
    out = np.interp(np.log(np.clip(kk, 1.0, _K_MAX)), logk, m)
    return np.where(kk <= 1.0, 0.0, out)


def slowdown(k: np.ndarray | list[int] | int, spread: float) -> np.ndarray:
    """The factor 1 + σ·m_k by which the slowest of k devices stretches a synchronised step's compute."""
    kk = np.asarray(k, dtype=np.float64)
    if not spread:
        return np.ones(kk.shape)
    return 1.0 + float(spread) * expected_max(kk)


def spread_from(ratio: float, k0: int, k1: int) -> float:
    """The σ that makes a measured per-device throughput ratio tput(k1)/tput(k0) = (1 + σ·m_k0)/(1 + σ·m_k1).

    ``ratio`` below 1 (k1 > k0) gives σ > 0; a ratio above 1 gives σ < 0, which no spread explains (the larger
    run was faster): clip it before passing it on as ``--spread``."""
    if not (k1 > k0 >= 1) or not (ratio > 0 and math.isfinite(ratio)):
        raise ValueError(f"spread_from: needs k1 > k0 >= 1 and a positive ratio, got {ratio!r}, {k0}, {k1}")
    m0, m1 = (float(v) for v in expected_max([k0, k1]))
    return (1.0 - ratio) / (ratio * m1 - m0)
