"""The input rules every reader of measured files shares (simcli/io/rules.py, issue 40): one test per class of input,
parametrized over the readers where the rule is shared, and a property that feeds every reader mutations of a
good file. Good files: tests/fixtures (nccl-tests text and -J JSON, Inspector logs and Prometheus), the real trace
in measurements/kineto-ddp-gloo-cpu, a published nccl-tests CSV and the fixture scaling table."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcli.base.types import InputError
from simcli.cli.app import app
from simcli.io import rules

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
TEXT = FIX / "all_reduce_perf_8xA100.txt"
NJSON = FIX / "all_reduce_perf_8xA100.json"
INSP = FIX / "inspector"
PROM = FIX / "nccl_inspector_metrics_GPU-4.prom"
TRACE = ROOT / "measurements" / "kineto-ddp-gloo-cpu"
CSV = ROOT / "validation" / "published" / "nccl-allreduce-8xA100-nvswitch.csv"
GB200 = ROOT / "validation" / "published" / "nccl-allreduce-72xGB200-1rack.csv"
SCALING = ROOT / "validation" / "published" / "dlperf-resnet50-fp32-v100.csv"


def run(runner, *args):
    return runner.invoke(app, [str(a) for a in args])


def refused(runner, *args, needles=()):
    """Exit 2 and exactly one line on stderr (the error, nothing else), naming what it should."""
    r = run(runner, *args)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.exit_code == 2, r.output
    assert len(lines) == 1 and lines[0].startswith("simcli: error:"), r.stderr
    assert "Traceback" not in r.output
    for n in needles:
        assert re.search(n, lines[0]), lines[0]
    return lines[0]


def warned(runner, *args, needles=(), code=0):
    r = run(runner, *args)
    assert r.exit_code == code, r.output
    warnings = [x for x in r.stderr.splitlines() if x.startswith("simcli: warning:")]
    assert warnings, r.stderr
    for n in needles:
        assert any(re.search(n, w) for w in warnings), warnings
    return r


def clean(runner, *args):
    r = run(runner, *args)
    assert r.exit_code == 0, r.output
    assert "warning" not in r.stderr, r.stderr
    return r


# --------------------------------------------------------------------------- fixtures edited


def inspector_dir(tmp_path: Path, edit=None, files=None) -> Path:
    """A copy of the Inspector dump directory, the first record of node0-pid1001.log edited by ``edit(rec)``."""
    out = tmp_path / "insp"
    out.mkdir()
    for f in files or sorted(INSP.iterdir()):
        shutil.copy(f, out / f.name)
    if edit is not None:
        p = out / "node0-pid1001.log"
        lines = p.read_text().splitlines()
        lines[0] = edit(lines[0])
        p.write_text("\n".join(lines) + "\n")
    return out


def set_json(line: str, path: str, value) -> str:
    rec = json.loads(line)
    cur = rec
    *head, last = path.split(".")
    for part in head:
        cur = cur[part]
    cur[last] = value
    return json.dumps(rec)


def trace_copy(tmp_path: Path, edit=None, every_rank: bool = False) -> Path:
    """A copy of the real 2-rank gloo trace; ``edit(doc)`` changes rank 0's (``every_rank``: both ranks')."""
    out = tmp_path / "trace"
    out.mkdir()
    for f in sorted(TRACE.glob("*.json")):
        shutil.copy(f, out / f.name)
    for f in sorted(out.glob("*.json")) if edit is not None else []:
        if every_rank or f.name == "rank0.json":
            doc = json.loads(f.read_text())
            edit(doc)
            f.write_text(json.dumps(doc))
    return out


def events(doc, prefix):
    return [e for e in doc["traceEvents"] if str(e.get("name", "")).startswith(prefix) and e.get("ph") == "X"]


def text_row(edit) -> str:
    """The nccl-tests text fixture with its 1 MiB row's columns edited by ``edit(tokens)``."""
    out = []
    for line in TEXT.read_text().splitlines():
        toks = line.split()
        if toks[:1] == ["1048576"]:
            toks = edit(toks)
            line = "  " + "  ".join(toks)
        out.append(line)
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- the good files pass, and say nothing


