"""`simcli plan best`: the fastest or cheapest configuration that fits, searched jointly over a grid.

The grid is the product of the strategies, device counts, micro-batches (samples per device per micro-step) and,
optionally, gradient dtypes, hsdp shard groups, activation checkpointing on/off and DDP bucket sizes. The global
batch B is fixed, so the gradient accumulation follows: accum = B / (k·b), which must be a whole number >= 1
(else the configuration cannot keep the global batch and is dropped). Every configuration is priced with the
engine (:func:`simcli.step.engine.simulate` once per (strategy, micro-batch, dtype, group, bucket) over every k, then
:func:`simcli.step.engine.accumulated` for its accumulation: no Python loop per k) and its memory per device with the
one memory model (:func:`simcli.step.memory.per_device`, broadcast over the grid).

Dropped, with the reason counted (the first that applies): the global batch (k·b does not divide B), the shard
group (hsdp: k not a multiple of it), memory (above the device's), then the constraints ``--min-efficiency``,
``--max-days`` and ``--budget``.

Objectives over what is left: ``time`` (the most samples/s; ties: the least cost) and ``cost`` (the least
device-time per sample, times the price; ties: the most samples/s). Activation checkpointing changes memory only
(as in the engine, the MFU carries the recompute), so at equal speed the configuration without it is preferred.
The frontier is the set of configurations no other beats on both time and cost (Pareto).

Pure: no printing, no CLI, plotting or pandas imports.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..base.types import DTYPE_BYTES, InputError
from ..base.units import fmt_bytes, fmt_count
from ..step import memory as M
from ..step.engine import Scenario, accumulated, simulate
from ..step.strategies import SPECS, STRATEGIES, check_strategy
from .plan import Infeasible, breakdown, describe_breakdown, samples_from_tokens

__all__ = ["Grid", "Best", "best", "parse_global_batch", "REASONS", "OBJECTIVES", "MAX_CONFIGURATIONS"]

#: the most configurations one search prices: about 3 s and 1 GB of columns on this project's 2-vCPU VM
#: (benchmarks/bench_plan.py: 10^5 in 0.18-0.31 s); a larger grid is refused before any work, with its count
MAX_CONFIGURATIONS = 1_000_000
#: the largest global batch in samples: 2**53, the largest whole number float64 (the engine's arithmetic) holds
MAX_GLOBAL_BATCH = 2**53

OBJECTIVES = ("time", "cost")
#: why a configuration was dropped, in the order they are tested
REASONS = ("global_batch", "shard_group", "memory", "min_efficiency", "max_days", "budget")
REASON_TEXT = {
    "global_batch": "cannot keep the global batch (k x micro-batch does not divide it)",
    "shard_group": "k is not a multiple of the hsdp shard group",
    "memory": "do not fit in device memory",
    "min_efficiency": "below --min-efficiency",
    "max_days": "over --max-days",
    "budget": "over --budget",
}


def parse_global_batch(text: str, seq_len: int | None, option: str = "--global-batch") -> tuple[int, str]:
    """``512`` or ``512 samples`` (samples), ``4Mi-tokens``/``4M tokens``/``4194304 tokens`` (tokens, divided by the
    sequence length) -> (samples, how it was given)."""
    s = str(text).strip()
    m = re.fullmatch(r"([0-9.eE+]+)\s*(Ki|Mi|Gi|k|K|M|G)?[\s-]*(tokens?|samples?|sequences?)?", s)
    if not m:
        raise InputError(
            f"{option}: {text!r} is not a batch; give samples (512) or tokens with a unit (4Mi-tokens, 4M tokens)"
        )
    scale = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, None: 1}[m.group(2)]
    try:
        n = float(m.group(1)) * scale
    except ValueError:
        raise InputError(f"{option}: {text!r}: {m.group(1)!r} is not a number") from None
    tokens = (m.group(3) or "").startswith("token")
    if tokens:
        if not seq_len:
            raise InputError(f"{option}: {text!r} counts tokens but the model has no sequence length; give samples")
        samples = n / seq_len
        if abs(samples - round(samples)) > 1e-9 * max(1.0, samples):
            raise InputError(
                f"{option}: {text!r} is {n:g} tokens, not a whole number of {seq_len}-token sequences "
                f"({samples:g}); give a multiple of {seq_len} tokens"
            )
        n = samples
    if not (math.isfinite(n) and n >= 1 and abs(n - round(n)) < 1e-9 * max(1.0, n)):
        raise InputError(f"{option}: {text!r} must be a whole number of samples, at least 1")
    if n > MAX_GLOBAL_BATCH:
        raise InputError(
            f"{option}: {text!r} is {n:g} samples, more than simcli models (at most 2**53 = {MAX_GLOBAL_BATCH:,})"
        )
    return int(round(n)), ("tokens" if tokens else "samples")


@dataclass(frozen=True)
class Grid:
    """The values searched (each a tuple, in the order given)."""

    strategies: tuple[str, ...]
    devices: np.ndarray
    micro_batches: tuple[int, ...]
    grad_dtypes: tuple[str, ...] = ("fp32",)
    shard_groups: tuple[int | None, ...] = (None,)  #: hsdp only
    checkpointing: tuple[bool, ...] = (True,)
    bucket_mbs: tuple[float, ...] = (25.0,)  #: ddp only

    def __post_init__(self) -> None:
        for s in self.strategies:
            check_strategy(s)
        for g in self.grad_dtypes:
            if g not in DTYPE_BYTES:
                raise InputError(f"--grad-dtype: unknown dtype {g!r}; choose one of {', '.join(DTYPE_BYTES)}")
        for name, vals in (("--batch-per-device", self.micro_batches), ("--shard-group", self.shard_groups)):
            for v in vals:
                if v is not None and (int(v) != v or v < 1):
                    raise InputError(f"{name}: {v} must be a whole number, at least 1")
        for mb in self.bucket_mbs:
            if not (mb > 0 and math.isfinite(mb)):
                raise InputError(f"--bucket-mb: {mb} must be a positive number of MiB")
        if not self.strategies or not self.micro_batches or np.asarray(self.devices).size == 0:
            raise InputError("plan best: give at least one strategy, micro-batch and device count")

    def combos(self) -> list[tuple[str, str, int | None, float]]:
        """(strategy, grad dtype, shard group, bucket MiB): one simulate each, over every (k, micro-batch). The
        shard group matters to hsdp only and the bucket size to ddp only, so the others take one value of each."""
        out = []
        for s, g in itertools.product(self.strategies, self.grad_dtypes):
            groups = self.shard_groups if SPECS[s].group == "shard_group" else (None,)
            buckets = self.bucket_mbs if SPECS[s].timeline == "buckets" else (self.bucket_mbs[0],)
            out += [(s, g, sg, bk) for sg in groups for bk in buckets]
        return out

    @property
    def size(self) -> int:
        n = np.asarray(self.devices).size * len(self.micro_batches) * len(self.checkpointing)
        return len(self.combos()) * int(n)

    def check_size(self, limit: int | None = None) -> int:
        """The number of configurations, refused (one line naming each factor and how to narrow it) when over
        ``limit`` (:data:`MAX_CONFIGURATIONS`): checked before anything is priced or allocated."""
        limit = MAX_CONFIGURATIONS if limit is None else limit
        n = self.size
        if n > limit:
            parts = [
                f"{np.asarray(self.devices).size:,} device counts (--devices)",
                f"{len(self.micro_batches):,} micro-batches (--batch-per-device)",
                f"{len(self.combos()):,} strategy settings (--strategy, --grad-dtype, --shard-group, --bucket-mb)",
            ]
            if len(self.checkpointing) > 1:
                parts.append(f"{len(self.checkpointing)} checkpointing settings (--activation-checkpointing)")
            raise InputError(
                f"plan best: {n:,} configurations to search ({' x '.join(parts)}), more than the "
                f"{limit:,} one search prices; narrow the grid: a geometric --devices ('64..4096:x2'), fewer "
                "micro-batches ('-b 1,2,4,8') or strategies"
            )
        return n


#: the columns of every priced configuration (arrays of one length)
_COLS = (
    "strategy",
    "devices",
    "batch_per_device",
    "accum",
    "grad_dtype",
    "shard_group",
    "activation_checkpointing",
    "bucket_mb",
    "samples_per_s",
    "t_step_s",
    "efficiency",
    "memory_bytes",
    "days",
    "cost",
    "device_hours",
    "reason",
)


@dataclass(frozen=True)
class Best:
    objective: str
    global_batch: int
    samples: float | None
    price: float | None
    constraints: dict[str, float | None]
    scanned: int
    dropped: dict[str, int]
    answer: dict[str, Any]
    runner_up: dict[str, Any] | None
    frontier: list[dict[str, Any]]
    why: str
    limited_by: str
    at_answer: dict[str, Any]
    #: every configuration priced, column-wise (for pictures); reason "" where it was kept
    table: dict[str, np.ndarray] = field(repr=False)

    @property
    def worse(self) -> str:
        """How much worse the runner-up is, in the objective's terms."""
        r, a = self.runner_up, self.answer
        if r is None:
            return ""
        if self.objective == "time":
            return f"{100 * (a['samples_per_s'] / r['samples_per_s'] - 1):.2f}% slower"
        return f"{100 * (r['cost_key'] / a['cost_key'] - 1):.2f}% dearer"

    def to_dict(self) -> dict[str, Any]:
        def clean(row: dict[str, Any] | None) -> dict[str, Any] | None:
            return None if row is None else {k: v for k, v in row.items() if k != "cost_key"}

        return {
            "question": "best",
            "objective": self.objective,
            "global_batch": self.global_batch,
            "samples": self.samples,
            "price_per_device_hour": self.price,
            "constraints": self.constraints,
            "scanned": self.scanned,
            "kept": self.scanned - sum(self.dropped.values()),
            "dropped": self.dropped,
            "answer": clean(self.answer),
            "runner_up": clean(self.runner_up),
            "runner_up_worse": self.worse,
            "limited_by": self.limited_by,
            "why": self.why,
            "at_answer": self.at_answer,
            "frontier": [clean(r) for r in self.frontier],
        }


