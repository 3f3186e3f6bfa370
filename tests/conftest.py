"""Shared fixtures: tiny profiles built in Python, a CLI runner with a pinned terminal width."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from simcli.base.types import Device, Profile, Tier

os.environ.setdefault("COLUMNS", "140")

#: the same examples on every run (CI must not fail one run in ten on a case a random draw found once); a
#: property a run finds broken is a bug to fix, and the examples it draws are the same next time. No clock either:
#: no deadline per example and no too_slow health check, which a loaded machine (CI's 2 cores, shared) trips
settings.register_profile(
    "simcli", derandomize=True, print_blob=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("simcli")


def make_profile(
    *tiers: Tier, name: str = "test", peak: float = 100e12, mfu: float = 0.5, memory: float | None = 80e9
) -> Profile:
    return Profile(
        name=name,
        description="test profile",
        sources=("test",),
        device=Device(name="testdev", peak_flops={"bf16": peak, "fp32": peak / 4}, mfu=mfu, memory_bytes=memory),
        network=tuple(tiers),
    )


@pytest.fixture
def two_tier() -> Profile:
    """8 devices per node at 100 GB/s, 5 us; one 25 GB/s link per device across nodes, 10 us."""
    return make_profile(Tier("nvlink", 100e9, 5e-6, size=8), Tier("ib", 25e9, 10e-6, per="device"))


@pytest.fixture
def one_tier() -> Profile:
    return make_profile(Tier("net", 10e9, 20e-6))


#: a two-tier profile as a user would write it: 8 devices per node on NVLink, one 200 Gb/s link per device across
TWO_TIER_YAML = """\
name: t2
description: test
sources: [test]
device: {name: D, peak_flops: {bf16: 100 TFLOP/s}, mfu: 0.5}
network:
  - {name: nvlink, size: 8, bandwidth: 300 GB/s, latency: 3 us}
  - {name: ib, bandwidth: 200 Gb/s, latency: 10 us}
"""


@pytest.fixture
def prof(tmp_path) -> str:
    """Path of :data:`TWO_TIER_YAML` written to a file, for CLI tests."""
    f = tmp_path / "t2.yaml"
    f.write_text(TWO_TIER_YAML)
    return str(f)


#: an H100 cluster as a user would write it: 8 per node on NVLink, one 400 Gb/s InfiniBand NIC per GPU across
H100_YAML = """\
name: t-h100
description: test
sources: [test]
device:
  name: H100
  peak_flops: {fp32: 67 TFLOP/s, bf16: 989 TFLOP/s}
  memory: 80 GB
  mfu: 0.4
network:
  - {name: nvlink, size: 8, bandwidth: 450 GB/s, latency: 3 us, efficiency: 0.8}
  - {name: infiniband, bandwidth: 400 Gb/s, latency: 8 us, efficiency: 0.8}
"""


@pytest.fixture
def h100_prof(tmp_path) -> str:
    """Path of :data:`H100_YAML` written to a file (t-h100.yaml), for CLI tests."""
    f = tmp_path / "t-h100.yaml"
    f.write_text(H100_YAML)
    return str(f)


def run(runner, *args):
    """``simcli ARGS...`` through the runner (each argument str()-ed)."""
    from simcli.cli import app

    return runner.invoke(app, [str(a) for a in args])


def run_json(runner, command: str, *more: object):
    """``simcli COMMAND MORE...`` (COMMAND split as a shell splits it; MORE as they are, e.g. paths), asserted to
    exit 0: its stdout read as JSON."""
    r = run(runner, *shlex.split(command), *more)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def assert_table_written(table, rows: list, fresh_text: str) -> None:
    """A generated error table (simcli/comm/error_table.py, simcli/step/error_table.py: ``table``, the module) is
    what its generator writes from today's model (``rows`` and ``fresh_text``, written with the table's COMMIT): the
    rows (ratios, the last field, to 1e-9; the rest exactly), the text around the numbers, a commit in COMMIT."""
    assert len(table.ROWS) == len(rows)
    for stored, fresh in zip(table.ROWS, rows):
        assert stored[:-1] == fresh[:-1]
        assert stored[-1] == pytest.approx(fresh[-1], rel=1e-9)
    stored_text = Path(table.__file__).read_text(encoding="utf-8")
    ratio = r", -?[0-9.]+(?:e-?[0-9]+)?\),\n"
    assert re.sub(ratio, ", X),\n", stored_text) == re.sub(ratio, ", X),\n", fresh_text)
    assert re.fullmatch(r"[0-9a-f]{40}(\+changes)?", table.COMMIT)


@pytest.fixture
def figs(monkeypatch):
    """Every figure the command line saves, in order (simcli.plot.figures.save_figure wrapped)."""
    import simcli.plot.figures as P

    seen = []
    real = P.save_figure

    def capture(fig, path, force=False, option="--plot"):
        seen.append(fig)
        return real(fig, path, force=force, option=option)

    monkeypatch.setattr(P, "save_figure", capture)
    return seen


@pytest.fixture
def runner():
    from typer.testing import CliRunner

    return CliRunner()
