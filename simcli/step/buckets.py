"""DDP's gradient buckets: how the gradient splits into all-reduces and when each one ends.

Overlap with backward (``overlap="buckets"``, PyTorch DDP's gradient buckets;
Li et al. 2020, "PyTorch Distributed", VLDB): the n gradient bytes fall into
N_f = floor(n/c) full buckets of c = bucket_mb·2^20 bytes in reverse layer
order, plus a remainder bucket of r = n - N_f·c bytes (the first layers). We
assume backward produces gradient bytes at a steady rate over T_b =
backward_fraction · T_compute (one micro-step), so full bucket j (0-based) is
ready at t_j = T_b·(j+1)·c/n and the remainder at T_b. Buckets are reduced one
after another, each as soon as it is ready and the previous one is done::

    e_j = max(t_j, e_{j-1}) + C(c)          (C: one all-reduce of the algorithm)
    e_last = max(T_b, e_{N_f-1}) + C(r)
    T_comm         = N_f·C(c) + C(r)          (total)
    T_comm,exposed = max(0, e_last - T_b)     (what is left when backward ends)
    T_comm,hidden  = T_comm - T_comm,exposed

With equal full buckets the recursion has a closed form, e_{N_f-1} =
max(t_0 + N_f·C(c), t_{N_f-1} + C(c)) (the arrival times are linear in j),
so the timeline costs O(1) per k and stays vectorised; :func:`bucket_timeline`
runs the recursion bucket by bucket for one k (for explanations and tests).
With ``overlap="none"`` the whole gradient is one all-reduce after backward
(T_comm,exposed = T_comm). With ``accum = m`` (DDP's no_sync) only the last
micro-step's backward hides communication.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["BucketPlan", "bucket_plan", "bucket_exposure", "bucket_timeline"]


@dataclass(frozen=True)
class BucketPlan:
    """How ``n`` gradient bytes become all-reduces: ``full`` buckets of ``size`` bytes, then ``last`` bytes."""

    full: int
    size: float
    last: float

    @property
    def count(self) -> int:
        return self.full + (1 if self.last > 0 else 0)


def bucket_plan(nbytes: float, bucket_bytes: float | None) -> BucketPlan:
    """DDP's split of the gradient (reverse layer order; the remainder is the last bucket).

    ``bucket_bytes=None`` (no overlap): one message of all ``nbytes``.
    """
    if bucket_bytes is None or bucket_bytes >= nbytes:
        return BucketPlan(full=0, size=float(bucket_bytes or nbytes), last=float(nbytes))
    full = int(nbytes // bucket_bytes)
    last = nbytes - full * bucket_bytes
    if last < 0.5:  # a whole number of buckets (up to rounding)
        last = 0.0
    return BucketPlan(full=full, size=float(bucket_bytes), last=float(last))


def bucket_exposure(
    plan: BucketPlan, t_backward: np.ndarray, c_full: np.ndarray, *, c_last: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(T_comm total, end of the last bucket's all-reduce measured from the start of backward), closed form."""
    n = plan.full * plan.size + plan.last
    end = np.zeros_like(t_backward)
    if plan.full:
        t0 = t_backward * plan.size / n
        t_last_full = t_backward * plan.full * plan.size / n
        end = np.maximum(t0 + plan.full * c_full, t_last_full + c_full)
    total = plan.full * c_full
    if plan.last > 0:
        end = np.maximum(t_backward, end) + c_last
        total = total + c_last
    return total, end


def bucket_timeline(plan: BucketPlan, t_backward: float, c_full: float, *, c_last: float) -> list[dict[str, float]]:
    """The bucket-by-bucket recursion for one k: ready, start and end of each all-reduce (s from backward's start).

    Bucket sizes, in the order DDP reduces them: ``plan.full`` of ``plan.size`` bytes, then ``plan.last``.
    """
    n = plan.full * plan.size + plan.last
    out = []
    prev = 0.0
    for j in range(plan.count):
        full = j < plan.full
        ready = t_backward * (j + 1) * plan.size / n if full else t_backward
        start = max(ready, prev)
        prev = start + (c_full if full else c_last)
        out.append(
            {"bucket": j, "bytes": plan.size if full else plan.last, "ready_s": ready, "start_s": start, "end_s": prev}
        )
    return out
