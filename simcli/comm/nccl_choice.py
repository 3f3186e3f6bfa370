"""NCCL's choice, priced: the pair NCCL's tuner picks for each (k, n) (:func:`nccl_collective`, a running minimum
over :func:`simcli.comm.nccl.pairs`, vectorised), what that pair costs, and where another pair would cost less
(:func:`nccl_faster_pair`, with the ``NCCL_ALGO``/``NCCL_PROTO`` setting that gets it)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

from ..base.types import InputError, NcclSpec
from . import releases
from .collnet import NCCL_NAMES as COLLNET_ENV
from .collnet import collnet_pairs
from .cost import CommCost, Lazy, lazy, per_tier
from .nccl import RING_PLATEAU, default_spec, nvls_fill, pairs
from .specs import PROTOCOL_SPECS
from .topology import ring_params, tier_bandwidth

__all__ = [
    "chooser",
    "nccl_spec",
    "nccl_collective",
    "candidates",
    "nccl_faster_pair",
    "nccl_env",
    "NCCL_ALGO_ENV",
    "FASTER_MARGIN",
]


def nccl_spec(profile: Any) -> Any:
    """The profile's NCCL constants, or the defaults for its GPU generation and link kinds."""
    return profile.nccl if profile.nccl is not None else default_spec(profile.device.name, profile.network)


def chooser(spec: NcclSpec, by: str) -> str:
    """How a pair is chosen: ``by`` ("tuner": the library's tuner; "time": the fastest by cost), except that where
    a platform's tuner plugin replaces the library's (``spec.tuner == "fastest"``, docs/nccl.md "Tuner plugins")
    the choice is the fastest by cost."""
    return "time" if spec.tuner == "fastest" else by


def candidates(
    pairs_of: Callable[..., list[Any]],
    profile: Any,
    k: np.ndarray,
    *,
    spec: NcclSpec,
    collective: str,
    algorithms: Sequence[str] | None,
    protocol: str | None,
    library: str = "",
) -> tuple[np.ndarray, list[Any]]:
    """What each tier offers a ring over k and the pairs ``pairs_of`` (NCCL's :func:`pairs` or RCCL's) prices for
    the collective; bad input where a forced ``--protocol`` runs none of them."""
    tb = tier_bandwidth(profile.network, k)
    protocols = [protocol] if protocol else None
    cands = pairs_of(
        profile.network, spec, k, tier_Bps=tb, collective=collective, algorithms=algorithms, protocols=protocols
    )
    if pairs_of is pairs:  # SHARP tiers (simcli.comm.collnet): NCCL's CollNet beside its pairs
        cands += collnet_pairs(
            profile.network, spec, k, collective=collective, algorithms=algorithms, protocols=protocols
        )
    if not cands:
        raise InputError(
            f"--protocol: {protocol} does not run {', '.join(algorithms or ['any algorithm'])} on "
            f"profile {profile.name}{library}; choose another protocol or leave --protocol out"
        )
    return tb, cands


def _candidates(
    profile: Any,
    spec: NcclSpec,
    k: np.ndarray,
    *,
    collective: str,
    algorithms: Sequence[str] | None,
    protocol: str | None,
) -> list:
    """NCCL's pairs for the collective (the forced ones, and Ring where a forced algorithm cannot run: tuning.cc,
    "at least set ring algo available")."""
    net = profile.network
    protos = [protocol] if protocol else None
    tb, cands = candidates(
        pairs, profile, k, spec=spec, collective=collective, algorithms=algorithms, protocol=protocol
    )
    if algorithms is not None and "ring" not in algorithms:
        forced_on = np.any(np.stack([np.broadcast_to(p.enabled, k.shape) for p in cands]), axis=0)
        for r in pairs(net, spec, k, tier_Bps=tb, collective=collective, algorithms=["ring"], protocols=protos):
            cands.append(dataclasses.replace(r, enabled=np.broadcast_to(r.enabled, k.shape) & ~forced_on))
    return cands


