"""`simcli compare`: the cartesian product of alternatives, the gain over the first, and the command line."""

from __future__ import annotations

import csv
import functools
import io
import json

import numpy as np
import pytest

from simcli.base.types import InputError, Tier, Workload
from simcli.decisions.compare import alternatives, compare
from simcli.step.engine import Scenario, simulate

from conftest import H100_YAML, make_profile, run, run_json

H100 = H100_YAML.replace("mfu: 0.4", "mfu: 0.45")
#: an A100 cluster of the same shape: 300 GB/s NVLink, 200 Gb/s InfiniBand
A100 = functools.reduce(
    lambda text, pair: text.replace(*pair),
    (
        ("t-h100", "t-a100"),
        ("H100", "A100"),
        ("67 TFLOP", "19.5 TFLOP"),
        ("989", "312"),
        ("450 GB/s", "300 GB/s"),
        ("400 Gb/s", "200 Gb/s"),
    ),
    H100,
)


@pytest.fixture
def profs(tmp_path):
    out = []
    for text, name in ((A100, "t-a100"), (H100, "t-h100")):
        f = tmp_path / f"{name}.yaml"
        f.write_text(text)
        out.append(str(f))
    return out


def base(profile) -> Scenario:
    return Scenario(
        profile=profile,
        workload=Workload(name="w", params=3e8, flops_per_sample=6 * 3e8 * 128, batch_per_device=32, seq_len=128),
    )


def test_product_order_and_labels(two_tier, one_tier):
    alts = alternatives(
        base(two_tier),
        {"profile": [two_tier, one_tier.replace(name="other")], "grad_dtype": ["fp32", "bf16"], "algorithm": ["ring"]},
    )
    assert [a.label for a in alts] == ["test / fp32", "test / bf16", "other / fp32", "other / bf16"]
    assert all(list(a.choices) == ["profile", "grad_dtype"] for a in alts)  # one value: not an alternative
    assert alts[3].scenario.profile.name == "other" and alts[3].scenario.grad_dtype == "bf16"
    with pytest.raises(InputError, match="not a scenario field"):
        alternatives(base(two_tier), {"colour": ["red"]})


def test_gain_is_throughput_over_the_first_at_the_same_k(two_tier):
    k = np.array([1, 8, 16, 64, 256])
    sc = base(two_tier)
    cmp = compare(sc, {"grad_dtype": ["fp32", "bf16"], "bucket_mb": [25.0, 100.0]}, k)
    recs = cmp.records()
    assert len(recs) == 4 * len(k)
    first = simulate(sc.replace(grad_dtype="fp32", bucket_mb=25.0), k)
    for alt in cmp.alternatives:
        res = simulate(alt.scenario, k)
        rows = [r for r in recs if r["alternative"] == alt.index]
        assert [r["devices"] for r in rows] == k.tolist()
        assert [r["gain"] for r in rows] == pytest.approx((res.samples_per_s / first.samples_per_s).tolist())
        assert [r["efficiency"] for r in rows] == pytest.approx(res.efficiency.tolist())
    assert all(r["gain"] == 1.0 for r in recs if r["alternative"] == 0)
    # side by side: k-major, every alternative in order
    assert [(r["devices"], r["alternative"]) for r in cmp.by_devices()[:5]] == [(1, 0), (1, 1), (1, 2), (1, 3), (8, 0)]


def test_fewer_gradient_bytes_never_slow_a_step(two_tier):
    k = np.arange(1, 129)
    cmp = compare(base(two_tier), {"grad_dtype": ["fp32", "bf16", "fp8"], "overlap": ["none"]}, k)
    g = cmp.gains()
    assert np.all(g[1] >= 1 - 1e-12) and np.all(g[2] >= g[1] - 1e-12)
    assert np.any(g[1] > 1.01)  # and they do buy something once the all-reduce matters


def test_a_result_column_named_like_a_varied_field_is_kept(two_tier):
    cmp = compare(base(two_tier), {"algorithm": ["ring", "auto"]}, [8, 64])
    rec = cmp.records()[-1]
    assert rec["algorithm"] == "auto" and rec["algorithm_used"] in (
        "ring",
        "tree",
        "recursive-doubling",
        "rabenseifner",
        "hierarchical",
        "ps",
        "ps-sharded",
    )


