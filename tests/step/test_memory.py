"""The one memory model (simcli.step.memory): bytes by hand per strategy, its order, and the four commands that
read it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from simcli.base.types import InputError
from simcli.cli.app import app
from simcli.step import memory

P = 124_439_808  # GPT-2 small
K8 = np.array([8])
KW = dict(params=P, units=12, param_bytes=2, grad_bytes=4, optimizer="adamw", reshard_after_forward=True)


def test_bytes_per_param_by_part():
    """ZeRO's accounting with a 16-bit param dtype: 2 + fp32 master 4; fsdp keeps the fp32 shard only."""
    assert memory.bytes_per_param("ddp", param_bytes=2, grad_bytes=4, optimizer="adamw") == {
        "weights": 2,
        "master": 4,
        "grads": 4,
        "optimizer": 8,
    }
    assert memory.bytes_per_param("ddp", param_bytes=4, grad_bytes=4, optimizer="sgd")["master"] == 0
    assert memory.bytes_per_param("fsdp", param_bytes=2, grad_bytes=2, optimizer="sgd-momentum") == {
        "weights": 4,
        "master": 0,
        "grads": 2,
        "optimizer": 4,
    }
    with pytest.raises(InputError, match="--optimizer: unknown optimizer 'lion'"):
        memory.bytes_per_param("ddp", param_bytes=2, grad_bytes=4, optimizer="lion")


def test_memory_by_hand_at_k8():
    """Each strategy's state at k = 8, written out (module docstring's table)."""
    m = {s: memory.per_device(s, K8, **KW) for s in ("ddp", "zero1", "zero2", "fsdp")}
    # ddp: 2 + 4 (master) + 4 (grads) + 8 (adam) + 4 (DDP's bucket copy of the gradients)
    assert m["ddp"].total[0] == pytest.approx(22 * P)
    assert m["ddp"].buffers[0] == pytest.approx(4 * P)
    # zero1: weights and gradients whole, master and adam sharded, DeepSpeed's two buckets (P < 5e8 elements)
    assert m["zero1"].total[0] == pytest.approx(2 * P + 4 * P + 12 * P / 8 + P * (4 + 2))
    assert m["zero2"].total[0] == pytest.approx(2 * P + 16 * P / 8 + P * (4 + 2))
    # fsdp: fp32 shard + grads + adam over 8, two gathered bf16 units, one unit's fp32 gradient to reduce-scatter
    assert m["fsdp"].total[0] == pytest.approx(16 * P / 8 + 2 * 2 * P / 12 + 4 * P / 12)
    assert m["fsdp"].optimizer[0] == pytest.approx(8 * P / 8) and m["fsdp"].master[0] == 0
    big = memory.per_device("zero2", K8, **{**KW, "params": 7e9})
    assert big.buffers[0] == pytest.approx(5e8 * (4 + 2))  # the buckets stop at 5e8 elements


def test_activations_with_the_logits():
    """34·h per token and block (2·h + one block's 34·h with checkpointing), plus 10·v per token at the loss
    (bf16 logits 2 + fp32 copy 4 + fp32 log-probabilities 4)."""
    t = 4096.0
    no = memory.activation_bytes(tokens=t, hidden=4096, units=32, checkpointing=False, vocab=32000)
    yes = memory.activation_bytes(tokens=t, hidden=4096, units=32, checkpointing=True, vocab=32000)
    assert no == pytest.approx(34 * 4096 * t * 32 + 10 * 32000 * t)
    assert yes == pytest.approx(2 * 4096 * t * 32 + 34 * 4096 * t + 10 * 32000 * t)
    assert memory.activation_bytes(tokens=t, hidden=None, units=32, checkpointing=True, vocab=32000) == 0


@settings(max_examples=60, deadline=None)
@given(
    k=st.integers(2, 4096),
    params=st.floats(1e6, 1e12),
    units=st.integers(5, 200),
    pdt=st.sampled_from([2, 4]),
    gdt=st.sampled_from([2, 4]),
    act=st.floats(0, 1e11),
)
def test_memory_ordered_ddp_zero1_zero2_fsdp(k, params, units, pdt, gdt, act):
    """k >= 2, at least 5 units: each more sharded strategy needs no more (zero1 and zero2's buckets stop at 5e8
    elements; below that they hold a copy as ddp's buckets do; at k = 2 fsdp's gathered units can weigh what zero2's
    unsharded weights do: 10e9 fp32 parameters in 5 units tie)."""
    kw = dict(
        params=params,
        units=units,
        param_bytes=pdt,
        grad_bytes=gdt,
        optimizer="adamw",
        activations=act,
        reshard_after_forward=True,
    )
    t = [float(memory.per_device(s, np.array([k]), **kw).total[0]) for s in ("ddp", "zero1", "zero2", "fsdp")]
    assert t[0] >= t[1] > t[2] >= t[3]


