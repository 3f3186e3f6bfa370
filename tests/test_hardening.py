"""Issue 12 part 2: each class of bad input ends in one InputError line (exit 2) or one environment line
(exit 1), caught in the shared mechanism (ranges/units, inputs.read_text, output.write_atomic, the YAML
loader, the workload builder, the scenario). Each test here failed before its fix."""

from __future__ import annotations

import pytest

from simcli.model import InputError


# --------------------------------------------------------------------------- numbers beyond int64


@pytest.mark.parametrize("text", ["99999999999999999999999", "1..99999999999999999999999",
                                  "1..99999999999999999999999:x2", "9007199254740993"])
def test_device_counts_beyond_the_model_are_input_errors(text):
    from simcli.ranges import parse_devices

    with pytest.raises(InputError, match=r"--devices: .*more than simcli models"):
        parse_devices(text)


@pytest.mark.parametrize("text", ["1e23TiB", "1KiB..1e23TiB:x2", "1e19", "5EiB"])
def test_sizes_beyond_int64_are_input_errors(text):
    from simcli.ranges import parse_sizes

    with pytest.raises(InputError, match=r"--size: .*more than simcli models"):
        parse_sizes(text)


def test_largest_geometric_ranges_stay_exact():
    from simcli.ranges import MAX_BYTES, MAX_DEVICES, parse_devices, parse_sizes

    assert parse_devices(f"1..{MAX_DEVICES}:x2")[-1] == MAX_DEVICES
    assert parse_sizes("1..4EiB:x2")[-1] == MAX_BYTES


# --------------------------------------------------------------------------- nccl-tests' size syntax


@pytest.mark.parametrize("text,expected", [("1G", 2**30), ("16g", 16 * 2**30), ("512M", 512 * 2**20),
                                           ("8", 8), ("4k", 4096), ("1K", 1024), ("1GB", 1e9)])
def test_nccl_tests_size_syntax_is_binary(text, expected):
    from simcli.units import parse

    assert parse(text, "bytes") == expected


def test_nccl_tests_size_range():
    from simcli.ranges import parse_sizes

    assert parse_sizes("8..16G:x1024").tolist() == [8, 8 * 2**10, 8 * 2**20, 8 * 2**30]


# --------------------------------------------------------------------------- zero and negative lengths


@pytest.mark.parametrize("seq", [-5, 0, 1.5])
@pytest.mark.parametrize("model", ["gpt2", "resnet50"])
def test_seq_len_below_one_is_refused_at_the_workload_builder(seq, model):
    from simcli.workloads import build_workload

    with pytest.raises(InputError, match=r"^--seq-len: .*at least 1"):
        build_workload(model=model, seq_len=seq)


def test_seq_len_refused_for_workload_files_too(tmp_path):
    from simcli.workloads import build_workload

    f = tmp_path / "w.yaml"
    f.write_text("name: w\nkind: transformer\nparams: 1e6\nseq_len: 128\n")
    with pytest.raises(InputError, match="--seq-len"):
        build_workload(workload_file=str(f), seq_len=0)
    assert build_workload(workload_file=str(f), seq_len=7).seq_len == 7


@pytest.mark.parametrize("args", [["--seq-len", "-5"], ["--seq-len", "0"]])
@pytest.mark.parametrize("cmd", [["speedup"], ["explain", "-k", "8"]])
def test_cli_negative_seq_len_exits_2(runner, cmd, args):
    from simcli.cli import app

    r = runner.invoke(app, [*cmd, "--model", "gpt2", *args])
    assert r.exit_code == 2 and "--seq-len" in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("mb", [1e-320, 1e-300, 1e-4])
def test_absurdly_small_buckets_are_refused(two_tier, mb):
    from simcli.engine import Scenario
    from simcli.workloads import build_workload

    with pytest.raises(InputError, match=r"--bucket-mb: .*1 KiB"):
        Scenario(profile=two_tier, workload=build_workload(model="resnet50"), bucket_mb=mb)


def test_one_kib_bucket_is_allowed(two_tier):
    from simcli.engine import MIN_BUCKET_MB, Scenario, simulate
    from simcli.workloads import build_workload

    sc = Scenario(profile=two_tier, workload=build_workload(model="resnet50"), bucket_mb=MIN_BUCKET_MB)
    assert simulate(sc, [1, 8]) is not None