@pytest.mark.parametrize("good", [TEXT, NJSON, INSP, TRACE], ids=lambda p: p.name)
def test_good_files_import_without_a_word(runner, good):
    r = clean(runner, "bench", "import", good, "--format", "json")
    assert json.loads(r.stdout)


def test_good_csv_and_scaling_table_validate_without_a_word(runner):
    clean(runner, "validate", CSV, "-p", "dgx-a100", "-f", "json")
    clean(runner, "validate", SCALING, "-p", "dgx-a100", "--model", "resnet50", "-f", "json")


# --------------------------------------------------------------------------- JSON: a key given twice


def _dup_key_nccl(tmp_path):
    f = tmp_path / "dup.json"
    f.write_text(NJSON.read_text().replace('"size": 32768,', '"size": 32768, "size": 65536,', 1))
    return f


def _dup_key_inspector(tmp_path):
    return inspector_dir(tmp_path, lambda s: s.replace('"rank": 0,', '"rank": 0, "rank": 3,', 1))


def _dup_key_trace(tmp_path):
    d = trace_copy(tmp_path)
    p = d / "rank0.json"
    p.write_text(p.read_text().replace('"world_size": 2', '"world_size": 2, "world_size": 4', 1))
    return d


@pytest.mark.parametrize(
    "make", [_dup_key_nccl, _dup_key_inspector, _dup_key_trace], ids=["nccl-json", "insp", "trace"]
)
def test_a_json_key_given_twice_is_refused(runner, tmp_path, make):
    refused(runner, "bench", "import", make(tmp_path), needles=[r"given twice in one object"])


# --------------------------------------------------------------------------- numbers: digits and ranges


BIG41 = "1" + "0" * 40


@pytest.mark.parametrize(
    "kind",
    ["nccl-text", "nccl-json", "insp", "prom", "trace", "csv"],
)
def test_a_41_digit_number_is_refused(runner, tmp_path, kind):
    if kind == "nccl-text":
        f = tmp_path / "t.txt"
        f.write_text(text_row(lambda t: [BIG41, *t[1:]]))
    elif kind == "nccl-json":
        f = tmp_path / "t.json"
        f.write_text(NJSON.read_text().replace('"size": 32768', f'"size": {BIG41}', 1))
    elif kind == "insp":
        f = inspector_dir(tmp_path, lambda s: s.replace('"coll_sn": 1,', f'"coll_sn": {BIG41},', 1))
    elif kind == "prom":
        f = tmp_path / "m.prom"
        f.write_text(PROM.read_text().replace('coll_sn="228924"', f'coll_sn="{BIG41}"', 1))
    elif kind == "trace":
        f = trace_copy(tmp_path, lambda d: events(d, "gloo:all_reduce")[0]["args"].update({"Input Dims": [[10**40]]}))
    else:
        f = tmp_path / "c.csv"
        f.write_text(CSV.read_text().replace("8,32768,43.83", f"8,32768,{BIG41}", 1))
    args = ("validate", f, "-p", "dgx-a100") if kind == "csv" else ("bench", "import", f)
    refused(runner, *args, needles=[r"digits|more than simcli reads|beyond any quantity"])


@pytest.mark.parametrize("kind", ["nccl-json", "insp", "prom", "trace", "csv"])
def test_a_size_above_4_eib_is_refused(runner, tmp_path, kind):
    big = 2**63
    if kind == "nccl-json":
        f = tmp_path / "t.json"
        f.write_text(
            NJSON.read_text().replace('"size": 32768, "count": 8192', f'"size": {big}, "count": {big // 4}', 1)
        )
    elif kind == "insp":
        f = inspector_dir(tmp_path, lambda s: set_json(s, "coll_perf.coll_msg_size_bytes", big))
    elif kind == "prom":
        f = tmp_path / "m.prom"
        f.write_text(PROM.read_text().replace('message_size="2.00GB"', 'message_size="9000000.00TB"'))
    elif kind == "trace":
        f = trace_copy(
            tmp_path, lambda d: events(d, "gloo:all_reduce")[0]["args"].update({"Input Dims": [[2**31, 2**31]]})
        )
    else:
        f = tmp_path / "c.csv"
        f.write_text(CSV.read_text().replace("8,32768,43.83,0.75,1.31", f"8,{big},43.83,,", 1))
    args = ("validate", f, "-p", "dgx-a100") if kind == "csv" else ("bench", "import", f)
    refused(runner, *args, needles=[r"4 EiB|2\*\*62"])


