"""What a step says about NCCL's choice: where NCCL's own pick costs more, in simcli's model, than another of its
pairs (:func:`nccl_faster`), and where a faster NIC stops NCCL's search graph at fewer channels
(:func:`graph_notes`). The CLI turns both into one stderr line each; docs/nccl.md says where tuner and cost part."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..comm import nccl, nccl_choice
from .engine import Result, simulate

__all__ = ["nccl_faster", "graph_notes", "STEP_MARGIN"]


#: how much of the step NCCL_ALGO/NCCL_PROTO must save before simcli says NCCL's own choice is not its cheapest:
#: at every other k a better network can make the step slower by at most this fraction (each pair's cost never
#: grows with a better tier, so the step with the new picks is at most their total saving above the step with the
#: old ones; tests/comm/test_nccl_issue21.py holds it for every built-in profile and preset)
STEP_MARGIN = 0.01


def nccl_faster(res: Result, margin: float = STEP_MARGIN) -> list[dict[str, Any]]:
    """Where the step runs NCCL's own choice and simcli prices other pairs of NCCL's cheaper, by more than
    ``margin`` of the step in all: one JSON-ready row per (message, k) whose pick is not the cheapest, k-major, at
    the k where the rows' savings add up to more than ``margin`` x T_step.

    Only when NCCL chooses (a profile that models NCCL, ``--algorithm nccl``, no ``--protocol``): the pick is
    what NCCL's tuner prefers, the cheaper pair what simcli's cost prefers
    (:func:`simcli.comm.nccl_choice.nccl_faster_pair`; docs/nccl.md says where the two part). ``setting`` is
    the NCCL_ALGO/NCCL_PROTO that runs the cheaper pair;
    ``saving_s`` the communication one micro-step saves with it, before overlap (count x the difference);
    ``release`` the NCCL release whose tuner made the pick (the stderr line names it and the pair where it is not
    the default: an older release's tables can make a faster link pick a slower pair).
    """
    sc = res.scenario
    if sc.profile.library != "nccl" or sc.algorithm != "nccl" or sc.protocol is not None:
        return []
    per_step = 1.0  # the step's messages, once per optimizer step (ddp: the last micro-step's backward)
    if res.sharded is not None:
        per_step = float(sc.accum)  # the sharded strategies communicate every micro-step
        msgs = [
            (coll, count, float(nbytes), cost, prof, devs)
            for (_, count, nbytes, cost), (coll, prof, devs) in zip(res.sharded.messages, res.sharded.priced_on)
            if count
        ]
    else:
        plan = res.plan
        assert plan is not None
        msgs = [
            ("all_reduce", float(count), float(nbytes), cost, sc.profile, res.devices)
            for count, nbytes, cost in ((plan.full, plan.size, res.comm_bucket), (1, plan.last, res.comm_last))
            if cost is not None and count
        ]
    release = nccl_choice.nccl_spec(sc.profile).version  # the release whose tuner made the pick
    found: list[tuple[int, int, dict[str, Any]]] = []
    total = np.zeros(res.devices.shape)
    for m, (coll, count, nbytes, cost, prof, devs) in enumerate(msgs):
        devs = np.asarray(devs, dtype=np.int64)
        faster, alg, proto, t = nccl_choice.nccl_faster_pair(
            prof, devs, np.float64(nbytes), collective=coll, margin=1e-9, picked=cost
        )
        picked_t = np.broadcast_to(cost.time, devs.shape)
        for i in np.flatnonzero(faster):
            p_proto = cost.protocol[i] if cost.protocol is not None else None
            f_proto = None if proto[i] in (None, "-") else str(proto[i])
            saving = count * float(picked_t[i] - t[i])
            total[i] += per_step * saving
            found.append(
                (
                    int(i),
                    m,
                    {
                        "devices": int(res.devices[i]),
                        "collective": coll,
                        "bytes": nbytes,
                        "count": count,
                        "algorithm": str(cost.algorithm[i]),
                        "protocol": None if p_proto in (None, "-") else str(p_proto),
                        "time_s": float(picked_t[i]),
                        "faster_algorithm": str(alg[i]),
                        "faster_protocol": f_proto,
                        "faster_time_s": float(t[i]),
                        "setting": nccl_choice.nccl_env(str(alg[i]), f_proto),
                        "saving_s": saving,
                        "release": release,
                    },
                )
            )
    said = total > margin * res.t_step_s
    return [row for i, _, row in sorted(found, key=lambda x: (x[0], x[1])) if said[i]]


def graph_notes(res: Result, margin: float = STEP_MARGIN) -> list[dict[str, Any]]:
    """Where NCCL's inter-node search graph is a tie that the profile's NIC speed breaks toward fewer channels, and
    a NIC just under the graph's speed would run the step faster by more than ``margin`` of it (the per-channel
    caps count the channels; :func:`simcli.comm.nccl.graph_tie`): one row per such k. The other way, besides
    :func:`nccl_faster`, that a better tier can make NCCL's step slower; the CLI says it on stderr."""
    sc = res.scenario
    if sc.profile.library != "nccl" or sc.algorithm != "nccl" or sc.protocol is not None:
        return []

    net = sc.profile.network
    tie = nccl.graph_tie(net, nccl_choice.nccl_spec(sc.profile), res.devices)
    if tie is None or not tie["tie"].any():
        return []
    slower_Bps = float(np.max(tie["speed_GBps"])) * 1e9 * (1 - 1e-6) / max(net[1].efficiency, 1e-12)
    alt_net = (net[0], dataclasses.replace(net[1], bandwidth_Bps=slower_Bps), *net[2:])
    alt = simulate(sc.replace(profile=dataclasses.replace(sc.profile, network=alt_net)), res.devices)
    said = tie["tie"] & (alt.t_step_s < res.t_step_s * (1 - margin))
    return [
        {
            "devices": int(res.devices[i]),
            "channels": int(tie["channels"][i]),
            "speed_GBps": float(tie["speed_GBps"][i]),
            "alt_channels": int(tie["alt_channels"][i]),
            "alt_speed_GBps": float(tie["alt_speed_GBps"][i]),
            "t_step_s": float(res.t_step_s[i]),
            "alt_t_step_s": float(alt.t_step_s[i]),
        }
        for i in np.flatnonzero(said)
    ]
