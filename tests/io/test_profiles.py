"""Profile loading: built-ins, the search path, and a corpus of bad inputs (exit 2, one clear line)."""

import textwrap

import pytest

from simcli.cli import app
from simcli.io.profiles import DEFAULT_PROFILE, list_profiles, load_profile, profile_from_dict, profile_to_dict

GOOD = textwrap.dedent("""\
    name: mini
    description: test box
    sources: [made up for a test]
    device:
      name: Test GPU
      peak_flops: {fp32: 10 TFLOP/s, bf16: 100 TFLOP/s}
      memory: 16 GB
      mfu: 0.5
    network:
      - name: nvlink
        size: 4
        bandwidth: 100 GB/s
        latency: 2 us
        efficiency: 0.8
      - name: ib
        bandwidth: 200 Gb/s
        per: node
        latency: 6 us
    """)

BUILTINS = {
    "dgx-v100",
    "dgx-a100",
    "dgx-h100",
    "hgx-h200",
    "dgx-b200",
    "gb200-nvl72",
    "mi300x",
    "mi300x-roce",
    "mi325x",
    "mi355x",
    "gcp-a3-mega",
    "l40s-pcie",
    "cpu-loopback",
}


def test_good_profile_in_si(tmp_path):
    f = tmp_path / "mini.yaml"
    f.write_text(GOOD)
    p = load_profile(f)
    assert p.device.peak_flops["bf16"] == 100e12
    assert p.device.memory_bytes == 16e9
    assert p.network[0].bandwidth_Bps == 100e9 and p.network[0].efficiency == 0.8
    assert p.network[1].bandwidth_Bps == 25e9  # 200 Gb/s is bits
    assert p.network[1].per == "node" and p.network[1].latency_s == 6e-6
    # round trip through the writer
    assert profile_from_dict(profile_to_dict(p), "x").network == p.network


def test_mfu_by_dtype(tmp_path):
    f = tmp_path / "mini.yaml"
    f.write_text(GOOD.replace("  mfu: 0.5\n", "  mfu: 0.5\n  mfu_by_dtype: {fp32: 0.8}\n"))
    p = load_profile(f)
    assert p.device.mfu_for("fp32") == 0.8 and p.device.mfu_for("bf16") == 0.5
    from simcli.base.types import Workload
    from simcli.step.engine import Scenario

    wl = Workload("w", 1e6, 1e9)
    assert Scenario(profile=p, workload=wl, dtype="fp32").achieved_flops == 10e12 * 0.8
    assert Scenario(profile=p, workload=wl).achieved_flops == 100e12 * 0.5
    assert Scenario(profile=p, workload=wl, dtype="fp32", mfu=0.1).achieved_mfu == 0.1
    f.write_text(GOOD.replace("  mfu: 0.5\n", "  mfu: 0.5\n  mfu_by_dtype: {fp8: 0.8}\n"))
    with pytest.raises(Exception, match="mfu_by_dtype.fp8"):
        load_profile(f)


def test_builtins_all_valid():
    names = {e.name for e in list_profiles() if e.origin == "built-in"}
    assert BUILTINS <= names, f"missing built-in profiles: {BUILTINS - names}"
    assert DEFAULT_PROFILE in names
    for e in list_profiles():
        if e.origin == "built-in":
            p = load_profile(e.path)
            assert p.name == e.name, "a built-in's name equals its file's stem"
            assert p.sources


def test_user_dir_adds_profiles(tmp_path, monkeypatch, runner):
    (tmp_path / "mini.yaml").write_text(GOOD)
    monkeypatch.setenv("SIMCLI_PROFILE_PATH", str(tmp_path))
    r = runner.invoke(app, ["profiles", "list", "--format", "json"])
    assert r.exit_code == 0
    import json

    rows = {x["name"]: x for x in json.loads(r.stdout)}
    assert rows["mini"]["origin"] == "user" and rows["mini"]["path"].endswith("mini.yaml")
    r = runner.invoke(app, ["speedup", "--profile", "mini", "--devices", "1,8", "--format", "json"])
    assert r.exit_code == 0, r.output


