"""The bench models (simcli.bench.models): counts against simcli's presets and torch's FLOP counter; the dtype
and memory guards of `bench step`; mfu_by_dtype and the backward fraction fitted from synthetic timings."""

from __future__ import annotations

import csv
import datetime

import numpy as np
import pytest

from simcli.bench import models as bm
from simcli.bench.models import ModelSpec
from simcli.cli import app
from simcli.io.workloads import get_model, workload_from_dict

GPT2 = ModelSpec(kind="gpt", layers=12, hidden=768, heads=12, seq_len=1024, vocab=50257)
RESNET50 = ModelSpec(kind="resnet", width=64, blocks=(3, 4, 6, 3), image_size=224, classes=1000)
_NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


# --------------------------------------------------------------------------- counts, no torch


def test_gpt2_shape_is_the_gpt2_preset():
    pre = get_model("gpt2")
    assert bm.params(GPT2) == pre.params == 124439808  # tied embeddings, learned positions, biases, LayerNorms
    assert bm.flops_per_sample(GPT2) == pre.flops_per_sample() == 6 * pre.params * 1024
    # the exact count adds attention's scores and weighted sum, 12·L·H·S² (15% of GPT-2's at seq 1024)
    assert bm.flops_per_sample_exact(GPT2) - bm.flops_per_sample(GPT2) == 12 * 12 * 768 * 1024**2


def test_resnet50_shape_is_the_resnet50_preset():
    pre = get_model("resnet50")
    assert bm.params(RESNET50) == pre.params == 25557032
    assert bm.forward_macs(RESNET50) == pytest.approx(4.089e9, rel=1e-4)  # torchvision: 4.09 GFLOPS (MACs)
    assert bm.flops_per_sample(RESNET50) == pytest.approx(pre.flops_per_sample(), rel=1e-4)


@pytest.mark.parametrize(
    "spec",
    [
        ModelSpec(kind="gpt"),
        ModelSpec(kind="gpt", layers=3, hidden=96, heads=3, seq_len=32, vocab=500),
        ModelSpec(kind="resnet"),
        ModelSpec(kind="resnet", width=8, blocks=(2, 1), image_size=64, classes=7),
        ModelSpec(kind="mlp", width=64, depth=3),
    ],
)
def test_count_is_the_preset_formula_for_the_same_shape(spec):
    """What a workload file of the same shape would say: 6·N·seq (transformer), 3 x 2 x MACs (cnn), 6·N (dense)."""
    if spec.kind == "gpt":
        d = {"kind": "transformer", "params": bm.params(spec), "seq_len": spec.seq_len}
    elif spec.kind == "resnet":
        d = {"kind": "cnn", "params": bm.params(spec), "forward_macs": bm.forward_macs(spec)}
    else:
        d = {"kind": "custom", "params": bm.params(spec), "flops_per_sample": 6 * bm.params(spec)}
    assert bm.flops_per_sample(spec) == pytest.approx(workload_from_dict(d, "test", "m").flops_per_sample(), rel=1e-12)


def test_shape_checks_and_guards():
    assert bm.autocast_settings("bf16", "cpu") == {"autocast": True, "autocast_dtype": "bfloat16", "allow_tf32": False}
    assert bm.autocast_settings("fp32", "cuda")["allow_tf32"] is False
    assert bm.autocast_settings("tf32", "cuda") == {"autocast": False, "autocast_dtype": None, "allow_tf32": True}
    assert bm.autocast_settings("fp16", "cuda")["autocast_dtype"] == "float16"
    for dt in ("tf32", "fp16"):
        with pytest.raises(ValueError, match="needs a CUDA device"):
            bm.autocast_settings(dt, "cpu")
    assert bm.grad_rtol("fp32") == 1e-4 < bm.grad_rtol("tf32") < bm.grad_rtol("bf16")
    assert bm.resnet_final_size(ModelSpec(kind="resnet")) == 4  # 32 -> 32, 16, 8, 4
    assert ModelSpec(kind="resnet").width == 16 and ModelSpec().width == 1024
    assert ModelSpec.from_dict(GPT2.to_dict()) == GPT2


# --------------------------------------------------------------------------- against torch


def _counted(spec: ModelSpec, batch: int = 2) -> float:
    torch = pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    model = bm.build(spec, 0, torch.device("cpu"))
    assert sum(p.numel() for p in model.parameters()) == bm.params(spec)
    x, y = bm.make_batches(spec, batch, 1, gen=torch.Generator().manual_seed(0), device=torch.device("cpu"))[0]
    # the math kernel: FlopCounterMode counts its bmm (the fused CPU kernel is not counted)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
        bm.loss(spec, model(x), y).backward()
    return fc.get_total_flops() / batch


