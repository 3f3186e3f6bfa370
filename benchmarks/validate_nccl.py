"""simcli's NCCL model against published nccl-tests all-reduce curves, by size band (nothing fitted to them).

For each curve: the built-in profile of that system, ``--algorithm nccl`` (or the algorithm the run forced:
``ring`` for NCCL_ALGO=Ring / NCCL_NVLS_ENABLE=0, ``nvls`` for Azure's NCCL_ALGO=NVLS), the run's nccl-tests
``-g`` (a file's ``gpus_per_process`` column: one process launching on 8 GPUs is no faster than 8 launches,
simcli.comm.nccl.host_floor), and the median of |t_pred/t_meas - 1| in three bands: <= 256 KiB,
0.5-64 MiB, >= 128 MiB, per curve, then the median of the curves' medians and the median over all points of the
band. The measured time is the better of out-of-place and in-place (a published run is one
sample), or n·2(k-1)/k / busbw where only busbw is published. Sizes below 1 KiB are left out (launch noise).
Beside it, NCCL's own tuner estimate of the pair it picks (the selected release's tuning.cc re-implemented: ring
plateau factor, all channels). Sources: the header of each file under validation/published/.

    python benchmarks/validate_nccl.py [-v] [--textbook] [--ll128-net-off] [--extra DIR[:PROFILE]] [--nccl-version V]

``--nccl-version V`` prices every curve with NCCL release V's tuner (simcli.comm.releases; default: each profile's
``nccl.version``, the default release, 2.29.7, on the built-in ones), as ``simcli ... --nccl-version V`` does.

``--extra DIR[:PROFILE]`` adds every CSV of DIR (columns devices, bytes, time_us[, time_inplace_us]; NCCL's default
choice, -g 1) priced with PROFILE (default dgx-h100): curves held out of the project (issue 21 phase 2 used the other
runs of the nccl-tests#309 thread) to check that a mechanism was not chosen on the rows it is judged by.

``--ll128-net-off`` runs every profile with ``nccl.ll128_net: false`` (LL128 only inside a node), the open
hypothesis of issue 21 for the H100 clusters whose forced-ring floor sits on Ring/Simple's latency.

``-v`` prints every point; where NCCL runs NVLS it also prints the pipeline fill the measurement implies, in
chunk times: (measured - the modelled time without its fill) / one chunk time; the model charges 2.

``--textbook`` adds the previous release's model beside it: the textbook ring (2(k-1) steps, each at the
slowest spanned tier's latency) on the same profiles.

After it, a second table: per curve, the NCCL release its run used (a ``# nccl_version: X`` line in the file's
header, written only where the source states the release; ``SYSTEM=X, SYSTEM=Y`` where one file holds several
systems; else "unknown"), the carried row simcli prices that release as (simcli.comm.releases.select; "refused"
for a release older than the oldest carried), and the median |error| per band under that row and under the
default release (simcli.base.types.NCCL_TABLES_VERSION).

``--write-errors`` writes simcli/comm/error_table.py again (and prints nothing else): every point of every curve
above as r = t_pred/t_meas with its kind (transport, past NCCL's node, size band, NCCL's algorithm family;
simcli.comm.bands.point_kinds), the curves it comes from and the git commit it was written at. ``simcli comm``'s
band is read from it (docs/nccl.md#how-sure); tests/comm/test_bands.py fails when the model moves and the table was not
written again.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simcli.base.types import NCCL_TABLES_VERSION  # noqa: E402
from simcli.checks.check import curve_kind  # noqa: E402
from simcli.checks.validate import SIZE_BANDS  # noqa: E402
from simcli.comm import bands as B  # noqa: E402
from simcli.comm import collectives as C  # noqa: E402
from simcli.comm import collnet, nccl, nccl_choice, rccl, releases, topology  # noqa: E402
from simcli.io.profiles import resolve_profile, with_nccl_min_ctas, with_nccl_version  # noqa: E402

PUB = ROOT / "validation" / "published"
CASES = [  # file, system column value (or None), profile, algorithm
    ("nccl-allreduce-16xH100-2node-ib400x8.csv", None, "dgx-h100", "nccl"),
    ("nccl-allreduce-16xH100-2node-ring.csv", None, "dgx-h100", "ring"),
    ("nccl-allreduce-8xA100-nvswitch.csv", None, "dgx-a100", "nccl"),
    ("nccl-allreduce-8xH100-8xH200-azure.csv", "nd-h100-v5", "dgx-h100", "nvls"),  # NCCL_ALGO=NVLS, -g 8
    ("nccl-allreduce-8xH100-8xH200-azure.csv", "nd-h200-v5", "hgx-h200", "nvls"),
    ("nccl-allreduce-8xH200-ring-nvls-off.csv", None, "hgx-h200", "ring"),
    ("nccl-allreduce-32xH100-4node-ib400.csv", None, "dgx-h100", "nccl"),  # past two nodes (issue 21)
    ("nccl-allreduce-16xH100-2node-aws-p5-efa.csv", None, "aws-p5", "nccl"),  # EFA (issue 21)
    ("nccl-allreduce-144xGB200-2rack.csv", None, "gb200-nvl72", "nccl"),  # two NVL72 racks (issue 21)
    # the other runs of the nccl-tests#309 thread, held out while the mechanisms were chosen (headers say so)
    ("nccl-allreduce-16xH100-2node-gjaion.csv", None, "dgx-h100", "nccl"),
    ("nccl-allreduce-32xH100-4node-vm.csv", None, "dgx-h100", "nccl"),
    ("nccl-allreduce-64xH100-8node-gjaion.csv", None, "dgx-h100", "nccl"),
    # one NVL72 rack of the 2-rack curve's provider, held out (2026-12-02): MNNVL inside one domain, NVLink5 alone
    ("nccl-allreduce-72xGB200-1rack.csv", None, "gb200-nvl72", "nccl"),
    # AWS's own 2x p4de run on the page the p5 curve comes from, held out (2026-12-02): A100 on EFA, Simple only
    ("nccl-allreduce-16xA100-2node-aws-p4de-efa.csv", None, "aws-p4de", "nccl"),
    # 8 AWS p5 (64 H100 on EFA), one 4 GiB point quoted in NVIDIA/nccl#1112, held out (2026-12-02): past two EFA nodes
    ("nccl-allreduce-64xH100-8node-aws-p5-efa.csv", None, "aws-p5", "nccl"),
    # one MI300X node on RCCL (issue 37): AMD's library, its tuning model 5 and MSCCL's all-pairs kernels
    ("rccl-allreduce-8xMI300X-1node.csv", None, "mi300x", "nccl"),
    # issue 37, scored as they came (nothing fitted). 8 nodes of the 64-H100 curve's cluster with NCCL_MIN_CTAS=24
    # (at least 24 channels): priced with nccl.min_ctas = 24 (SETTINGS, simcli.comm.ctas). Its middle band stays a
    # miss (29.9%; scored, not a KNOWN_MISS, as the default 8-node curve's 22.5% is): that curve's own Tree/LL128
    # miss at 4-8 MiB, and an NVLSTree fill the run puts at 4-7 chunk times where 24 channels give 2 (docs/nccl.md)
    ("nccl-allreduce-64xH100-8node-ib400-minctas24.csv", None, "dgx-h100", "nccl"),
    # 20 NVL72 racks (1440 GB200), NCCL's default choice with NVLS off (SETTINGS), 2.26.2; the 2-rack curve's provider
    ("nccl-allreduce-1440xGB200-20rack.csv", None, "gb200-nvl72", "nccl"),
    # NCCL_ALGO=COLLNETCHAIN with SHARP on 8 H100 nodes: the network tier with collnet: sharp (SETTINGS), the
    # algorithm forced as the run forced it (simcli.comm.collnet)
    ("nccl-allreduce-64xH100-8node-collnetchain-sharp.csv", None, "dgx-h100", "collnet-chain"),
    # 2 AWS p5 on NCCL 2.18.5 and aws-ofi-nccl 1.7.3: the p5 curve's cluster kind on an older stack (known miss)
    ("nccl-allreduce-16xH100-2node-aws-p5-efa-nccl2.18.5.csv", None, "aws-p5", "nccl"),
]
#: what a run set that the built-in profile does not say, by curve file: ``min_ctas`` (NCCL_MIN_CTAS, as
#: ``--nccl-min-ctas`` sets it), ``collnet`` (the value of every network tier's ``collnet`` field: the fabric's
#: switches reduce and NCCL_COLLNET_ENABLE=1) and ``nvls`` (``nccl.nvls``: False where the run set
#: NCCL_NVLS_ENABLE=0, NCCL's choice then among the rest)
SETTINGS = {
    "nccl-allreduce-64xH100-8node-ib400-minctas24.csv": {"min_ctas": 24},
    "nccl-allreduce-64xH100-8node-collnetchain-sharp.csv": {"collnet": "sharp"},
    # coreweave/nccl-tests' GB200 script when the 20-rack run was posted (PR #48, commit 5ceab10, 2025-04-21):
    # NCCL_NVLS_ENABLE=0 ("per NV ask, we need to disable NVLS temporarily", commit a736384, 2025-04-14),
    # NCCL_NET_GDR_C2C=1, NCCL_COLLNET_ENABLE=0, image ...-nccl2.26.2-1
    "nccl-allreduce-1440xGB200-20rack.csv": {"nvls": False},
}
#: curves whose miss is known and named in docs/nccl.md, with why: in every table and median, but not in the
#: percentiles that simcli check's default tolerance is read from, nor in its floors (MODEL_FLOOR)
KNOWN_MISSES = {
    "nccl-allreduce-16xA100-2node-aws-p4de-efa": "A100 on EFA, small sizes: NCCL's Tree/Simple pick and its hops "
    "(docs/nccl.md, 'Not met')",
    "nccl-allreduce-1440xGB200-20rack": "20 NVL72 racks, NCCL 2.26.2 with NCCL_NVLS_ENABLE=0 (the script of the "
    "run, SETTINGS): its two largest sizes fit 4.6 ms + n / 212 GB/s of algbw, a ring's 2(k-1) steps at 1.6 us and "
    "424 GB/s of busbw, where NCCL 2.26.2's ring graph of a fused NVL72 is 15 channels of 48 GB/s, one NIC each "
    "(search.cc: 15 x 48 = 18 x SM100_NVLINK_BW 40.0 = totalBw stops the search; 2.27.3's 47.9 makes it 16 x 45, "
    "'16 NICs' in its notes), 720 GB/s, about what simcli's Ring (665) and Tree (734) move; what holds the run to "
    "about 9 NICs' worth is not in the source (docs/nccl.md, 'GB200 across many racks')",
    "nccl-allreduce-16xH100-2node-aws-p5-efa-nccl2.18.5": "NCCL 2.18.5 with aws-ofi-nccl 1.7.3: a miss under its "
    "own release too (2.18.5's tuner, 0.70·N/(2(N-1)) NVLSTree ratio and all, also picks NVLSTree at every size; "
    "docs/nccl.md 'Carried releases'); the plugin has no tuner (aws-ofi-nccl's came in v1.8.0), keeps NVLS on at "
    "2.18.5 (platform-aws.c configure_nvls_option) and on p5 with RDMA leaves NCCL_PROTO alone; the run's algbw "
    "doubles from 256 to 512 MiB, a change of algorithm no carried tuner makes there",
}
BANDS = SIZE_BANDS


def _rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(line for line in path.read_text().splitlines() if not line.startswith("#")))


def _measured(r: dict[str, str]) -> float:
    if r.get("time_us"):
        return min(float(r[c]) for c in ("time_us", "time_inplace_us") if r.get(c)) * 1e-6
    k, n = int(r["devices"]), float(r["bytes"])
    return n * 2 * (k - 1) / k / (float(r["busbw_GBps"]) * 1e9)


def ran_release(path: Path, system: str | None = None) -> str | None:
    """The NCCL release the curve's run used: its header's ``# nccl_version: X`` line (``SYSTEM=X, SYSTEM=Y`` where
    one file holds several systems' runs), written only where the source states the release; None where it does
    not."""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            continue
        key, _, value = line[1:].partition(":")
        if key.strip() != "nccl_version":
            continue
        value = value.strip()
        if "=" not in value:
            return value
        per = dict(part.strip().split("=", 1) for part in value.split(","))
        return per.get(system or "")
    return None


def release_table(cases: list[tuple], ll128_net: bool = True) -> list[dict]:
    """Per curve and size band: the release its run used (:func:`ran_release`; None: not stated), the carried row
    simcli prices it as (simcli.comm.releases.select: itself, else the newest carried one before it; None where
    simcli refuses it or the profile is not priced by NCCL's tuner), and the median |t_pred/t_meas - 1| under that
    row (None without one) and under the default release (simcli.base.types.NCCL_TABLES_VERSION)."""
    import warnings

    from simcli.io.profiles import ReleaseNote

    out = []
    for path, system, prof, alg in cases:
        ran = ran_release(path, system)
        default = None if resolve_profile(prof).library == "rccl" else NCCL_TABLES_VERSION  # RCCL: its own rows
        p, k, n, t, base = _priced(path, system, prof, alg, ll128_net, default)
        row, under = None, None
        if ran is not None and p.nccl is not None and p.library != "rccl" and releases.problem(ran) is None:
            row = releases.select(ran).version
            with warnings.catch_warnings():  # "priced as the newest carried one before it": the row column says so
                warnings.simplefilter("ignore", ReleaseNote)
                under = _priced(path, system, prof, alg, ll128_net, ran)[4]
        for band, lo, hi in BANDS:
            m = (n > lo) & (n <= hi)
            if not m.any():
                continue
            out.append(
                {
                    "curve": B.curve_label(path.name, system),
                    "band": band,
                    "points": int(m.sum()),
                    "ran": ran,
                    "row": row,
                    "under_ran": None if under is None else float(np.median(np.abs(under.time[m] / t[m] - 1))),
                    "under_default": float(np.median(np.abs(base.time[m] / t[m] - 1))),
                }
            )
    return out


def print_release_table(recs: list[dict]) -> None:
    print()
    print(
        "the NCCL release each run used ('# nccl_version:' in its file, where the source states it), the carried row "
        f"simcli prices it as, and the median |error| under that row and under the default ({NCCL_TABLES_VERSION})"
    )
    print(f"{'curve':52s} {'band':11s} {'n':>3s} {'ran':>8s} {'priced as':>18s} {'under it':>8s} {'default':>8s}")
    oldest = releases.carried()[0]
    for r in recs:
        if r["row"] is not None:
            row = r["row"]
        elif r["ran"] is None:
            row = "-"
        else:
            row = f"refused (< {oldest})" if releases.problem(r["ran"]) else "not NCCL's tuner"
        under = f"{r['under_ran']:8.1%}" if r["under_ran"] is not None else f"{'-':>8s}"
        print(
            f"{r['curve']:52s} {r['band']:11s} {r['points']:3d} {r['ran'] or 'unknown':>8s} {row:>18s} {under} "
            f"{r['under_default']:8.1%}"
        )


def with_settings(p, settings: dict):
    """``p`` with a run's :data:`SETTINGS`: NCCL_MIN_CTAS as --nccl-min-ctas sets it, NVLS off where the run set
    NCCL_NVLS_ENABLE=0, ``collnet`` on every network tier past the first."""
    import dataclasses

    p = with_nccl_min_ctas(p, settings.get("min_ctas"), "SETTINGS min_ctas")
    if "nvls" in settings and p.nccl is not None:
        p = dataclasses.replace(p, nccl=dataclasses.replace(p.nccl, nvls=bool(settings["nvls"])))
    if "collnet" in settings:
        tiers = tuple(
            t if i == 0 else dataclasses.replace(t, collnet=settings["collnet"]) for i, t in enumerate(p.network)
        )
        p = dataclasses.replace(p, network=tiers)
    return p


def _priced(
    path: Path, system: str | None, prof: str, alg: str, ll128_net: bool = True, nccl_version: str | None = None
):
    """(profile, k, n, measured time, simcli's prediction) of one curve's points of 1 KiB and up, under the profile's
    NCCL release or ``nccl_version``."""
    p = with_nccl_version(resolve_profile(prof), nccl_version)
    p = with_settings(p, SETTINGS.get(path.name, {}))
    if not ll128_net and p.nccl is not None:  # issue 21's open question: LL128 not across the network
        import dataclasses

        p = dataclasses.replace(p, nccl=dataclasses.replace(p.nccl, ll128_net=False))
    rs = [r for r in _rows(path) if (system is None or r.get("system") == system) and float(r["bytes"]) >= 1024]
    k = np.array([int(r["devices"]) for r in rs])
    n = np.array([float(r["bytes"]) for r in rs])
    t = np.array([_measured(r) for r in rs])
    g = int(rs[0].get("gpus_per_process") or 1)  # nccl-tests' -g: one process launching on g GPUs
    return p, k, n, t, C.collective(p, alg, k, nbytes=n, collective="all_reduce", protocol=None, gpus_per_process=g)


def error_rows() -> tuple[list[tuple], list[tuple]]:
    """(curves, rows) of simcli/comm/error_table.py: each curve as (file, system, profile, algorithm, points), each
    point as (curve's index, devices, bytes, transport, past NCCL's node, size band, family, t_pred/t_meas)."""
    curves, rows = [], []
    for f, system, prof, alg in CASES:
        p, k, n, t, pred = _priced(PUB / f, system, prof, alg)
        transport, nodes, band, family = B.point_kinds(
            p.network, k, n, algorithm=pred.algorithm, protocol=pred.protocol
        )
        ratio = pred.time / t
        for i in range(k.size):
            b = B.SIZE_BANDS[int(band[i])][0]
            rows.append(
                (
                    len(curves),
                    int(k[i]),
                    int(n[i]),
                    str(transport[i]),
                    bool(nodes[i]),
                    b,
                    str(family[i]),
                    float(ratio[i]),
                )
            )
        curves.append((f, system, prof, alg, int(k.size)))
    return curves, rows


def _commit() -> str:
    """The commit checked out, with '+changes' where the tree has uncommitted changes (the model being changed)."""
    import subprocess

    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git)"
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def _lit(row: tuple) -> str:
    """A tuple as ruff formats it: strings in double quotes."""
    return "(" + ", ".join(f'"{v}"' if isinstance(v, str) else repr(v) for v in row) + ")"


def _entry(row: tuple) -> str:
    """One entry of a tuple of tuples as ruff formats it: on one line where it fits in 120 columns, else one
    element a line."""
    line = f"    {_lit(row)},"
    if len(line) <= 120:
        return line
    return "\n".join(["    (", *(f"        {_lit((v,))[1:-1]}," for v in row), "    ),"])


def table_source(
    doc: str, *, commit: str, groups: tuple[str, str, list[tuple]], fields: tuple[str, tuple], rows: list[tuple]
) -> str:
    """The text of an error table (simcli/comm/error_table.py, simcli/step/error_table.py): its docstring,
    COMMIT, the groups (name, comment, entries: the curves, the series), FIELDS (comment, names) and ROWS."""
    name, about, entries = groups
    fields_about, names = fields
    lines = [
        doc,
        "",
        "#: the git commit checked out when this table was written ('+changes': with uncommitted changes)",
        f'COMMIT = "{commit}"',
        f"#: {about}",
        f"{name} = (",
        *(_entry(e) for e in entries),
        ")",
        f"#: {fields_about}",
        f"FIELDS = {_lit(names)}",
        "ROWS = (",
        *(_entry(r) for r in rows),
        ")",
        "",
    ]
    return "\n".join(lines)


def error_table_source(curves: list[tuple], rows: list[tuple], commit: str) -> str:
    """The text of simcli/comm/error_table.py."""
    doc = '''"""Every point of the published nccl-tests all-reduce curves benchmarks/validate_nccl.py prices, as
r = t_pred / t_meas with its kind (simcli.comm.bands.point_kinds). Written by
`python benchmarks/validate_nccl.py --write-errors`; never edit it by hand (tests/comm/test_bands.py prices
the curves again and fails where this table and the model part)."""'''
    return table_source(
        doc,
        commit=commit,
        groups=(
            "CURVES",
            "the curves: file under validation/published/, its system column's value, profile, algorithm, points",
            curves,
        ),
        fields=(
            "the fields of each row of ROWS (curve: an index into CURVES)",
            ("curve", "devices", "bytes", "transport", "past_node", "size_band", "family", "ratio"),
        ),
        rows=rows,
    )


def write_errors() -> Path:
    curves, rows = error_rows()
    out = ROOT / "simcli" / "comm" / "error_table.py"
    out.write_text(error_table_source(curves, rows, _commit()), encoding="utf-8")
    return out


def main(
    verbose: bool = False,
    textbook: bool = False,
    ll128_net: bool = True,
    extra: str | None = None,
    nccl_version: str | None = None,
) -> list[dict]:
    out = []
    cases = [(PUB / f, s, p, a) for f, s, p, a in CASES]
    if extra:
        d, _, prof = extra.partition(":")
        cases += [(f, None, prof or "dgx-h100", "nccl") for f in sorted(Path(d).glob("*.csv"))]
    print(
        f"{'curve':52s} {'profile':9s} {'alg':5s} {'band':11s} {'n':>3s} {'simcli':>7s} {'NCCL tuner':>10s}"
        + (f" {'textbook':>10s}" if textbook else "")
    )
    for path, system, prof, alg in cases:
        p, k, n, t, pred = _priced(path, system, prof, alg, ll128_net, nccl_version)
        if p.library == "rccl":  # RCCL's own tuner (simcli.comm.rccl): its estimate of the pair it picks
            rps = rccl.pairs(
                p.network,
                nccl_choice.nccl_spec(p),
                k,
                tier_Bps=topology.tier_bandwidth(p.network, k),
                collective="all_reduce",
            )
            tuner = np.min(np.stack([pr.tuner_lat + n / (bw * corr(n)) for pr, bw, corr in rps]), axis=0)
        else:
            prs = nccl.pairs(
                p.network,
                nccl_choice.nccl_spec(p),
                k,
                tier_Bps=topology.tier_bandwidth(p.network, k),
                collective="all_reduce",
                algorithms=None if alg == "nccl" else [alg],
            )
            prs += collnet.collnet_pairs(
                p.network,
                nccl_choice.nccl_spec(p),
                k,
                collective="all_reduce",
                algorithms=None if alg == "nccl" else [alg],
            )
            tuner = np.min(np.stack([pr.cost(n)[1] for pr in prs]), axis=0)
        err, err_t = pred.time / t - 1, tuner / t - 1
        err_old = C.allreduce("ring", p.network, k, nbytes=n).time / t - 1 if textbook else None
        label = B.curve_label(path.name, system)
        for band, lo, hi in BANDS:
            m = (n > lo) & (n <= hi)
            if not m.any():
                continue
            a, b = float(np.median(np.abs(err[m]))), float(np.median(np.abs(err_t[m])))
            rec = {
                "curve": label,
                "profile": prof,
                "algorithm": alg,
                "band": band,
                "points": int(m.sum()),
                "simcli": a,
                "nccl_tuner": b,
                "errors": np.abs(err[m]).tolist(),
                "ratios": (pred.time[m] / t[m]).tolist(),  # measured / expected busbw, as simcli check's meas/exp
                "kinds": curve_kind(p, k[m]).tolist(),
                "tuner_errors": np.abs(err_t[m]).tolist(),
            }
            if err_old is not None:
                rec["textbook_ring"] = float(np.median(np.abs(err_old[m])))
            out.append(rec)
            old = f" {rec['textbook_ring']:10.1%}" if err_old is not None else ""
            print(f"{label:52s} {prof:9s} {alg:5s} {band:11s} {int(m.sum()):3d} {a:7.1%} {b:10.1%}{old}")
        if verbose:
            for i in range(len(n)):
                # NVLS: the fill the measurement implies, in chunk times (the model charges nccl.NVLS_FILL of them)
                chunk_t = pred.fill[i] / nccl.NVLS_FILL["all_reduce"] if pred.fill is not None else 0.0
                if pred.host is not None and pred.host[i] > 0:
                    chunk_t = 0.0  # host-bound: the measurement says nothing about the fill
                implied = (
                    f"  implied fill {(t[i] - (pred.time[i] - pred.fill[i])) / chunk_t:4.1f} chunk times"
                    if chunk_t > 0
                    else ""
                )
                print(
                    f"    {int(n[i]):>12d} B  measured {t[i] * 1e6:9.1f} us  simcli {pred.time[i] * 1e6:9.1f} us "
                    f"({err[i]:+.0%}, {pred.algorithm[i]}/{pred.protocol[i]})  tuner {tuner[i] * 1e6:9.1f} us" + implied
                )
    for band, _, _ in BANDS:
        a = [r["simcli"] for r in out if r["band"] == band]
        b = [r["nccl_tuner"] for r in out if r["band"] == band]
        c = [r["textbook_ring"] for r in out if r["band"] == band and "textbook_ring" in r]
        print(
            f"{'all curves (median of the curves medians)':52s} {'':9s} {'':5s} {band:11s} {len(a):3d} "
            f"{np.median(a):7.1%} {np.median(b):10.1%}" + (f" {np.median(c):10.1%}" if c else "")
        )
    for band, _, _ in BANDS:  # the other reading: every point of the band, whichever curve it is on
        a = [e for r in out if r["band"] == band for e in r["errors"]]
        b = [e for r in out if r["band"] == band for e in r["tuner_errors"]]
        print(
            f"{'all points (median over the points)':52s} {'':9s} {'':5s} {band:11s} {len(a):3d} "
            f"{np.median(a):7.1%} {np.median(b):10.1%}"
        )
    from simcli.checks.check import DEFAULT_TOLERANCE  # noqa: E402

    for band, _, _ in BANDS:  # what simcli check's default tolerance stands on (simcli/check.py)
        a = [e for r in out if r["band"] == band for e in r["errors"]]
        c = [e for r in out if r["band"] == band and r["curve"] not in KNOWN_MISSES for e in r["errors"]]
        print(
            f"{'95th percentile of |error| over the points':52s} {'':9s} {'':5s} {band:11s} {len(a):3d} "
            f"{np.quantile(a, 0.95):7.1%}  (without the known misses: {np.quantile(c, 0.95):.1%}; simcli check's "
            f"default: {DEFAULT_TOLERANCE[band]:.0%})"
        )
    from simcli.checks.check import MODEL_FLOOR

    for kind, bands in model_floors(out).items():  # simcli check's MODEL_FLOOR: below it LOW, above it MODEL
        for band, (floor, points) in bands.items():
            print(
                f"{'lowest measured/expected busbw, ' + kind:52s} {'':9s} {'':5s} {band:11s} {points:3d} "
                f"{floor:7.1%}  (simcli check's floor: {MODEL_FLOOR[kind][band]:.0%})"
            )
    print(
        "simcli check's defaults are the percentiles without the known misses (below): a small-size tolerance of"
        " 150% would call nothing LOW on any cluster; where the model misses that badly, check says HIGH (the"
        " profile undersells the hardware), as it should. docs/nccl.md names why."
    )
    for name, why in KNOWN_MISSES.items():
        print(f"  known miss: {name}: {why}")
    print_release_table(release_table(cases, ll128_net))
    return out


def model_floors(out: list[dict]) -> dict[str, dict[str, tuple[float, int]]]:
    """Per kind of ring (simcli.checks.check.curve_kind) and size band: (the lowest measured/expected busbw over the
    points of the curves, the known misses left out; the number of points), what simcli check's MODEL_FLOOR holds
    rounded down to a whole percent."""
    acc: dict[str, dict[str, list[float]]] = {}
    for r in out:
        if r["curve"] in KNOWN_MISSES:
            continue
        for kind, ratio in zip(r["kinds"], r["ratios"]):
            acc.setdefault(kind, {}).setdefault(r["band"], []).append(ratio)
    order = [b for b, _, _ in BANDS]
    return {
        kind: {band: (min(bands[band]), len(bands[band])) for band in order if band in bands}
        for kind, bands in acc.items()
    }


if __name__ == "__main__" and "--write-errors" in sys.argv:
    print(f"wrote {write_errors().relative_to(ROOT)}")
elif __name__ == "__main__":
    ex = sys.argv[sys.argv.index("--extra") + 1] if "--extra" in sys.argv else None
    ver = sys.argv[sys.argv.index("--nccl-version") + 1] if "--nccl-version" in sys.argv else None
    main("-v" in sys.argv, "--textbook" in sys.argv, "--ll128-net-off" not in sys.argv, ex, ver)