def _bad(body: str) -> str:
    return body


# (file content, expected fragment of the one-line message)
CORPUS = {
    "malformed": ("name: [unclosed\n", "not valid YAML"),
    "empty": ("", "the file is empty"),
    "not-a-mapping": ("- just\n- a list\n", "expected a mapping"),
    "unknown-key": (
        GOOD.replace("bandwidth: 100 GB/s", "bandwith: 100 GB/s"),
        "network[0].bandwith: unknown key (did you mean 'bandwidth'?)",
    ),
    "unknown-top": (GOOD + "colour: red\n", "colour: unknown key"),
    "wrong-unit": (
        GOOD.replace("200 Gb/s", "400 Gbps/s"),
        "network[1].bandwidth: '400 Gbps/s' is not a bandwidth (try '400 Gb/s' or '50 GB/s')",
    ),
    "bits-for-bytes": (GOOD.replace("memory: 16 GB", "memory: 16 Gb/s"), "device.memory: '16 Gb/s' is not a size"),
    "negative": (
        GOOD.replace("latency: 2 us", "latency: -2 us"),
        "network[0].latency: '-2 us' must be greater than zero",
    ),
    "zero-bw": (GOOD.replace("bandwidth: 100 GB/s", "bandwidth: 0 GB/s"), "must be greater than zero"),
    "nan": (GOOD.replace("mfu: 0.5", "mfu: .nan"), "device.mfu: nan is not a number"),
    "mfu-above-1": (GOOD.replace("mfu: 0.5", "mfu: 40"), "device.mfu: 40 is not in (0, 1]"),
    "missing-required": (GOOD.replace("  mfu: 0.5\n", ""), "device.mfu: required but missing"),
    "missing-sources": (GOOD.replace("sources: [made up for a test]\n", ""), "sources: required but missing"),
    "bad-per": (GOOD.replace("per: node", "per: rack"), "network[1].per: 'rack' is neither"),
    "size-missing": (GOOD.replace("    size: 4\n", ""), "network[0].size: required"),
    "bad-dtype": (GOOD.replace("fp32: 10 TFLOP/s", "fp23: 10 TFLOP/s"), "device.peak_flops.fp23: unknown dtype"),
    "alias-bomb": (
        "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n",
        "aliases",
    ),
    "python-tag": ("name: !!python/object/apply:os.system ['echo pwned']\n", "not valid YAML"),
    "string-size": (GOOD.replace("size: 4", "size: four"), "network[0].size: 'four' is not a whole number"),
    "nccl-version-word": (GOOD + "nccl: {version: banana}\n", "nccl.version: 'banana' is not an NCCL release"),
    "nccl-version-number": (GOOD + "nccl: {version: 2.20}\n", "nccl.version: 2.2 was read as a number"),
    "nccl-tuner": (GOOD + "nccl: {tuner: gcp}\n", "nccl.tuner: 'gcp' is not a tuner simcli models; use one of nccl"),
}


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_bad_profile_corpus(case, tmp_path, runner):
    content, fragment = CORPUS[case]
    f = tmp_path / f"{case}.yaml"
    f.write_text(content)
    for args in (["profiles", "validate", str(f)], ["speedup", "--profile", str(f), "--devices", "8"]):
        r = runner.invoke(app, args)
        assert r.exit_code == 2, (case, args, r.output)
        lines = r.stderr.strip().splitlines()
        # speedup: one line; profiles validate: one line per error (a typo'd key is also a missing one)
        assert len(lines) == 1 or args[0] == "profiles", r.stderr
        assert all(ln.startswith(f"simcli: error: {f}") for ln in lines), lines
        assert fragment in lines[0], lines[0]
        assert "Traceback" not in r.output