def _check_positive(name: str, v: float | None) -> None:
    if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
        raise InputError(f"{name}: {v!r} must be a positive number")


def _run_length(
    sc: Scenario,
    objective: str,
    samples: float | None,
    *,
    tokens: float | None,
    price: float | None,
    max_days: float | None,
    budget: float | None,
    min_efficiency: float | None,
) -> float | None:
    """The objective and the constraints checked against each other; the run's length in samples (from
    ``--tokens`` where given), None when no length was given."""
    if objective not in OBJECTIVES:
        raise InputError(f"--objective: {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    for name, v in (
        ("--samples", samples),
        ("--tokens", tokens),
        ("--price-per-device-hour", price),
        ("--max-days", max_days),
        ("--budget", budget),
    ):
        _check_positive(name, v)
    if samples is not None and tokens is not None:
        raise InputError("--samples and --tokens exclude each other: give the run's length once")
    if tokens is not None:
        samples = samples_from_tokens(sc.workload, tokens)
    if min_efficiency is not None and not (0 < min_efficiency <= 1):
        raise InputError(f"--min-efficiency: {min_efficiency!r} is not in (0, 1]")
    if max_days is not None and samples is None:
        raise InputError("--max-days needs the run's length: give --tokens or --samples")
    if budget is not None and (samples is None or price is None):
        raise InputError("--budget needs --price-per-device-hour and the run's length (--tokens or --samples)")
    return samples


