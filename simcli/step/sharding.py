"""Sharded data parallelism: ZeRO-1/2, FSDP (ZeRO-3, FULL_SHARD) and HSDP, their collectives and overlap.

Pure numpy, vectorised over k: no typer, yaml or torch. ``engine.simulate`` calls :func:`step` for every
strategy but ``ddp`` (whose bucketed all-reduce stays in the engine); memory is :mod:`simcli.step.memory`'s.

Notation: P parameters in L units (FSDP's wrapped modules, one transformer block each; the embedding and the
head are spread evenly over the blocks, so each unit carries P/L parameters), p = bytes per parameter in the
param dtype (all-gathers, default bf16), g = bytes per gradient value (reduce-scatters and all-reduces, default
fp32), k devices, shard group G (hsdp), r = k/G replicas. Sizes are nccl-tests' (all-gather: the gathered
output; reduce-scatter: the input), so the bytes a device sends are (k-1)/k·n for either and 2(k-1)/k·n for an
all-reduce (nccl-tests doc/PERFORMANCE.md).

Collectives per optimizer step (one micro-step; with ``accum = m`` each micro-step repeats them, as FSDP2 and
DeepSpeed reduce every micro-batch by default):

* ``ddp``: all-reduce of P·g in DDP's buckets (the engine).
* ``zero1``, ``zero2``: reduce-scatter of P·g in buckets of 5e8 elements during backward (DeepSpeed's
  reduce_bucket_size; the DDP bucket timeline with a reduce-scatter's cost; ``--bucket-mb`` is DDP's only), then
  one all-gather of the updated parameter shards, P·p, after the optimizer step, never hidden (DeepSpeed's
  allgather_bucket_size, 5e8 elements, makes it one to a few collectives of about a GB; one is priced). The two
  differ only in memory.
* ``fsdp``: per unit an all-gather of P/L·p before its forward, again before its backward (unless
  ``reshard_after_forward`` is False), and a reduce-scatter of P/L·g after its backward.
* ``hsdp``: fsdp inside a shard group of G devices, plus an all-reduce of each unit's gradient shard, P/L·g/G,
  across the r replicas after its reduce-scatter, priced on :func:`replica_profile`.

Bytes sent per device per step (:func:`comm_bytes`), at p = g the ZeRO paper's volumes (Rajbhandari et al.
2020, sec. 7): ddp 2(k-1)/k·P·g; zero1/zero2 (k-1)/k·P·(g + p), DDP's; fsdp (k-1)/k·P·(2p + g), 1.5x DDP's.

Overlap, FSDP's prefetch as a per-unit timeline with one compute stream and one communication stream (FIFO).
With f and b one unit's forward and backward compute and A, A', R one unit's forward all-gather, backward
all-gather and reduce-scatter (+ the replicas' all-reduce for hsdp):

* forward: the all-gather of unit i+1 is issued when unit i's compute starts, so unit i starts at
  s_i = A + i·max(A, f) and forward ends at F = A + (L-1)·max(A, f) + f (the first all-gather is never hidden);
* backward (units in reverse, j = 0..L-1): compute j starts at s_j = max(e_{j-1}, a_j) and ends at
  e_j = s_j + b; the all-gather of unit j+1 is issued at s_j, the reduce-scatter of unit j at e_j, and the
  stream runs them in that order: a_{j+1} = max(s_j, r_{j-1}) + A', r_j = max(e_j, a_{j+1}) + R (a_0 = A' from
  backward's start; without resharding there is no backward all-gather and r_j = max(e_j, r_{j-1}) + R);
  backward ends with the last reduce-scatter, B = r_{L-1};
* exposed = (F - L·f) + (B - L·b): what neither compute stream hides.

:func:`fsdp_times` runs the backward recursion unit by unit, each step vectorised over k; the tests hold it
against a plain event loop over one k. The all-gather of the first unit of the *next* step could hide behind
the optimizer step; FSDP does not do that and neither does this model.

Memory per device is :mod:`simcli.step.memory`'s (the one memory model every command reads).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base.types import InputError, Profile, Tier
from ..comm import bands, collectives, nccl, nccl_choice, registry
from ..comm.cost import COMM_TERMS, CommCost
from .buckets import bucket_exposure, bucket_plan  # DDP's bucket timeline, reused for zero1/zero2's reduce-scatter
from .memory import ZERO_BUCKET_ELEMENTS
from .strategies import SHARDED, SPECS
from .strategies import shard_divisor as shard_group

__all__ = [
    "comm_bytes",
    "replica_profile",
    "fsdp_times",
    "unit_timeline",
    "Step",
    "step",
    "ZERO_BUCKET_ELEMENTS",
]

#: zero1/zero2 reduce-scatter the gradients in buckets of ZERO_BUCKET_ELEMENTS elements (simcli.step.memory: DeepSpeed's
#: reduce_bucket_size default); shard_group is simcli.step.strategies.shard_divisor; the strategies' rows are
#: simcli.step.strategies.STRATEGY_SPECS


# --------------------------------------------------------------------------- communicated bytes


def comm_bytes(
    strategy: str,
    k: np.ndarray,
    *,
    params: float,
    param_bytes: float,
    grad_bytes: float,
    group: int | None = None,
    node_size: int | None = None,
    reshard_after_forward: bool,
) -> np.ndarray:
    """Bytes one device sends per micro-step (ring volumes: (k-1)/k·n per reduce-scatter or all-gather, 2(k-1)/k·n
    per all-reduce; nccl-tests doc/PERFORMANCE.md)."""
    kf = np.asarray(k, dtype=np.float64)
    P, p, g = float(params), float(param_bytes), float(grad_bytes)
    timeline = SPECS[strategy].timeline
    if timeline == "buckets":
        return 2.0 * (kf - 1.0) / kf * P * g
    if timeline == "zero":
        return (kf - 1.0) / kf * P * (g + p)
    gathers = 2.0 if reshard_after_forward else 1.0
    d = shard_group(strategy, np.asarray(k, dtype=np.int64), group, node_size=node_size).astype(np.float64)
    out = (d - 1.0) / d * P * (gathers * p + g)
    if SPECS[strategy].replicas:
        r = kf / d
        out = out + 2.0 * (r - 1.0) / r * P * g / d
    return out


# --------------------------------------------------------------------------- hsdp's replicas


def replica_profile(profile: Profile, group: int) -> Profile:
    """The network one device's replicas see: the same tiers with every domain counted in shard groups.

    Devices with the same place in their shard group form one all-reduce ring across the groups. A tier whose
    domain lies inside one group keeps one replica per domain (size 1, so no hop pays its latency); a larger
    domain holds size/G replicas. The G rings run at once: a ``per: device`` link (one NIC per GPU, rail
    optimised) carries one ring, a ``per: node`` link is shared by G rings (bandwidth/G). Tier kinds and NCCL
    constants stay those of the full profile. An approximation: NCCL sees each ring as one GPU per node.
    """
    tiers = []
    for i, t in enumerate(profile.network):
        size = t.size
        if size is not None:
            if size <= group:
                size = 1
            elif size % group:
                raise InputError(
                    f"--shard-group: {group} does not divide {profile.name}'s network[{i}].size "
                    f"{size}; give a shard group that divides every larger domain (a node: "
                    f"{profile.network[0].size})"
                )
            else:
                size //= group
        bw = t.bandwidth_Bps / group if t.per == "node" else t.bandwidth_Bps
        kind = t.kind or _tier_kind(t, i)
        tiers.append(dataclasses.replace(t, size=size, bandwidth_Bps=bw, kind=kind))
    spec = nccl_choice.nccl_spec(profile) if profile.library == "nccl" else profile.nccl
    return dataclasses.replace(profile, name=f"{profile.name} (replicas of {group})", network=tuple(tiers), nccl=spec)


def _tier_kind(t: Tier, i: int) -> str:

    return nccl.tier_kind(t, i)


# --------------------------------------------------------------------------- the step


def fsdp_times(
    *, f: np.ndarray, b: np.ndarray, ag_fwd: np.ndarray, ag_bwd: np.ndarray | None, rs: np.ndarray, units: int
) -> tuple[np.ndarray, np.ndarray]:
    """(forward end F, backward end B) of one micro-step, each from its phase's start (module docstring).

    ``ag_bwd`` None: no all-gather before backward (not resharded after forward). Arrays broadcast over k.
    """
    L = int(units)
    f, b, A, R = (np.asarray(x, dtype=np.float64) for x in (f, b, ag_fwd, rs))
    F = A + (L - 1) * np.maximum(A, f) + f
    if ag_bwd is None:
        # compute runs back to back; reduce-scatter j is ready at (j+1)·b: the bucket closed form
        B = np.maximum(b + L * R, L * b + R)
        return F, np.broadcast_to(B, np.broadcast_shapes(F.shape, B.shape)).copy()
    Ab = np.asarray(ag_bwd, dtype=np.float64)
    a = Ab + 0.0 * b  # a_0: the first backward all-gather, from backward's start
    e_prev = np.zeros_like(a)
    r_prev = np.zeros_like(a)
    for j in range(L):
        s = np.maximum(e_prev, a)
        e = s + b
        if j + 1 < L:
            a_next = np.maximum(s, r_prev) + Ab
            r = np.maximum(e, a_next) + R
        else:
            a_next = a
            r = np.maximum(e, r_prev) + R
        e_prev, r_prev, a = e, r, a_next
    return F, r_prev


@dataclass(frozen=True)
class Step:
    """One micro-step's communication for a sharded strategy, arrays over k (seconds)."""

    t_comm: np.ndarray  #: every collective's time added up
    exposed: np.ndarray  #: what compute does not hide
    comm: CommCost  #: all collectives added up (alpha, bus_Bps, bottleneck: the main one's)
    parts: dict[str, np.ndarray]  #: seconds per collective kind and phase, added up over units/buckets
    #: every kind of collective once: (name, how many per micro-step, bytes as nccl-tests counts them, its cost)
    messages: tuple[tuple[str, float, float, CommCost], ...] = ()
    #: what each message was priced on, in the order of ``messages``: (collective, profile, devices over k)
    priced_on: tuple[tuple[str, Profile, np.ndarray], ...] = ()