def test_binary_garbage_and_directory(tmp_path, runner):
    g = tmp_path / "garbage.yaml"
    g.write_bytes(bytes(range(256)) * 4)
    r = runner.invoke(app, ["profiles", "validate", str(g)])
    assert r.exit_code == 2 and "not a text file" in r.stderr
    r = runner.invoke(app, ["speedup", "--profile", str(tmp_path) + "/", "--devices", "8"])
    assert r.exit_code == 2 and "is a directory" in r.stderr
    r = runner.invoke(app, ["speedup", "--profile", str(tmp_path / "nope.yaml")])
    assert r.exit_code == 2 and "no such file" in r.stderr


def test_unknown_profile_name_lists_close_matches(runner):
    r = runner.invoke(app, ["speedup", "--profile", "dgx-h10"])
    assert r.exit_code == 2
    assert "unknown profile 'dgx-h10'" in r.stderr and "dgx-h100" in r.stderr


def test_validate_reports_every_file(tmp_path, runner):
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    bad = tmp_path / "bad.yaml"
    bad.write_text(CORPUS["negative"][0])
    r = runner.invoke(app, ["profiles", "validate", str(good), str(bad)])
    assert r.exit_code == 2
    assert "good.yaml: ok" in r.stdout and "bad.yaml: network[0].latency" in r.stderr


def test_show_has_units(runner):
    r = runner.invoke(app, ["profiles", "show", "dgx-h100"])
    assert r.exit_code == 0, r.output
    assert "TFLOP/s" in r.stdout and "GB/s" in r.stdout and "µs" in r.stdout


def test_a_profiles_nccl_release_selects_its_tables(tmp_path, runner):
    """nccl.version picks the carried release that prices the profile (simcli.comm.releases): a carried one prices
    as itself, one between two carried ones as the earlier (one stderr line says so, and profiles show), one
    before the oldest is refused (exit 2, one line naming the field); the T_comm header names a release other
    than the default."""
    from simcli.base.types import NCCL_TABLES_VERSION

    files = {}
    for name, version in (("same", NCCL_TABLES_VERSION), ("new", "2.28.9"), ("between", "2.28.8"), ("old", "2.17.1")):
        files[name] = tmp_path / f"{name}.yaml"
        files[name].write_text(GOOD + f"nccl: {{version: '{version}'}}\n")
    assert load_profile(files["new"]).nccl.version == "2.28.9"
    r = runner.invoke(app, ["profiles", "show", str(files["between"])])
    assert r.exit_code == 0, r.output
    assert "2.28.8 (NCCL 2.28.8 is not a carried release; priced as 2.28.7" in " ".join(r.stdout.split())
    r = runner.invoke(app, ["profiles", "show", str(files["new"])])
    assert "2.28.9 (carried: its tuner prices" in " ".join(r.stdout.split())
    r = runner.invoke(app, ["speedup", "-p", str(files["old"]), "-k", "4,8"])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "nccl.version: NCCL 2.17.1 is older than the oldest" in r.stderr
    outs = {}
    for name in ("same", "new"):
        r = runner.invoke(app, ["speedup", "-p", str(files[name]), "-k", "4,8,16", "--format", "json"])
        assert r.exit_code == 0, r.output
        outs[name] = r.stdout
        r = runner.invoke(app, ["speedup", "-p", str(files[name]), "-k", "4,8"])
        assert ("nccl.version 2.28.9" in " ".join(r.stdout.split())) == (name == "new"), r.stdout
    r = runner.invoke(
        app, ["speedup", "-p", str(files["same"]), "-k", "4,8,16", "--format", "json", "--nccl-version", "2.20.3"]
    )
    assert r.exit_code == 0, r.output
    assert (
        outs["same"] != r.stdout
    )  # 2.20.3's tables price the same profile otherwise (2.28.9's and 2.29.7's agree here)
    r = runner.invoke(app, ["speedup", "-p", str(files["between"]), "-k", "4,8", "--format", "json"])
    assert r.exit_code == 0, r.output
    said = [line for line in r.stderr.splitlines() if "nccl.version" in line]  # (its made-up GPU warns of its MFU)
    assert len(said) == 1 and "priced as 2.28.7" in said[0]
