"""Pure statistics of benchmark times (no torch): summaries, nccl-tests bandwidths.

Times are per iteration and already the maximum over ranks (a collective ends
when its last rank ends), in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..collectives import busbw_factor

__all__ = ["Summary", "summarize", "NOISY_SPREAD", "STATS", "DEFAULT_STAT", "algbw_GBps", "allreduce_busbw_factor"]

#: (p90 - p10) / median above this marks a measurement as noisy (torch.utils.benchmark warns at an
#: IQR of 10% of the median; p10..p90 spans 80% of the samples, so the bar is wider)
NOISY_SPREAD = 0.25


#: the statistics a benchmark can report as its time (``--stat``). Preemption on a busy machine only ever adds
#: time, so a low quantile estimates the uncontended cost; the median and the mean (what nccl-tests prints)
#: include the contention. See :data:`DEFAULT_STAT` for the measured choice.
STATS = ("min", "p10", "median", "mean")
#: p10: on this project's shared 2-core VM, under a competing busy process, calibrate-on-one-run /
#: validate-on-another reached a median error of 14.9% with p10, 15.3% with min, 26% with the median and 20%
#: with the mean (156 pairs of 14 runs with one iteration per size per round; validation/cpu-loopback/README.md).
#: p10 is as good as the minimum with 10 samples and, unlike the minimum, not one lucky iteration with more.
DEFAULT_STAT = "p10"


@dataclass(frozen=True)
class Summary:
    median: float
    p10: float
    p90: float
    min: float
    max: float
    n: int
    mean: float = float("nan")

    def stat(self, name: str) -> float:
        """One of :data:`STATS` by name."""
        if name not in STATS:
            raise ValueError(f"unknown statistic {name!r}; choose one of {', '.join(STATS)}")
        return float(getattr(self, name))

    @property
    def noise(self) -> float:
        """p90 / p10: how many times slower the slow tenth of the iterations was than the fast tenth."""
        return self.p90 / self.p10 if self.p10 > 0 else float("nan")

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
    return Summary(float(med), float(p10), float(p90), float(t.min()), float(t.max()), int(t.size), float(t.mean()))


def allreduce_busbw_factor(k: int | np.ndarray) -> np.ndarray | float:
    """All-reduce bus-bandwidth factor 2(k-1)/k (nccl-tests doc/PERFORMANCE.md#allreduce)."""
    f = busbw_factor(k)  # the one definition, in simcli.collectives
    return float(f) if f.ndim == 0 else f


def algbw_GBps(nbytes: float, time_s: float) -> float:
    """nccl-tests' algbw = size / time, in GB/s = 1e9 B/s (doc/PERFORMANCE.md)."""
    return nbytes / time_s / 1e9 if time_s > 0 else float("nan")