def test_cli_compare_json(runner, profs):
    cmd = "compare --model bert-large --devices 8..64:x2 --grad-dtype fp32,bf16 -f json"
    recs = run_json(runner, cmd, "--profile", ",".join(profs))
    assert len(recs) == 4 * 4
    assert {(x["profile"], x["grad_dtype"]) for x in recs} == {
        (p, g) for p in ("t-a100", "t-h100") for g in ("fp32", "bf16")
    }
    for key in ("devices", "speedup", "efficiency", "t_step_s", "gain", "fits_memory"):
        assert key in recs[0]
    # the gain of a faster device over the first profile, read against `speedup` of each
    one = json.loads(
        run(
            runner, "speedup", "--profile", profs[1], "--model", "bert-large", "--devices", "8..64:x2", "-f", "json"
        ).stdout
    )
    h100_fp32 = [x for x in recs if x["profile"] == "t-h100" and x["grad_dtype"] == "fp32"]
    assert [x["t_step_s"] for x in h100_fp32] == pytest.approx([x["t_step_s"] for x in one])


def test_cli_compare_csv_table_and_plot(runner, profs, tmp_path):
    args = [
        "compare",
        "--profile",
        profs[0],
        *"--model bert-base,bert-large -k 8,16 --bucket-mb 25,100 --algorithm ring,auto".split(),
    ]
    r = run(runner, *args, "-f", "csv")
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert len(rows) == 2 * 2 * 2 * 2 and {"model", "bucket_mb", "algorithm", "gain"} <= set(rows[0])
    png = tmp_path / "cmp.png"
    r = run(runner, *args, "--plot", png)
    assert r.exit_code == 0, r.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "gain" in r.stdout and "bert-large" in r.stdout and "auto" in r.stdout


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--grad-dtype", "fp32,fp99"], "--grad-dtype: unknown dtype 'fp99'"),
        (["--algorithm", "ring,,auto"], "--algorithm: empty item"),
        (["--algorithm", "ring,telepathy"], "telepathy"),
        (["--bucket-mb", "25,abc"], "--bucket-mb: 'abc' is not a number"),
        (["--mfu", "0.4,1.5"], "--mfu: '1.5' must be in (0, 1]"),
        (["--accum", "1,0"], "--accum: '0' must be at least 1"),
        (["--overlap", "none,magic"], "--overlap"),
        (["--model", "bert-base,bert-larg"], "did you mean bert-large"),
    ],
)
def test_cli_compare_bad_input_exits_2(runner, profs, args, fragment):
    r = run(runner, "compare", "--profile", profs[0], "-k", "8", *args)
    assert r.exit_code == 2, r.output
    assert fragment in r.stderr and "Traceback" not in r.output


def test_memory_misfit_is_flagged_once(runner, profs):
    r = run(runner, "compare", "--profile", ",".join(profs), "--model", "llama2-13b", "-k", "8", "-f", "json")
    assert r.exit_code == 0
    assert all(x["fits_memory"] is False for x in json.loads(r.stdout))
    assert r.stderr.count("DOES NOT FIT") == 1 and "every alternative" in r.stderr


def test_a_slower_network_gains_less_than_one(two_tier):
    slow = make_profile(Tier("nvlink", 100e9, 5e-6, size=8), Tier("ib", 5e9, 10e-6), name="slow")
    cmp = compare(base(two_tier), {"profile": [two_tier, slow]}, [16])
    assert cmp.gains()[1][0] < 1.0


def test_compare_table_prints_samples_per_s_as_plain_numbers(runner):
    r = run(runner, "compare", "-p", "dgx-a100,dgx-h100", "-m", "resnet50", "-k", "8,512")
    assert r.exit_code == 0, r.output
    lines = [line for line in r.stdout.splitlines() if "│" in line]
    heads = [c.strip() for c in next(line for line in r.stdout.splitlines() if "┃" in line).split("┃")]
    cells = [line.split("│")[heads.index("samples/s")].strip() for line in lines]
    assert len(cells) == 4 and all("e+" not in c and "e-" not in c for c in cells), cells
    # thousands separated, as speedup's table: 512 ResNet-50 devices run hundreds of thousands of samples/s
    assert all(float(c.replace(",", "")) > 1000 for c in cells) and any("," in c for c in cells)
