"""Sharded data parallelism (simcli.step.sharding): bytes by hand, memory, the FSDP timeline against an event loop, and
the CLI's memory warning."""

from __future__ import annotations

import dataclasses
import heapq
import json
from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from simcli.base.types import InputError, Workload
from simcli.cli.app import app
from simcli.comm import collectives
from simcli.io.profiles import resolve_profile
from simcli.step import memory, sharding, strategies
from simcli.step.engine import Scenario, simulate

P = 124_439_808  # GPT-2 small
K8 = np.array([8])


def small(layers: int | None = 12, params: float = P, hidden: int | None = 768) -> Workload:
    return Workload(
        name="small",
        params=params,
        flops_per_sample=6.0 * params * 1024,
        batch_per_device=8,
        seq_len=1024,
        layers=layers,
        hidden=hidden,
    )


def run(strategy: str, k, profile="dgx-h100", **kw):
    prof = resolve_profile(profile) if isinstance(profile, str) else profile
    return simulate(Scenario(profile=prof, workload=kw.pop("workload", small()), strategy=strategy, **kw), k)


# --------------------------------------------------------------------------- bytes per device per step, by hand


def test_bytes_per_device_at_k8_by_hand():
    """ddp 2(k-1)/k·P·g; zero2 (k-1)/k·P·(g + p); fsdp (k-1)/k·P·(2p + g); g = 4 (fp32), p = 2 (bf16)."""
    assert run("ddp", K8).comm_bytes[0] == pytest.approx(2 * 7 / 8 * P * 4)
    assert run("zero1", K8).comm_bytes[0] == pytest.approx(7 / 8 * P * (4 + 2))
    assert run("zero2", K8).comm_bytes[0] == pytest.approx(7 / 8 * P * (4 + 2))
    assert run("fsdp", K8).comm_bytes[0] == pytest.approx(7 / 8 * P * (2 * 2 + 4))
    assert run("fsdp", K8, reshard_after_forward=False).comm_bytes[0] == pytest.approx(7 / 8 * P * (2 + 4))


def test_zero3_moves_one_and_a_half_times_ddp_at_one_dtype():
    """The ZeRO paper, sec. 7: ZeRO-1/2 move DDP's volume, ZeRO-3 1.5x, when parameters and gradients share a dtype."""
    ddp = run("ddp", K8, grad_dtype="bf16").comm_bytes[0]
    assert ddp == pytest.approx(2 * 7 / 8 * P * 2)
    assert run("zero2", K8, grad_dtype="bf16").comm_bytes[0] == pytest.approx(ddp)
    assert run("fsdp", K8, grad_dtype="bf16").comm_bytes[0] == pytest.approx(1.5 * ddp)


def test_hsdp_bytes_by_hand():
    """16 devices, groups of 8: fsdp's volume over 8 plus an all-reduce of the P/8 gradient shard over 2 replicas."""
    got = run("hsdp", np.array([16])).comm_bytes[0]
    assert got == pytest.approx(7 / 8 * P * (2 * 2 + 4) + 2 * (1 / 2) * P * 4 / 8)


