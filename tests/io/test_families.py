"""The MFU of each workload family per GPU generation (simcli/io/data/families.yaml, issue 39): resnet50's
predicted throughput on every built-in GPU profile against the published per-GPU figure of its generation, and
the one-line warning where a generation has no figure of the model's family."""

import json
import re

import pytest

from simcli.cli import app
from simcli.comm.nccl import generation
from simcli.io.profiles import list_profiles, load_profile
from simcli.io.workloads import families

#: ResNet-50 v1.5 training throughput per GPU as its source published it (images/s, mixed precision), one per GPU
#: generation that has one: test data, copied from the publications, not from simcli. families.yaml's cnn MFUs
#: were derived from the same runs, so this holds the chain from them to `speedup`'s samples/s (FLOPs per image,
#: peaks, the slowest-of-k and update terms) to what was measured.
PUBLISHED_RESNET50 = {
    "volta": (
        8322 / 8,
        "8,322",
        "NVIDIA DeepLearningExamples PyTorch/Classification/ConvNets/README.md, 'Training performance: NVIDIA DGX-1 "
        "16G (8x V100 16GB)', 21.03 container: resnet50 8,322 img/s mixed precision on 8 GPUs",
    ),
    "ada": (
        1146,
        "1,146",
        "Lambda GPU benchmarks, lambdal/deeplearning-benchmark pytorch/pytorch-train-throughput-fp16.csv: "
        "'RTX 6000 Ada', 1 GPU, resnet50 1,146 img/s (PyTorch, AMP); AD102, the L40S's die",
    ),
    "ampere": (
        16621 / 8,
        "16,621",
        "NVIDIA DeepLearningExamples PyTorch/Classification/ConvNets/README.md, 'Training performance: NVIDIA DGX "
        "A100 (8x A100 80GB)', 21.03 container: resnet50 16,621 img/s mixed precision on 8 GPUs",
    ),
    "hopper": (
        56050 / 8,
        "56,050",
        "MLPerf Training v3.0 closed, NVIDIA, mlcommons/training_results_v3.0 NVIDIA/results/dgxh100_ngc23.04_mxnet/"
        "resnet/result_0.txt: tracked_stats throughput 55,916-56,171 img/s per epoch (epochs 27-35) on 8 H100",
    ),
}
#: how far the prediction may be from the published figure
TOLERANCE = 0.25
#: the longest line the warning may print (issue 39)
WARNING_CHARS = 160
FALLBACK = re.compile(r"^simcli: warning: .* no (\w+) MFU for (.+?) \((\w+)\) in families\.yaml; uses (.+)$")


def gpu_profiles() -> list[str]:
    return [e.name for e in list_profiles() if e.origin == "built-in" and generation(load_profile(e.path).device.name)]


def run(runner, *args):
    return runner.invoke(app, [str(a) for a in args])


def fallbacks(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if FALLBACK.match(line)]


def test_every_cnn_figure_has_its_published_throughput():
    """A generation that gains a cnn MFU gains its published figure here, and the figure is the one the MFU's
    source cites."""
    cnn = families()["cnn"]
    assert set(cnn) == set(PUBLISHED_RESNET50)
    for gen, (_, printed, _) in PUBLISHED_RESNET50.items():
        assert printed in cnn[gen]["source"], gen


def test_the_gpu_profiles_span_the_generations():
    gens = {generation(load_profile(e.path).device.name) for e in list_profiles() if e.name in gpu_profiles()}
    assert {"volta", "ampere", "hopper", "ada", "blackwell", "cdna3"} <= gens


