"""`simcli speedup` (S(k) and E(k) over k) and `simcli comm` (all-reduce time and busbw over k and size)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import numpy as np

from ..base.ranges import parse_devices
from ..base.types import InputError
from ..base.units import fmt_bytes
from ..comm.collectives import default_algorithm
from ..io.formats import jsonable, to_csv, to_json
from ..step.engine import memory_fit, simulate
from ..step.notes import graph_notes, nccl_faster
from ..step.strategies import STRATEGIES
from . import options as o
from .common import emit, examples, handle_errors, new_app, show, warn, warn_mfu_fallback, warn_nccl_faster, where_k
from .progress import progress

app = new_app()


#: k values simulated and formatted at a time when a CSV or JSON has more rows than this (memory stays flat:
#: speedup -k 1..5000000 -f csv took 170 s and 12.9 GB whole)
STREAM_CHUNK = 100_000


def _stream_records(scs, k, as_json: bool):
    """The CSV or JSON text of every scenario's records, chunk by chunk: the same text as written whole."""

    from ..step.band import banded  # lazy

    vary = (o.varying(scs) or list(o.MULTI)) if len(scs) > 1 else []
    first = True
    if as_json:
        yield "[\n"
    for sc in scs:
        tags = o.scenario_tags(sc)
        for i in range(0, k.size, STREAM_CHUNK):
            recs = banded(simulate(sc, k[i : i + STREAM_CHUNK])).records()
            if vary:
                recs = [{**{t: tags[t] for t in vary}, **r} for r in recs]
            if as_json:
                body = ",\n".join(json.dumps(jsonable(r), allow_nan=False) for r in recs)
                yield body if first else ",\n" + body
            else:
                text = to_csv(recs)
                yield text if first else text.split("\n", 1)[1]
            first = False
    if as_json:
        yield "\n]\n"


def _counted(chunks, bar):
    """The chunks of a streamed CSV or JSON, advancing ``bar`` once per chunk of records."""
    for text in chunks:
        yield text
        if text not in ("[\n", "\n]\n"):
            bar.advance()


