"""The all_reduce timing loop, run by every rank (imports torch).

Timing as nccl-tests and torch.utils.benchmark do it: ``warmup`` untimed
calls, then for each of ``iters`` iterations a barrier, a device
synchronisation, the timed ``all_reduce`` and another synchronisation. The
per-iteration times of all ranks are reduced with MAX (a collective ends when
its last rank ends); rank 0 summarises them (median, p10, p90) and emits one
record per message size as soon as it is measured.
"""

from __future__ import annotations

import time
from typing import Sequence

from .stats import algbw_GBps, allreduce_busbw_factor, summarize

__all__ = ["TORCH_DTYPES", "measure_allreduce"]

#: simcli dtype name -> (torch dtype attribute, bytes per element)
TORCH_DTYPES = {"fp32": ("float32", 4), "fp64": ("float64", 8), "fp16": ("float16", 2), "bf16": ("bfloat16", 2),
                "int32": ("int32", 4), "int64": ("int64", 8), "int8": ("int8", 1), "uint8": ("uint8", 1)}


def measure_allreduce(d, sizes: Sequence[int], dtype: str = "fp32", warmup: int = 5, iters: int = 20) -> None:
    import torch
    import torch.distributed as dist

    name, esize = TORCH_DTYPES[dtype]
    tdtype = getattr(torch, name)
    counts = [max(1, int(n) // esize) for n in sizes]
    # zeros: a sum of zeros stays finite however many times it is reduced
    buf = torch.zeros(max(counts), dtype=tdtype, device=d.device)
    k = d.world_size
    for i, count in enumerate(counts):
        d.checkpoint(i)
        t = buf[:count]
        for _ in range(warmup):
            dist.all_reduce(t)
        d.sync()
        times = []
        for _ in range(iters):
            dist.barrier()
            d.sync()
            t0 = time.perf_counter()
            dist.all_reduce(t)
            d.sync()
            times.append(time.perf_counter() - t0)
        tt = torch.tensor(times, dtype=torch.float64, device=d.device)
        dist.all_reduce(tt, op=dist.ReduceOp.MAX)
        if d.rank == 0:
            s = summarize(tt.cpu().tolist())
            nbytes = count * esize
            alg = algbw_GBps(nbytes, s.median)
            d.emit({"collective": "all_reduce", "backend": d.backend, "world_size": k, "bytes": nbytes,
                    "count": count, "dtype": dtype, "iters": iters, "warmup": warmup, "time_s": s.median,
                    "time_p10_s": s.p10, "time_p90_s": s.p90, "time_min_s": s.min, "time_max_s": s.max,
                    "algbw_GBps": alg, "busbw_GBps": alg * allreduce_busbw_factor(k), "spread": s.spread,
                    "source": "simcli bench allreduce"})