def test_a_309_digit_throughput_in_a_scaling_table_is_refused(runner, tmp_path):
    f = tmp_path / "s.csv"
    f.write_text(SCALING.read_text().replace("367.29", "9" * 309, 1))
    refused(runner, "validate", f, "-p", "dgx-a100", "--model", "resnet50", needles=[r"images_per_s has 309 digits"])


@pytest.mark.parametrize("kind", ["insp", "prom", "trace"])
def test_a_rank_count_beyond_ncclss_int_is_refused(runner, tmp_path, kind):
    if kind == "insp":
        f = inspector_dir(tmp_path, lambda s: set_json(s, "header.n_ranks", 2**60))
    elif kind == "prom":
        f = tmp_path / "m.prom"
        f.write_text(PROM.read_text().replace('nranks="8"', f'nranks="{2**60}"'))
    else:
        f = trace_copy(tmp_path, lambda d: d["distributedInfo"].update({"world_size": 2**60}))
    refused(runner, "bench", "import", f, needles=[r"rank count|n_ranks|nranks|world_size"])


# --------------------------------------------------------------------------- ranks: range, duplicates, missing


@pytest.mark.parametrize("kind", ["insp", "trace"])
def test_a_rank_outside_its_communicator_is_refused(runner, tmp_path, kind):
    if kind == "insp":
        f = inspector_dir(tmp_path, lambda s: set_json(s, "header.rank", 9))
        needle = r"rank 9 of a communicator of 4 ranks"
    else:
        f = trace_copy(tmp_path, lambda d: d["distributedInfo"].update({"rank": 5}))
        needle = r"rank 5 of a world of 2 ranks"
    refused(runner, "bench", "import", f, needles=[needle])


def test_a_ranks_log_given_twice_is_refused(runner, tmp_path):
    d = inspector_dir(tmp_path)
    shutil.copy(d / "node0-pid1001.log", d / "node0-pid1001-copy.log")
    refused(runner, "bench", "import", d, needles=[r"rank 0's collective #1 is recorded twice"])


def test_the_same_coll_sn_twice_is_refused(runner, tmp_path):
    d = inspector_dir(tmp_path, lambda s: set_json(s, "coll_perf.coll_sn", 2))
    refused(runner, "bench", "import", d, needles=[r"collective #2 is recorded twice"])


def test_a_prometheus_sample_given_twice_is_refused(runner, tmp_path):
    f = tmp_path / "m.prom"
    text = PROM.read_text()
    f.write_text(text + text.splitlines()[0] + "\n")
    refused(runner, "bench", "import", f, needles=[r"a second nccl_algorithm_bandwidth_gbs sample"])


def test_missing_ranks_are_a_warning_naming_them(runner, tmp_path):
    one = inspector_dir(tmp_path, files=[INSP / "node0-pid1001.log"])  # one log of a 4-rank communicator
    r = warned(
        runner,
        "bench",
        "import",
        one,
        "-f",
        "json",
        needles=[r"ranks: records of 1 of communicator 0xe62dedaa97644a's 4 \(missing 1, 2, 3\); 1 of"],
    )
    assert {x["world_size"] for x in json.loads(r.stdout)} == {4, 2}  # still the communicators' sizes
    warned(
        runner,
        "bench",
        "import",
        PROM,
        "-f",
        "json",
        needles=[r"2 of communicator 0xd152c00f111816's 8 \(missing 0, 1, 2, 3, ...\)"],
    )


def _world4(doc):
    doc["distributedInfo"]["world_size"] = 4
    doc["distributedInfo"]["pg_config"][0].update({"pg_size": 4, "ranks": [0, 1, 2, 3]})


def test_a_trace_directory_short_of_ranks_is_a_warning(runner, tmp_path):
    d = trace_copy(tmp_path, _world4, every_rank=True)
    warned(runner, "bench", "import", d, "-f", "json", needles=[r"2 traces of a world of 4 ranks"])


def test_the_ranks_traces_must_agree_on_the_world(runner, tmp_path):
    d = trace_copy(tmp_path, _world4)  # rank 0 says 4 ranks, rank 1 says 2
    refused(runner, "bench", "import", d, needles=[r"the traces say world_size 2, 4"])


