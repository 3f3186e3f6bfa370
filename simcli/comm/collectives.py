"""The cost of one collective on a profile: the one entry point (:func:`collective`) that the engine, the
grid, validation and calibration call, dispatching to NCCL's pairs (:mod:`simcli.comm.nccl`) or the textbook
formulas (:mod:`simcli.comm.textbook`), and ``auto``, the fastest of everything simcli models.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import difflib
from typing import Any, Iterator, Sequence

import numpy as np

from ..base.types import TUNED_LIBRARIES, InputError, Tier
from . import nccl, nccl_choice, rccl
from .cost import CommCost, fastest
from .registry import ALGORITHMS, CHOICES, REGISTRY, SPECS
from .specs import PROTOCOLS, check_collective
from .textbook import ring_pass
from .topology import latency_params, ring_params

__all__ = [
    "allreduce",
    "auto_allreduce",
    "check_algorithm",
    "check_protocol",
    "collective",
    "measured_allreduce",
    "default_algorithm",
    "memo",
    "textbook_collective",
]

#: inside :func:`memo`: the costs priced so far, by their inputs (None outside: every call prices)
_MEMO: contextvars.ContextVar[dict | None] = contextvars.ContextVar("simcli_collective_memo", default=None)


@contextlib.contextmanager
def memo() -> Iterator[None]:
    """Inside it, :func:`collective` prices each distinct call once and hands the same (frozen) cost to the calls
    that repeat it: a step's band prices the step at several corners of σ and the communication band, whose
    collectives are the same (simcli.step.band). Nothing outlives the block."""
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def auto_allreduce(
    network: Sequence[Tier], k: np.ndarray, nbytes: np.ndarray, *, reduce_Bps: float | None = None
) -> CommCost:
    """The fastest textbook algorithm of :data:`ALGORITHMS` for each element; ties go to the earlier one."""
    return fastest([f(network, k, nbytes, reduce_Bps=reduce_Bps) for f in ALGORITHMS.values()])


def check_algorithm(algorithm: str, option: str = "--algorithm") -> str:
    """The algorithm's name if simcli knows it, else an InputError that lists the choices."""
    if algorithm not in CHOICES:
        close = difflib.get_close_matches(algorithm, CHOICES, n=2)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        raise InputError(f"{option}: unknown algorithm {algorithm!r}{hint}; choose one of {', '.join(CHOICES)}")
    return algorithm


def allreduce(
    algorithm: str, network: Sequence[Tier], k: np.ndarray, *, nbytes: np.ndarray, reduce_Bps: float | None = None
) -> CommCost:
    """Cost of one all-reduce of ``nbytes`` over ``k`` devices with the named *textbook* algorithm (or ``auto``).

    ``k`` and ``nbytes`` broadcast against each other (pass ``k[:, None]`` and
    ``n[None, :]`` for a grid). For NCCL's algorithms and the other collectives see :func:`collective`.
    """
    check_algorithm(algorithm)
    if algorithm != "auto" and algorithm not in ALGORITHMS:
        raise InputError(f"--algorithm: {algorithm!r} is one of NCCL's; price it with a profile that models NCCL")
    f = auto_allreduce if algorithm == "auto" else ALGORITHMS[algorithm]
    return f(network, k, nbytes, reduce_Bps=reduce_Bps)


# --------------------------------------------------------------------------- profiles: NCCL or textbook


def default_algorithm(profile: Any) -> str:
    """What ``--algorithm`` means when not given: NCCL's choice on a profile that models NCCL, else the ring."""
    return "nccl" if profile.library in TUNED_LIBRARIES else "ring"


def check_protocol(protocol: str | None, option: str = "--protocol") -> str | None:
    if protocol in (None, "auto"):
        return None
    if protocol not in PROTOCOLS:
        raise InputError(f"{option}: unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)} or auto")
    return protocol


def collective(
    profile: Any,
    algorithm: str | None,
    k: np.ndarray,
    *,
    nbytes: np.ndarray,
    collective: str = "all_reduce",
    protocol: str | None,
    gpus_per_process: int | np.ndarray = 1,
    message_dtype: str | None = None,
) -> CommCost:
    """Cost of one collective of ``nbytes`` (nccl-tests' size) over ``k`` devices on ``profile``.

    ``algorithm`` None is :func:`default_algorithm`. On a profile that models NCCL (``library: nccl``) the
    names ``nccl``, ``ring``, ``tree``, ``nvls`` and ``nvls-tree`` mean what NCCL runs (``nccl``: its tuner's
    cheapest pair; the others force that algorithm as ``NCCL_ALGO`` does, with its cheapest protocol unless
    ``protocol`` forces one); on a textbook profile ``ring`` and ``tree`` are the alpha-beta formulas.
    ``auto`` is the fastest of everything simcli models, which no single library reaches.

    ``gpus_per_process`` > 1 is a run where one host thread launches the collective on that many GPUs
    (nccl-tests ``-g G``; a number, or an array that broadcasts against the grid, one value per measured
    row): an NCCL-priced time is then at least :func:`simcli.comm.nccl.host_floor` (the ``host`` term says how much
    that adds). ``protocol``: the NCCL protocol to force, None for the one NCCL would pick. ``message_dtype``: the
    element type of the message, where NCCL's choice depends on it (fp8, from 2.24.3); None: not known.
    """
    table = _MEMO.get()
    key: tuple | None = None
    if table is not None:
        kk, nn, gg = (np.asarray(x) for x in (k, nbytes, gpus_per_process))
        arrays = tuple((x.dtype.str, x.shape, x.tobytes()) for x in (kk, nn, gg))
        key = (id(profile), algorithm, collective, protocol, message_dtype, *arrays)
        if key in table:
            return table[key][1]
    cost = _with_host_floor(
        _collective(
            profile, algorithm, k, nbytes=nbytes, collective=collective, protocol=protocol, message_dtype=message_dtype
        ),
        gpus_per_process,
    )
    if table is not None:
        table[key] = (profile, cost)  # the profile held: its id is not reused while the block lasts
    return cost