def _price(
    profile: Profile,
    algorithm: str | None,
    protocol: str | None,
    *,
    k: np.ndarray,
    n: float,
    kind: str,
    comm_end: str | None = None,
) -> CommCost:
    """One collective; an algorithm that does not run ``kind`` (or None) gives way to the profile's default.
    ``comm_end`` ("lo", "hi"): its time at that end of its band (simcli.comm.bands.at_end)."""
    alg = algorithm
    if alg is None or (alg != "auto" and kind not in registry.SPECS[alg].collectives):
        alg = collectives.default_algorithm(profile)
    cost = collectives.collective(profile, alg, k, nbytes=np.float64(n), collective=kind, protocol=protocol)
    return cost if comm_end is None else bands.at_end(cost, profile, k, n=n, collective=kind, end=comm_end)


def _scaled(c: CommCost, times: float) -> dict[str, Any]:
    return {name: (None if getattr(c, name) is None else times * np.asarray(getattr(c, name))) for name in COMM_TERMS}


def _add(main: CommCost, terms: list[tuple[CommCost, float]]) -> CommCost:
    total: dict[str, Any] = {}
    for c, times in terms:
        for name, v in _scaled(c, times).items():
            if name in total and (total[name] is None or v is None):
                total[name] = None
            else:
                total[name] = v if name not in total else total[name] + v
    return dataclasses.replace(main, **total)


