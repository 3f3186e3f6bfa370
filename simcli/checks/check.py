"""Is this bandwidth normal? A measured collective curve held against what NCCL should reach on a profile.

For each measured (collective, k, size): the expected time is NCCL's choice on the profile (``--algorithm nccl``,
the default on GPU profiles: the (algorithm, protocol) pair its tuner prices cheapest, with the run's
``gpus_per_process``); ``ratio`` = expected / measured time = measured / expected bus bandwidth. The verdict is

* ``LOW``  when ratio < 1 - tolerance and, with the default tolerance, also below the model's floor there
  (:data:`MODEL_FLOOR`): slower than the hardware should run, by more than simcli itself misses on healthy
  published clusters of that kind in that size band;
* ``MODEL`` when ratio < 1 - tolerance but not below the floor: "within the model's error": simcli's model is
  known to be off by that much at this size on healthy hardware of this kind (the 8xA100 NVSwitch curve of
  tests/fixtures runs at 45% of the model's busbw at 1 MiB), so the size says nothing about the hardware and is
  not LOW (no exit 1);
* ``HIGH`` when ratio > 1 + tolerance: faster than the profile allows (the profile undersells the hardware:
  calibrate it);
* ``OK`` otherwise.

The kind of a size (:func:`curve_kind`) is where its ring runs: ``nvlink`` (inside one NVLink domain, a node or
an NVL72 rack: the profile's innermost tier), ``efa`` (across nodes over AWS EFA), ``network`` (across nodes
over InfiniBand, RoCE or another network). :data:`MODEL_FLOOR` is, per kind and band, the lowest ratio simcli's
model gave on a point of the published curves of that kind that ``benchmarks/validate_nccl.py`` holds it to
(built-in profiles, nothing fitted, sizes from 1 KiB, the known misses left out), rounded down to a whole
percent; ``python benchmarks/validate_nccl.py`` prints them again, and tests/checks/test_check.py holds the table to
what it computes. An explicit ``--tolerance`` is the whole rule (the user asks for that check): no floor.

:data:`DEFAULT_TOLERANCE` is per size band (:data:`simcli.checks.validate.SIZE_BANDS`): the 95th percentile of
|t_pred/t_meas - 1| over every point of that band of the published nccl-tests curves that
``benchmarks/validate_nccl.py`` holds simcli to (built-in profiles, nothing fitted), rounded up to a whole
percent, so that a healthy cluster's point is called LOW or HIGH about one time in twenty. On the points the
validation run gives (printed by ``python benchmarks/validate_nccl.py``; docs/nccl.md): <= 256 KiB 31.3%,
0.5-64 MiB 40.5%, >= 128 MiB 20.05% (42, 79 and 94 points of 16 curves; four known misses left out: AWS's p4de
curve at small sizes, where a 150% tolerance would call nothing LOW, the 20-rack GB200 curve, the 8-node
CollNet/SHARP curve and the 2x p5 curve on NCCL 2.18.5, each named in docs/nccl.md). The middle band is wide
because the model is: the EFA, single-process (-g 8) and 8-node curves miss there by 22-37% (docs/nccl.md,
'How close it is'). Before issue 37's curves the same rule gave 32%, 40% and 20%.

The measured time of an nccl-tests run is the better of its out-of-place and in-place times where it has both
(one run is one sample of each, and the first sizes carry launch outliers; as validate_nccl.py reads them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base.types import InputError, Profile
from ..comm import collectives, specs, topology
from ..comm.nccl import tier_kind
from ..comm.specs import COLLECTIVES
from ..io.measured.table import Measured, placement_notes
from .validate import SIZE_BANDS, size_band

__all__ = ["DEFAULT_TOLERANCE", "MODEL_FLOOR", "KINDS", "curve_kind", "check", "parse_tolerance", "VERDICTS"]

#: per size band: the 95th percentile of |t_pred/t_meas - 1| over the published validation curves' points,
#: rounded up (see the module docstring; benchmarks/validate_nccl.py prints the percentiles)
DEFAULT_TOLERANCE = {"<= 256 KiB": 0.32, "0.5-64 MiB": 0.41, ">= 128 MiB": 0.21}
#: the kinds of a size's ring (curve_kind), each with the published curves its floor stands on
KINDS = {
    "nvlink": "inside one NVLink domain (8xA100 NVSwitch -g 8, Azure 8xH100 and 8xH200 NVLS -g 8, 8xH200 ring, "
    "one GB200 NVL72 rack)",
    "network": "across nodes over InfiniBand or RoCE (16, 32 and 64 H100 in 2-8 nodes, 64 of them again with "
    "NCCL_MIN_CTAS=24, 32 H100 in 4 VMs, 144 GB200 in 2 racks; the 20-rack GB200 and 8-node CollNet/SHARP curves are "
    "known misses, left out)",
    "efa": "across nodes over AWS EFA (16 and 64 H100 on p5; the 2x p4de curve and the 2x p5 one on NCCL 2.18.5 are "
    "known misses, left out)",
}
#: per kind and size band: the lowest measured/expected busbw (= t_pred/t_meas) of simcli's model on the healthy
#: published curves of that kind, under the default release 2.29.7 (benchmarks/validate_nccl.py prints it: 54.7%,
#: 35.3%, 77.2% on nvlink, of 15, 20 and 28 points; 89.6%, 41.6%, 75.2% across the network, of 18, 51, 62; 69.2%,
#: 65.6%, 78.1% on EFA, of 9, 8, 9; sizes from 1 KiB; under 2.20.3 they were 61.8%, 44.7%, 77.9%; 89.6%, 41.6%,
#: 73%; 67.2%, 61.7%, 79.5%), rounded down to a whole percent. Below it a size is
#: slower than any healthy curve of its kind was against the model: LOW. Above it but below 1 - tolerance: MODEL.
MODEL_FLOOR = {
    "nvlink": {"<= 256 KiB": 0.54, "0.5-64 MiB": 0.35, ">= 128 MiB": 0.77},
    "network": {"<= 256 KiB": 0.89, "0.5-64 MiB": 0.41, ">= 128 MiB": 0.75},
    "efa": {"<= 256 KiB": 0.69, "0.5-64 MiB": 0.65, ">= 128 MiB": 0.78},
}
VERDICTS = ("OK", "MODEL", "LOW", "HIGH")


def curve_kind(profile: Profile, k: np.ndarray) -> np.ndarray:
    """Per k, the kind of its ring (:data:`KINDS`): 'nvlink' inside the profile's innermost tier, else 'efa' where
    the outermost tier it spans is EFA, else 'network'."""

    k = np.asarray(k, dtype=np.int64)
    spanned = topology.tier_spanned(profile.network, k)
    outer = np.zeros(k.shape, dtype=np.int64)
    for i in range(1, spanned.shape[0]):
        outer = np.where(spanned[i], i, outer)
    kinds = [tier_kind(t, i) for i, t in enumerate(profile.network)]
    return np.array(["nvlink" if o == 0 else "efa" if kinds[o] == "efa" else "network" for o in outer.ravel()])


def parse_tolerance(text: str | None) -> dict[str, float]:
    """--tolerance: one fraction for every band ('15%', 0.15) or three, smallest band first ('30%,40%,10%')."""
    if text is None:
        return dict(DEFAULT_TOLERANCE)
    parts = [p.strip() for p in text.split(",")]
    if len(parts) not in (1, len(SIZE_BANDS)):
        raise InputError(
            f"--tolerance: {text!r} gives {len(parts)} values; give one ('15%') or one per size band, "
            f"{', '.join(b for b, _, _ in SIZE_BANDS)} ('30%,40%,10%')"
        )
    vals = []
    for p in parts:
        try:
            v = float(p[:-1]) / 100 if p.endswith("%") else float(p)
        except ValueError:
            raise InputError(f"--tolerance: {p!r} is not a fraction ('15%' or 0.15)") from None
        if not 0 < v < 1:
            raise InputError(f"--tolerance: {p!r} must be between 0 and 100% (exclusive)")
        vals.append(v)
    if len(vals) == 1:
        vals *= len(SIZE_BANDS)
    return {b: v for (b, _, _), v in zip(SIZE_BANDS, vals)}


def check(
    m: Measured,
    profile: Profile,
    measured_s: np.ndarray,
    *,
    tolerance: dict[str, float],
    algorithm: str | None,
    floors: dict[str, dict[str, float]] | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """(one record per row, notes): measured beside expected, the verdict, the limiting tier.

    ``floors`` (:data:`MODEL_FLOOR` with the default tolerance, None with the user's): per kind and band, the
    ratio above which a size below 1 - tolerance is the model's known error (MODEL), not LOW."""
    k = m.devices()
    n = m.number("bytes")
    colls = m.text("collective", "all_reduce") if "collective" in m.header else ["all_reduce"] * len(m)
    g = m.gpus_per_process()
    notes: list[str] = placement_notes(m, profile)
    names = [t.name for t in profile.network]
    recs: list[dict[str, Any]] = []
    skipped: dict[str, int] = {}
    for coll in dict.fromkeys(colls):
        idx = np.array([i for i, c in enumerate(colls) if c == coll])

        if coll not in COLLECTIVES:
            skipped[coll] = len(idx)
            continue
        if np.any(k[idx] < 2):
            i = int(idx[np.argmax(k[idx] < 2)])
            raise InputError(
                f"{m.path}: line {m.lines[i]}: world size {int(k[i])}: a collective on one device costs nothing"
            )
        topology.check_devices(profile.network, k[idx])
        cost = collectives.collective(
            profile,
            algorithm,
            k[idx],
            nbytes=n[idx],
            collective=coll,
            protocol=None,
            gpus_per_process=1 if g is None else g[idx],
        )
        f = specs.busbw_factor(k[idx], coll)
        kinds = curve_kind(profile, k[idx])
        for j, i in enumerate(idx):
            t_exp, t_meas = float(cost.time[j]), float(measured_s[i])
            band = size_band(float(n[i]))
            tol = tolerance[band]
            ratio = t_exp / t_meas
            floor = None if floors is None else min(floors[str(kinds[j])][band], 1 - tol)
            verdict = "HIGH" if ratio > 1 + tol else "OK" if ratio >= 1 - tol else "LOW"
            if verdict == "LOW" and floor is not None and ratio >= floor:
                verdict = "MODEL"
            bi = int(np.asarray(cost.bottleneck)[j]) if np.ndim(cost.bottleneck) else int(cost.bottleneck)
            tier_Bps = float(np.asarray(cost.bus_Bps)[j]) if np.ndim(cost.bus_Bps) else float(cost.bus_Bps)
            rec = {
                "collective": coll,
                "devices": int(k[i]),
                "bytes": float(n[i]),
                "measured_s": t_meas,
                "expected_s": t_exp,
                "busbw_measured_GBps": float(n[i] * f[j] / t_meas / 1e9),
                "busbw_expected_GBps": float(n[i] * f[j] / t_exp / 1e9),
                "ratio": ratio,
                "band": band,
                "tolerance": tol,
                "kind": str(kinds[j]),
                "model_floor": floor,
                "verdict": verdict,
                "algorithm": None if cost.algorithm is None else str(np.asarray(cost.algorithm).ravel()[j]),
                "protocol": None if cost.protocol is None else str(np.asarray(cost.protocol).ravel()[j]),
                "tier": names[bi] if 0 <= bi < len(names) else None,
                "tier_GBps": tier_Bps / 1e9 if np.isfinite(tier_Bps) else None,
                "line": int(m.lines[i]),
            }
            lat = float(np.broadcast_to(cost.latency, np.shape(cost.time))[j])
            rec["latency_s"] = lat
            if verdict == "LOW" and lat > 0.5 * t_exp:  # latency-bound: a bandwidth says nothing here
                tl = np.asarray(cost.tier_latency)[:, j] if cost.tier_latency is not None else None
                li = int(np.argmax(tl)) if tl is not None and tl.size else -1
                where = f", most of it per hop on {names[li]}" if 0 <= li < len(names) else ""
                rec["expected"] = (
                    f"latency-bound at this size: {t_exp * 1e6:.4g} us expected, of which {lat * 1e6:.4g} us is "
                    f"latency ({rec['algorithm']}/{rec['protocol']}: base + hops x per-hop latency{where})"
                )
            elif verdict == "LOW" and rec["tier"] is not None:
                rec["expected"] = (
                    f"{rec['tier']} should give {rec['tier_GBps']:.4g} GB/s (the bottleneck bandwidth, as speedup's "
                    f"'bottleneck GB/s'), busbw "
                    f"{rec['busbw_expected_GBps']:.4g} GB/s at this size ({rec['algorithm']}/{rec['protocol']})"
                )
            recs.append(rec)
    if skipped:
        notes.append(
            "left out (simcli models all_reduce, reduce_scatter, all_gather, broadcast): "
            + ", ".join(f"{c} ({n_} rows)" for c, n_ in skipped.items())
        )
    if not recs:
        raise InputError(f"{m.path}: no collective simcli can price ({', '.join(skipped)})")
    return recs, notes