def test_hsdp_shards_within_its_group():
    kw = dict(KW, node_size=8)
    h = memory.per_device("hsdp", np.array([8, 64, 512]), **kw).total
    f8 = memory.per_device("fsdp", np.array([8]), **kw).total[0]
    assert np.allclose(h, f8)
    assert memory.per_device("hsdp", np.array([64]), **{**kw, "group": 16}).total[0] == pytest.approx(
        memory.per_device("fsdp", np.array([16]), **kw).total[0]
    )


def test_per_device_broadcasts_over_a_grid():
    """plan best prices (k, micro-batch) grids in one call: the same bytes as one k at a time."""
    k = np.array([[8], [64]])
    act = np.array([[1e9, 2e9, 4e9]])
    grid = memory.per_device("fsdp", k, **KW, activations=act).total
    assert grid.shape == (2, 3)
    one = memory.per_device("fsdp", np.array([64]), **KW, activations=2e9).total[0]
    assert grid[1, 1] == pytest.approx(one)


def _bytes(runner, *args):
    r = runner.invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.parametrize("strategy", ["ddp", "zero1", "zero2", "fsdp", "hsdp"])
def test_speedup_compare_plan_and_explain_report_the_same_bytes(strategy):
    """llama2-7b on dgx-h100 at k = 8: one memory model, so every command gives the same bytes per device (speedup,
    compare, plan max-devices, plan time-to-train, plan best where the configuration fits, explain)."""
    runner = CliRunner()
    common = ["-m", "llama2-7b", "-p", "dgx-h100", "--strategy", strategy, "-f", "json"]
    s = _bytes(runner, "speedup", "-k", "8", *common)[0]["memory_bytes"]
    c = _bytes(runner, "compare", "-k", "8", *common)[0]["memory_bytes"]
    p = _bytes(runner, "plan", "max-devices", "-e", "0.5", "-k", "1..8", *common)
    e = _bytes(runner, "explain", "-k", "8", *common)
    e = (e["explain"][0] if isinstance(e, dict) and "explain" in e else e)["memory"]["total_bytes"]
    t = _bytes(runner, "plan", "time-to-train", "--samples", "1e6", "-k", "8", *common)["memory"]["total_bytes"]
    by_hand = memory.for_scenario(_scenario(strategy), [8]).total[0]
    assert s == c == p["memory"]["total_bytes"] == t == e == pytest.approx(by_hand, rel=1e-12)
    if strategy == "ddp":
        assert s > 80e9 and p["memory"]["fits"] is False
    else:  # plan best with the one configuration: the same bytes for its answer
        best = ["best", "-m", "llama2-7b", "-p", "dgx-h100", "--strategy", strategy, "--devices", "8"]
        b = _bytes(runner, "plan", *best, "--batch-per-device", "1", "--global-batch", "8", "-f", "json")
        assert b["answer"]["memory_bytes"] == pytest.approx(by_hand, rel=1e-12)


def _scenario(strategy):
    from simcli.io.profiles import resolve_profile
    from simcli.io.workloads import build_workload
    from simcli.step.engine import Scenario

    return Scenario(profile=resolve_profile("dgx-h100"), workload=build_workload(model="llama2-7b"), strategy=strategy)


@pytest.mark.parametrize("optimizer", ["sgd", "adamw", "sgd-momentum"])
def test_the_memory_warning_and_the_records_count_the_same_optimizer_state(optimizer):
    """issue 41: the warning on stderr and the records' memory_bytes come from the scenario's --optimizer (the
    warning once counted Adam's state whatever --optimizer said: 151.2 GB for sgd, whose records said 97.3)."""
    import re

    args = ["speedup", "-p", "dgx-h100", "-m", "llama2-7b", "-k", "8", "--optimizer", optimizer, "-f", "json"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout)[0]
    warned = re.search(r"ddp .*needs ([\d.]+) GB per device", r.stderr)
    assert warned, r.stderr  # 7B with ddp does not fit 80 GB with any of these optimizers
    assert float(warned.group(1)) * 1e9 == pytest.approx(rec["memory_bytes"], rel=5e-4)
    sc = _scenario("ddp")
    state = memory.OPTIMIZER_STATE_BYTES[optimizer] - memory.OPTIMIZER_STATE_BYTES[sc.optimizer]
    expected = memory.for_scenario(sc, [8]).total[0] + state * sc.workload.params
    assert rec["memory_bytes"] == pytest.approx(expected, rel=1e-9)
