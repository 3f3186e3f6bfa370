"""`simcli check`: is a measured collective curve (nccl-tests, NCCL Inspector) what the hardware should give?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import numpy as np
import typer
from rich.console import Group
from rich.text import Text

from ..base.types import InputError
from ..base.units import fmt_bytes
from ..checks.check import MODEL_FLOOR, parse_tolerance
from ..checks.check import check as run_check
from ..io import rules
from ..io.files import check_output_path
from ..io.inputs import read_text
from ..io.measured.live import detect, read_live
from ..io.measured.nccltests import looks_like_nccl_tests, parse_nccl_tests
from ..io.measured.table import live_measured, read_measurements
from ..io.render import Column, table
from . import options as o
from .common import answer, examples, handle_errors, new_app
from .measured import MeasuredProfile, backend_of, devices_of, profile_for_measurements

app = new_app()  # `check`, a top-level command


Tolerance = Annotated[
    Optional[str],
    o.listed(
        "--tolerance",
        help="Allowed |measured/expected busbw - 1| before a size is LOW or HIGH: one value ('15%') or one per size "
        "band, smallest first ('30%,40%,10%'); given, it is the whole rule [default: per band, the 95th percentile of "
        "simcli's own error on the published validation curves (the table's caption and --format json name them), and "
        "a size below it is LOW only below the lowest meas/exp the model gave on a healthy curve of its kind, else "
        "MODEL; docs/calibration.md].",
    ),
]


def _measured_times(path: str, m) -> Any:
    """The better of out-of-place and in-place where the file has both (nccl-tests runs both), else time_s."""

    t = m.allreduce_time()
    if m.has("time_us", "time_inplace_us"):
        inp = m.optional("time_inplace_us")
        if inp is not None:
            return np.minimum(t, inp * 1e-6)
        return t

    if Path(path).is_dir():
        return t

    if looks_like_nccl_tests(read_text(path, "nccl-tests output")):
        try:
            inplace = {int(r["bytes"]): r["time_s"] for r in parse_nccl_tests(path, placement="in")}
        except InputError:  # no in-place columns: out-of-place only
            return t
        n = m.number("bytes")
        return np.array([min(t[i], inplace.get(int(n[i]), t[i])) for i in range(len(t))])
    return t


@app.command(epilog=examples("simcli check all_reduce_perf.txt --profile dgx-h100"))
@handle_errors
def check(
    file: Annotated[
        str,
        typer.Argument(
            metavar="FILE",
            help="A collective's measured curve: nccl-tests output (its text or -J JSON), NCCL Inspector output "
            "(a log, a Prometheus file, or the dump directory), or a 'bench allreduce' / 'bench import' CSV.",
        ),
    ],
    profile: MeasuredProfile = None,
    tolerance: Tolerance = None,
    algorithm: o.Algorithm = None,
    out: o.OutputOptions = o.OutputOptions(),
) -> None:
    """Per size: measured beside what NCCL should reach on the profile, OK / MODEL / LOW / HIGH, the limiting tier.

    MODEL: below the tolerance but within simcli's own known error there (healthy published curves of the same
    kind run that far below the model): not the hardware. Exit status 0 when no size is LOW, 1 when any is LOW
    (HIGH: the profile undersells the hardware).
    """

    if out.output:
        check_output_path(out.output, out.force, inputs=[file, profile])
    tol = parse_tolerance(tolerance)

    kind = detect(file)
    m = live_measured(read_live(file, kind), None) if kind else read_measurements(file)
    prof = profile_for_measurements(profile, [m])
    floors = MODEL_FLOOR if tolerance is None else None  # the user's --tolerance is the whole rule
    recs, notes = run_check(m, prof, _measured_times(file, m), tolerance=tol, algorithm=algorithm, floors=floors)

    rules.hardware(file, prof, backend=backend_of(m), devices=devices_of(m))
    rules.line_rate(
        prof,
        [r["devices"] for r in recs],
        [r["busbw_measured_GBps"] for r in recs],
        where=[f"{file}: k = {r['devices']}, {int(r['bytes'])} B" for r in recs],
        field="busbw (measured)",
    )
    for note in notes:
        typer.echo(f"simcli: note: {note}", err=True)
    low = sum(r["verdict"] == "LOW" for r in recs)
    high = sum(r["verdict"] == "HIGH" for r in recs)
    model = sum(r["verdict"] == "MODEL" for r in recs)
    doc = {"file": file, "profile": prof.name, "tolerance": tol, "model_floor": floors, "rows": recs}
    answer(
        out,
        lambda: _check_view(file, prof.name, recs, tol=tol, max_rows=out.rows, floors=floors is not None),
        lambda: {**doc, "low": low, "model": model, "high": high},
        rows=lambda: (recs, [f"simcli check {file} --profile {prof.name}"]),
    )
    if low:
        raise typer.Exit(1)


def _check_view(
    path: str, profile: str, recs: list[dict[str, Any]], *, tol: dict[str, float], max_rows: int, floors: bool = True
):
    def bw(x: float) -> str:
        return f"{x:.4g}"

    cols = []
    if len({r["collective"] for r in recs}) > 1:
        cols.append(Column("collective", "collective", justify="left"))
    cols += [
        Column("k", "devices"),
        Column("size", "bytes", fmt_bytes),
        Column("busbw meas GB/s", "busbw_measured_GBps", bw, priority=4, short="meas GB/s"),
        Column("busbw expected GB/s", "busbw_expected_GBps", bw, priority=5, short="exp GB/s"),
        Column("meas/exp", "ratio", lambda x: f"{100 * x:.0f}%"),
        Column("tolerance", "tolerance", lambda x: f"±{100 * x:.0f}%", priority=3, short="tol"),
        Column("verdict", "verdict", justify="left"),
        Column("limiting tier", "tier", lambda x: x or "-", justify="left", priority=6, short="tier"),
        Column("NCCL's choice", "choice", justify="left", priority=7, short="NCCL"),
        Column("LOW: tier should give GB/s", "should", justify="left", priority=2, short="LOW: should give"),
    ]
    # k, size, meas/exp and the verdict are the answer (never left out on a narrow terminal); the rest by priority
    rows = [
        {
            **r,
            "choice": f"{r['algorithm']}/{r['protocol']}" if r["protocol"] else str(r["algorithm"]),
            "should": f"{r['tier_GBps']:.4g}" if r["verdict"] == "LOW" and r["tier_GBps"] else "-",
        }
        for r in recs
    ]
    n = {v: sum(r["verdict"] == v for r in recs) for v in ("OK", "MODEL", "LOW", "HIGH")}
    low = [r for r in recs if r["verdict"] == "LOW"]
    model = [r for r in recs if r["verdict"] == "MODEL"]
    head = Text(
        f"{path} against profile {profile}: expected = what the profile's algorithm gives (on an NCCL profile, NCCL's "
        "choice); meas/exp = measured busbw / expected busbw (= expected time / measured time)"
    )
    counts = f"{n['OK']} OK, " + (f"{n['MODEL']} MODEL, " if floors else "") + f"{n['LOW']} LOW, {n['HIGH']} HIGH"
    cap = (
        f"{len(recs)} sizes: {counts}. Tolerance by size band: "
        + ", ".join(f"{b} ±{100 * v:.0f}%" for b, v in tol.items())
        + (
            " (default: simcli's own error on published curves, 95th percentile; --tolerance). "
            if floors
            else " (--tolerance: the whole rule, no model floor). "
        )
        + (
            "MODEL ("
            + ", ".join(
                f"{fmt_bytes(r['bytes'])} at {100 * r['ratio']:.0f}% >= floor {100 * r['model_floor']:.0f}%"
                for r in model
            )
            + f"): within the model's error, not the hardware's: healthy published {model[0]['kind']} curves run "
            "as far below simcli's model there (docs/calibration.md). "
            if model
            else ""
        )
        + (
            f"LOW from {fmt_bytes(min(r['bytes'] for r in low))}: the {low[0]['tier']} tier delivers less than "
            "it should; check its links, NICs and NCCL's settings (NCCL_DEBUG=INFO)."
            if low
            else "No size is LOW."
        )
    )
    return Group(head, table(rows, cols, caption=cap, max_rows=max_rows))
