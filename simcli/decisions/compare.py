"""Side-by-side alternatives: every combination of listed scenario fields, and the gain of each over the first.

``simcli compare --profile dgx-a100,dgx-h100 --grad-dtype fp32,bf16`` is the
cartesian product of the listed values (profile-major, in the order given):
four scenarios, each simulated over the same device counts. The *gain* of an
alternative at k is its throughput over the first alternative's at the same k::

    gain(k) = samples_per_s(alternative, k) / samples_per_s(first, k)

(for the same model and batch this is T_step(first, k) / T_step(alternative, k)).
Pure: no printing, no CLI or plotting imports.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..base.ranges import check_combinations
from ..base.types import InputError, Profile, Workload
from ..step.engine import Result, Scenario, simulate
from ..step.memory import for_scenario

__all__ = ["Alternative", "Comparison", "alternatives", "compare", "display", "LABELS"]


#: how a Scenario field is named in records and tables (the command-line option's name)
LABELS = {"workload": "model"}


def display(value: Any) -> Any:
    """How a field's value is named in tables and records (profiles and workloads by name)."""
    if isinstance(value, (Profile, Workload)):
        return value.name
    return value


@dataclass(frozen=True)
class Alternative:
    index: int
    choices: Mapping[str, Any]  #: varied field -> display value
    scenario: Scenario = field(repr=False)

    @property
    def label(self) -> str:
        return " / ".join(f"{v:g}" if isinstance(v, float) else f"{v}" for v in self.choices.values()) or "baseline"


def alternatives(base: Scenario, choices: Mapping[str, Sequence[Any]]) -> list[Alternative]:
    """One scenario per combination of ``choices`` (Scenario field -> values), in the order given.

    Fields with a single value are applied to every combination; only fields
    with several values name an alternative.
    """
    names = list(choices)
    for n in names:
        if n not in Scenario.__dataclass_fields__:
            raise InputError(f"compare: {n!r} is not a scenario field")
        if len(choices[n]) == 0:
            raise InputError(f"--{n.replace('_', '-')}: give at least one value")

    check_combinations({f"--{n.replace('_', '-')}": len(choices[n]) for n in names})
    varied = [n for n in names if len(choices[n]) > 1]
    out = []
    for i, combo in enumerate(itertools.product(*(choices[n] for n in names))):
        sc = base.replace(**dict(zip(names, combo)))
        out.append(
            Alternative(
                index=i,
                choices={LABELS.get(n, n): display(v) for n, v in zip(names, combo) if n in varied},
                scenario=sc,
            )
        )
    return out


@dataclass(frozen=True)
class Comparison:
    alternatives: tuple[Alternative, ...]
    results: tuple[Result, ...]

    @property
    def varied(self) -> list[str]:
        """Names (as in records: 'model' for the workload) of the fields that differ between alternatives."""
        return list(self.alternatives[0].choices) if self.alternatives else []

    def gains(self) -> list[np.ndarray]:
        """Throughput of each alternative over the first at every k (the first's is all ones)."""
        base = self.results[0].samples_per_s
        return [r.samples_per_s / base for r in self.results]

    def records(self) -> list[dict[str, Any]]:
        """One record per (alternative, k), alternative-major: the varied fields, the simulation's columns,
        ``gain`` over the first alternative, and whether the training state fits in device memory."""
        out = []
        for alt, res, gain in zip(self.alternatives, self.results, self.gains()):
            # the one memory model (simcli.step.memory) with the alternative's --optimizer: the bytes speedup reports
            need = for_scenario(alt.scenario, res.devices).total
            cap = alt.scenario.profile.device.memory_bytes
            for i, rec in enumerate(res.records()):
                row: dict[str, Any] = {"alternative": alt.index, "label": alt.label}
                row.update(alt.choices)
                for key, v in rec.items():
                    # a result column of the same name as a varied field (for example the algorithm that
                    # 'auto' chose per k) keeps its value under <name>_used
                    row[f"{key}_used" if key in alt.choices else key] = v
                row["gain"] = float(gain[i])
                row["memory_bytes"] = float(need[i])
                row["fits_memory"] = None if cap is None else bool(need[i] <= cap)
                out.append(row)
        return out

    def by_devices(self) -> list[dict[str, Any]]:
        """The same records, k-major: for each k, every alternative in order (side by side)."""
        recs = self.records()
        n = len(self.results[0].devices)
        return [recs[a * n + i] for i in range(n) for a in range(len(self.alternatives))]


def compare(base: Scenario, choices: Mapping[str, Sequence[Any]], devices: np.ndarray | list[int]) -> Comparison:
    """Simulate every combination of ``choices`` over ``devices``."""
    alts = alternatives(base, choices)
    results = tuple(simulate(a.scenario, devices) for a in alts)
    return Comparison(alternatives=tuple(alts), results=results)
