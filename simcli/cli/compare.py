"""`simcli compare`: every combination of comma-separated alternatives side by side (simcli.decisions.compare)."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import numpy as np
from rich.console import Group
from rich.text import Text

from ..base.ranges import parse_devices
from ..base.types import InputError
from ..base.units import fmt_bytes, sig4
from ..decisions.compare import alternatives
from ..decisions.compare import compare as run_compare
from ..decisions.plan import training_memory
from ..io.profiles import resolve_profile, with_nccl_version
from ..io.render import Column, table, time_unit
from ..io.workloads import build_workload
from . import options as o
from .common import answer, examples, handle_errors, new_app, warn
from .progress import progress
from .views import header_lines

app = new_app()  # `compare`, a top-level command

# the scenario options compare takes as comma-separated alternatives, laid out by hand as a table (as options.py's)
# fmt: off
ProfileList = Annotated[Optional[str], o.listed(
    "--profile", "-p", help="Profiles to compare, comma-separated names or paths: 'dgx-a100,dgx-h100'.",
)]
ModelList = Annotated[Optional[str], o.listed("--model", "-m", help="Built-in models to compare, comma-separated.")]
DtypeList = Annotated[Optional[str], o.listed(
    "--dtype", help="Compute dtypes to compare, comma-separated [default: the device's].",
)]
GradDtypeList = Annotated[str, o.listed(
    "--grad-dtype", help="Gradient dtypes to compare, comma-separated: 'fp32,bf16'.",
)]
MfuList = Annotated[Optional[str], o.listed(
    "--mfu", help="Achieved fractions of peak to compare, comma-separated [default: the profile's].",
)]
BatchList = Annotated[Optional[str], o.listed(
    "--batch-per-device", "-b", help="Per-device batches to compare, comma-separated [default: the model's].",
)]
AlgorithmList = Annotated[str, o.listed(
    "--algorithm", "-a", help="All-reduce algorithms to compare, comma-separated: 'ring,auto'.",
)]
OverlapList = Annotated[Optional[str], o.option(
    "--overlap", metavar="buckets,none",
    help="Overlap modes to compare, comma-separated: 'none,buckets' [default: the engine's].",
)]
BucketList = Annotated[Optional[str], o.listed(
    "--bucket-mb", help="DDP bucket sizes in MiB to compare, comma-separated: '25,100' [default: the engine's].",
)]
AccumList = Annotated[Optional[str], o.listed(
    "--accum", help="Gradient accumulation steps to compare, comma-separated: '1,4'.",
)]
# fmt: on


#: compare takes comma-separated alternatives for these scenario options
_COMPARE = o.tweak(
    profile=ProfileList,
    model=ModelList,
    batch_per_device=BatchList,
    dtype=DtypeList,
    grad_dtype=GradDtypeList,
    mfu=MfuList,
    algorithm=AlgorithmList,
    overlap=(OverlapList, None),
    bucket_mb=(BucketList, None),
    accum=(AccumList, None),
)


@app.command(
    epilog=examples(
        "simcli compare -p dgx-a100,dgx-h100 -m bert-large -k 8..512:x4",
        "simcli compare -m llama2-7b -k 8,64 --strategy ddp,zero1,fsdp",
    )
)
@handle_errors
def compare(
    devices: o.Devices = "1..64:x2",
    scn: Annotated[o.ScenarioOptions, _COMPARE] = o.ScenarioOptions(),
    out: Annotated[o.OutputOptions, o.tweak(defaults={"rows": 80})] = o.OutputOptions(),
    pic: o.PictureOptions = o.PictureOptions(),
) -> None:
    """Every combination of the comma-separated alternatives, side by side: step time, speedup, efficiency and
    the gain (throughput over the first combination at the same k).
    """

    fig_size = o.check_outputs(out, pic)
    k = parse_devices(devices)
    profiles = o.split_list(scn.profile, "--profile")
    models = o.split_list(scn.model, "--model")
    dtypes = o.split_list(scn.dtype, "--dtype")
    grads = o.split_list(scn.grad_dtype, "--grad-dtype")
    algs = o.split_list(scn.algorithm, "--algorithm")
    strategies = o.split_list(scn.strategy, "--strategy")
    mfus = o.parse_numbers(scn.mfu, "--mfu", float, lo=0.0, hi=1.0) or [None]
    if 0.0 in mfus:
        raise InputError("--mfu: 0 is not in (0, 1]")
    batches = o.parse_numbers(scn.batch_per_device, "--batch-per-device", int, lo=1) or [None]
    first = o.ScenarioOptions()  # the engine's overlap, bucket and accumulation unless compared
    sc = scn.replace(
        profile=profiles[0],
        model=models[0],
        batch_per_device=batches[0],
        dtype=dtypes[0],
        grad_dtype=grads[0],
        mfu=mfus[0],
        algorithm=algs[0],
        strategy=strategies[0],
        overlap=first.overlap,
        bucket_mb=first.bucket_mb,
        accum=first.accum,
    ).build()
    choices: dict[str, list[Any]] = {}
    if len(profiles) > 1:
        choices["profile"] = [with_nccl_version(resolve_profile(p), scn.nccl_version) for p in profiles]
    if len(models) > 1:
        if scn.params is not None or scn.workload is not None:
            raise InputError("--model with several names excludes --params and --workload")
        ct = sc.compute_time_s
        choices["workload"] = [build_workload(model=m, seq_len=scn.seq_len, compute_time=ct) for m in models]
    for name, vals in (
        ("dtype", dtypes),
        ("grad_dtype", grads),
        ("mfu", mfus),
        ("batch_per_device", batches),
        ("algorithm", algs),
        ("strategy", strategies),
    ):
        if len(vals) > 1:
            choices[name] = vals
    if scn.overlap is not None:
        choices["overlap"] = o.split_list(scn.overlap, "--overlap")
    if scn.bucket_mb is not None:
        choices["bucket_mb"] = o.parse_numbers(scn.bucket_mb, "--bucket-mb", float, lo=1e-9)
    if scn.accum is not None:
        choices["accum"] = o.parse_numbers(scn.accum, "--accum", int, lo=1)

    n_alt = len(alternatives(sc, choices))
    k_all = k
    if out.table and not pic.plot and out.rows and k.size * n_alt > out.rows:
        # a table shows its first and last rows only (k-major, every alternative per k): compute those k
        head = out.rows // 2
        nh, nt = -(-head // n_alt), -(-(out.rows - head) // n_alt)
        k = np.concatenate([k[:nh], k[k.size - nt :]]) if nh + nt < k.size else k

    with progress(f"compare: {n_alt} alternatives x {k.size} device counts"):
        cmp = run_compare(sc, choices, k)

    misfits: dict[str, list[str]] = {}
    for alt in cmp.alternatives:
        mem = training_memory(alt.scenario, k)
        if mem.fits is False:
            misfits.setdefault(mem.message(), []).append(alt.label)
    for msg, labels in misfits.items():
        warn(("every alternative" if len(labels) == len(cmp.alternatives) else ", ".join(labels)) + ": " + msg)
    if pic.plot:
        with progress(f"drawing {pic.plot}"):
            _draw_compare(cmp, pic.plot, out.force, size=fig_size, threshold=pic.threshold)
    answer(
        out, lambda: _compare_view(cmp, out.rows, n_devices=k_all.size), cmp.records, rows=lambda: (cmp.records(), [])
    )


def _compare_title(cmp: Any) -> str:
    from .plot import scenario_title  # lazy

    varied = cmp.varied or ["nothing"]
    return scenario_title(
        [a.scenario for a in cmp.alternatives], f"Compare {', '.join(varied)}: throughput, S(k) and E(k):"
    )


def _draw_compare(cmp: Any, path: str, force: bool, *, size: Any, threshold: float) -> None:
    from .plot import draw_speedup  # lazy

    draw_speedup(
        cmp.results,
        path,
        force,
        size=size,
        threshold=threshold,
        labels=[a.label for a in cmp.alternatives],
        title=_compare_title(cmp),
    )


def _compare_view(cmp: Any, rows: int, n_devices: int | None = None) -> Any:
    """``n_devices``: how many k were asked for when ``cmp`` holds only the first and last ones shown."""

    recs = cmp.by_devices()
    first = cmp.alternatives[0]
    f, unit = time_unit([r["t_step_s"] for r in recs])
    keys = cmp.varied
    label_cols = [
        Column(key, key, lambda v: f"{v:g}" if isinstance(v, float) else str(v), justify="left") for key in keys
    ]
    cols = [
        Column("k", "devices"),
        *label_cols,
        Column(f"compute {unit}", "t_compute_s", lambda v: sig4(v / f), priority=3, short=f"comp {unit}"),
        Column(f"comm {unit}", "t_comm_s", lambda v: sig4(v / f), priority=4),
        *(
            [Column(f"exposed {unit}", "t_comm_exposed_s", lambda v: sig4(v / f), priority=2, short=f"exp {unit}")]
            if any(r.get("t_comm_exposed_s") is not None and r["t_comm_exposed_s"] != r["t_comm_s"] for r in recs)
            else []
        ),
        Column(f"step {unit}", "t_step_s", lambda v: sig4(v / f)),
        Column("S(k)", "speedup", lambda v: f"{v:.2f}"),
        Column("E(k)", "efficiency", lambda v: f"{v:.3f}"),
        Column("samples/s", "samples_per_s", sig4),
        Column("gain", "gain", lambda v: f"x{v:.3f}"),
    ]
    if any(r["fits_memory"] is False for r in recs):
        cols.append(
            Column(
                "memory",
                lambda r: (
                    None
                    if r["fits_memory"] is None
                    else ("fits" if r["fits_memory"] else f"NO ({fmt_bytes(r['memory_bytes'], binary=False)})")
                ),
                justify="left",
            )
        )
    n_k = n_devices or len(cmp.results[0].devices)
    total = len(cmp.alternatives) * n_k
    t = table(
        recs,
        cols,
        max_rows=rows,
        total=total,
        caption=f"Times in {unit}. gain = samples/s over the first alternative ({first.label}) at the same k. "
        f"{len(cmp.alternatives)} alternatives x {n_k} device counts."
        + (" --format csv or json holds every row." if rows and total > rows else ""),
    )
    head = Text(
        "\n".join(header_lines(first.scenario))
        + "\n(first alternative; the table's columns "
        + ", ".join(keys or ["none"])
        + " vary)"
    )
    return Group(head, Text(""), t)