@pytest.mark.torch
@pytest.mark.parametrize(
    "spec", [ModelSpec(kind="gpt"), ModelSpec(kind="resnet"), ModelSpec(kind="mlp", width=64, depth=3)]
)
def test_exact_count_matches_torch_flop_counter(spec):
    counted = _counted(spec)
    exact = bm.flops_per_sample_exact(spec)
    assert exact == pytest.approx(counted, rel=bm.FLOP_COUNTER_RTOL)
    if spec.kind == "mlp":
        assert exact == counted  # the matmuls, exactly
    if spec.kind == "gpt":  # the preset count alone misses attention: 6·N·S is below what torch counts
        assert bm.flops_per_sample(spec) < counted < exact


@pytest.mark.torch
def test_big_shapes_build_with_the_counted_parameters():
    torch = pytest.importorskip("torch")
    for spec in (GPT2, RESNET50):
        m = bm.build(spec, 0, torch.device("meta"))
        assert sum(p.numel() for p in m.parameters()) == bm.params(spec)


# --------------------------------------------------------------------------- bench step's guards (exit 2)


@pytest.mark.torch
@pytest.mark.parametrize(
    "args, needle",
    [
        (["--dtype", "fp16"], "--dtype: fp16 needs a CUDA device"),
        (["--dtype", "tf32"], "--dtype: tf32 needs a CUDA device"),
        (
            ["--model", "gpt", "--hidden", "16384", "--layers", "96", "--vocab", "50257"],
            "--model gpt: a step needs about",
        ),
        (["--model", "gpt", "--hidden", "100", "--heads", "3"], "--heads: 3 does not divide --hidden 100"),
        (["--model", "resnet", "--blocks", "3,x"], "--blocks:"),
        (
            ["--model", "resnet", "--image-size", "8", "--blocks", "1,1,1,1,1", "--batch-per-device", "1"],
            "--image-size",
        ),
        (["--model", "gpt", "--params", "1e6"], "--params: sizes the mlp only"),
    ],
)
def test_bench_step_refuses_with_one_line(runner, args, needle):
    pytest.importorskip("torch")
    r = runner.invoke(app, ["bench", "step", "--world-sizes", "1", *args])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("simcli: error: ") and needle in lines[0], r.stderr
    assert "Traceback" not in r.output


# --------------------------------------------------------------------------- calibrate and validate