# --------------------------------------------------------------------------- world size against the file


def test_a_trace_whose_world_size_its_groups_contradict_is_refused(runner, tmp_path):
    f = trace_copy(tmp_path, lambda d: d["distributedInfo"].update({"world_size": 8}))
    refused(runner, "bench", "import", f, needles=[r"the default group has 2 ranks, but world_size says 8"])


def test_a_world_size_the_busbw_ratio_contradicts_is_refused(runner, tmp_path):
    f = tmp_path / "norank.txt"
    f.write_text("\n".join(x for x in TEXT.read_text().splitlines() if "Rank" not in x) + "\n")
    refused(runner, "bench", "import", f, "--world-size", 16, needles=[r"busbw .* is not algbw x 1.875"])


# --------------------------------------------------------------------------- bandwidths against size and time


@pytest.mark.parametrize("kind", ["nccl-text", "nccl-json", "insp", "prom", "csv"])
def test_a_bandwidth_the_size_and_time_contradict_is_refused(runner, tmp_path, kind):
    if kind == "nccl-text":
        f = tmp_path / "t.txt"
        f.write_text(text_row(lambda t: [*t[:7], "180.00", *t[8:]]))  # busbw 10x
    elif kind == "nccl-json":
        f = tmp_path / "t.json"
        f.write_text(
            NJSON.read_text().replace('"alg_bw": 10.29, "bus_bw": 18.0', '"alg_bw": 102.9, "bus_bw": 180.0', 1)
        )
    elif kind == "insp":
        f = inspector_dir(tmp_path, lambda s: set_json(s, "coll_perf.coll_busbw_gbs", 262.144))
    elif kind == "prom":
        f = tmp_path / "m.prom"
        f.write_text(PROM.read_text().replace("} 419.899", "} 4198.99", 1))
    else:
        f = tmp_path / "c.csv"
        f.write_text(CSV.read_text().replace("8,1048576,101.9,10.29,18.0", "8,1048576,101.9,10.29,180.0", 1))
    args = ("validate", f, "-p", "dgx-a100") if kind == "csv" else ("bench", "import", f)
    refused(runner, *args, needles=[r"(alg|bus)bw .* is not"])


def test_the_ms_for_us_slip_is_refused_by_check_naming_the_field(runner, tmp_path):
    f = tmp_path / "ms.csv"
    lines = CSV.read_text().splitlines()
    out = [lines[0] if not lines[0].startswith("devices") else lines[0]]
    for x in lines[1:]:
        if x.startswith("#") or x.startswith("devices"):
            out.append(x)
            continue
        k, n, t, *_ = x.split(",")
        out.append(f"{k},{n},{float(t) / 1000:.6g},,,8")  # times in ms under a us header
    f.write_text("\n".join(out) + "\n")
    refused(
        runner, "check", f, "-p", "dgx-a100", needles=[r"busbw \(measured\) .* GB/s .* line rate", r"ms written as us"]
    )


def test_a_gb200_rack_checked_against_dgx_a100_is_refused(runner):
    refused(runner, "check", GB200, "-p", "dgx-a100", needles=[r"x the 200 GB/s line rate of dgx-a100's infiniband"])
    run_ok = run(runner, "check", GB200, "-p", "gb200-nvl72", "-f", "json")
    assert run_ok.exit_code in (0, 1), run_ok.output  # on its own hardware it is a curve to judge


def test_a_busbw_above_the_line_rate_but_within_in_network_reduction_passes(runner, tmp_path):
    # NVLS gets above the NVLink line rate: 466 GB/s on H100's 450 (the published Azure curve) is a healthy curve
    azure = ROOT / "validation" / "published" / "nccl-allreduce-8xH100-8xH200-azure.csv"
    r = run(runner, "check", azure, "-p", "dgx-h100", "-f", "json")
    assert r.exit_code in (0, 1) and "line rate" not in r.stderr, r.output
    f = tmp_path / "fast.csv"
    f.write_text("devices,bytes,time_us\n8,4294967296,12000\n")  # 626 GB/s busbw: 2.09 x 300 GB/s NVLink
    refused(runner, "check", f, "-p", "dgx-a100", needles=[r"2.09 x the 300 GB/s line rate of dgx-a100's nvlink"])


# --------------------------------------------------------------------------- traces: dims, steps, hardware