def step(
    strategy: str,
    profile: Profile,
    k: np.ndarray,
    *,
    algorithm: str | None,
    protocol: str | None,
    params: float,
    units: int,
    param_bytes: float,
    grad_bytes: float,
    t_forward: np.ndarray,
    t_backward: np.ndarray,
    bucket_bytes: float | None,
    group: int | None = None,
    reshard_after_forward: bool,
    comm_end: str | None = None,
) -> Step:
    """Communication of one micro-step of ``strategy`` (one of :data:`SHARDED`) and what of it is exposed;
    ``comm_end`` ("lo", "hi"): every collective at that end of its band (simcli.step.band)."""

    k = np.asarray(k, dtype=np.int64)
    P = float(params)
    zero = np.zeros(k.shape)
    spec = SPECS[strategy]
    if spec.timeline == "zero":
        n = P * grad_bytes
        plan = bucket_plan(n, bucket_bytes)
        rs_full = (
            _price(profile, algorithm, protocol, k=k, n=plan.size, kind="reduce_scatter", comm_end=comm_end)
            if plan.full
            else None
        )
        rs_last = (
            _price(profile, algorithm, protocol, k=k, n=plan.last, kind="reduce_scatter", comm_end=comm_end)
            if plan.last
            else None
        )
        ag = _price(profile, algorithm, protocol, k=k, n=P * param_bytes, kind="all_gather", comm_end=comm_end)
        t_rs, end = bucket_exposure(
            plan, t_backward, rs_full.time if rs_full else zero, c_last=rs_last.time if rs_last else zero
        )
        rs_exposed = np.clip(end - t_backward, 0.0, t_rs) if bucket_bytes is not None else t_rs
        t_ag = ag.time
        terms = [(c, plan.full if c is rs_full else 1.0) for c in (rs_full, rs_last, ag) if c is not None]
        zmsgs = tuple(
            (name, times, size, c)
            for name, times, size, c in (
                ("reduce_scatter", plan.full, plan.size, rs_full),
                ("reduce_scatter", 1, plan.last, rs_last),
                ("all_gather after the step", 1, P * param_bytes, ag),
            )
            if c is not None
        )
        return Step(
            t_comm=t_rs + t_ag,
            exposed=rs_exposed + t_ag,
            comm=_add(terms[0][0], terms),  # the main one: a full bucket's reduce-scatter, else the remainder's
            parts={"reduce_scatter_s": t_rs, "all_gather_step_s": t_ag},
            messages=zmsgs,
            priced_on=tuple((m[0].split()[0], profile, k) for m in zmsgs),
        )
    if spec.timeline != "units":
        raise InputError(f"--strategy: {strategy!r} is not a sharded strategy ({', '.join(SHARDED)})")
    L = int(units)
    d = shard_group(strategy, k, group, node_size=profile.network[0].size)
    unit_p = P / L * param_bytes
    unit_g = P / L * grad_bytes
    ag = _price(profile, algorithm, protocol, k=d, n=unit_p, kind="all_gather", comm_end=comm_end)
    rs = _price(profile, algorithm, protocol, k=d, n=unit_g, kind="reduce_scatter", comm_end=comm_end)
    R = rs.time
    terms = [(ag, 2.0 * L if reshard_after_forward else 1.0 * L), (rs, 1.0 * L)]
    parts = {"all_gather_s": L * ag.time * (2.0 if reshard_after_forward else 1.0), "reduce_scatter_s": L * rs.time}
    msgs: list[tuple[str, float, float, CommCost]] = [
        ("all_gather", (2.0 if reshard_after_forward else 1.0) * L, unit_p, ag),
        ("reduce_scatter", L, unit_g, rs),
    ]
    on = [("all_gather", profile, d), ("reduce_scatter", profile, d)]
    if spec.replicas:
        gsize = int(group if group is not None else (profile.network[0].size or 0)) or None
        r = k // d
        if np.any(k % d):
            bad = int(k[(k % d) != 0][0])
            raise InputError(
                f"--shard-group: k = {bad} is not a multiple of the shard group {int(d.max())}; ask "
                "for device counts that are, or give another --shard-group"
            )
        if gsize is not None and np.any(r > 1):
            sub = replica_profile(profile, gsize)
            ar = _price(
                sub, algorithm, protocol, k=r, n=unit_g / gsize, kind="all_reduce", comm_end=comm_end
            )  # 0 where r = 1
            R = R + ar.time
            parts["all_reduce_replicas_s"] = L * ar.time
            terms.append((ar, 1.0 * L))
            msgs.append(("all_reduce across groups", L, unit_g / gsize, ar))
            on.append(("all_reduce", sub, r))
    fwd_u = np.asarray(t_forward, dtype=np.float64) / L
    bwd_u = np.asarray(t_backward, dtype=np.float64) / L
    F, B = fsdp_times(
        f=fwd_u, b=bwd_u, ag_fwd=ag.time, ag_bwd=ag.time if reshard_after_forward else None, rs=R, units=L
    )
    exposed = np.maximum(F - L * fwd_u, 0.0) + np.maximum(B - L * bwd_u, 0.0)
    t_comm = sum(parts.values(), zero)
    return Step(
        t_comm=t_comm,
        exposed=np.minimum(exposed, t_comm),
        comm=_add(ag, terms),
        parts=parts,
        messages=tuple(msgs),
        priced_on=tuple(on),
    )