@pytest.mark.parametrize("name", gpu_profiles())
def test_resnet50_per_gpu_throughput_against_the_published_figure(runner, name):
    """`speedup -m resnet50 -k 1` on each built-in GPU profile: within 25% of the published per-GPU throughput of
    its generation, with the MFU's source in the header; a generation without a published figure warns instead."""
    prof = load_profile(next(e.path for e in list_profiles() if e.name == name))
    gen = generation(prof.device.name)
    r = run(runner, "speedup", "-m", "resnet50", "-k", "1", "-p", name, "-f", "json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)[0]["samples_per_s"]
    table = run(runner, "speedup", "-m", "resnet50", "-k", "1", "-p", name, "--wide")
    assert table.exit_code == 0, table.output
    header = " ".join(table.stdout.split())
    if gen in PUBLISHED_RESNET50:
        published, _, source = PUBLISHED_RESNET50[gen]
        assert abs(got / published - 1) <= TOLERANCE, (name, got, published, source)
        assert fallbacks(r.stderr) == []
        if (prof.device.mfu_family or "transformer") == "cnn":
            assert "mfu: device.mfu" in header  # the profile's own figure, with its sources in the profile
        else:
            at_k = families()["cnn"][gen]["at_k"]  # a run of one device has no slowest-of-k wait to name
            where = f", measured at k = {at_k})" if at_k > 1 else ")"
            assert f"mfu: cnn on {gen} GPUs (simcli/io/data/families.yaml){where}" in header
    else:
        assert gen not in families()["cnn"]
        (line,) = fallbacks(r.stderr)
        assert len(line) <= WARNING_CHARS
        assert f"resnet50 on {name}: no cnn MFU for {gen} GPUs" in line
        assert f"uses device.mfu = {prof.device.mfu:g}, a transformer figure" in line
        assert "mfu: device.mfu" in header


USER = """\
name: {name}
description: test
sources: [test]
device: {{name: {device}, peak_flops: {{fp32: 50 TFLOP/s, bf16: 400 TFLOP/s}}, mfu: 0.35}}
network:
  - {{name: nvlink, size: 8, bandwidth: 300 GB/s, latency: 3 us}}
  - {{name: ib, bandwidth: 200 Gb/s, latency: 10 us}}
"""


def user_profile(tmp_path, name="mine", device="Accel X9"):
    f = tmp_path / "mine.yaml"
    f.write_text(USER.format(name=name, device=device))
    return str(f)


def test_a_user_profile_of_unknown_generation_warns_once(runner, tmp_path):
    r = run(runner, "speedup", "-m", "resnet50", "-k", "1..64:x2", "-p", user_profile(tmp_path), "-f", "csv")
    assert r.exit_code == 0, r.output
    (line,) = fallbacks(r.stderr)
    assert line == (
        "simcli: warning: resnet50 on mine: no cnn MFU for an unknown GPU generation (bf16) in families.yaml; "
        "uses device.mfu = 0.35, a transformer figure"
    )
    assert len(line) <= WARNING_CHARS and r.stdout.count("\n") == 8  # the CSV is whole: header and 7 rows


def test_the_warning_stays_one_short_line_with_a_long_profile_name(runner, tmp_path):
    path = user_profile(tmp_path, name="a-very-long-profile-name-" * 6)
    r = run(runner, "speedup", "-m", "inception_v3", "-k", "8", "-p", path, "-f", "csv")
    assert r.exit_code == 0, r.output
    (line,) = fallbacks(r.stderr)
    assert len(line) <= WARNING_CHARS and line.startswith("simcli: warning: inception_v3 on a-very-long")
    assert line.endswith("uses device.mfu = 0.35, a transformer figure")


@pytest.mark.parametrize(
    "args",
    [
        ("-m", "resnet50", "-p", "dgx-a100"),  # ampere has a cnn figure
        ("-m", "bert-large", "-p", "dgx-b200"),  # the profile's own mfu is a transformer figure
        ("-m", "bert-large", "-p", "dgx-v100"),  # a cnn profile, and volta has a transformer figure
        ("-m", "resnet50", "-p", "dgx-b200", "--mfu", "0.2"),  # the user's own
        ("-m", "resnet50", "-p", "dgx-b200", "--compute-time", "20 ms"),  # no MFU at all
        ("--params", "1e8", "--flops-per-sample", "1e12", "-p", "dgx-b200"),  # a custom workload has no family
    ],
)
def test_no_warning_where_the_mfu_is_the_family_s_own(runner, args):
    r = run(runner, "speedup", "-k", "8", "-f", "csv", *args)
    assert r.exit_code == 0, r.output
    assert fallbacks(r.stderr) == []


def test_a_dtype_without_a_figure_warns_and_names_the_stand_in(runner):
    """ampere's cnn figures are for bf16, fp16 and tf32; fp32 takes the profile's transformer mfu, and says so."""
    r = run(runner, "speedup", "-m", "resnet50", "-k", "1", "-p", "dgx-a100", "--dtype", "fp32", "-f", "csv")
    assert r.exit_code == 0, r.output
    (line,) = fallbacks(r.stderr)
    assert "no cnn MFU for ampere GPUs (fp32)" in line and "uses device.mfu = 0.45, a transformer figure" in line


def test_one_warning_per_profile_that_lacks_a_figure(runner):
    r = run(runner, "speedup", "-m", "resnet50", "-k", "8", "-p", "dgx-h100,l40s-pcie,mi300x", "-f", "csv")
    assert r.exit_code == 0, r.output
    got = [FALLBACK.match(line).group(2) for line in fallbacks(r.stderr)]
    assert got == ["cdna3 GPUs"]


@pytest.mark.parametrize(
    "cmd",
    [
        ("explain", "-k", "8"),
        ("plan", "max-devices", "-e", "0.5", "-k", "1..16"),
        ("plot", "speedup", "-k", "1..8", "-o", "{tmp}/s.png"),
    ],
)
def test_the_other_commands_that_price_compute_warn_too(runner, tmp_path, cmd):
    args = [a.format(tmp=tmp_path) for a in cmd]
    if args[0] == "plot":
        pytest.importorskip("matplotlib")
    r = run(runner, *args, "-m", "resnet50", "-p", "dgx-b200")
    assert r.exit_code == 0, r.output
    (line,) = fallbacks(r.stderr)
    assert "resnet50 on dgx-b200: no cnn MFU for blackwell GPUs (bf16)" in line


def test_the_scenario_says_what_stands_in():
    """Scenario.mfu_fallback: the engine's record of the stand-in, from which the CLI writes its line."""
    from simcli.io.profiles import resolve_profile
    from simcli.io.workloads import get_model
    from simcli.step.engine import Scenario

    wl = get_model("resnet50").workload()
    b200 = Scenario(profile=resolve_profile("dgx-b200"), workload=wl)
    assert b200.mfu_fallback == {
        "family": "cnn",
        "generation": "blackwell",
        "dtype": "bf16",
        "mfu": pytest.approx(0.4),
        "source": "device.mfu",
        "measured_on": "transformer",
    }
    assert b200.achieved_mfu == pytest.approx(0.4)
    assert Scenario(profile=resolve_profile("dgx-h100"), workload=wl).mfu_fallback is None
    assert b200.replace(mfu=0.2).mfu_fallback is None


def test_an_error_stays_the_only_line(runner, tmp_path):
    """The warning is said once the command has answered: a command that fails says its error alone."""
    path = user_profile(tmp_path)
    r = run(runner, "plan", "max-devices", "-e", "0.9999", "-k", "2..64", "-m", "resnet50", "-p", path)
    assert r.exit_code == 1, r.output
    assert r.stderr.startswith("simcli: error: ") and r.stderr.count("\n") == 1, r.stderr
    ok = run(runner, "plan", "max-devices", "-e", "0.5", "-k", "1..16", "-m", "resnet50", "-p", path)
    assert ok.exit_code == 0 and len(fallbacks(ok.stderr)) == 1, ok.output