def test_a_negative_input_dims_is_refused(runner, tmp_path):
    f = trace_copy(tmp_path, lambda d: events(d, "gloo:all_reduce")[0]["args"].update({"Input Dims": [[-262144]]}))
    refused(runner, "bench", "import", f, needles=[r"Input Dims -262144 is out of range"])


def test_a_zero_length_step_is_refused(runner, tmp_path):
    f = trace_copy(tmp_path, lambda d: events(d, "ProfilerStep#2")[0].update({"dur": 0}))
    refused(runner, "bench", "import", f, needles=[r"ProfilerStep#2: dur 0 us"])


def test_a_collective_much_longer_than_its_step_is_refused(runner, tmp_path):
    def edit(d):
        step = events(d, "ProfilerStep#2")[0]
        c = next(e for e in events(d, "gloo:all_reduce") if step["ts"] <= e["ts"] < step["ts"] + step["dur"])
        c["dur"] = step["dur"] * 1000

    refused(runner, "bench", "import", trace_copy(tmp_path, edit), needles=[r"in a step of .* none lasts 1e\+03 x"])


def test_a_gloo_trace_against_a_gpu_profile_is_a_warning(runner):
    args = ("validate", TRACE, "-p", "dgx-h100", "--params", 786432, "--batch-per-device", 64, "-f", "json")
    warned(runner, *args, needles=[r"backend: gloo \(a CPU run\) held to dgx-h100"])


def test_fsdp_on_a_ddp_trace_is_refused(runner):
    args = ("validate", TRACE, "-p", "cpu-loopback", "--params", 786432, "--batch-per-device", 64)
    refused(runner, *args, "--strategy", "fsdp", needles=[r"--strategy: fsdp .* only all_reduce"])


def test_nccl_tests_devices_against_the_profile_are_a_warning(runner):
    warned(runner, "check", TEXT, "-p", "dgx-h100", "-f", "json", code=1, needles=[r"device: .*A100.*H100"])
    r = run(runner, "check", TEXT, "-p", "dgx-a100", "-f", "json")
    assert "device:" not in r.stderr


# --------------------------------------------------------------------------- scaling tables


def _scaling(tmp_path, rows: str, header="devices,batch_per_device,images_per_s,speedup") -> Path:
    f = tmp_path / "s.csv"
    f.write_text(header + "\n" + rows)
    return f


def test_a_scaling_efficiency_above_one_is_refused_and_near_one_warned(runner, tmp_path):
    args = ("-p", "dgx-a100", "--model", "resnet50", "-f", "json")
    bad = _scaling(tmp_path, "1,128,100,1.0\n4,128,480,4.8\n")
    refused(runner, "validate", bad, *args, needles=[r"line 3: speedup / k 1.2 at k = 4: .* at most 1"])
    near = _scaling(tmp_path, "1,128,100,1.0\n4,128,404,4.04\n")
    warned(runner, "validate", near, *args, needles=[r"efficiency: above 1 at k = 4"])


def test_a_speedup_its_throughput_contradicts_is_refused(runner, tmp_path):
    f = _scaling(tmp_path, "1,128,100,1.0\n4,128,380,3.2\n")
    refused(runner, "validate", f, "-p", "dgx-a100", "--model", "resnet50", needles=[r"speedup 3.2 at k = 4, but"])


def test_a_global_batch_that_changes_is_warned_and_one_that_contradicts_refused(runner, tmp_path):
    args = ("-p", "dgx-a100", "--model", "resnet50", "-f", "json")
    h = "devices,batch_per_device,accum,samples_per_s"
    f = _scaling(tmp_path, "8,32,8,1000\n16,32,4,1980\n32,32,4,3900\n", h)
    warned(runner, "validate", f, *args, needles=[r"line 4: global batch .* 4096 at k = 32, 2048 at k = 8"])
    h2 = h + ",global_batch"
    g = _scaling(tmp_path, "8,32,8,1000,2048\n16,32,4,1980,4096\n", h2)
    refused(runner, "validate", g, *args, needles=[r"global_batch 4096 is not k x batch_per_device x accum"])


# --------------------------------------------------------------------------- profiles