def _tables(cands: list, ks: tuple, by: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-pair tables over k: (latency, 1/bandwidth) of the cost and of the choice (NCCL's tuner view for
    ``by="tuner"``: its tables, its plugin's latency, its graph's bandwidths); disabled pairs get an infinite
    latency, so their time is inf without a mask."""
    lat_t = np.stack([np.where(p.enabled, np.broadcast_to(p.latency, ks), np.inf) for p in cands])
    inv_t = np.stack([np.where(p.enabled, 1.0 / np.broadcast_to(p.alg_Bps, ks), 0.0) for p in cands])
    if by != "tuner":
        return lat_t, inv_t, lat_t, inv_t
    tlat_t = np.stack(
        [
            np.where(p.enabled, np.broadcast_to(p.latency if p.tuner_lat is None else p.tuner_lat, ks), np.inf)
            for p in cands
        ]
    )
    tinv_t = np.stack(
        [
            np.where(
                p.enabled, 1.0 / np.broadcast_to(p.alg_Bps if p.tuner_alg_Bps is None else p.tuner_alg_Bps, ks), 0.0
            )
            for p in cands
        ]
    )
    return lat_t, inv_t, tlat_t, tinv_t


def _choose(
    cands: list,
    n: np.ndarray,
    shape: tuple,
    *,
    ks: tuple,
    tlat_t: np.ndarray,
    tinv_t: np.ndarray,
    by: str,
    fp8_ring: bool,
) -> tuple[np.ndarray, list, dict]:
    """(index of the chosen pair per (k, n), each pair's size factor, the fills priced for ``by="time"``): NCCL's
    running minimum in float32, as NCCL keeps it (ncclTopoGetAlgoTime(..., float* time) and the float tables it
    reads); what the pick costs is computed again in float64 after."""
    nn = np.broadcast_to(n, shape)
    tinv32, tlat32 = tinv_t.astype(np.float32), tlat_t.astype(np.float32)
    best = np.empty(shape, dtype=np.float32)
    idx = np.zeros(shape, dtype=np.intp)
    mask = np.empty(shape, dtype=bool)
    key = np.empty(shape, dtype=np.float32)
    corr_by_pair = []
    fill_by_pair: dict[int, np.ndarray] = {}
    n32 = np.asarray(n, dtype=np.float32)
    for j, pr in enumerate(cands):
        out = best if j == 0 else key  # the first pair's key is the running minimum
        corr = pr.correction(n)  # tree's size factor (1.0 for the others), shaped like n
        corr_by_pair.append(corr)
        # the tree's factor folded into the sizes (a vector over n, not a pass over the grid)
        sizes = (np.asarray(n, dtype=np.float64) / corr).astype(np.float32) if isinstance(corr, np.ndarray) else n32
        np.multiply(np.broadcast_to(sizes, shape), tinv32[j], out=out)
        if by != "tuner":
            out /= pr.share(n)
        out += tlat32[j]
        if by == "tuner" and pr.plateau:
            # the tuner's ring plateau (Pair.tuner_latency), in place: +0.4 x latency where n >= 64 x channels x k
            # on more than one node; one comparison against a per-k threshold
            at = np.where(np.broadcast_to(pr.multi, ks), 64.0 * pr.channels * np.broadcast_to(pr.ranks, ks), np.inf)
            np.greater_equal(nn, at, out=mask)
            np.add(out, (RING_PLATEAU - 1.0) * tlat_t[j], out=out, where=mask)
        if fp8_ring and pr.algorithm == "ring":  # enqueue.cc: "Relegate fp8 reduction trees ..." (2.24.3 on)
            out *= np.where(np.broadcast_to(pr.ranks, ks) > 8, np.float32(1024.0), np.float32(1.0))
        if pr.ops is not None and by != "tuner":  # NVLS's pipeline fill: what it costs (NCCL's tuner omits it)
            fill_by_pair[j] = np.where(np.broadcast_to(pr.enabled, ks), pr.fill(nn), 0.0)
            out += fill_by_pair[j]
        if j == 0:
            continue
        np.less(key, best, out=mask)
        np.copyto(best, key, where=mask)
        np.copyto(idx, j, where=mask)
    return idx, corr_by_pair, fill_by_pair


def _fills(cands: list, idx: np.ndarray, nn: np.ndarray, *, shape: tuple, fill_by_pair: dict) -> list:
    """The NVLS pipeline fill of the chosen pair, as (where, seconds) parts: priced only where an NVLS pair was
    chosen (a small part of a large grid), never for the others."""
    parts = []
    for j, pr in enumerate(cands):
        if pr.ops is None or not np.any(pr.enabled):
            continue
        chosen = idx == j
        if not chosen.any():
            continue
        if j in fill_by_pair:
            parts.append((chosen, fill_by_pair[j][chosen]))
            continue
        parts.append(
            (
                chosen,
                nvls_fill(
                    pr.algorithm,
                    nn[chosen],
                    np.broadcast_to(pr.ops, shape)[chosen],
                    nodes=np.broadcast_to(pr.nodes, shape)[chosen],
                    alg_Bps=np.broadcast_to(pr.alg_Bps, shape)[chosen],
                    stages=pr.stages,
                ),
            )
        )
    return parts


def nccl_collective(
    profile: Any,
    k: np.ndarray,
    n: np.ndarray,
    *,
    collective: str = "all_reduce",
    algorithms: Sequence[str] | None = None,
    protocol: str | None,
    by: str = "tuner",
    message_dtype: str | None = None,
) -> CommCost:
    """NCCL's pick among its (algorithm, protocol) pairs (``by="tuner"``, as NCCL chooses) or the fastest
    (``by="time"``), priced as :mod:`simcli.comm.nccl` says it costs; vectorised, a running minimum over the pairs.
    ``protocol``: the one protocol to price, None for all of them. ``message_dtype``: the element type of the
    message (from 2.24.3 NCCL's choice prices an fp8 Ring x1024 past 8 ranks); None: not known."""
    net = profile.network
    spec = nccl_spec(profile)
    by = chooser(spec, by)
    fp8_ring = (
        message_dtype == "fp8" and by == "tuner" and releases.select(spec.version, "nccl.version").fp8_ring_penalty
    )
    cands = _candidates(profile, spec, k, collective=collective, algorithms=algorithms, protocol=protocol)
    n = np.asarray(n, dtype=np.float64)
    shape = np.broadcast(k, n).shape
    ks = k.shape
    lat_t, inv_t, tlat_t, tinv_t = _tables(cands, ks, by)
    # bytes per channel below which a channel is dropped; NVLS never drops one (a threshold of ~0)
    thr_t = np.stack(
        [np.where(np.broadcast_to(p.threshold, ks) > 0, np.broadcast_to(p.threshold, ks), 1e-30) for p in cands]
    )
    nn = np.broadcast_to(n, shape)
    idx, corr_by_pair, fill_by_pair = _choose(
        cands, n, shape, ks=ks, tlat_t=tlat_t, tinv_t=tinv_t, by=by, fp8_ring=fp8_ring
    )
    # what the chosen pair costs: its latency, and its bytes at the channels getAlgoInfo launches for the size
    nk = int(np.prod(ks))
    flat = idx * nk
    flat += np.arange(nk).reshape(ks)  # index of (chosen pair, k) in a (pairs, k) table, per element

    def pick(table: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(table).reshape(-1).take(flat)

    ch = np.broadcast_to(np.asarray(cands[0].channels, dtype=np.float64), ks)  # runtime channels, over k
    lat = pick(lat_t)
    # nc/ch of the chosen pair: nc = clip(floor(n / threshold), 1, channels)
    nc = np.divide(nn, pick(thr_t))
    np.floor(nc, out=nc)
    np.clip(nc, 1.0, ch, out=nc)
    if any(isinstance(c, np.ndarray) for c in corr_by_pair):
        corr_t = np.stack([np.broadcast_to(np.asarray(c, dtype=np.float64), np.shape(n)) for c in corr_by_pair])
        nsz = int(np.prod(np.shape(n)))
        fn = idx * nsz
        fn += np.arange(nsz).reshape(np.shape(n))
        nc *= corr_t.reshape(-1).take(fn)  # nc x the tree correction: the bandwidth's size factor x ch
    one = k < 2
    anyone = bool(np.any(one))
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = pick(inv_t * ch)
        bandwidth *= nn
        bandwidth /= nc
    parts = _fills(cands, idx, nn, shape=shape, fill_by_pair=fill_by_pair)
    for where, f in parts:
        bandwidth[where] += f

    def fill_of() -> np.ndarray:
        out = np.zeros(shape)
        for where, f in parts:
            out[where] = f
        return np.where(one, 0.0, out) if anyone else out

    if anyone:
        one = np.broadcast_to(one, shape)
        bandwidth = np.where(one, 0.0, bandwidth)
        lat = np.where(one, 0.0, lat)
    return _cost(
        cands,
        net,
        k,
        shape=shape,
        idx=idx,
        lat=lat,
        bandwidth=bandwidth,
        nc=nc,
        ch=ch,
        pick=pick,
        one=one,
        anyone=anyone,
        fill=Lazy(fill_of),
    )


def _cost(cands, net, k, *, shape, idx, lat, bandwidth, nc, ch, pick, one, anyone, fill) -> CommCost:
    """The chosen pairs' CommCost: time, latency and bandwidth now, the per-tier terms and names when asked."""
    ks = k.shape
    P = len(cands)
    time = lat + bandwidth
    alg_names = np.array([p.algorithm for p in cands] + ["none"])
    proto_names = np.array([p.protocol for p in cands] + [None], dtype=object)
    sel = np.where(one, P, idx) if anyone else idx
    nt = len(net)

    def bottleneck() -> np.ndarray:
        """NVLS in one node: the NVLink tier; the others: the ring's bottleneck tier; -1 where k == 1."""
        _, _, ring_b = ring_params(net, k)
        is_nvls = np.array([p.algorithm == "nvls" for p in cands] + [False])[sel]
        b = np.where(is_nvls, 0, ring_b)
        return np.where(one, -1, b) if anyone else b

    def tier_table(attr: str) -> Callable[[], np.ndarray]:
        def build() -> np.ndarray:
            tab = np.stack([getattr(p, attr) for p in cands])  # (P, tiers, ...k)
            out = np.stack([pick(tab[:, i]) for i in range(nt)])
            if attr == "hop_latency":
                out[0] += np.array([p.base for p in cands])[idx]  # NCCL's base latency, charged to tier 0
            return np.where(one, 0.0, out) if anyone else out

        return build

    # the lazy terms share one cache and never name the CommCost itself: a closure over it would make a
    # reference cycle, so that every result (and its grid-sized arrays) waited for the cyclic garbage collector
    cache: dict[str, np.ndarray] = {}

    def once(name: str, build: Callable[[], np.ndarray]) -> Callable[[], np.ndarray]:
        def get() -> np.ndarray:
            if name not in cache:
                cache[name] = build()
            return cache[name]

        return get

    hops_of = once("hops", tier_table("hops"))
    bneck_of = once("bottleneck", bottleneck)
    return CommCost(
        time=time,
        latency=lat,
        bandwidth=bandwidth,
        reduction=lazy(lambda: np.zeros(shape)),
        alpha=lazy(lambda: np.where(one, 0.0, lat / np.maximum(hops_of().sum(axis=0), 1.0))),
        bus_Bps=lazy(
            lambda: np.where(one, np.inf, pick(np.stack([np.broadcast_to(p.bus_Bps, ks) for p in cands])) * nc / ch)
        ),
        bottleneck=lazy(bneck_of),
        tier_latency=lazy(tier_table("hop_latency")),
        tier_bandwidth_s=lazy(lambda: per_tier(nt, bandwidth, bneck_of())),
        algorithm=lazy(lambda: alg_names[sel]),
        protocol=lazy(lambda: proto_names[sel]),
        tier_hops=lazy(hops_of),
        fill=fill,
    )


#: NCCL_ALGO's spellings of simcli's NCCL algorithm names (NCCL_PROTO's are the ProtocolSpec rows' ``nccl``)
NCCL_ALGO_ENV = {"ring": "Ring", "tree": "Tree", "nvls": "NVLS", "nvls-tree": "NVLSTree", "pat": "PAT", **COLLNET_ENV}
#: by how much the cheapest pair by simcli's cost must beat NCCL's pick of one collective before ``comm`` says so,
#: as a fraction of the pick's time (a step says so by its own measure: simcli.step.notes.STEP_MARGIN)
FASTER_MARGIN = 0.02


def nccl_faster_pair(
    profile: Any,
    k: np.ndarray,
    n: np.ndarray,
    *,
    collective: str = "all_reduce",
    margin: float = FASTER_MARGIN,
    picked: CommCost | None = None,
    message_dtype: str | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Where NCCL's own pick costs more (by more than ``margin``) than another of its pairs, in simcli's cost.

    Returns (faster, algorithm, protocol, time) over the (k, n) grid: ``faster`` is True where the cheapest pair
    by cost beats NCCL's pick by more than ``margin``; ``algorithm``/``protocol`` name that pair and ``time`` its
    cost. Both are one model: NCCL's choice is made on its tuner's view (its tables, the network plugin's
    latency, the ring plateau, all channels), the cost on simcli's; the difference is what
    ``NCCL_ALGO``/``NCCL_PROTO`` would buy (:func:`nccl_env`). ``picked``: NCCL's pick, if already priced;
    ``message_dtype``: as :func:`nccl_collective`.
    """
    if picked is None:
        picked = nccl_collective(profile, k, n, collective=collective, protocol=None, message_dtype=message_dtype)
    best = nccl_collective(profile, k, n, collective=collective, protocol=None, by="time")
    faster = best.time < picked.time * (1.0 - margin)
    return faster, np.asarray(best.algorithm), np.asarray(best.protocol), best.time


def nccl_env(algorithm: str, protocol: str | None) -> str:
    """The environment that makes NCCL run one pair: ``NCCL_ALGO=Tree NCCL_PROTO=LL128``."""
    env = f"NCCL_ALGO={NCCL_ALGO_ENV.get(algorithm, algorithm)}"
    if protocol:
        proto = next((p.nccl for p in PROTOCOL_SPECS if p.name == protocol), protocol)
        env += f" NCCL_PROTO={proto}"
    return env
