"""Pure statistics of benchmark times (no torch): summaries, nccl-tests bandwidths, an alpha-beta fit.

Times are per iteration and already the maximum over ranks (a collective ends
when its last rank ends), in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

__all__ = ["Summary", "summarize", "NOISY_SPREAD", "algbw_GBps", "allreduce_busbw_factor", "RingFit",
           "fit_ring"]

#: (p90 - p10) / median above this marks a measurement as noisy (torch.utils.benchmark warns at an
#: IQR of 10% of the median; p10..p90 spans 80% of the samples, so the bar is wider)
NOISY_SPREAD = 0.25


@dataclass(frozen=True)
class Summary:
    median: float
    p10: float
    p90: float
    min: float
    max: float
    n: int

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: the relative width of the middle 80% of the samples."""
        return (self.p90 - self.p10) / self.median if self.median > 0 else float("nan")

    @property
    def noisy(self) -> bool:
        return bool(self.spread > NOISY_SPREAD)


def summarize(times: Sequence[float] | np.ndarray) -> Summary:
    """Median, 10th and 90th percentile (linear interpolation, numpy's default) of ``times``."""
    t = np.asarray(times, dtype=np.float64).ravel()
    if t.size == 0:
        raise ValueError("no times to summarize")
    p10, med, p90 = np.percentile(t, [10, 50, 90])
    return Summary(float(med), float(p10), float(p90), float(t.min()), float(t.max()), int(t.size))


def allreduce_busbw_factor(k: int | np.ndarray) -> np.ndarray | float:
    """All-reduce bus-bandwidth factor 2(k-1)/k (nccl-tests doc/PERFORMANCE.md#allreduce)."""
    k = np.asarray(k, dtype=np.float64)
    f = 2.0 * (k - 1.0) / k
    return float(f) if f.ndim == 0 else f


def algbw_GBps(nbytes: float, time_s: float) -> float:
    """nccl-tests' algbw = size / time, in GB/s = 1e9 B/s (doc/PERFORMANCE.md)."""
    return nbytes / time_s / 1e9 if time_s > 0 else float("nan")


@dataclass(frozen=True)
class RingFit:
    alpha_s: float  #: latency per ring step
    bandwidth_Bps: float  #: B in T = 2(k-1)·alpha + 2(k-1)/k · n/B
    rms_rel_err: float  #: root-mean-square of (fit - measured) / measured
    points: int


def fit_ring(rows: Iterable[tuple[int, float, float]], per: str = "device") -> RingFit:
    """Least-squares fit of the ring all-reduce model to measured (k, bytes, time_s) points.

    T = 2(k-1)·alpha + 2(k-1)/k · n · beta, beta = 1/B (Patarasuk & Yuan 2009),
    linear in (alpha, beta). With ``per="node"`` the k processes share one
    medium of bandwidth B (simcli.collectives.tier_bandwidth: B/k each), so the
    bandwidth term is 2(k-1) · n · beta. Rows are weighted by 1/T so that small
    and large messages count alike (a relative-error fit). Points with k < 2
    carry no communication and are skipped.
    """
    pts = np.array([(k, n, t) for k, n, t in rows if k >= 2 and t > 0], dtype=np.float64)
    if pts.shape[0] < 2:
        raise ValueError("need at least two measurements with world size >= 2 to fit alpha and bandwidth")
    k, n, t = pts.T
    if per not in ("device", "node"):
        raise ValueError(f"per must be 'device' or 'node', not {per!r}")
    bw_term = 2.0 * (k - 1.0) * n if per == "node" else 2.0 * (k - 1.0) / k * n
    a = np.column_stack([2.0 * (k - 1.0), bw_term]) / t[:, None]
    (alpha, beta), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    fit = 2.0 * (k - 1.0) * alpha + bw_term * beta
    rms = float(np.sqrt(np.mean(((fit - t) / t) ** 2)))
    return RingFit(float(alpha), float(1.0 / beta) if beta > 0 else float("inf"), rms, int(pts.shape[0]))
