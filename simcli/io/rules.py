"""The input rules every reader of measured files applies, written once (issue 40).

Every reader (nccl-tests text and ``-J`` JSON, NCCL Inspector logs and Prometheus files, PyTorch profiler
traces, bench CSVs, scaling tables) builds its records through this module, so a file is held to the same
rules whichever format it came in:

* **JSON**: a key given twice in one object, an integer of more than :data:`MAX_INT_DIGITS` digits, NaN or
  infinity (:func:`json_records`, :func:`simcli.io.inputs.load_json`).
* **numbers** (:func:`number`): finite; fewer than :data:`MAX_DIGITS` digits before the point (|x| < 1e20); a
  size or element count within 2**62 B; a rank count within :data:`MAX_RANKS`; a rank in [0, ranks); a time > 0.
* **ranks** (:func:`calls`): each (communicator, rank, sequence number) once (a rank's log given twice, one
  ``coll_sn`` twice); a rank outside its communicator; ranks missing from a communicator (a warning: the
  slowest rank may be among them).
* **consistency** (:func:`rows`): algbw = size / time and busbw = algbw x the collective's factor (nccl-tests
  doc/PERFORMANCE.md), within what two printed decimals round (:data:`BW_REL`, :data:`BW_ABS_GBPS`);
  (:func:`steps`) a step longer than zero and each collective shorter than :data:`STEP_CEILING` x its step;
  (:func:`scaling`) efficiency S(k)/k at most 1 (up to :data:`EFFICIENCY_NOISE` above it is a warning), speedup
  and throughput that say the same, a ``global_batch`` column of k x batch x accum; a global batch that changes
  between rows of a run whose accumulation changes with k is a warning (DeepLearningExamples' published BERT
  tables do that between one node and more).
* **physical plausibility** (:func:`line_rate`): a measured bus bandwidth above :data:`IN_NETWORK_CEILING` x the
  line rate of the slowest link its ranks span is refused as a unit slip (us for ms, GB for Gb) or a file of
  other hardware (between 1 x and that, healthy curves with in-network reduction get there: not warned).
  :func:`hardware` warns where a file's device names or backend contradict the profile.
* **options** (:func:`not_for`, :func:`collective_option`, :func:`strategy`): an option that does not apply to an
  input is refused, not ignored.
* **profiles** (:func:`bare_bandwidths`, :func:`tier_order`): ``simcli profiles validate`` refuses a bandwidth
  without its unit and warns on tier orderings no machine has.

What is impossible is an :class:`~simcli.base.types.InputError` (exit 2, one line naming the file, line or
field, the value and the fix); what is only suspicious is a :class:`SuspiciousInput` warning (one stderr line
naming the field; the command line prints them after a successful command, never beside an error).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import warnings
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from ..base.ranges import MAX_BYTES
from ..base.types import InputError
from ..comm import topology
from ..comm.nccl import known_gpu, tier_kind
from ..comm.specs import COLLECTIVES, LINK_KIND_SPECS, busbw_factor
from ..step.strategies import SPECS
from . import schema as S
from .inputs import MAX_INT_DIGITS, check_json_depth, json_decoder

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "SuspiciousInput",
    "suspicious",
    "MAX_RANKS",
    "MAX_DIGITS",
    "BW_REL",
    "BW_ABS_GBPS",
    "STEP_CEILING",
    "IN_NETWORK_CEILING",
    "EFFICIENCY_NOISE",
    "json_records",
    "number",
    "calls",
    "rows",
    "steps",
    "scaling",
    "line_rate",
    "hardware",
    "strategy",
    "not_for",
    "collective_option",
    "bare_bandwidths",
    "tier_order",
    "MAX_INT_DIGITS",
]

#: the most ranks a communicator has: NCCL counts them in a C ``int`` (nccl.h: ``ncclCommInitRank(ncclComm_t*,
#: int nranks, ...)``), and the PyTorch profiler's ``world_size`` is one too
MAX_RANKS = 2**31 - 1
#: a number with more digits than this before its point (|x| >= 1e20; 2**64 has 20 digits) is beyond any quantity
#: a measured file holds: sizes stop at 2**62 B, and no time, rate or count comes near
MAX_DIGITS = 20
#: nccl-tests and Inspector print bandwidths with two decimals (util.cu ``%7.2f``) and times with 3-4 significant
#: digits: algbw and busbw agree with size / time within this fraction ...
BW_REL = 0.05
#: ... plus this many GB/s (half the last printed digit of two numbers)
BW_ABS_GBPS = 0.011
#: a collective is refused when it is longer than this many times the step it started in (a synchronous step waits
#: for its collectives, so none outlasts it by much); longer than the step alone is a warning
STEP_CEILING = 2.0
#: the most bus bandwidth any algorithm gets from a link of line rate B: in-network reduction (NVLS, SHARP) sends
#: each byte once, so busbw = 2(k-1)/k x B < 2B (nccl-tests doc/PERFORMANCE.md's busbw of a ring is at most B)
IN_NETWORK_CEILING = 2.0
#: weak scaling at k devices does the same per-device work as at one plus communication, so S(k)/k <= 1; published
#: tables round and runs vary by a few percent, so up to this much above 1 is a warning, more is refused
EFFICIENCY_NOISE = 0.05


class SuspiciousInput(UserWarning):
    """A value a file may hold but is probably a mistake: one line on stderr, the command goes on."""


def suspicious(message: str) -> None:
    warnings.warn(SuspiciousInput(message), stacklevel=2)


# --------------------------------------------------------------------------- JSON


def json_records(text: str, source: str) -> Iterator[tuple[Any, int, int]]:
    """(object, record number, line) of a stream of JSON values (one per line, or pretty-printed one after another,
    or a list of them), each decoded by the strict decoder of :func:`simcli.io.inputs.load_json`."""
    check_json_depth(text, source)  # before json's recursive parser
    size, i, no = len(text), 0, 0
    while True:
        while i < size and text[i] in " \t\r\n,":
            i += 1
        if i >= size:
            return
        line = text.count("\n", 0, i) + 1
        no += 1
        where = f"{source}: record {no} (line {line})"
        try:
            rec, end = json_decoder(where).raw_decode(text, i)
        except InputError:
            raise
        except ValueError as e:
            pos = getattr(e, "pos", 0)
            cut = "cut short (the job was still writing, or the file was truncated)" if pos >= size - 1 else str(e)
            raise InputError(
                f"{where}: not a whole JSON record: {cut}; delete the broken record or copy the log again"
            ) from None
        yield rec, no, line
        i = end


# --------------------------------------------------------------------------- numbers

#: kind -> (integer, lowest, highest, what it is)
_KINDS = {
    "bytes": (True, 0, MAX_BYTES, "a size in bytes (at most 2**62 B = 4 EiB)"),
    "count": (True, 0, MAX_BYTES, "an element count (at most 2**62)"),
    "ranks": (True, 1, MAX_RANKS, f"a rank count (1 to {MAX_RANKS:,}: NCCL's int)"),
    "rank": (True, 0, MAX_RANKS - 1, "a rank (0 to the communicator's size - 1)"),
    "nodes": (True, 1, MAX_RANKS, "a node count (at least 1)"),
    "seq": (True, 0, 2**63 - 1, "a sequence number (a 64-bit counter)"),
    "dim": (True, 0, MAX_BYTES, "a tensor dimension (>= 0)"),
    "time": (False, 0.0, None, "a time (> 0)"),
    "bandwidth": (False, 0.0, None, "a bandwidth (>= 0)"),
    "positive": (False, 0.0, None, "a number > 0"),
    "real": (False, None, None, "a finite number"),
}


def number(value: Any, where: str, field: str, *, kind: str) -> Any:
    """``value`` (a JSON number or a numeric string) as a checked int or float, else one InputError line naming
    ``where``, the field and the value. Kinds: see :data:`_KINDS`."""
    integer, lo, hi, what = _KINDS[kind]
    shown = "null" if value is None else (json.dumps(value) if not isinstance(value, str) else repr(value))[:40]
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InputError(f"{where}: {field} {shown} is not a number; give {what}")
    text = value.strip() if isinstance(value, str) else None
    if text is not None:
        head = text.lstrip("+-").split(".")[0].split("e")[0].split("E")[0]
        if len(head) > MAX_DIGITS:
            raise InputError(
                f"{where}: {field} has {len(head)} digits, beyond any quantity a measured file holds (at most "
                f"{MAX_DIGITS}); the file is damaged or edited"
            )
    if isinstance(value, int) and len(str(abs(value))) > MAX_DIGITS:
        raise InputError(
            f"{where}: {field} has {len(str(abs(value)))} digits, beyond any quantity a measured file holds (at most "
            f"{MAX_DIGITS}); the file is damaged or edited"
        )
    try:
        x = float(value) if not isinstance(value, int) else value
    except ValueError:
        raise InputError(f"{where}: {field} {shown} is not a number; give {what}") from None
    if isinstance(x, float) and not math.isfinite(x):
        raise InputError(f"{where}: {field} {shown} is not a finite number; give {what}")
    if abs(x) >= 10.0**MAX_DIGITS:
        raise InputError(
            f"{where}: {field} {shown} is beyond any quantity a measured file holds (|x| < 1e{MAX_DIGITS})"
        )
    if integer:
        if x != int(x):
            raise InputError(f"{where}: {field} {shown} is not a whole number; give {what}")
        x = int(x)
    if (lo is not None and (x < lo or (kind in ("time", "positive") and x <= 0))) or (hi is not None and x > hi):
        raise InputError(f"{where}: {field} {shown} is out of range; give {what}")
    return x


# --------------------------------------------------------------------------- calls: ranks and repeats


def calls(found: Sequence[Mapping[str, Any]], source: str) -> None:
    """The calls of one input (every rank's file of a live job): each (communicator, rank, sequence number) once,
    every rank inside its communicator, and a warning naming the ranks missing from a communicator.

    A call: ``rank`` (communicator, rank), ``ranks`` (its size), ``instance`` (communicator, sequence number),
    ``where`` (its file and record, for the message)."""
    seen: dict[tuple, str] = {}
    present: dict[Any, set[int]] = {}
    size: dict[Any, int] = {}
    for c in found:
        scoped = isinstance(c.get("rank"), tuple)  # (communicator, rank in it); else a trace's global rank
        inst = c.get("instance")
        comm, rank = c["rank"] if scoped else ((inst[0] if isinstance(inst, tuple) else None), c.get("rank"))
        where = str(c.get("where") or source)
        k = int(c["ranks"])
        if rank is None:
            continue
        if scoped and not 0 <= rank < k:
            raise InputError(
                f"{where}: rank {rank} of a communicator of {k} ranks (ranks run 0 to {k - 1}); the record is "
                "damaged, or mixes two runs"
            )
        key = (comm, rank, c["instance"][1] if isinstance(c.get("instance"), tuple) else c.get("instance"))
        if key in seen:
            raise InputError(
                f"{where}: rank {rank}'s collective #{key[2]} is recorded twice (first at {seen[key]}): a rank's "
                "log given twice, or two runs in one input; give each rank's file of one run once"
            )
        seen[key] = where
        _consistent(where, c.get("bytes"), c.get("time_s"), k=k, coll=c.get("collective"), alg=c.get("algbw_GBps"),
                    bus=c.get("busbw_GBps"))  # fmt: skip
        if scoped:
            present.setdefault(comm, set()).add(rank)
            size[comm] = k
    short = []
    for comm, ranks in present.items():
        k = size[comm]
        if len(ranks) < k:
            missing = sorted(set(range(min(k, 1 << 16))) - ranks)
            shown = ", ".join(map(str, missing[:4])) + (", ..." if len(missing) > 4 else "")
            short.append(f"{len(ranks)} of communicator {comm}'s {k} (missing {shown})")
    if short:  # one line for the input, however many communicators
        suspicious(
            f"{source}: ranks: records of {'; '.join(short[:3])}{'; ...' if len(short) > 3 else ''}; a "
            "collective's time is its slowest rank's, which may be a missing one: give every rank's file"
        )


# --------------------------------------------------------------------------- rows: a measured table's consistency


def _close(x: float, expected: float) -> bool:
    return abs(x - expected) <= BW_REL * max(abs(x), abs(expected)) + BW_ABS_GBPS


def _consistent(where: str, n: Any, t: Any, *, k: Any, coll: Any, alg: Any, bus: Any) -> None:
    """algbw = size / time, busbw = algbw x the collective's factor at k (where the record gives them)."""

    if n is not None and t is not None and alg is not None:
        expected = n / t / 1e9
        if not _close(alg, expected):
            raise InputError(
                f"{where}: algbw {alg:g} GB/s is not size / time = {n} B / {t * 1e6:.6g} us = {expected:.4g} GB/s "
                "(nccl-tests' algbw); the record contradicts itself: the file is damaged or edited, or a time is in "
                "another unit"
            )
    coll = str(coll or "all_reduce")
    if alg is None and bus is not None and n is not None and t is not None:
        alg = n / t / 1e9  # a table that gives busbw beside the time, without algbw
    if k is not None and alg is not None and bus is not None and coll in COLLECTIVES and k >= 1:
        f = float(busbw_factor(k, coll))
        if not _close(bus, alg * f):
            raise InputError(
                f"{where}: busbw {bus:g} GB/s is not algbw x {f:.4g} = {alg * f:.4g} GB/s ({coll} of {k} ranks, "
                "nccl-tests doc/PERFORMANCE.md); the record contradicts itself (busbw or the rank count is wrong)"
            )


def rows(records: Sequence[dict[str, Any]], source: str, lines: Sequence[Any] | None = None) -> list[dict[str, Any]]:
    """Every record of a measured collective table checked: bytes, world_size, time_s, algbw_GBps and busbw_GBps in
    range, and the bandwidths consistent with size and time (algbw = bytes / time; busbw = algbw x factor(k)).
    ``lines``: where each record is, after ``source`` (or in full, with ``source`` ""). Returns the records (the
    readers return what this returns)."""
    for i, r in enumerate(records):
        where = (f"{source}: " if source else "") + (str(lines[i]) if lines is not None else f"row {i + 1}")
        if r.get("bytes") is not None:
            r["bytes"] = number(r["bytes"], where, "bytes", kind="bytes")
        if r.get("world_size") is not None:
            r["world_size"] = number(r["world_size"], where, "world_size", kind="ranks")
        for f in ("time_s", "time_p10_s", "time_p90_s", "time_min_s", "time_max_s"):
            if r.get(f) is not None:
                r[f] = number(r[f], where, f, kind="time")
        for f in ("algbw_GBps", "busbw_GBps"):
            if r.get(f) is not None:
                r[f] = number(r[f], where, f, kind="bandwidth")
        _consistent(
            where, r.get("bytes"), r.get("time_s"), k=r.get("world_size"), coll=r.get("collective"),
            alg=r.get("algbw_GBps"), bus=r.get("busbw_GBps"),
        )  # fmt: skip
    return list(records)


# --------------------------------------------------------------------------- steps of a trace


def steps(step_list: Iterable[tuple[str, float, Sequence[tuple[str, float]]]], source: str) -> None:
    """(step name, step seconds, [(collective, seconds), ...]) of each step: a step longer than zero, and no
    collective longer than STEP_CEILING x its step (a warning where it is longer than the step alone)."""
    longer: list[str] = []
    for name, step_s, colls in step_list:
        if not step_s > 0:
            raise InputError(
                f"{source}: {name}: dur {step_s * 1e6:g} us: a training step takes time; the trace is damaged or "
                "edited (export it again)"
            )
        for coll, t in colls:
            if t > STEP_CEILING * step_s:
                raise InputError(
                    f"{source}: {name}: a {coll} of {t * 1e6:.6g} us in a step of {step_s * 1e6:.6g} us: a "
                    f"synchronous step waits for its collectives, so none lasts {t / step_s:.3g} x the step; the "
                    "trace is damaged or edited (export it again)"
                )
            if t > step_s:
                longer.append(name)
    if longer:
        suspicious(
            f"{source}: dur: a collective outlasts its step in {len(set(longer))} step(s) ({longer[0]} first); the "
            "step's terms are the trace's, but check that the steps are whole"
        )


# --------------------------------------------------------------------------- scaling tables


def scaling(
    k: Sequence[int],
    lines: Sequence[int],
    source: str,
    *,
    speedup: Sequence[float] | np.ndarray | None,
    throughput: tuple[str, Sequence[float] | np.ndarray] | None,
    efficiency: Sequence[float] | np.ndarray | None,
    batch: Sequence[float] | np.ndarray | None,
    accum: Sequence[float] | np.ndarray | None,
    global_batch: Sequence[float] | np.ndarray | None,
    series: Sequence[Any] | None,
) -> None:
    """A scaling table (one training run at several k) against itself: S(k)/k <= 1, an efficiency column equal to
    S(k)/k and <= 1, speedup and throughput that say the same, and one global batch where the accumulation changes
    with k (a run that keeps its global batch); a global_batch column equal to k x batch x accum. ``series``: each
    row's run (rows of one value are one run; the table's text columns, as a series' name and precision). Each
    column is None where the table has none."""
    runs: dict[Any, list[int]] = {}
    for i in range(len(k)):
        runs.setdefault(series[i] if series is not None else None, []).append(i)
    for idx in runs.values():
        _one_run(
            idx,
            k,
            lines,
            source=source,
            speedup=speedup,
            throughput=throughput,
            efficiency=efficiency,
            batch=batch,
            accum=accum,
            global_batch=global_batch,
        )


def _one_run(
    idx: list[int],
    k: Any,
    lines: Any,
    *,
    source: str,
    speedup: Any,
    throughput: Any,
    efficiency: Any,
    batch: Any,
    accum: Any,
    global_batch: Any,
) -> None:
    """One run's rows (``idx``) held together: the efficiency, the speedup against the throughput, the global batch."""
    i0 = min(idx, key=lambda i: k[i])
    _run_efficiency(idx, k, lines, source=source, speedup=speedup, efficiency=efficiency)
    if speedup is not None and throughput is not None:
        _run_speedup_throughput(idx, i0, k, lines=lines, source=source, speedup=speedup, throughput=throughput)
    if batch is not None or global_batch is not None:
        _run_global_batch(idx, i0, k, lines=lines, source=source, batch=batch, accum=accum, global_batch=global_batch)


def _run_efficiency(idx: list[int], k: Any, lines: Any, *, source: str, speedup: Any, efficiency: Any) -> None:
    """S(k)/k and the efficiency column at most 1 (a little above: run-to-run noise, warned), and the two agree."""
    high: list[int] = []

    def eff_rule(i: int, e: float, field: str) -> None:
        if e > 1 + EFFICIENCY_NOISE:
            raise InputError(
                f"{source}: line {lines[i]}: {field} {e:.4g} at k = {k[i]}: each device does the same work as alone "
                "plus communication, so the efficiency S(k)/k is at most 1; is the speedup relative to one device, "
                "and the column the one it names?"
            )
        if e > 1:
            high.append(i)

    if speedup is not None:
        for i in idx:
            eff_rule(i, speedup[i] / k[i], "speedup / k")
    if efficiency is not None:
        for i in idx:
            eff_rule(i, efficiency[i], "efficiency")
            if speedup is not None and abs(efficiency[i] - speedup[i] / k[i]) > 0.02 + 0.01 * efficiency[i]:
                raise InputError(
                    f"{source}: line {lines[i]}: efficiency {efficiency[i]:.4g} is not speedup / k = "
                    f"{speedup[i]:g} / {k[i]} = {speedup[i] / k[i]:.4g}; the row contradicts itself"
                )
    if high:
        suspicious(
            f"{source}: efficiency: above 1 at k = {', '.join(str(k[i]) for i in high[:4])} (within "
            f"{EFFICIENCY_NOISE:.0%}: read as run-to-run noise); weak scaling adds communication to the same work"
        )


def _run_speedup_throughput(
    idx: list[int], i0: int, k: Any, *, lines: Any, source: str, speedup: Any, throughput: Any
) -> None:
    """The speedup column against the throughput's ratio to the run's smallest k."""
    col, tp = throughput
    for i in idx:
        want = speedup[i0] * tp[i] / tp[i0]
        if abs(speedup[i] - want) > 0.03 * want + 0.01:
            raise InputError(
                f"{source}: line {lines[i]}: speedup {speedup[i]:g} at k = {k[i]}, but {col} says "
                f"{want:.4g} ({tp[i]:g} / {tp[i0]:g} x {speedup[i0]:g} at k = {k[i0]}); the row contradicts itself"
            )


def _run_global_batch(
    idx: list[int], i0: int, k: Any, *, lines: Any, source: str, batch: Any, accum: Any, global_batch: Any
) -> None:
    """k x batch_per_device x accum against the global batch column, and one global batch over the run."""
    m = accum if accum is not None else [1] * len(k)
    gb = {i: (k[i] * batch[i] * m[i] if batch is not None else global_batch[i]) for i in idx}
    if global_batch is not None and batch is not None:
        for i in idx:
            if abs(global_batch[i] - gb[i]) > 1e-9 * gb[i]:
                raise InputError(
                    f"{source}: line {lines[i]}: global_batch {global_batch[i]:g} is not k x batch_per_device x "
                    f"accum = {k[i]} x {batch[i]:g} x {m[i]:g} = {gb[i]:g}; the row contradicts itself"
                )
    if accum is not None and len({accum[i] for i in idx}) > 1:
        odd = [i for i in idx if abs(gb[i] - gb[i0]) > 1e-9 * gb[i0]]
        if odd:
            i = odd[0]
            suspicious(
                f"{source}: line {lines[i]}: global batch (k x batch_per_device x accum) {gb[i]:g} at k = {k[i]}, "
                f"{gb[i0]:g} at k = {k[i0]}: a run whose accum changes with k keeps its global batch; rows of "
                "another global batch are another run's (each row is priced as given)"
            )


# --------------------------------------------------------------------------- options


#: the collectives nccl-tests measures (its ``*_perf`` binaries, src/), by the names simcli gives them
NCCL_TESTS_COLLECTIVES = (
    "all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "gather", "scatter",
    "send_recv", "hypercube",
)  # fmt: skip


def not_for(option: str, path: str, what: str, *, why: str) -> InputError:
    """The refusal of an option that does not apply to an input (it would be ignored): one line naming both."""
    return InputError(f"{option}: does not apply to {path} ({what}): {why}; leave {option} out")


def collective_option(name: str) -> str:
    """``--collective``: one of nccl-tests' collectives (nccl-tests' spelling, NCCL's or torch's), by simcli's name."""

    key = re.sub(r"_perf(_mpi)?$", "", name.strip().lower()).replace("_", "").replace("-", "")
    found = {c.replace("_", ""): c for c in NCCL_TESTS_COLLECTIVES}.get(key)
    if found is None:
        raise InputError(
            f"--collective: {name[:40]!r} is not a collective nccl-tests measures; give one of "
            f"{', '.join(NCCL_TESTS_COLLECTIVES)}"
        )
    return found


def strategy(path: str, name: str | None, collectives: set[str]) -> None:
    """``--strategy`` against the collectives a traced step ran: a sharded strategy (ZeRO, FSDP: reduce-scatter and
    all-gather) on a step that only all-reduces (DDP's buckets) is refused, since it would price another run."""

    spec = SPECS.get(name or "")
    if spec is None or spec.timeline == "buckets" or not collectives:
        return
    if not collectives & {"all_gather", "reduce_scatter"}:
        raise InputError(
            f"--strategy: {name} shards with reduce-scatter and all-gather, but {path}'s steps run only "
            f"{', '.join(sorted(collectives))} (a DDP step); give --strategy ddp, or leave --strategy out"
        )


# --------------------------------------------------------------------------- physical plausibility


def line_rate(
    profile: Any,
    k: Sequence[int],
    busbw_GBps: Sequence[float | None],
    *,
    where: Sequence[str],
    field: str = "busbw",
) -> None:
    """Measured bus bandwidths against the line rate of the slowest link k ranks of ``profile`` span (its tiers'
    bandwidth before efficiency, as :func:`simcli.comm.topology.tier_bandwidth` gives a ring): above
    IN_NETWORK_CEILING x the line rate is refused (a unit slip, or a file of other hardware). Between 1 x and that
    is not warned: healthy published curves get there (NVLS on H100: 466 GB/s busbw on 450 GB/s NVLink,
    validation/published/nccl-allreduce-8xH100-8xH200-azure.csv; 427 GB/s over 400 GB/s of NICs a GPU's node)."""

    if not len(k):
        return
    ks = np.asarray(k, dtype=np.int64)
    net = [dataclasses.replace(t, efficiency=1.0) for t in profile.network]
    cap = net[-1].size
    if cap is not None:
        ks = np.minimum(ks, cap)
    bw = topology.tier_bandwidth(net, np.maximum(ks, 2))
    rate = np.min(bw, axis=0) / 1e9
    tier = np.argmin(bw, axis=0)
    worst: int | None = None
    worst_b = 0.0
    for i, b in enumerate(busbw_GBps):
        if b is None or not np.isfinite(rate[i]) or int(k[i]) < 2:
            continue
        if b > IN_NETWORK_CEILING * rate[i] and (worst is None or b / rate[i] > worst_b / rate[worst]):
            worst, worst_b = i, b
    if worst is not None:  # the row furthest above the line: its ratio says which slip it was
        i = worst
        ratio = worst_b / rate[i]
        slip = (
            "a time in ms written as us (1000x)"
            if ratio > 100
            else "bits read as bytes (8x), a time in another unit, or a file of other hardware"
        )
        raise InputError(
            f"{where[i]}: {field} {worst_b:.4g} GB/s at k = {int(k[i])} is {ratio:.3g} x the {rate[i]:.4g} GB/s "
            f"line rate of {profile.name}'s {profile.network[int(tier[i])].name} (no algorithm gets more than "
            f"{IN_NETWORK_CEILING:g} x): likely {slip}; fix the unit, or give the profile of the hardware that "
            "measured it (--profile)"
        )


#: words in a device's name -> the family that says which profile it fits
_FAMILIES = (
    "gb300", "gb200", "b300", "b200", "h200", "h100", "h800", "h20", "a100", "a800", "a10", "l40s", "l40", "l4",
    "v100", "t4", "mi355", "mi325", "mi300", "mi250", "gaudi",
)  # fmt: skip


def _family(name: str) -> str | None:
    low = name.lower().replace(" ", "").replace("-", "")
    return next((f for f in _FAMILIES if f in low), None)


def hardware(source: str, profile: Any, *, backend: str | None = None, devices: Iterable[str] = ()) -> None:
    """A warning where a file's backend or device names contradict the profile it is held to: a gloo (CPU) run
    against a GPU profile, an NCCL run against a CPU profile, A100s against an H100 profile."""

    gpu_profile = getattr(profile, "library", None) == "nccl" or known_gpu(profile.device.name)
    if backend == "gloo" and gpu_profile:
        suspicious(
            f"{source}: backend: gloo (a CPU run) held to {profile.name}, a GPU profile ({profile.device.name}); "
            "give the profile of the machine that ran it (--profile cpu-loopback for this host's CPU)"
        )
    elif backend == "nccl" and not gpu_profile:
        suspicious(
            f"{source}: backend: nccl (a GPU run) held to {profile.name}, whose device is {profile.device.name}; "
            "give the profile of the GPUs that ran it (--profile)"
        )
    want = _family(profile.device.name)
    names = sorted({d for d in devices if d})
    got = {f for f in (_family(d) for d in names) if f}
    if want and got and want not in got:
        suspicious(
            f"{source}: device: the file's devices are {', '.join(names[:2])}, the profile {profile.name}'s "
            f"{profile.device.name}; give the profile of the hardware that measured it (--profile)"
        )


# --------------------------------------------------------------------------- profiles

#: the fastest a NIC can feed a GPU: one PCIe 6.0 x16 slot, 64 GT/s x 16 lanes = 128 GB/s per direction (PCI-SIG,
#: PCI Express Base Specification 6.0, 2022); a per-device NIC tier faster than that is faster than its host
PCIE_X16_MAX_BPS = 128e9
#: an NVLink (or xGMI) tier is at least this many times its NIC per device on every machine simcli ships: DGX A100
#: 300 GB/s over 25 (12x), DGX H100 450 over 50 (9x), GB200 NVL72 900 over 100 (9x), MI300X 448 over 50 (9x); closer
#: than 2x is a unit slip (450 Gb/s for 450 GB/s) more often than a machine
NVLINK_OVER_NIC_MIN = 2.0


def bare_bandwidths(data: Any) -> list[str]:
    """The bandwidths of a profile's YAML (device and network tiers) given as a bare number: ``memory_bandwidth:
    3.35`` is read as 3.35 B/s; each as 'field: value' (``simcli profiles validate`` refuses them)."""

    def bare(v: Any) -> bool:
        if isinstance(v, bool):
            return False
        if isinstance(v, (int, float)):
            return True
        try:
            float(str(v).strip())
        except ValueError:
            return False
        return True

    out: list[str] = []
    if not isinstance(data, dict):
        return out
    device = data.get("device")
    if not isinstance(device, dict):
        device = {}
    for f in S.DEVICE:
        if f.kind == "quantity" and f.unit == "bandwidth" and f.key in device and bare(device[f.key]):
            out.append(f"device.{f.key}: {device[f.key]!r}")
    for i, t in enumerate(data.get("network") or [] if isinstance(data.get("network"), list) else []):
        if not isinstance(t, dict):
            continue
        for f in S.TIER:
            if f.kind == "quantity" and f.unit == "bandwidth" and f.key in t and bare(t[f.key]):
                out.append(f"network[{i}].{f.key}: {t[f.key]!r}")
    return out


def tier_order(profile: Any, source: str) -> list[str]:
    """Warnings for tier orderings no machine has: an NVLink tier slower per device than a network tier outside it,
    a per-device NIC faster than a PCIe tier of the profile (else than a PCIe 6.0 x16 slot)."""

    hw = {lk.name: lk.hw for lk in LINK_KIND_SPECS}
    net = list(profile.network)
    per_dev = []
    for i, t in enumerate(net):
        share = 1 if t.per == "device" else (t.size if i == 0 else net[i - 1].size) or 1
        per_dev.append((i, t, hw.get(tier_kind(t, i), "net"), t.bandwidth_Bps / share))
    out = []
    pcie = [b for _, t, h, b in per_dev if h == "pcie"]
    for i, t, h, b in per_dev:
        if h != "nvlink":
            continue
        for j, u, hu, bu in per_dev[i + 1 :]:
            if hu == "net" and bu * NVLINK_OVER_NIC_MIN > b:
                out.append(
                    f"{source}: network[{i}].bandwidth: {t.name} ({b / 1e9:.4g} GB/s a device) is "
                    f"{'slower than' if bu > b else 'within 2x of'} the NIC of {u.name} (network[{j}], "
                    f"{bu / 1e9:.4g} GB/s); every machine's NVLink is 9-12x its NIC: is it in Gb/s?"
                )
                break
    limit, what = (min(pcie), "the profile's PCIe") if pcie else (PCIE_X16_MAX_BPS, "a PCIe 6.0 x16 slot")
    for i, t, h, b in per_dev:
        if h == "net" and t.per == "device" and b > limit:
            out.append(
                f"{source}: network[{i}].bandwidth: {t.name}'s NIC ({b / 1e9:.4g} GB/s a device) is faster than "
                f"{what} ({limit / 1e9:.4g} GB/s) that feeds it; is it in GB/s where Gb/s was meant?"
            )
    return out