def test_each_collective_priced_in_its_dtype():
    """zero2: reduce-scatters of the fp32 gradient (buckets of 5e8 elements, or one message without overlap), then
    one bf16 all-gather of the parameters after the step."""
    prof = resolve_profile("dgx-h100")

    def c(n, kind):
        return float(
            collectives.collective(prof, "nccl", K8, nbytes=np.float64(n), collective=kind, protocol=None).time[0]
        )

    w = small(params=1.3e9)  # 5.2 GB of fp32 gradients: two full 2 GB buckets and a remainder
    n, bucket = 1.3e9 * 4.0, 5e8 * 4.0
    full = int(n // bucket)
    assert full == 2
    ag = c(1.3e9 * 2.0, "all_gather")
    r = run("zero2", K8, workload=w)
    assert r.t_comm_s[0] == pytest.approx(
        full * c(bucket, "reduce_scatter") + c(n - full * bucket, "reduce_scatter") + ag
    )
    assert r.t_comm_exposed_s[0] >= ag
    r = run("zero2", K8, overlap="none", workload=w)
    assert r.t_comm_s[0] == pytest.approx(c(n, "reduce_scatter") + ag)
    assert r.t_comm_exposed_s[0] == pytest.approx(r.t_comm_s[0])  # nothing hidden


# --------------------------------------------------------------------------- memory


def test_activations_by_hand():
    """34·h bytes per token and block; with checkpointing 2·h per token and block plus one block's 34·h."""
    w = small()
    no = run("ddp", K8, workload=w, activation_checkpointing=False).memory.activations[0]
    yes = run("ddp", K8, workload=w).memory.activations[0]
    tokens = 8 * 1024
    assert no == pytest.approx(34 * 768 * tokens * 12)
    assert yes == pytest.approx(2 * 768 * tokens * 12 + 34 * 768 * tokens)
    assert run("ddp", K8, workload=small(hidden=None)).memory.activations[0] == 0.0


def test_activations_given_replace_the_estimate(tmp_path):
    """--activations (or a workload file's activation_bytes_per_sample) times the micro-batch, for any strategy."""
    w = small()
    given = run("fsdp", K8, workload=w, activation_bytes_per_sample=3e6).memory.activations[0]
    assert given == pytest.approx(8 * 3e6)  # micro-batch 8 (small()) x 3 MB, checkpointing or not
    w_file = dataclasses.replace(small(hidden=None), activation_bytes_per_sample=2.0**20)
    assert run("ddp", K8, workload=w_file).memory.activations[0] == pytest.approx(8 * 2.0**20)
    # the command line wins over the file
    assert run("ddp", K8, workload=w_file, activation_bytes_per_sample=0.0).memory.activations[0] == 0.0
    r = CliRunner().invoke(
        app, ["speedup", "-m", "resnet50", "-p", "dgx-a100", "-k", "8", "--activations", "96MiB", "-f", "json"]
    )
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout)[0]
    assert rec["memory_activations_bytes"] == pytest.approx(rec["batch_per_device"] * 96 * 2**20)
    f = tmp_path / "w.yaml"
    f.write_text(
        "name: w\nparams: 1e8\nflops_per_sample: 1e12\nbatch_per_device: 4\nactivation_bytes_per_sample: 2 MB\n"
    )
    r = CliRunner().invoke(app, ["speedup", "--workload", str(f), "-p", "dgx-a100", "-k", "8", "-f", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)[0]["memory_activations_bytes"] == pytest.approx(4 * 2e6)
    for bad, msg in (("-5MB", "must not be negative"), ("lots", "is not a size")):
        r = CliRunner().invoke(app, ["speedup", "-m", "resnet50", "-p", "dgx-a100", "-k", "8", "--activations", bad])
        assert r.exit_code == 2 and f"--activations: '{bad}' {msg}" in r.output
    f.write_text("name: w\nparams: 1e8\nflops_per_sample: 1e12\nactivation_bytes_per_sample: -1\n")
    r = CliRunner().invoke(app, ["speedup", "--workload", str(f), "-p", "dgx-a100", "-k", "8"])
    assert r.exit_code == 2 and "activation_bytes_per_sample: -1 must not be negative" in r.output


def test_activations_by_compute_dtype(tmp_path):
    """A figure per dtype: bf16 and fp16 take the bf16 entry, fp32 and tf32 the fp32 one; one entry alone scales."""
    from simcli.base.types import activations_for
    from simcli.io.workloads import get_model

    both = {"fp32": 86e6, "bf16": 44e6}
    assert [activations_for(both, d) for d in ("fp32", "tf32", "bf16", "fp16")] == [86e6, 86e6, 44e6, 44e6]
    assert activations_for({"fp32": 86e6}, "bf16") == 43e6 and activations_for({"bf16": 44e6}, "fp32") == 88e6
    assert activations_for(5.0, "bf16") == 5.0 and activations_for(None, "fp32") is None
    # the built-in ResNet-50 carries this project's measurement (measurements/activation_bytes.py)
    r50 = get_model("resnet50").workload()
    mem = run("ddp", K8, workload=r50, dtype="fp32").memory.activations[0]
    assert mem == pytest.approx(r50.batch_per_device * 85.9e6)
    assert run("ddp", K8, workload=r50, dtype="bf16").memory.activations[0] == pytest.approx(128 * 43.8e6)
    f = tmp_path / "w.yaml"
    f.write_text("name: w\nparams: 1e8\nflops_per_sample: 1e12\nactivation_bytes_per_sample: {fp8: 1 MB}\n")
    r = CliRunner().invoke(app, ["speedup", "--workload", str(f), "-p", "dgx-a100", "-k", "8"])
    assert r.exit_code == 2 and "activation_bytes_per_sample: give a size, or sizes for fp32 and/or bf16" in r.output


# --------------------------------------------------------------------------- the FSDP timeline


def event_loop(f: float, b: float, A: float, Ab: float | None, R: float, L: int) -> tuple[float, float]:
    """Forward and backward ends by a plain event simulation: one compute stream, one FIFO communication stream."""
    # forward: all-gather i+1 issued when compute i starts
    comm_free, ag_end, prev = A, [A] + [0.0] * (L - 1), 0.0
    for i in range(L):
        s = max(prev, ag_end[i])
        if i + 1 < L:
            ag_end[i + 1] = max(s, comm_free) + A
            comm_free = ag_end[i + 1]
        prev = s + f
    F = prev
    # backward as events: ("issue", op), ("comm_end", op), ("comp_end", j)
    ev: list = []
    seq = iter(range(10**9))
    fifo: deque = deque()
    state = {"busy": False, "running": False, "done": -1, "last": 0.0}
    gathered = [Ab is None] * L

    def push(t, kind, item):
        heapq.heappush(ev, (t, next(seq), kind, item))

    def try_comm(t):
        if not state["busy"] and fifo:
            op = fifo.popleft()
            state["busy"] = True
            push(t + (Ab if op[0] == "ag" else R), "comm_end", op)

    def try_comp(t):
        j = state["done"] + 1
        if j < L and not state["running"] and gathered[j]:
            state["running"] = True
            push(t + b, "comp_end", j)
            if Ab is not None and j + 1 < L:
                push(t, "issue", ("ag", j + 1))

    if Ab is not None:
        push(0.0, "issue", ("ag", 0))
    else:
        try_comp(0.0)
    while ev:
        t, _, kind, item = heapq.heappop(ev)
        if kind == "issue":
            fifo.append(item)
            try_comm(t)
        elif kind == "comm_end":
            state["busy"] = False
            if item[0] == "ag":
                gathered[item[1]] = True
                try_comp(t)
            else:
                state["last"] = max(state["last"], t)
            try_comm(t)
        else:
            state["done"], state["running"] = item, False
            push(t, "issue", ("rs", item))
            try_comp(t)
    return F, state["last"]


@settings(max_examples=200, deadline=None)
@given(
    f=st.floats(0, 1),
    b=st.floats(0, 2),
    A=st.floats(0, 1),
    R=st.floats(0, 1),
    L=st.integers(1, 40),
    reshard=st.booleans(),
)
def test_fsdp_recursion_equals_event_loop(f, b, A, R, L, reshard):
    F, B = sharding.fsdp_times(
        f=np.array([f]),
        b=np.array([b]),
        ag_fwd=np.array([A]),
        ag_bwd=np.array([A]) if reshard else None,
        rs=np.array([R]),
        units=L,
    )
    F0, B0 = event_loop(f, b, A, A if reshard else None, R, L)
    assert F[0] == pytest.approx(F0, rel=1e-9, abs=1e-12)
    assert B[0] == pytest.approx(B0, rel=1e-9, abs=1e-12)


def test_fsdp_recursion_vectorised_over_k():
    f, b = np.array([0.01, 0.02, 0.03]), np.array([0.02, 0.04, 0.06])
    A, R = np.array([0.03, 0.001, 0.02]), np.array([0.0, 0.05, 0.02])
    F, B = sharding.fsdp_times(f=f, b=b, ag_fwd=A, ag_bwd=A, rs=R, units=7)
    for i in range(3):
        assert (F[i], B[i]) == pytest.approx(event_loop(f[i], b[i], A[i], A[i], R[i], 7))


PROFILES = ["dgx-h100", "dgx-a100", "l40s-pcie", "dgx-v100"]
#: the profile and model shapes both properties below draw from
SHAPES = dict(
    prof=st.sampled_from(PROFILES),
    params=st.floats(1e7, 2e10),
    layers=st.integers(1, 96),
    batch=st.integers(1, 64),
)


@settings(max_examples=40, deadline=None)
@given(
    strategy=st.sampled_from(strategies.STRATEGIES),
    **SHAPES,
    accum=st.integers(1, 4),
    pdt=st.sampled_from(["bf16", "fp32"]),
    overlap=st.sampled_from(["buckets", "none"]),
)
def test_every_strategy_equals_ddp_at_one_device(prof, strategy, params, layers, batch, accum, pdt, overlap):
    w = small(layers=layers, params=params)
    kw = dict(batch_per_device=batch, accum=accum, param_dtype=pdt, overlap=overlap)
    a, d = run(strategy, [1], prof, workload=w, **kw), run("ddp", [1], prof, workload=w, **kw)
    for name in ("t_step_s", "t_compute_s", "t_comm_s", "t_comm_exposed_s", "speedup", "efficiency"):
        assert getattr(a, name)[0] == pytest.approx(getattr(d, name)[0], rel=1e-12, abs=1e-15), name
    assert a.speedup[0] == pytest.approx(1.0)


@settings(max_examples=40, deadline=None)
@given(
    strategy=st.sampled_from(strategies.SHARDED),
    **SHAPES,
    k=st.sampled_from([2, 4, 8, 16, 64, 256]),
    reshard=st.booleans(),
)
def test_step_at_least_compute_and_first_all_gather(prof, strategy, params, layers, batch, k, reshard):
    w = small(layers=layers, params=params)
    r = run(strategy, [k], prof, workload=w, batch_per_device=batch, reshard_after_forward=reshard)
    assert r.t_step_s[0] >= r.t_compute_s[0]
    assert 0.0 <= r.t_comm_exposed_s[0] <= r.t_comm_s[0] * (1 + 1e-12)
    if strategy in ("fsdp", "hsdp"):
        p = resolve_profile(prof)
        d = min(k, p.network[0].size) if strategy == "hsdp" else k
        first = collectives.collective(
            p, None, np.array([d]), nbytes=np.float64(params / layers * 2.0), collective="all_gather", protocol=None
        ).time[0]
        assert r.t_step_s[0] >= r.t_compute_s[0] + first * (1 - 1e-12)


def test_hsdp_with_the_whole_k_as_group_is_fsdp():
    f = run("fsdp", np.array([16, 64]))
    h = run("hsdp", np.array([16, 64]), shard_group=64)
    assert np.allclose(f.t_step_s[1], h.t_step_s[1]) and np.allclose(f.memory.total[1], h.memory.total[1])


def test_zero1_and_zero2_differ_only_in_memory():
    a, b = run("zero1", np.array([8, 64])), run("zero2", np.array([8, 64]))
    assert np.allclose(a.t_step_s, b.t_step_s)
    assert np.all(a.memory.total > b.memory.total)


def test_replica_profile_counts_domains_in_groups():
    prof = resolve_profile("dgx-h100")
    sub = sharding.replica_profile(prof, 8)
    assert [t.size for t in sub.network] == [1, None]
    assert [t.kind for t in sub.network] == ["nvswitch", "infiniband"]  # the profile's own kinds, kept
    three = prof.replace(
        network=(
            prof.network[0],
            dataclasses.replace(prof.network[1], size=64),
            dataclasses.replace(prof.network[1], name="spine"),
        )
    )
    assert [t.size for t in sharding.replica_profile(three, 16).network] == [1, 4, None]
    with pytest.raises(InputError, match="--shard-group"):
        sharding.replica_profile(three, 24)


def test_bad_inputs():
    with pytest.raises(InputError, match="--strategy"):
        run("zero3", K8)
    with pytest.raises(InputError, match="--units"):
        run("fsdp", K8, units=0)
    with pytest.raises(InputError, match="--shard-group"):
        run("hsdp", np.array([12]))
    with pytest.raises(InputError, match="--param-dtype"):
        run("fsdp", K8, param_dtype="int4")


def test_units_override():
    a = run("fsdp", K8, units=1)
    b = run("fsdp", K8)
    assert a.t_comm_exposed_s[0] > b.t_comm_exposed_s[0]  # one unit: the whole all-gather is exposed


# --------------------------------------------------------------------------- CLI


def test_speedup_says_ddp_does_not_fit_and_fsdp_does(runner):
    r = runner.invoke(app, ["speedup", "-m", "llama2-70b", "-p", "dgx-h100", "-k", "64", "-f", "json"])
    assert r.exit_code == 0, r.output
    lines = [x for x in r.stderr.strip().splitlines() if "NCCL" not in x]  # NCCL's-choice notes aside
    assert len(lines) == 1 and "ddp" in lines[0] and "does not fit" in lines[0] and "--strategy fsdp fits" in lines[0]
    rec = json.loads(r.stdout)[0]
    assert rec["strategy"] == "ddp" and rec["memory_bytes"] > 80e9
    r = runner.invoke(
        app, ["speedup", "-m", "llama2-70b", "-p", "dgx-h100", "-k", "64", "--strategy", "fsdp", "-f", "json"]
    )
    assert r.exit_code == 0 and all("NCCL" in x for x in r.stderr.splitlines())  # nothing but NCCL's-choice notes
    rec = json.loads(r.stdout)[0]
    assert rec["strategy"] == "fsdp" and rec["memory_bytes"] <= 80e9
    parts = [f"memory_{p}_bytes" for p in ("params", "master", "grads", "optimizer", "buffers", "activations")]
    assert rec["memory_bytes"] == pytest.approx(sum(rec[p] for p in parts))


def test_speedup_one_result_per_strategy(runner):
    r = runner.invoke(
        app, ["speedup", "-m", "gpt2", "-p", "dgx-h100", "-k", "8,16", "--strategy", "ddp,fsdp,hsdp", "-f", "json"]
    )
    assert r.exit_code == 0, r.output
    recs = json.loads(r.stdout)
    assert [x["strategy"] for x in recs] == ["ddp", "ddp", "fsdp", "fsdp", "hsdp", "hsdp"]
    # nothing on stderr but, once, the note that hsdp's replica all-reduce runs faster with NCCL_ALGO=Ring (issue 21)
    assert [x for x in r.stderr.splitlines() if "NCCL's own choice" not in x] == []
    assert len(r.stderr.splitlines()) <= 1


def test_speedup_strategy_options(runner):
    r = runner.invoke(
        app,
        (
            "speedup -m gpt2 -p dgx-h100 -k 16 --strategy hsdp --shard-group 4 --units 6 --param-dtype fp32 "
            "--no-reshard-after-forward"
        ).split(),
    )
    assert r.exit_code == 0, r.output
    assert "hsdp" in r.stdout and "mem GB" in r.stdout
    r = runner.invoke(app, ["speedup", "--strategy", "zero3"])
    assert r.exit_code == 2 and "--strategy" in r.stderr and len(r.stderr.strip().splitlines()) == 1


# --------------------------------------------------------------------------- explain


def test_explain_sharded_terms_add_up():
    from simcli.decisions.explain import explain

    prof = resolve_profile("dgx-h100")
    for strategy in ("fsdp", "hsdp"):
        sc = Scenario(profile=prof, workload=small(layers=4), strategy=strategy)
        d = explain(sc, 16)
        assert d["strategy"] == strategy and d["units"] == 4
        tl = d["units_timeline"]
        assert len(tl) == 8  # 4 units, forward and backward: all shown
        tail = tl[-1]["reduce_end_s"] - tl[-1]["end_s"]
        assert sum(r["wait_s"] for r in tl) + tail == pytest.approx(d["t_comm_exposed_s"])
        assert d["t_step_s"] == pytest.approx(d["t_compute_s"] + d["t_comm_exposed_s"] + d["t_update_s"])
        per_collective = sum(m["count"] * m["time_s"] for m in d["messages"])
        assert per_collective == pytest.approx(d["t_comm_s"])
        assert d["memory"]["total_bytes"] == pytest.approx(sum(d["memory"][f"{p}_bytes"] for p in memory.PARTS))
    d = explain(Scenario(profile=prof, workload=small(), strategy="fsdp"), 16)
    assert len(d["units_timeline"]) == 8  # 12 units: the first and last two of each phase


def test_unit_timeline_ends_where_fsdp_times_ends():
    for reshard in (True, False):
        tl = sharding.unit_timeline(f=0.3, b=0.5, ag_fwd=0.4, ag_bwd=0.4 if reshard else None, rs=0.7, units=6)
        F, B = sharding.fsdp_times(
            f=np.array([0.3]),
            b=np.array([0.5]),
            ag_fwd=np.array([0.4]),
            ag_bwd=np.array([0.4]) if reshard else None,
            rs=np.array([0.7]),
            units=6,
        )
        fwd = [r for r in tl if r["phase"] == "forward"]
        bwd = [r for r in tl if r["phase"] == "backward"]
        assert fwd[-1]["end_s"] == pytest.approx(F[0]) and bwd[-1]["reduce_end_s"] == pytest.approx(B[0])


def test_explain_and_plan_take_a_strategy(runner):
    r = runner.invoke(app, ["explain", "-m", "gpt2", "-p", "dgx-h100", "-k", "16", "--strategy", "fsdp"])
    assert r.exit_code == 0, r.output
    assert "all-gather" in r.stdout and "reduce-scatter" in r.stdout and "stall" in r.stdout
    r = runner.invoke(
        app, ["speedup", "-m", "gpt2", "-p", "dgx-h100", "-k", "8,16", "--strategy", "zero2", "--explain", "-f", "json"]
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["explain"][0]["memory"]["fits"] is True
    r = runner.invoke(
        app,
        "plan max-devices -m gpt2 -p dgx-h100 -k 8..256:x2 --min-efficiency 0.9 --strategy fsdp".split(),
    )
    assert r.exit_code == 0, r.output


def test_compare_and_plan_check_a_sharded_strategy_s_memory(runner):
    r = runner.invoke(
        app, ["compare", "-m", "llama2-7b", "-p", "dgx-h100", "-k", "8,64", "--strategy", "ddp,fsdp", "-f", "json"]
    )
    assert r.exit_code == 0, r.output
    recs = json.loads(r.stdout)
    fits = {(x["strategy"], x["devices"]): x["fits_memory"] for x in recs}
    assert fits == {("ddp", 8): False, ("ddp", 64): False, ("fsdp", 8): True, ("fsdp", 64): True}
    warnings = [line for line in r.stderr.splitlines() if "DOES NOT FIT" in line]
    assert len(warnings) == 1 and warnings[0].startswith("simcli: warning: ddp:")  # fsdp's state fits
    cmd = "plan max-devices -m llama2-7b -p dgx-h100 -k 8..64:x2 --min-efficiency 0.9 --strategy fsdp -f json"
    r = runner.invoke(app, cmd.split())
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["memory"]["strategy"] == "fsdp" and out["memory"]["fits"] is True and r.stderr == ""
    assert out["memory"]["devices"] == [out["answer"]]


def test_workload_file_gives_layers_and_hidden(tmp_path):
    from simcli.io.workloads import get_model, load_workload

    f = tmp_path / "w.yaml"
    f.write_text("name: mine\nkind: transformer\nparams: 1.3e9\nseq_len: 2048\nlayers: 24\nhidden: 2048\n")
    w = load_workload(str(f))
    assert (w.layers, w.hidden) == (24, 2048)
    assert run("fsdp", K8, workload=w).sharded.messages[0][1] == 2 * 24  # two all-gathers per unit
    assert run("fsdp", K8, workload=w, units=6).sharded.messages[0][1] == 2 * 6  # --units overrides
    f.write_text("name: mine\nkind: transformer\nparams: 1.3e9\nseq_len: 2048\nlayers: 0\n")
    with pytest.raises(InputError, match="layers"):
        load_workload(str(f))
    assert (get_model("llama2-70b").layers, get_model("llama2-70b").hidden) == (80, 8192)
    assert get_model("resnet50").layers is None


def test_every_strategy_row_is_complete_and_drives_memory_and_the_step():
    specs = strategies.STRATEGY_SPECS
    assert strategies.STRATEGIES == tuple(s.name for s in specs) and len(set(strategies.STRATEGIES)) == len(specs)
    for s in specs:
        assert s.name and s.label and s.buffers and s.source, s
        assert s.timeline in ("buckets", "zero", "units") and s.group in ("none", "world", "shard_group"), s
        assert len(s.shards) == 4 and (s.group == "none") == (not any(s.shards)), s
        assert not s.replicas or s.group == "shard_group", s
    # memory grows less sharded to more sharded, as the rows are ordered
    kw = dict(
        params=7e9,
        param_bytes=2.0,
        grad_bytes=4.0,
        optimizer="adam",
        activations=0.0,
        units=32,
        reshard_after_forward=True,
    )
    need = [memory.per_device(s.name, np.array([64]), group=8, node_size=8, **kw).total[0] for s in specs]
    assert need == sorted(need, reverse=True)
    assert strategies.shard_divisor("hsdp", np.array([64]), None, node_size=8).tolist() == [8]
    assert strategies.shard_divisor("zero2", np.array([64]), None, node_size=8).tolist() == [64]
    assert strategies.shard_divisor("ddp", np.array([64]), None, node_size=8).tolist() == [1]
