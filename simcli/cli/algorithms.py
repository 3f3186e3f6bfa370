"""`simcli algorithms` (which all-reduce algorithm wins where) and `simcli explain` (every term for one k)."""

from __future__ import annotations

from typing import Annotated

import numpy as np

from ..base.ranges import parse_devices, parse_sizes
from ..base.types import InputError
from ..base.units import fmt_bytes
from ..comm import collectives, crossover, registry, topology
from ..io.formats import to_csv, to_json
from ..io.profiles import resolve_profile
from . import options as o
from .common import answer, emit, examples, handle_errors, new_app, show, warn_mfu_fallback, warn_nccl_faster
from .progress import progress

__all__ = ["algorithms", "explain"]

app = new_app()

#: short names for the winner grid
SHORT = {a.name: a.label for a in registry.REGISTRY}


@app.command(epilog=examples("simcli algorithms -p dgx-h100 -k 2..1024:x4 -s 1KiB..4GiB:x16"))
@handle_errors
def algorithms(
    devices: o.Devices = "2..1024:x2",
    size: Annotated[
        str, o.option("--size", "-s", help="Message sizes with units: '1KiB..4GiB:x4', '32MiB,1GiB'.")
    ] = "1KiB..4GiB:x4",
    profile: o.Profile = None,
    out: Annotated[o.OutputOptions, o.tweak(omit=["rows"])] = o.OutputOptions(),
    pic: Annotated[o.PictureOptions, o.tweak(omit=["threshold"])] = o.PictureOptions(),
) -> None:
    """Which all-reduce algorithm is fastest at each (k, message size), and the crossover sizes."""

    fig_size = o.check_outputs(out, pic, threshold=False)
    k = parse_devices(devices)
    n = parse_sizes(size)
    prof = resolve_profile(profile)
    net = prof.network
    topology.check_devices(net, k)
    gamma = prof.device.reduce_Bps
    nccl = prof.library == "nccl"

    with progress(f"fastest all-reduce over {k.size * n.size:,} (k, size) points and their crossovers"):
        names = crossover.algorithm_names(prof)
        times = crossover.allreduce_times(prof, names, k[:, None], n=n[None, :])
        win = np.argmin(times, axis=0)
        choice = collectives.collective(prof, "nccl", k[:, None], nbytes=n[None, :], protocol=None) if nccl else None
        if pic.plot:
            from .plot import draw_algorithm_map  # lazy

            draw_algorithm_map(prof, k, n, names=names, winner=win, path=pic.plot, force=out.force, size=fig_size)
        cross = (
            crossover.crossovers_numeric(prof, names, k, n_lo=float(n.min()), n_hi=float(n.max()))
            if nccl
            else crossover.crossovers(net, k, float(n.min()), n_hi=float(n.max()), reduce_Bps=gamma)
        )
    grid = []
    for i, kk in enumerate(k.tolist()):
        for j, nn in enumerate(n.tolist()):
            rec = {
                "devices": kk,
                "bytes": int(nn),
                "fastest": names[int(win[i, j])],
                "time_s": float(times[win[i, j], i, j]),
            }
            rec.update({f"{a}_s": _finite(times[x, i, j]) for x, a in enumerate(names)})
            if choice is not None:  # what NCCL itself would run there
                rec.update(
                    nccl_algorithm=str(choice.algorithm[i, j]),
                    nccl_protocol=None if choice.protocol is None else choice.protocol[i, j],
                    nccl_s=float(choice.time[i, j]),
                )
            grid.append(rec)
    if out.format is o.Format.json:
        emit(to_json({"profile": prof.name, "grid": grid, "crossovers": cross}), out.output, out.force)
        return
    if out.format is o.Format.csv:
        emit(to_csv(grid), out.output, out.force)
        return
    from rich.console import Group  # lazy
    from rich.text import Text  # lazy

    from ..io.render import Column, table  # lazy

    rows = [
        {"size": fmt_bytes(nn), **{str(kk): SHORT[names[int(win[i, j])]] for i, kk in enumerate(k.tolist())}}
        for j, nn in enumerate(n.tolist())
    ]
    # the sizes and the first and last k are kept on a narrow terminal; the k between go from the right
    ks = k.tolist()
    cols = [Column("size \\ k", "size")] + [
        Column(str(kk), str(kk), justify="left", priority=0 if i in (0, len(ks) - 1) else 1 + i, label=f"k = {kk}")
        for i, kk in enumerate(ks)
    ]
    legend = ", ".join(f"{SHORT[a]} = {a}" for a in names)
    crows = [{"devices": c["devices"], "bytes": c["bytes"], "change": f"{c['from']} -> {c['to']}"} for c in cross]
    cross_table = table(
        crows,
        [
            Column("k", "devices"),
            Column("crossover size", "bytes", lambda v: fmt_bytes(v)),
            Column("fastest changes", "change", justify="left"),  # all three are the answer: never left out
        ],
    )
    ctab = Group(
        cross_table,
        Text(
            "Crossover: where two algorithms' costs are equal ("
            + (
                "found by bisection: NCCL's costs are piecewise, not affine in the size)."
                if nccl
                else "each is L + s·n, so it is exact)."
            )
        ),
    )
    head = Text(
        f"fastest all-reduce per (k, size), profile {prof.name} ({prof.device.name})"
        + (
            "; ring, tree, nvls, nvlst"
            + (", cnd, cnc" if any(t.collnet == "sharp" for t in prof.network) else "")  # CollNet (SHARP)
            + " are NCCL's (best protocol each); 'simcli comm -a nccl' shows what NCCL itself picks"
            if nccl
            else ""
        )
    )
    show(
        Group(
            head,
            Text(""),
            table(rows, cols),
            Text(legend),
            Text(""),
            ctab if crows else Text("no crossovers in this size range"),
        ),
        out.output,
        out.force,
    )


def _finite(x: float) -> float | None:
    x = float(x)
    return x if x == x and x != float("inf") else None


@app.command(epilog=examples("simcli explain -k 64", "simcli explain -k 64 -m llama2-7b --strategy fsdp"))
@handle_errors
def explain(
    devices: Annotated[int, o.option("--devices", "-k", metavar="K", help="The one device count to explain.")] = 8,
    scn: o.ScenarioOptions = o.ScenarioOptions(),
    out: Annotated[o.OutputOptions, o.tweak(omit=["rows"])] = o.OutputOptions(),
) -> None:
    """Every term of the step on k devices: forward, backward, each tier's terms, T_comm, hidden, exposed, n*."""
    from ..decisions.explain import explain as explain_terms  # lazy
    from .views import explain_view, flat_terms  # lazy

    o.check_outputs(out)
    if devices < 1:
        raise InputError(f"--devices: {devices} must be at least 1")
    sc = scn.build()
    warn_mfu_fallback([sc])
    d = explain_terms(sc, devices)
    warn_nccl_faster(
        ({"profile": d["inputs"]["profile"], "devices": d["devices"], **row} for row in d.get("nccl_faster") or []),
        see="the line 'NCCL's choice' says which" if out.table else "'nccl_faster' says which",
    )
    answer(out, lambda: explain_view(d), lambda: d, rows=lambda: (flat_terms(d), []))
