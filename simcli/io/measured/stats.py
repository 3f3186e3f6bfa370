"""Pure statistics of benchmark times (no torch): summaries, nccl-tests bandwidths.

Times are per iteration and already the maximum over ranks (a collective ends
when its last rank ends), in seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...comm.specs import busbw_factor

__all__ = [
    "Summary",
    "summarize",
    "NOISY_SPREAD",
    "STATS",
    "DEFAULT_STAT",
    "DEFAULT_TARGET_SE",
    "DEFAULT_MAX_ITERS",
    "DEFAULT_MAX_TIME",
    "relative_se",
    "unsettled",
    "algbw_GBps",
    "allreduce_busbw_factor",
]

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

#: adaptive repetition (``bench allreduce --target-se/--max-iters/--max-time``): after the minimum ``--iters``,
#: rounds are added until the relative standard error of every size's statistic is at most this (3%).
#: Measured on this project's 2-core VM under a competing busy process (docs/bench.md, "On a busy machine"):
#: with p10, run-to-run calibrate/validate pairs reach a median error of ~20% at 10 iterations, ~10% at 100-200;
#: a 3% target stops where the fixed 200 reaches (9-10%), at half its time, and a quiet machine stops early
DEFAULT_TARGET_SE = 0.03
#: at most this many timed iterations per size (or ``--iters``, if larger)
DEFAULT_MAX_ITERS = 200
#: seconds a world may spend measuring before no more rounds are added (the minimum ``--iters`` always run)
DEFAULT_MAX_TIME = 30.0

_QUANTILES = {"p10": 0.10, "median": 0.50}


def relative_se(times: Sequence[float] | np.ndarray, stat: str) -> float:
    """The standard error of ``stat`` of ``times``, relative to it: how far another run would likely differ.

    * ``mean``: ``sd/sqrt(n)/mean``;
    * a quantile q (``p10``, ``median``): distribution-free, from order statistics (Conover, *Practical
      Nonparametric Statistics*, 3rd ed. 1999, sec. 3.2): the number of samples below the true quantile is
      Binomial(n, q), so the sorted samples at ranks ``n·q ± sqrt(n·q·(1-q))`` bracket it with about 68%
      (one standard error each side); half their distance over the estimate is returned. No assumption on the
      shape: a bimodal busy machine (fast iterations and preempted ones) whose quantile sits between the modes
      gets a wide bracket, so more samples are taken;
    * ``min``: the same with ``n·q = 1`` (the lowest sample's bracket: the 1st to 3rd smallest); a lone lucky
      iteration far below the rest reads as unsettled.

    Fewer than 2 samples, or a statistic <= 0: ``inf`` (nothing is known yet).
    """
    if stat not in STATS:
        raise ValueError(f"unknown statistic {stat!r}; choose one of {', '.join(STATS)}")
    t = np.sort(np.asarray(times, dtype=np.float64).ravel())
    n = int(t.size)
    if n < 2:
        return math.inf
    if stat == "mean":
        m = float(t.mean())
        return float(t.std(ddof=1)) / math.sqrt(n) / m if m > 0 else math.inf
    value = summarize(t).stat(stat)
    if not value > 0:
        return math.inf
    q = 1.0 / n if stat == "min" else _QUANTILES[stat]
    m, sd = n * q, math.sqrt(n * q * (1.0 - q))
    lo = min(max(math.floor(m - sd), 0), n - 1)
    hi = min(max(math.ceil(m + sd), 0), n - 1)
    return float(t[hi] - t[lo]) / 2.0 / value


def unsettled(
    times: Sequence[Sequence[float]],
    stat: str,
    target_se: float,
    *,
    max_iters: int,
) -> list[int]:
    """Indices of the sizes that need another iteration: ``relative_se`` above ``target_se`` and fewer
    than ``max_iters`` samples. Pure (every rank computes it from the same max-over-ranks times)."""
    return [i for i, t in enumerate(times) if len(t) < max_iters and relative_se(t, stat) > target_se]


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
    f = busbw_factor(k)  # the one definition, in simcli.comm.collectives
    return float(f) if f.ndim == 0 else f


def algbw_GBps(nbytes: float, time_s: float) -> float:
    """nccl-tests' algbw = size / time, in GB/s = 1e9 B/s (doc/PERFORMANCE.md)."""
    return nbytes / time_s / 1e9 if time_s > 0 else float("nan")
