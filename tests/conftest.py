"""Shared fixtures: tiny profiles built in Python, a CLI runner with a pinned terminal width."""

from __future__ import annotations

import os

import pytest

from simcli.model import Device, Profile, Tier

os.environ.setdefault("COLUMNS", "140")


def make_profile(*tiers: Tier, name: str = "test", peak: float = 100e12, mfu: float = 0.5,
                 memory: float | None = 80e9) -> Profile:
    return Profile(name=name, description="test profile", sources=("test",),
                   device=Device(name="testdev", peak_flops={"bf16": peak, "fp32": peak / 4}, mfu=mfu,
                                 memory_bytes=memory),
                   network=tuple(tiers))


@pytest.fixture
def two_tier() -> Profile:
    """8 devices per node at 100 GB/s, 5 us; one 25 GB/s link per device across nodes, 10 us."""
    return make_profile(Tier("nvlink", 100e9, 5e-6, size=8),
                        Tier("ib", 25e9, 10e-6, per="device"))


@pytest.fixture
def one_tier() -> Profile:
    return make_profile(Tier("net", 10e9, 20e-6))


@pytest.fixture
def runner():
    from typer.testing import CliRunner

    return CliRunner()