def unit_timeline(
    *, f: float, b: float, ag_fwd: float, ag_bwd: float | None, rs: float, units: int
) -> list[dict[str, Any]]:
    """The per-unit timeline of one micro-step for one k (explanations; the recursion of :func:`fsdp_times`, unit
    by unit): per phase and unit the all-gather's end, the compute's start and end, the reduce-scatter's end
    (backward), all in seconds from the phase's start, and ``wait_s``, how long compute stalled before the unit.
    The waits plus backward's tail (the last reduce-scatter's end after the last compute) are the exposed time."""
    L = int(units)
    out: list[dict[str, Any]] = []
    for i in range(L):
        s = ag_fwd + i * max(ag_fwd, f)
        out.append(
            {
                "phase": "forward",
                "unit": i,
                "gather_end_s": s if i == 0 else s - max(ag_fwd, f) + ag_fwd,
                "start_s": s,
                "end_s": s + f,
                "reduce_end_s": None,
                "wait_s": ag_fwd if i == 0 else max(ag_fwd, f) - f,
            }
        )
    a = ag_bwd if ag_bwd is not None else 0.0
    e_prev = r_prev = 0.0
    for j in range(L):
        s = max(e_prev, a) if ag_bwd is not None else e_prev
        e = s + b
        if ag_bwd is not None and j + 1 < L:
            a_next = max(s, r_prev) + ag_bwd
            r = max(e, a_next) + rs
        else:
            a_next = a
            r = max(e, r_prev) + rs
        out.append(
            {
                "phase": "backward",
                "unit": L - 1 - j,
                "gather_end_s": a if ag_bwd is not None else None,
                "start_s": s,
                "end_s": e,
                "reduce_end_s": r,
                "wait_s": s - e_prev,
            }
        )
        e_prev, r_prev, a = e, r, a_next
    return out