def _steps_csv(path, mfu: dict[str, float], peak: float, bwd: float, noise: float = 0.0, seed: int = 0):
    """A bench step file whose T_compute is flops x b / (peak x mfu[dtype]) (times noise), T_b = bwd x T_compute."""
    from simcli.io.measured.results import STEP_COLUMNS

    rng = np.random.default_rng(seed)
    spec = ModelSpec(kind="gpt")
    fps, b = bm.flops_per_sample(spec), 4
    rows = []
    for dt, u in mfu.items():
        for k in (1, 2):
            tc = fps * b / (peak * u) * (1 + noise * rng.standard_normal())
            for mode in ("flat", "ddp"):
                tm = 0.0 if k == 1 else 0.01
                rows.append(
                    {
                        "world_size": k,
                        "backend": "gloo",
                        "mode": mode,
                        "model": bm.describe(spec),
                        "params": bm.params(spec),
                        "batch_per_device": b,
                        "steps": 5,
                        "threads": 1,
                        "t_compute_s": tc,
                        "t_comm_s": tm,
                        "t_step_s": tc + tm + 0.001,
                        "dtype": dt,
                        "flops_per_sample": fps,
                        "flops_per_sample_exact": bm.flops_per_sample_exact(spec),
                        "t_forward_s": (1 - bwd) * tc,
                        "t_backward_s": bwd * tc,
                        "profile": "x",
                    }
                )
    with open(path, "w", newline="") as f:
        f.write("# simcli bench step\n# synthetic: known mfu\n")
        w = csv.DictWriter(f, fieldnames=list(STEP_COLUMNS), extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return path


def _cpu_profile(tmp_path):
    import yaml

    from simcli.io.detect import detect

    p = tmp_path / "host.yaml"
    p.write_text(yaml.safe_dump(detect("host", gpus=[], date="2026-01-01T00:00:00Z"), sort_keys=False))
    return p


def test_calibrate_recovers_a_known_mfu_per_dtype(tmp_path):
    from simcli.fits.calibration import calibrate_profile
    from simcli.fits.fit_comm import CalibrationOptions
    from simcli.io.measured.table import read_measurements
    from simcli.io.profiles import load_profile

    base = load_profile(_cpu_profile(tmp_path))
    peak = base.device.peak("fp32")
    steps = _steps_csv(tmp_path / "steps.csv", {"fp32": 0.42, "bf16": 0.27}, peak, bwd=2 / 3, noise=0.01)
    rep = calibrate_profile(
        base,
        None,
        read_measurements(steps),
        opts=CalibrationOptions(name="cal", now=_NOW, host="h", holdout=0.25),
    )
    dev = rep["profile"].device
    by = {r["dtype"]: r for r in rep["step"]["by_dtype"]}
    for dt, u in (("fp32", 0.42), ("bf16", 0.27)):
        assert dev.mfu_by_dtype[dt] == pytest.approx(u, rel=0.03)
        assert by[dt]["rows"] == 2  # flat and ddp share one T_compute per world size
        assert 0 < by[dt]["mfu_se"] < 0.03 * u
        assert by[dt]["backward_fraction"] == pytest.approx(2 / 3, abs=1e-9)
    assert dev.mfu == dev.mfu_by_dtype[dev.default_dtype()]
    src = [s for s in rep["profile"].sources if s.startswith("device.mfu_by_dtype.")]
    assert len(src) == 2 and all(str(steps) in s and "CALIBRATED" in s for s in src)
    # the written YAML loads as a profile and keeps the fit with its uncertainty
    out = tmp_path / "cal.yaml"
    out.write_text(rep["yaml"])
    again = load_profile(out)
    assert again.device.mfu_by_dtype["bf16"] == pytest.approx(0.27, rel=0.03)
    assert again.calibration["step"]["by_dtype"]["bf16"]["mfu_standard_error"] > 0


def test_without_a_peak_for_a_dtype_no_mfu_is_written(tmp_path):
    from simcli.fits.calibration import calibrate_profile
    from simcli.fits.fit_comm import CalibrationOptions
    from simcli.io.measured.table import read_measurements
    from simcli.io.profiles import resolve_profile

    base = resolve_profile("cpu-loopback")  # fp32 peak only
    steps = _steps_csv(tmp_path / "steps.csv", {"fp32": 0.5, "bf16": 0.3}, base.device.peak("fp32"), bwd=0.6)
    rep = calibrate_profile(
        base,
        None,
        read_measurements(steps),
        opts=CalibrationOptions(name="cal", now=_NOW, host="h", holdout=0.25),
    )
    assert rep["profile"].device.mfu_by_dtype == {"fp32": pytest.approx(0.5)}
    assert rep["profile"].device.mfu == pytest.approx(0.5)  # fitted from the fp32 rows only, not all rows
    assert any("no peak_flops.bf16" in w for w in rep["warnings"])


def test_calibrate_then_validate_a_second_run(runner, tmp_path):
    import json

    base = _cpu_profile(tmp_path)
    from simcli.io.profiles import load_profile

    peak = load_profile(base).device.peak("fp32")
    first = _steps_csv(tmp_path / "first.csv", {"fp32": 0.4, "bf16": 0.25}, peak, bwd=0.65, noise=0.02, seed=1)
    second = _steps_csv(tmp_path / "second.csv", {"fp32": 0.4, "bf16": 0.25}, peak, bwd=0.65, noise=0.02, seed=2)
    r = runner.invoke(app, ["calibrate", str(first), "--profile", str(base), "-o", str(tmp_path / "cal.yaml")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["validate", str(second), "--profile", str(tmp_path / "cal.yaml"), "-f", "json"])
    assert r.exit_code == 0, r.output
    v = json.loads(r.stdout)
    tc = [x for x in v["rows"] if x["metric"] == "t_compute_s"]
    assert {x["dtype"] for x in tc} == {"fp32", "bf16"} and len(tc) == 4  # one per (dtype, k)
    assert max(x["abs_error"] for x in tc) < 0.1  # the second run's T_compute within its noise of the fit
    # against the uncalibrated profile (mfu 0.5 for both) the bf16 rows are off by 0.25/0.5 - 1 = -50%
    r = runner.invoke(app, ["validate", str(second), "--profile", str(base), "-f", "json"])
    bf = [x for x in json.loads(r.stdout)["rows"] if x["metric"] == "t_compute_s" and x["dtype"] == "bf16"]
    assert all(x["error"] == pytest.approx(-0.5, abs=0.08) for x in bf)


def test_one_row_per_dtype_gets_the_median_s_standard_error_and_where_filters_steps(runner, tmp_path):
    import json

    import yaml

    from simcli.fits.fit_compute import fit_mfu_by_dtype

    # one row: the uncertainty is the standard error of that row's median, 1.2533·σ/√steps, σ = (p90 - p10)/2.563
    f = fit_mfu_by_dtype(
        ["fp32"],
        np.array([1]),
        np.array([4.0]),
        t_compute=np.array([0.1]),
        flops_per_sample=np.array([1e9]),
        peaks={"fp32": 100e9},
        t_p10=np.array([0.09]),
        t_p90=np.array([0.11]),
        steps=np.array([25.0]),
    )
    u = 1e9 * 4 / 0.1 / 100e9
    assert f["fp32"].mfu == pytest.approx(u)
    assert f["fp32"].mfu_se == pytest.approx(u * 1.2533 * (0.02 / 2.563) / 5 / 0.1)
    # --where world_size=1 keeps only those step rows (k = 2 shares two cores and is slower per rank)
    base = _cpu_profile(tmp_path)
    steps = _steps_csv(tmp_path / "s.csv", {"fp32": 0.4}, 75e9, bwd=0.6)
    r = runner.invoke(
        app,
        [
            "calibrate",
            str(steps),
            "--profile",
            str(base),
            "--where",
            "world_size=1",
            "-o",
            str(tmp_path / "c.yaml"),
            "-f",
            "json",
        ],
    )
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["step"]["rows"] == 2 and [d["rows"] for d in rep["step"]["by_dtype"]] == [1]
    cal = yaml.safe_load((tmp_path / "c.yaml").read_text())
    assert cal["device"]["mfu_by_dtype"]["fp32"] == pytest.approx(0.4)


@pytest.mark.torch
def test_cpu_precision_is_bf16_autocast_and_fp32_is_none():
    torch = pytest.importorskip("torch")
    from simcli.bench.step import _Clock, _precision

    cpu = torch.device("cpu")
    a = torch.randn(4, 4)
    with _precision("bf16", cpu)():
        assert (a @ a).dtype == torch.bfloat16
    with _precision("fp32", cpu)():
        assert (a @ a).dtype == torch.float32
    with pytest.raises(ValueError, match="needs a CUDA device"):
        _precision("fp16", cpu)
    clock = _Clock(cpu)
    t0 = clock.mark()
    assert clock.seconds(t0, clock.mark()) >= 0


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.parametrize(
    "spec, dtype",
    [
        (ModelSpec(kind="gpt", layers=1, hidden=32, heads=2, seq_len=16, vocab=64), "bf16"),
        (ModelSpec(kind="resnet", width=4, blocks=(1, 1), image_size=16), "fp32"),
    ],
)
def test_two_ranks_train_the_model_and_pass_the_identity(spec, dtype):
    """A real world of 2 gloo ranks: both modes, the identity (BatchNorm: against the slices' mean), the columns."""
    pytest.importorskip("torch")
    from simcli.bench.launch import run_world

    recs: list[dict] = []
    config = {
        "backend": "gloo",
        "model": spec.to_dict(),
        "dtype": dtype,
        "batch_per_device": 2,
        "steps": 2,
        "warmup": 1,
        "modes": ["flat", "ddp"],
        "progress_unit": "timed iteration",
    }
    run_world(2, "step", config, timeout_s=120, on_record=recs.append, threads=1)  # BenchError if a rank fails
    assert [r["mode"] for r in recs] == ["flat", "ddp"]
    for r in recs:
        assert r["params"] == bm.params(spec) and r["dtype"] == dtype and r["model"] == bm.describe(spec)
        assert r["flops_per_sample"] == bm.flops_per_sample(spec)
        assert r["flops_per_sample_exact"] == bm.flops_per_sample_exact(spec)
        assert r["grad_rank_max_diff"] == 0 and r["param_rank_max_diff"] == 0
        assert 0 <= r["grad_max_abs_err"] <= r["grad_tolerance"]
        assert r["t_forward_s"] > 0 and r["t_backward_s"] > 0 and 0 < r["backward_fraction"] < 1
        assert r["achieved_flops"] == pytest.approx(r["flops_per_sample_exact"] * 2 / r["t_compute_s"])