def best(
    sc: Scenario,
    grid: Grid,
    *,
    global_batch: int,
    objective: str = "time",
    samples: float | None = None,
    tokens: float | None = None,
    price: float | None = None,
    max_days: float | None = None,
    budget: float | None = None,
    min_efficiency: float | None = None,
    on_progress: Callable[[int], Any] | None = None,
) -> Best:
    """The best configuration of ``grid`` for ``objective`` at ``global_batch`` samples per optimizer step (module
    docstring). ``sc`` gives the rest of the scenario (model, profile, dtypes, mfu, algorithm, ...).

    The grid's size is checked first (:meth:`Grid.check_size`); ``on_progress(n)`` is called as each n more
    configurations are priced (the CLI's progress bar)."""
    samples = _run_length(
        sc,
        objective,
        samples,
        tokens=tokens,
        price=price,
        max_days=max_days,
        budget=budget,
        min_efficiency=min_efficiency,
    )
    M.check_optimizer(sc.optimizer)
    B = int(global_batch)
    if not 1 <= B <= MAX_GLOBAL_BATCH:
        raise InputError(f"--global-batch: {global_batch} must be at least 1 and at most 2**53")
    grid.check_size()
    steps = math.ceil(samples / B - 1e-9) if samples is not None else None
    cap = sc.profile.device.memory_bytes
    base = sc.replace(global_batch=None, accum=1)
    node = sc.profile.network[0].size
    k_all = np.asarray(grid.devices, dtype=np.int64).ravel()
    parts: dict[str, list[np.ndarray]] = {c: [] for c in _COLS}
    mb = np.asarray(grid.micro_batches, dtype=np.int64)
    k = np.repeat(k_all, mb.size)  # every (k, micro-batch), k-major
    b = np.tile(mb, k_all.size)
    n = k.size
    kb = k * b
    accum = np.where(B % kb == 0, B // kb, 0)
    for s, g, sg, bk in grid.combos():
        reason = np.where(accum >= 1, "", "global_batch").astype(object)
        priced = np.ones(n, dtype=bool)
        if SPECS[s].group == "shard_group":
            gsize = sg if sg is not None else node
            if gsize:
                priced = k % np.minimum(k, gsize) == 0
                reason = np.where((reason == "") & ~priced, "shard_group", reason)
        scn = base.replace(strategy=s, grad_dtype=g, shard_group=sg, bucket_mb=bk)
        t_step = np.full(n, np.nan)
        eff = np.full(n, np.nan)
        if priced.any():
            res = simulate(scn, k[priced], micro_batch=b[priced])
            t_step[priced], eff[priced] = accumulated(res, np.maximum(accum[priced], 1))
        time_s = steps * t_step if steps is not None else np.full(n, np.nan)
        dev_h = k * time_s / 3600.0
        cost = dev_h * price if price is not None else np.full(n, np.nan)
        for ckpt in grid.checkpointing:
            need = M.per_device(s, k, **M.scenario_kwargs(scn.replace(activation_checkpointing=ckpt), b)).total
            r = reason.copy()
            if cap is not None:
                r = np.where((r == "") & (need > cap), "memory", r)
            if min_efficiency is not None:
                r = np.where((r == "") & (eff < min_efficiency - 1e-12), "min_efficiency", r)
            if max_days is not None:
                r = np.where((r == "") & (time_s > max_days * 86400.0), "max_days", r)
            if budget is not None:
                r = np.where((r == "") & (cost > budget), "budget", r)
            cols = {
                "strategy": np.full(n, s, dtype=object),
                "devices": k,
                "batch_per_device": b,
                "accum": accum,
                "grad_dtype": np.full(n, g, dtype=object),
                "shard_group": np.full(n, sg if sg is not None else (node if SPECS[s].group == "shard_group" else 0)),
                "activation_checkpointing": np.full(n, ckpt),
                "bucket_mb": np.full(n, bk if SPECS[s].timeline == "buckets" else np.nan),
                "samples_per_s": B / t_step,
                "t_step_s": t_step,
                "efficiency": eff,
                "memory_bytes": need,
                "days": time_s / 86400.0,
                "cost": cost,
                "device_hours": dev_h,
                "reason": r,
            }
            for c in _COLS:
                parts[c].append(cols[c])
            if on_progress is not None:
                on_progress(n)
    table = {c: np.concatenate(v) for c, v in parts.items()}
    return _answer(
        sc,
        grid,
        table,
        B=B,
        objective=objective,
        samples=samples,
        price=price,
        max_days=max_days,
        budget=budget,
        min_eff=min_efficiency,
    )


def _keys(table: dict[str, np.ndarray], objective: str) -> np.ndarray:
    """Order of the configurations, best first: the objective, then the other, then no checkpointing, fewer
    devices and the strategies' order (deterministic)."""
    per_sample = table["devices"] * table["t_step_s"]  # device-seconds per optimizer step: cost without a run
    speed = -table["samples_per_s"]
    strat = np.array([STRATEGIES.index(s) for s in table["strategy"]])
    ckpt = table["activation_checkpointing"].astype(int)
    first, second = (speed, per_sample) if objective == "time" else (per_sample, speed)
    return np.lexsort((strat, table["devices"], ckpt, second, first))


def _row(table: dict[str, np.ndarray], i: int) -> dict[str, Any]:
    def py(v: Any) -> Any:
        if isinstance(v, np.generic):
            v = v.item()
        return None if isinstance(v, float) and v != v else v

    row = {c: py(table[c][i]) for c in _COLS if c != "reason"}
    row["shard_group"] = row["shard_group"] or None
    row["cost_key"] = float(table["devices"][i] * table["t_step_s"][i])
    return row


def _frontier(table: dict[str, np.ndarray], ok: np.ndarray) -> list[int]:
    """Indices of the Pareto set over (time per step, device-time per step) among ``ok``, fastest first."""
    idx = np.flatnonzero(ok)
    t = table["t_step_s"][idx]
    c = table["devices"][idx] * t
    order = np.lexsort((c, t))
    c_sorted = c[order]
    prev_min = np.concatenate(([np.inf], np.minimum.accumulate(c_sorted)[:-1]))
    keep = c_sorted < prev_min * (1 - 1e-12)
    return idx[order[keep]].tolist()


def _answer(sc, grid, table, *, B, objective, samples, price, max_days, budget, min_eff) -> Best:
    reason = table["reason"]
    ok = reason == ""
    scanned = int(reason.size)
    dropped = {r: int(np.count_nonzero(reason == r)) for r in REASONS if np.any(reason == r)}
    if not ok.any():
        raise Infeasible(
            f"no configuration of the {scanned:,} searched fits: "
            + "; ".join(f"{n:,} {REASON_TEXT[r]}" for r, n in dropped.items())
            + _hint(dropped)
        )
    order = _keys(table, objective)
    order_ok = order[ok[order]]
    a = int(order_ok[0])
    answer = _row(table, a)
    key = ("strategy", "devices", "batch_per_device")
    runner = next((int(i) for i in order_ok[1:] if any(table[c][i] != table[c][a] for c in key)), None)
    # the best of every configuration that keeps the global batch, ignoring memory and the constraints
    valid = (reason != "global_batch") & (reason != "shard_group")
    order_valid = order[valid[order]]
    u = int(order_valid[0])
    at = _at(sc, table, a)
    limited_by, why = _why(
        sc,
        table,
        a,
        u=u,
        order_ok=order_ok,
        objective=objective,
        B=B,
        max_days=max_days,
        budget=budget,
        min_eff=min_eff,
    )
    why = why + "; " + describe_breakdown(at)
    return Best(
        objective=objective,
        global_batch=B,
        samples=samples,
        price=price,
        constraints={"max_days": max_days, "budget": budget, "min_efficiency": min_eff},
        scanned=scanned,
        dropped=dropped,
        answer=answer,
        runner_up=_row(table, runner) if runner is not None else None,
        frontier=[_row(table, i) for i in _frontier(table, ok)],
        why=why,
        limited_by=limited_by,
        at_answer=at,
        table=table,
    )


def answer_scenario(sc: Scenario, row: dict[str, Any]) -> Scenario:
    """The scenario of one configuration (its accumulation included): what `simcli speedup` runs for it."""
    return sc.replace(
        strategy=row["strategy"],
        batch_per_device=int(row["batch_per_device"]),
        global_batch=None,
        accum=int(row["accum"]),
        grad_dtype=row["grad_dtype"],
        shard_group=row["shard_group"] if SPECS[row["strategy"]].group == "shard_group" else sc.shard_group,
        activation_checkpointing=bool(row["activation_checkpointing"]),
        bucket_mb=row["bucket_mb"] if row["bucket_mb"] is not None else sc.bucket_mb,
    )


def _at(sc: Scenario, table: dict[str, np.ndarray], i: int) -> dict[str, Any]:
    res = simulate(answer_scenario(sc, _row(table, i)), [int(table["devices"][i])])
    return breakdown(res, 0)


def _desc(table: dict[str, np.ndarray], i: int) -> str:
    s = str(table["strategy"][i])
    return (
        f"{s} on {int(table['devices'][i])} devices, micro-batch {int(table['batch_per_device'][i])} x accum "
        f"{int(table['accum'][i])}"
    )


def _why(sc, table, a, *, u, order_ok, objective, B, max_days, budget, min_eff) -> tuple[str, str]:
    """What limits the answer: the memory or a constraint (a better configuration was dropped for it), then what
    stops the answer's own strategy: the global batch, the node boundary, the exposed collectives, the range."""
    cap = sc.profile.device.memory_bytes
    word = "faster" if objective == "time" else "cheaper"
    first: tuple[str, str] | None = None
    if u != a and table["reason"][u] != "":
        r = str(table["reason"][u])
        if r == "memory":
            first = (
                "memory",
                (
                    f"memory: the {word} {_desc(table, u)} needs "
                    f"{fmt_bytes(float(table['memory_bytes'][u]), binary=False)} per device, over the device's "
                    f"{fmt_bytes(float(cap), binary=False)}"
                ),
            )
        else:
            if r == "min_efficiency":
                what = f"E = {table['efficiency'][u]:.3f} < --min-efficiency {min_eff:g}"
            elif r == "max_days":
                what = f"{table['days'][u]:.3g} days > --max-days {max_days:g}"
            else:
                what = f"cost {fmt_count(float(table['cost'][u]))} > --budget {budget:g}"
            first = "constraint", f"the constraint: the {word} {_desc(table, u)} has {what}"
    own = _own_limit(sc, table, a, objective=objective, B=B)
    if first is None:
        return own
    return first[0], first[1] + "; then " + own[1]


def _own_limit(sc, table, a, *, objective, B) -> tuple[str, str]:
    s, k = table["strategy"][a], int(table["devices"][a])
    ks = table["devices"]
    node = sc.profile.network[0].size if len(sc.profile.network) > 1 else None
    if objective != "time":
        text = (
            f"the devices' efficiency: {s} at E = {table['efficiency'][a]:.3f} spends the least device-time per "
            "sample (every second beyond one device's compute is paid on every device)"
        )
        if k == int(ks.min()):
            text += f"; k = {k} is the fewest devices searched (widen --devices to look lower)"
        return "efficiency", text
    same = np.flatnonzero((table["strategy"] == s) & (table["reason"] != "shard_group"))
    larger = same[ks[same] > k]
    if not larger.size:
        return "range", f"the range: k = {k} is the most devices searched (widen --devices to look further)"
    if np.all(table["reason"][larger] == "global_batch"):
        return "global batch", (
            f"the global batch: {B:,} samples cannot be split over more than {k} devices at micro-batch "
            f"{int(table['batch_per_device'].min())} or more"
        )
    nxt = larger[table["reason"][larger] != "global_batch"]
    kk = int(ks[nxt].min())
    at = nxt[ks[nxt] == kk]
    j = int(at[np.nanargmax(table["samples_per_s"][at])])
    cross = node is not None and k <= node < kk
    if table["samples_per_s"][j] < table["samples_per_s"][a]:
        return ("node boundary" if cross else "exposed collective"), (
            (f"the node boundary: past one node of {node}" if cross else "the exposed collectives")
            + f", {s} on {kk} devices is slower ({table['samples_per_s'][j]:.4g} against "
            f"{table['samples_per_s'][a]:.4g} samples/s)"
        )
    r = str(table["reason"][j])
    if r == "":  # kept and as fast (a step that communication no longer changes): the tie went to fewer devices
        return "exposed collective", (
            f"the step itself: {s} on {kk} devices is no faster ({table['samples_per_s'][j]:.4g} against "
            f"{table['samples_per_s'][a]:.4g} samples/s), so the tie goes to fewer devices"
        )
    return ("memory" if r == "memory" else "constraint"), (
        f"{_desc(table, j)} would be faster, but it {REASON_TEXT[r].replace('do not', 'does not')}"
    )


def _hint(dropped: dict[str, int]) -> str:
    if "memory" in dropped and len(dropped) == 1:
        return "; try more devices, a smaller micro-batch, activation checkpointing, or fsdp"
    if "global_batch" in dropped and len(dropped) == 1:
        return "; give device counts and micro-batches whose product divides the global batch"
    return ""