PROFILE = """\
name: t
sources: [test]
device: {{name: H100, peak_flops: {{bf16: 989 TFLOP/s}}, memory: 80 GB, memory_bandwidth: {mem}, mfu: 0.4}}
network:
  - {{name: nvlink, size: 8, bandwidth: {nvl}, latency: 3 us}}
  - {{name: ib, bandwidth: {nic}, latency: 10 us}}
"""


def _profile(tmp_path, mem="3.35 TB/s", nvl="450 GB/s", nic="400 Gb/s") -> Path:
    f = tmp_path / "p.yaml"
    f.write_text(PROFILE.format(mem=mem, nvl=nvl, nic=nic))
    return f


def test_profiles_validate_refuses_a_bandwidth_without_a_unit(runner, tmp_path):
    clean(runner, "profiles", "validate", _profile(tmp_path))
    refused(runner, "profiles", "validate", _profile(tmp_path, mem="3.35"), needles=[r"device.memory_bandwidth: 3.35"])
    refused(
        runner, "profiles", "validate", _profile(tmp_path, nic="5e10"), needles=[r"network\[1\].bandwidth: 50000000000"]
    )


@pytest.mark.parametrize("cmd", [("speedup", "-k", "8"), ("explain", "-k", "8"), ("plan", "max-devices", "-e", "0.5")])
@pytest.mark.parametrize("mem", ["3.35", "'3.35'", "900000"])
def test_a_bare_bandwidth_no_link_has_is_refused_by_every_command(runner, tmp_path, cmd, mem):
    """Outside `profiles validate` too: a bare bandwidth below 1 MB/s is a unit left out (3.35 read as 3.35 B/s gave
    a 94-year optimizer step at E = 1.0), refused where the profile is read; a bare SI value (3.35e12) is taken."""
    bad = _profile(tmp_path, mem=mem)
    refused(runner, *cmd, "-p", bad, needles=[r"device.memory_bandwidth: .*has no unit and reads as"])
    r = run(runner, *cmd, "-p", _profile(tmp_path, mem="3.35e12"))
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize(
    "nvl, nic, needle",
    [("450 Gb/s", "400 Gb/s", r"network\[0\].bandwidth: nvlink .* within 2x of the NIC"),
     ("40 GB/s", "400 Gb/s", r"network\[0\].bandwidth: nvlink .* slower than the NIC"),
     ("900 GB/s", "200 GB/s", r"network\[1\].bandwidth: ib's NIC .* faster than a PCIe 6.0 x16 slot")],
)  # fmt: skip
def test_profiles_validate_warns_on_tier_orderings_no_machine_has(runner, tmp_path, nvl, nic, needle):
    warned(runner, "profiles", "validate", _profile(tmp_path, nvl=nvl, nic=nic), needles=[needle])


def test_built_in_profiles_validate_without_a_word(runner):
    clean(runner, "profiles", "validate", *sorted((ROOT / "hardware_profiles").glob("*.yaml")))


# --------------------------------------------------------------------------- options that do not apply


@pytest.mark.parametrize("src", [INSP, PROM, TRACE], ids=lambda p: p.name)
@pytest.mark.parametrize(
    "opt", [("--world-size", "4"), ("--collective", "all_reduce"), ("--collective", "foo"), ("--placement", "in")]
)
def test_options_that_do_not_apply_to_a_live_input_are_refused(runner, src, opt):
    refused(runner, "bench", "import", src, *opt, needles=[rf"^simcli: error: {opt[0]}: does not apply to"])


def test_an_unknown_collective_is_refused_for_nccl_tests_output(runner):
    refused(runner, "bench", "import", TEXT, "--collective", "allreduse", needles=[r"--collective: 'allreduse'"])
    r = clean(runner, "bench", "import", TEXT, "--collective", "all_reduce_perf", "-f", "json")
    assert {x["collective"] for x in json.loads(r.stdout)} == {"all_reduce"}


# --------------------------------------------------------------------------- the shared rules, directly


@pytest.mark.parametrize(
    "value, kind, ok",
    [(1 << 62, "bytes", True), ((1 << 62) + 1, "bytes", False), (2**31 - 1, "ranks", True), (2**31, "ranks", False),
     ("1e19", "real", True), ("1e20", "real", False), ("0", "time", False), (-0.0, "bandwidth", True),
     ("nan", "real", False), (True, "count", False), (2.5, "rank", False), ("9" * 21, "real", False)],
)  # fmt: skip
def test_number_rule(value, kind, ok):
    if ok:
        assert math.isfinite(rules.number(value, "f", "x", kind=kind))
    else:
        with pytest.raises(InputError, match=r"^f: x "):
            rules.number(value, "f", "x", kind=kind)


