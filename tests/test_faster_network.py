"""A faster network never predicts slower training: the property for every built-in profile under the default NCCL
release (simcli issue 37, item 7), strictly (t_step may not rise by more than 1e-9 relative).

It does not hold everywhere, and the test says where instead of loosening its bound: on five profiles NCCL's own
choice makes a faster tier cost a little more (each case below is pinned and explained by
``test_where_it_fails_nccls_choice_moved``). tests/test_nccl_issue21.py holds the weaker rule simcli promises for
those: never slower by more than STEP_MARGIN (1%) of the step without a stderr line that names the cause.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from simcli.base.types import NCCL_TABLES_VERSION
from simcli.io.profiles import list_profiles, resolve_profile
from simcli.io.workloads import presets
from simcli.step.engine import Scenario, simulate

BUILT_IN = sorted(e.name for e in list_profiles() if e.origin == "built-in")
MODELS = sorted(presets())

#: where the strict property fails under the default release, and why (pinned below)
FAILS = {
    "dgx-h100": "ResNet-50 at k = 1024, InfiniBand x1.1: the last bucket's pick flips Tree/LL128 -> NVLSTree/Simple "
    "(NCCL's tuner rates NVLSTree cheaper on the faster NICs; simcli prices it 11% dearer), +0.21% of the step",
    "hgx-h200": "as dgx-h100 (the same NVSwitch node and NICs): ResNet-50, k = 1024, InfiniBand x1.1, +0.22%",
    "gcp-a3-mega": "BERT-base at k = 16, TCPXO x1.1: both buckets flip Tree/LL128 -> NVLSTree/Simple, +0.30%",
    "l40s-pcie": "Inception v3 at k = 16, PCIe x4: the last bucket flips Ring/Simple (830 us) -> Tree/LL (2.3 ms), "
    "+0.89% of the step",
    "gb200-nvl72": "Llama 2 70B at k = 256, InfiniBand x1.1: NCCL's search graph finds 15 channels at 48 GB/s where "
    "it found 16 at 45 (simcli.comm.nccl.graph_channels), +1.8%; the 'graph' stderr note names it",
}
#: the pinned cases: profile, model, tier, bandwidth factor, k
CASES = [
    ("dgx-h100", "resnet50", 1, 1.1, 1024),
    ("hgx-h200", "resnet50", 1, 1.1, 1024),
    ("gcp-a3-mega", "bert-base", 1, 1.1, 16),
    ("l40s-pcie", "inception_v3", 0, 4.0, 16),
    ("gb200-nvl72", "llama2-70b", 1, 1.1, 256),
]


def _steps(profile: str, model: str, tier: int, factor: float, k: int, *, faster: bool = False):
    """(the step on the profile, the step with tier ``tier``'s bandwidth x ``factor``) at k devices; with
    ``faster``, also (the faster profile, its scenario)."""
    p = resolve_profile(profile)
    w = presets()[model].workload(None)
    tier %= len(p.network)
    net = list(p.network)
    net[tier] = dataclasses.replace(net[tier], bandwidth_Bps=factor * net[tier].bandwidth_Bps)
    q = Scenario(p.replace(network=tuple(net)), w)
    out = simulate(Scenario(p, w), [k]), simulate(q, [k])
    return (*out, q) if faster else out


def test_the_built_in_profiles_are_priced_as_the_default_release():
    for name in BUILT_IN:
        p = resolve_profile(name)
        if p.nccl is not None and p.library == "nccl":
            assert p.nccl.version == NCCL_TABLES_VERSION, name
    assert set(FAILS) <= set(BUILT_IN) and {c[0] for c in CASES} == set(FAILS)


@pytest.mark.parametrize(
    "profile",
    [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=FAILS[n])) if n in FAILS else n for n in BUILT_IN],
)
@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    model=st.sampled_from(MODELS),
    tier=st.integers(0, 3),
    factor=st.floats(1.01, 4.0),
    k=st.sampled_from([2, 4, 8, 16, 24, 32, 64, 128, 256, 512, 1024]),
)
# the pinned cases run first on every profile, so that a profile in FAILS fails every time
@example(model="resnet50", tier=1, factor=1.1, k=1024)
@example(model="bert-base", tier=1, factor=1.1, k=16)
@example(model="inception_v3", tier=0, factor=4.0, k=16)
@example(model="llama2-70b", tier=1, factor=1.1, k=256)
def test_a_faster_network_never_predicts_slower_training(profile, model, tier, factor, k):
    before, after = _steps(profile, model, tier, factor, k)
    assert after.t_step_s[0] <= before.t_step_s[0] * (1 + 1e-9), (
        profile,
        model,
        tier,
        factor,
        k,
        float(after.t_step_s[0] / before.t_step_s[0] - 1),
    )


def _pair(c) -> str | None:
    return None if c is None else f"{c.algorithm[0]}/{c.protocol[0]}"


@pytest.mark.parametrize(("profile", "model", "tier", "factor", "k"), CASES)
def test_where_it_fails_nccls_choice_moved(profile, model, tier, factor, k):
    """Each pinned case: the step does rise, by under 2%, and what moved is NCCL's choice, not a cost that grew
    with a faster tier: either a bucket's pair, to one that simcli prices above the pair it left (on the faster
    network itself), or the search graph's channels."""
    from simcli.comm import collectives as C
    from simcli.step.buckets import bucket_plan
    from simcli.step.notes import graph_notes

    before, after, sc = _steps(profile, model, tier, factor, k, faster=True)
    rise = after.t_step_s[0] / before.t_step_s[0] - 1
    assert 1e-9 < rise < 0.02
    graph = [r for r in graph_notes(after) if r["devices"] == k]
    if graph:  # fewer channels at a higher quantised speed: NCCL's search, as simcli.comm.nccl.graph_channels reads it
        assert graph[0]["channels"] < graph[0]["alt_channels"] and graph[0]["alt_t_step_s"] < graph[0]["t_step_s"]
        return
    plan = bucket_plan(float(sc.grad_bytes), sc.bucket_bytes if sc.overlap == "buckets" else None)
    moved = 0
    for old, new, size in (
        (before.comm_bucket, after.comm_bucket, plan.size),
        (before.comm_last, after.comm_last, plan.last),
    ):
        if new is None or _pair(old) == _pair(new):
            continue
        kept = C.collective(
            sc.profile,
            old.algorithm[0],
            np.array([k]),
            nbytes=np.float64(size),
            collective="all_reduce",
            protocol=old.protocol[0],
        )
        assert new.time[0] > kept.time[0], (size, _pair(old), _pair(new))  # the pair it left is cheaper there
        moved += 1
    assert moved