def _with_host_floor(cost: CommCost, gpus_per_process: Any) -> CommCost:
    """``cost`` where one host thread launches each collective on ``gpus_per_process`` GPUs (nccl-tests' -g): an
    NCCL-priced time at least :func:`simcli.comm.nccl.host_floor`, the ``host`` term what that adds."""
    g = np.asarray(gpus_per_process)
    if np.all(g == 1):
        return cost
    if np.any(g < 1):
        raise InputError(f"--gpus-per-process: {int(np.min(g))} must be at least 1 (nccl-tests' -g)")
    if cost.protocol is None:  # a textbook (alpha-beta) cost: no NCCL launches to count
        return cost
    floor = nccl.host_floor(g)
    launched = np.isin(np.broadcast_to(cost.protocol, np.shape(cost.time)), PROTOCOLS)  # auto: NCCL's elements
    time = np.where(launched, np.maximum(cost.time, floor), cost.time)
    return dataclasses.replace(cost, time=time, host=time - cost.time)


def _collective(
    profile: Any,
    algorithm: str | None,
    k: np.ndarray,
    *,
    nbytes: np.ndarray,
    collective: str,
    protocol: str | None,
    message_dtype: str | None = None,
) -> CommCost:
    algorithm = check_algorithm(algorithm or default_algorithm(profile))
    protocol = check_protocol(protocol)
    check_collective(collective)
    net = profile.network
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(nbytes, dtype=np.float64)
    gamma = profile.device.reduce_Bps
    is_nccl = profile.library in TUNED_LIBRARIES
    # rccl hook (issue 37): AMD's RCCL prices its own choice and costs (simcli.comm.rccl)
    tuned = rccl.rccl_collective if profile.library == "rccl" else nccl_choice.nccl_collective
    if algorithm != "auto":
        spec = SPECS[algorithm]
        if collective not in spec.collectives:
            raise InputError(
                f"--algorithm: {algorithm} does not run {collective}; choose one of "
                f"{', '.join(a.name for a in REGISTRY if collective in a.collectives)}"
            )
        uses_nccl = spec.nccl is not None and (is_nccl or spec.textbook is None)
        if not uses_nccl:
            if protocol is not None:
                raise InputError(
                    f"--protocol: {protocol} is one of NCCL's protocols; {algorithm} is priced with "
                    "the textbook formula here (give a profile that models NCCL, or drop --protocol)"
                )
            return textbook_collective(algorithm, net, k, n=n, collective=collective, reduce_Bps=gamma)
        algos = [spec.nccl] if spec.nccl is not None and spec.nccl != "*" else None
        if profile.library == "rccl":
            return rccl.rccl_collective(profile, k, n, collective=collective, algorithms=algos, protocol=protocol)
        return nccl_choice.nccl_collective(
            profile, k, n, collective=collective, algorithms=algos, protocol=protocol, message_dtype=message_dtype
        )
    # auto: the fastest of NCCL's pairs and every textbook algorithm that runs this collective
    costs = []
    if is_nccl or protocol is not None:
        costs.append(tuned(profile, k, n, collective=collective, algorithms=None, protocol=protocol, by="time"))
    if protocol is None:
        costs += [
            textbook_collective(a.name, net, k, n=n, collective=collective, reduce_Bps=gamma)
            for a in REGISTRY
            if a.textbook is not None and collective in a.collectives
        ]
    return costs[0] if len(costs) == 1 else fastest(costs)


def measured_allreduce(
    profile: Any,
    algorithm: str | None,
    k: np.ndarray,
    *,
    nbytes: np.ndarray,
    protocol: str | None,
    gpus: np.ndarray | None,
) -> np.ndarray:
    """Seconds of the all-reduces a measured table timed: ``gpus`` per row, the GPUs one thread launched on
    (nccl-tests' -g; None: one per process). What calibration fits and validation checks against."""
    gpp = 1 if gpus is None else gpus
    return collective(
        profile, algorithm, k, nbytes=nbytes, collective="all_reduce", protocol=protocol, gpus_per_process=gpp
    ).time


def textbook_collective(
    algorithm: str, network: Sequence[Tier], k: np.ndarray, *, n: np.ndarray, collective: str, reduce_Bps: float | None
) -> CommCost:
    """The alpha-beta cost; reduce-scatter and all-gather as one ring pass, broadcast as a pipelined ring."""
    if collective == "all_reduce":
        return ALGORITHMS[algorithm](network, k, n, reduce_Bps=reduce_Bps)
    alpha, bus, bottleneck = ring_params(network, k)
    _, lat_tier = latency_params(network, k)
    spec = check_collective(collective)
    kf = np.maximum(k.astype(np.float64), 1.0)
    steps = np.where(k >= 2, spec.ring_steps(kf), 0.0)  # one ring pass: NCCL's nsteps
    link = (alpha, bus, bottleneck, lat_tier)
    return ring_pass(
        network,
        k,
        n,
        name="ring",
        reduce_Bps=reduce_Bps,
        link=link,
        steps=steps,
        sent=spec.busbw_of(kf),
        reduced=spec.reduced(kf),
    )