def test_a_warning_is_not_printed_beside_an_error(runner, tmp_path):
    # one log of a 4-rank communicator (a warning) whose record also contradicts itself (an error): one line
    one = inspector_dir(tmp_path, lambda s: set_json(s, "coll_perf.coll_busbw_gbs", 99.0), [INSP / "node0-pid1001.log"])
    refused(runner, "bench", "import", one, needles=[r"busbw 99 GB/s is not"])


# --------------------------------------------------------------------------- property: every reader, mutated

#: hostile replacements for one number of a good file
HOSTILE = ["0", "-1", "-262144", "1e400", BIG41, str(2**60), str(2**63), "NaN", "", "1e-300", "0.5", "7", "2", "1e19"]
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")


def _mutate(text: str, data) -> str:
    how = data.draw(st.sampled_from(["number", "number", "number", "scale", "dup-line", "drop-line"]))
    lines = text.splitlines()
    if how in ("dup-line", "drop-line") and len(lines) > 1:
        i = data.draw(st.integers(0, len(lines) - 1))
        lines = lines[: i + 1] + lines[i:] if how == "dup-line" else lines[:i] + lines[i + 1 :]
        return "\n".join(lines) + "\n"
    spans = [m.span() for m in _NUMBER.finditer(text)]
    a, b = spans[data.draw(st.integers(0, len(spans) - 1))]
    if how == "scale":
        new = repr(float(text[a:b]) * data.draw(st.sampled_from([1000.0, 0.001, 8.0, 0.125, 10.0])))
    else:
        new = data.draw(st.sampled_from(HOSTILE))
    return text[:a] + new + text[b:]


#: reader -> (the good file to mutate, the command that reads it: FILE is replaced by the mutated copy)
READERS = {
    "nccl-text": (TEXT, ["bench", "import", "FILE", "-f", "json"]),
    "nccl-json": (NJSON, ["bench", "import", "FILE", "-f", "json"]),
    "inspector": (INSP / "node0-pid1001.log", ["bench", "import", "FILE", "-f", "json"]),
    "prometheus": (PROM, ["bench", "import", "FILE", "-f", "json"]),
    "trace": (TRACE / "rank0.json", ["bench", "import", "FILE", "-f", "json"]),
    "bench-csv": (CSV, ["validate", "FILE", "-p", "dgx-a100", "-f", "json"]),
    "scaling": (SCALING, ["validate", "FILE", "-p", "dgx-a100", "--model", "resnet50", "-f", "json"]),
}


def _records(doc):
    if isinstance(doc, list):
        return doc
    if "collectives" in doc:
        return doc["collectives"]
    return doc.get("rows", [])


def _finite(x) -> bool:
    if isinstance(x, float):
        return math.isfinite(x)
    if isinstance(x, dict):
        return all(_finite(v) for v in x.values())
    if isinstance(x, list):
        return all(_finite(v) for v in x)
    return True


@pytest.mark.parametrize("reader", list(READERS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_reader_takes_a_mutated_file_whole_or_refuses_it_in_one_line(runner, tmp_path, reader, data):
    good, cmd = READERS[reader]
    f = tmp_path / good.name
    f.write_text(_mutate(good.read_text(), data))
    r = runner.invoke(app, [str(f) if a == "FILE" else a for a in cmd])
    assert "Traceback" not in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    if r.exit_code == 2:
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and lines[0].startswith("simcli: error:"), r.stderr
        return
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert _finite(doc)
    for rec in _records(doc):
        n, t, alg = rec.get("bytes"), rec.get("time_s"), rec.get("algbw_GBps")
        k = rec.get("world_size", rec.get("devices"))
        assert k is None or 1 <= k <= rules.MAX_RANKS
        assert n is None or 0 <= n <= 2**62
        assert t is None or t > 0
        if n is not None and t is not None and alg is not None:
            assert abs(alg - n / t / 1e9) <= rules.BW_REL * max(alg, n / t / 1e9) + rules.BW_ABS_GBPS, rec