@app.command(
    epilog=examples(
        "simcli speedup --devices 1..64",
        "simcli speedup -k 8..512:x2 -p dgx-a100,dgx-h100 -m llama2-7b",
    )
)
@handle_errors
def speedup(
    devices: o.Devices = "1..64:x2",
    scn: o.ScenarioOptions = o.ScenarioOptions(),
    explain: o.Explain = False,
    out: o.OutputOptions = o.OutputOptions(),
    pic: o.PictureOptions = o.PictureOptions(),
) -> None:
    """Predict step time, speedup S(k) and efficiency E(k) = S(k)/k for each device count k.

    Comma-separated --profile, --model or --algorithm values give one result (and one line) per combination.
    """

    from ..step.band import banded  # lazy

    size = o.check_outputs(out, pic)
    k = parse_devices(devices)
    scs = scn.build_all()
    warn_mfu_fallback(scs)
    for sc in scs:
        _warn_memory(sc, k)
    shown = k
    if out.table and not pic.plot and out.rows and k.size > out.rows:
        # a table shows its first and last rows only: compute those (1..5000000 costs as much as 40 points)
        head = out.rows // 2
        shown = np.concatenate([k[:head], k[k.size - (out.rows - head) :]])

    if not out.table and not explain and not pic.plot and k.size > STREAM_CHUNK:
        # millions of rows: computed and written chunk by chunk, memory stays flat; a bar counts the chunks
        # (unless the rows themselves stream to the terminal)

        chunks = len(scs) * -(-k.size // STREAM_CHUNK)
        with progress(
            f"simulating and writing {k.size * len(scs):,} rows",
            total=chunks,
            when=bool(out.output) or not sys.stdout.isatty(),
        ) as bar:
            emit(_counted(_stream_records(scs, k, out.format is o.Format.json), bar), out.output, out.force)
        return
    with progress(f"simulating {shown.size:,} k" + (f", drawing {pic.plot}" if pic.plot else "")):
        results = [banded(simulate(sc, shown)) for sc in scs]
        # the warnings speak of every k asked for, not only the rows a table shows
        _warn_faster(results if shown is k or k.size > STREAM_CHUNK else [simulate(sc, k) for sc in scs])
        if explain:  # every term for the largest k of each scenario
            from ..decisions.explain import explain as explain_terms  # lazy

            terms = [explain_terms(sc, int(k.max())) for sc in scs]
        if pic.plot:
            from .plot import draw_speedup  # lazy

            draw_speedup(results, pic.plot, out.force, size=size, threshold=pic.threshold)
    if out.table:
        from rich.console import Group  # lazy
        from rich.text import Text  # lazy

        from .views import explain_view, speedup_table  # lazy

        parts = [x for res in results for x in (speedup_table(res, out.rows, total=k.size), Text(""))][:-1]
        if explain:
            parts += [x for d in terms for x in (Text(""), explain_view(d))]
        show(Group(*parts), out.output, out.force)
        return

    recs = o.speedup_records(results)
    if not explain:
        text = to_json(recs) if out.format is o.Format.json else to_csv(recs)
    elif out.format is o.Format.json:
        text = to_json({"records": recs, "explain": terms})
    else:
        from .views import flat_terms  # lazy

        text = to_csv(
            recs,
            comments=[f"explain k={d['devices']}: {r['term']} = {r['value']}" for d in terms for r in flat_terms(d)],
        )
    emit(text, out.output, out.force)


def _warn_faster(results: Any) -> None:
    """One stderr line for every result together where NCCL's own pick costs more than another of its pairs."""

    warn_nccl_faster({"profile": res.scenario.profile.name, **row} for res in results for row in nccl_faster(res))
    for res in results:
        rows = graph_notes(res)
        if rows:
            ks = [r["devices"] for r in rows]
            r = rows[0]
            warn(
                f"{res.scenario.profile.name}: NICs just under {r['speed_GBps']:g} GB/s would run the step faster at "
                f"{where_k(ks)} (NCCL's graph search; k = {r['devices']}: {r['alt_t_step_s'] * 1e3:.4g} ms, not "
                f"{r['t_step_s'] * 1e3:.4g} ms; docs/nccl.md)"
            )


def _warn_memory(sc: Any, k: Any) -> None:
    """One stderr line when some k does not fit the device's memory, naming the least sharded strategy that does."""

    fit = memory_fit(sc, k)
    if fit is None:
        return
    ks = fit["devices"]
    need = fmt_bytes(max(fit["memory_bytes"]), binary=False)
    need = f"{sc.strategy} does not fit: it needs {need} per device at {where_k(ks)}"
    cap = f"the device has {fmt_bytes(fit['capacity_bytes'], binary=False)}"
    if any(s is None for s in fit["fits_with"]):
        bad = [kk for kk, s in zip(ks, fit["fits_with"]) if s is None]
        hint = (
            "no strategy fits"
            + ("" if len(bad) == len(ks) else f" at {where_k(bad)}")
            + (
                " (try without --no-activation-checkpointing)"
                if not sc.activation_checkpointing
                and memory_fit(sc.replace(activation_checkpointing=True, strategy="fsdp"), bad) is None
                else " (that takes model parallelism)"
            )
        )
    else:
        best = max(fit["fits_with"], key=STRATEGIES.index)
        hint = f"--strategy {best} fits"
    warn(f"{sc.workload.name} on {sc.profile.name}: {need}, {cap}; {hint}")


def _grid_part(prof, k, n, *, start: int, count: int, kw: dict) -> list[dict]:
    """Records ``start`` .. ``start + count`` of comm_grid(prof, k, n) (k-major), computing only those."""
    from ..comm.grid import comm_grid  # lazy

    m, out, i = n.size, [], start
    while i < start + count:
        ki, ni = divmod(i, m)
        take = min(m - ni, start + count - i)
        out += comm_grid(prof, k[ki : ki + 1], n[ni : ni + take], **kw)
        i += take
    return out


@app.command(epilog=examples("simcli comm -k 8,64 -s 1KiB..1GiB:x4 -p dgx-h100"))
@handle_errors
def comm(
    co: o.CommOptions = o.CommOptions(),
    gpus_per_process: o.GpusPerProcess = 1,
    out: Annotated[o.OutputOptions, o.tweak(defaults={"rows": 60})] = o.OutputOptions(),
    pic: Annotated[o.PictureOptions, o.tweak(omit=["threshold"])] = o.PictureOptions(),
) -> None:
    """Predicted collective time, algbw and busbw per (k, message size), in nccl-tests' terms.

    Comma-separated --profile values give one table per profile (a 'profile' column in csv and json).
    """

    fig_size = o.check_outputs(out, pic, threshold=False)
    k, n = co.grid()
    profs = co.profiles()
    if pic.plot and len(profs) > 1:
        raise InputError(
            f"--plot: draws one profile's grid; give one --profile (not {len(profs)}), or compare profiles with "
            "'simcli plot speedup -p a,b'"
        )
    kw_base = {
        "algorithm": co.algorithm,
        "message_dtype": co.dtype,
        "collective": co.collective,
        "protocol": co.protocol,
        "gpus_per_process": gpus_per_process,
    }
    total = k.size * n.size
    parts: list[Any] = []
    records: list[dict] = []

    faster: list[dict] = []
    with progress(f"{total * len(profs):,} (k, size) points", total=len(profs)) as bar:
        for prof in profs:
            part, recs, seen = _comm_one(
                prof, k, n, kw_base=kw_base, out=out, pic=pic, fig_size=fig_size, tagged=len(profs) > 1
            )
            parts += [part] if part is not None else []
            records += recs
            faster += [
                {
                    **r,
                    "profile": prof.name,
                    "setting": r["faster"],
                    "faster_time_s": r["faster_s"],
                }
                for r in seen
                if r.get("faster")
            ]
            bar.advance()
    warn_nccl_faster(faster, step=False)
    if out.table:
        from rich.console import Group  # lazy
        from rich.text import Text  # lazy

        show(Group(*[x for part in parts for x in (part, Text(""))][:-1]), out.output, out.force)
        return

    emit(to_json(records) if out.format is o.Format.json else to_csv(records), out.output, out.force)


def _comm_one(
    prof: Any, k: Any, n: Any, *, kw_base: dict, out: Any, pic: Any, fig_size: Any, tagged: bool
) -> tuple[Any, list[dict], list[dict]]:
    """One profile's comm grid: its table (or None), its records (or [] for a table) and the records computed."""
    from ..comm.grid import comm_grid  # lazy
    from .views import comm_table  # lazy

    alg = kw_base["algorithm"] or default_algorithm(prof)
    kw = dict(kw_base, algorithm=alg)
    collective, total = kw["collective"], k.size * n.size
    if out.table and not pic.plot and out.rows and total > out.rows:
        # a table shows its first and last rows only: compute those (of the k-major grid), not all k x sizes
        head = out.rows // 2
        recs = _grid_part(prof, k, n, start=0, count=head, kw=kw) + _grid_part(
            prof, k, n, start=total - (out.rows - head), count=out.rows - head, kw=kw
        )
        return comm_table(prof, recs, alg, max_rows=out.rows, collective=collective, total=total), [], recs
    recs = comm_grid(prof, k, n, **kw)
    if pic.plot:
        from .plot import draw_comm  # lazy

        draw_comm(
            recs,
            prof,
            alg,
            dtype=kw["message_dtype"],
            path=pic.plot,
            force=out.force,
            size=fig_size,
            collective=collective,
        )
    if out.table:
        return comm_table(prof, recs, alg, max_rows=out.rows, collective=collective), [], recs
    return None, ([{"profile": prof.name, **r} for r in recs] if tagged else recs), recs
