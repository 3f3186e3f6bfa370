"""`simcli comm`: predicted all-reduce time, algbw and busbw over a (k, size) grid."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base.types import DTYPE_BYTES, InputError, Profile
from . import bands, collectives, nccl_choice, specs, topology
from .cost import CommCost

__all__ = ["comm_grid"]


def comm_grid(
    profile: Profile,
    devices: np.ndarray,
    sizes: np.ndarray,
    *,
    algorithm: str | None,
    message_dtype: str,
    collective: str = "all_reduce",
    protocol: str | None,
    gpus_per_process: int = 1,
) -> list[dict[str, Any]]:
    """One record per (k, bytes), k-major, with nccl-tests' columns in SI and GB/s (1e9 B/s).

    ``bytes`` is the collective's size as nccl-tests counts it (all-gather: the gathered output); busbw uses
    nccl-tests' factor for the collective (:func:`simcli.comm.specs.busbw_factor`). ``gpus_per_process``
    is nccl-tests' ``-g``: GPUs one host thread launches on (:func:`simcli.comm.nccl.host_floor`). Where NCCL
    chooses (``algorithm`` nccl, no ``protocol``), ``faster`` is the NCCL_ALGO/NCCL_PROTO setting of a pair simcli
    prices cheaper than NCCL's pick by more than :data:`simcli.comm.nccl_choice.FASTER_MARGIN` (None elsewhere) and
    ``faster_s`` its time. ``time_lo_s`` and ``time_hi_s`` are the band the published runs of the same kind put
    the measured time in (:func:`simcli.comm.bands.time_band`: ``time / p90`` to ``time / p10`` of t_pred/t_meas,
    holding ``time``); ``band_basis`` says what the band was read from.
    """
    if message_dtype not in DTYPE_BYTES:
        raise InputError(f"--dtype: unknown dtype {message_dtype!r}; choose one of {', '.join(DTYPE_BYTES)}")
    k = np.asarray(devices, dtype=np.int64)
    n = np.asarray(sizes, dtype=np.float64)
    topology.check_devices(profile.network, k)
    cost = collectives.collective(
        profile,
        algorithm,
        k[:, None],
        nbytes=n[None, :],
        collective=collective,
        protocol=protocol,
        gpus_per_process=gpus_per_process,
        message_dtype=message_dtype,
    )
    algorithm = algorithm or collectives.default_algorithm(profile)
    kk, nn = np.broadcast_arrays(k[:, None], n[None, :])
    t = cost.time
    with np.errstate(divide="ignore", invalid="ignore"):
        algbw = np.where(t > 0, nn / t, np.nan) / 1e9
    busbw = algbw * specs.busbw_factor(kk, collective)
    names = [tier.name for tier in profile.network]
    # how sure: the band the published runs of the same kind put the measured time in (simcli.comm.bands)
    algs = cost.algorithm if cost.algorithm is not None else algorithm
    band = bands.time_band(
        profile.network, kk, nn, time=t, algorithm=algs, protocol=cost.protocol, collective=collective
    )
    lo, hi = np.broadcast_to(band.lo, t.shape), np.broadcast_to(band.hi, t.shape)
    which = np.broadcast_to(band.which, t.shape)
    faster = None
    if profile.library == "nccl" and algorithm == "nccl" and protocol is None:
        # issue 21: where simcli's cost of NCCL's own pick is above another pair's, the setting that runs that pair
        faster, f_alg, f_proto, f_time = nccl_choice.nccl_faster_pair(
            profile, k[:, None], n[None, :], collective=collective, message_dtype=message_dtype
        )
    recs = []
    for idx in np.ndindex(t.shape):
        b = int(cost.bottleneck[idx])
        recs.append(
            {
                "devices": int(kk[idx]),
                "bytes": int(nn[idx]),
                "count": int(nn[idx] // DTYPE_BYTES[message_dtype]),
                "dtype": message_dtype,
                "collective": collective,
                "algorithm": str(cost.algorithm[idx]) if cost.algorithm is not None else algorithm,
                "protocol": _proto(cost, idx),
                "time_s": float(t[idx]),
                "time_lo_s": float(lo[idx]),
                "time_hi_s": float(hi[idx]),
                "latency_s": float(cost.latency[idx]),
                "bandwidth_s": float(cost.bandwidth[idx]),
                "fill_s": None if cost.fill is None else float(np.broadcast_to(cost.fill, t.shape)[idx]),
                "host_s": None if cost.host is None else float(np.broadcast_to(cost.host, t.shape)[idx]),
                "algbw_GBps": _f(algbw[idx]),
                "busbw_GBps": _f(busbw[idx]),
                "bottleneck": names[b] if b >= 0 else None,
                "band_basis": band.bands[which[idx]].words(),
            }
        )
        if faster is not None:
            fast = bool(faster[idx])
            proto = None if f_proto[idx] in (None, "-") else str(f_proto[idx])
            recs[-1]["faster"] = nccl_choice.nccl_env(str(f_alg[idx]), proto) if fast else None
            recs[-1]["faster_s"] = float(f_time[idx]) if fast else None
    return recs


def _proto(cost: CommCost, idx: tuple[int, ...]) -> str | None:
    if cost.protocol is None:
        return None
    p = cost.protocol[idx]
    return None if p in (None, "-") else str(p)


def _f(x: float) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None
