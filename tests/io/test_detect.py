"""simcli profiles detect: this machine's profile loads and validates; a GPU node from probes given by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simcli.base.types import NCCL_TABLES_VERSION
from simcli.cli import app
from simcli.io.detect import GpuInfo, detect, nics, parse_topo
from simcli.io.profiles import load_profile, profile_from_dict

TOPO = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity
GPU0\t X \tNV18\tNV18\tNV18\tPXB\t0-47\t0
GPU1\tNV18\t X \tNV18\tNV18\tPXB\t0-47\t0
GPU2\tNV18\tNV18\t X \tNV18\tSYS\t48-95\t1
GPU3\tNV18\tNV18\tNV18\t X \tSYS\t48-95\t1
NIC0\tPXB\tPXB\tSYS\tSYS\t X

Legend:
  X    = Self
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def test_this_machine_writes_a_profile_that_loads_and_validates(runner, tmp_path):
    out = tmp_path / "here.yaml"
    r = runner.invoke(app, ["profiles", "detect", "-o", str(out)])
    assert r.exit_code == 0, r.output
    p = load_profile(out)
    assert p.name == "here" and p.device.mfu > 0 and p.network
    text = out.read_text()
    data = yaml.safe_load(text)
    marks = [s.split(": ", 1)[1].split(" ", 1)[0] for s in data["sources"] if ": " in s]
    assert "DETECTED" in marks and "ASSUMED" in marks
    # every assumed number says so, in the sources and in the calibration block
    for key in data["calibration"]["assumed"]:
        assert any(s.startswith(f"{key} ") and "ASSUMED" in s for s in data["sources"]), key
    for key in data["calibration"]["detected"]:
        assert any(s.startswith(f"{key} ") and "DETECTED" in s for s in data["sources"]), key
    assert "device.peak_flops.fp32" in data["calibration"]["assumed"]
    r = runner.invoke(app, ["profiles", "validate", str(out)])
    assert r.exit_code == 0 and "ok" in r.output
    # the profile predicts
    r = runner.invoke(
        app,
        [
            "speedup",
            "--profile",
            str(out),
            *"--devices 1,2 --params 1e6 --flops-per-sample 6e6 -f json".split(),
        ],
    )
    assert r.exit_code == 0, r.output


def test_existing_output_without_force_is_exit_2_and_untouched(runner, tmp_path):
    out = tmp_path / "here.yaml"
    out.write_text("keep me\n")
    r = runner.invoke(app, ["profiles", "detect", "-o", str(out)])
    assert r.exit_code == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("simcli: error: --output:") and "--force" in lines[0]
    assert out.read_text() == "keep me\n"
    r = runner.invoke(app, ["profiles", "detect", "-o", str(out), "--force"])
    assert r.exit_code == 0, r.output
    assert load_profile(out).name == "here"


def test_stdout_without_output(runner):
    r = runner.invoke(app, ["profiles", "detect", "--name", "box"])
    assert r.exit_code == 0, r.output
    assert profile_from_dict(yaml.safe_load(r.stdout), "stdout").name == "box"


def _sysfs(root: Path) -> Path:
    for dev, rate in (("mlx5_0", "400 Gb/sec (4X NDR)"), ("mlx5_1", "400 Gb/sec (4X NDR)")):
        port = root / "sys/class/infiniband" / dev / "ports/1"
        port.mkdir(parents=True)
        (port / "rate").write_text(rate + "\n")
        (port / "state").write_text("4: ACTIVE\n")
    eth = root / "sys/class/net/eth0"
    (eth / "device").mkdir(parents=True)
    (eth / "speed").write_text("25000\n")
    (root / "sys/class/net/lo").mkdir(parents=True)
    (root / "sys/class/net/lo/speed").write_text("10\n")
    (root / "sys/class/net/docker0").mkdir(parents=True)  # virtual: no device link
    (root / "sys/class/net/docker0/speed").write_text("10000\n")
    return root


def test_nics_and_topology_parsing(tmp_path):
    found = nics(_sysfs(tmp_path))
    assert [(n.name, n.kind, n.rate_bps) for n in found] == [
        ("mlx5_0/1", "infiniband", 400e9),
        ("mlx5_1/1", "infiniband", 400e9),
        ("eth0", "ethernet", 25e9),
    ]
    pairs = parse_topo(TOPO)
    assert len(pairs) == 12 and set(pairs.values()) == {"NV18"} and pairs[(0, 3)] == "NV18"


def test_a_gpu_node_from_given_probes(tmp_path):
    gpus = [GpuInfo("NVIDIA H200", 150e9, (9, 0))] * 4
    data = detect("h200x4", gpus=gpus, topo=TOPO, root=_sysfs(tmp_path), host="node1", date="2026-01-01")
    p = profile_from_dict(yaml.safe_load(yaml.safe_dump(data)), "h200x4")
    assert p.device.name == "NVIDIA H200" and p.device.memory_bytes == 150e9
    assert p.device.peak("bf16") == pytest.approx(989.4e12)  # assumed from hgx-h200
    assert [t.name for t in p.network] == ["nvlink", "infiniband"] and p.network[0].size == 4
    assert p.network[1].bandwidth_Bps == pytest.approx(2 * 400e9 / 8) and p.network[1].per == "node"
    det, ass = data["calibration"]["detected"], data["calibration"]["assumed"]
    assert det["device.compute_capability"] == "9.0" and det["devices"] == 4
    assert "nvlink" in det["network[0].kind"] and "network[1].bandwidth" in det
    assert "device.peak_flops.bf16" in ass and "device.mfu" in ass and "network[0].bandwidth" in ass
    # without nvidia-smi the GPU links are assumed to be PCIe, and said so
    data = detect("x", gpus=gpus[:2], topo=None, root=tmp_path / "empty", date="d")
    p = profile_from_dict(yaml.safe_load(yaml.safe_dump(data)), "x")
    assert p.network[0].kind == "pcie" and data["calibration"]["assumed"]["network[0].kind"] == "pcie"
    assert any(s.startswith("network[1].bandwidth 12.5 GB/s: ASSUMED") for s in data["sources"])
    # an unknown GPU gets a placeholder peak, marked as such
    data = detect("y", gpus=[GpuInfo("Mystery GPU", 8e9, (8, 6))], topo=None, root=tmp_path / "empty", date="d")
    assert "placeholder" in " ".join(data["sources"])
    profile_from_dict(yaml.safe_load(yaml.safe_dump(data)), "y")


def _fake_torch(monkeypatch, *, cuda: bool, nccl: object) -> None:
    """A torch whose torch.cuda answers as a node of 8 H100 would (or has no CUDA), with torch.cuda.nccl.version()
    returning ``nccl`` (an exception instance: raised)."""
    import importlib.machinery
    import sys
    import types

    def version():
        if isinstance(nccl, Exception):
            raise nccl
        return nccl

    props = types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", total_memory=80e9, major=9, minor=0)
    cuda_mod = types.SimpleNamespace(
        is_available=lambda: cuda,
        device_count=lambda: 8 if cuda else 0,
        get_device_properties=lambda i: props,
        nccl=types.SimpleNamespace(version=version),
    )
    torch = types.ModuleType("torch")
    torch.__spec__ = importlib.machinery.ModuleSpec("torch", None)
    torch.cuda = cuda_mod
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr("simcli.io.detect.nvidia_smi_topo", lambda: None)


def test_the_nccl_release_torch_runs_is_the_profiles_nccl_version(runner, monkeypatch, tmp_path):
    _fake_torch(monkeypatch, cuda=True, nccl=(2, 27, 5))
    out = tmp_path / "node.yaml"
    r = runner.invoke(app, ["profiles", "detect", "-o", str(out)])
    assert r.exit_code == 0, r.output
    data = yaml.safe_load(out.read_text())
    assert data["nccl"] == {"version": "2.27.5"} and data["calibration"]["detected"]["nccl.version"] == "2.27.5"
    assert any(s.startswith("nccl.version 2.27.5: DETECTED (torch.cuda.nccl.version())") for s in data["sources"])
    p = load_profile(out)
    assert p.nccl.version == "2.27.5" and "version" not in p.nccl.defaulted
    r = runner.invoke(app, ["profiles", "validate", str(out)])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize(
    ("code", "text"), [((2, 18, 5), "2.18.5"), (21805, "2.18.5"), (2708, "2.7.8"), ((2, 30, 7, 1), "2.30.7")]
)
def test_release_text_reads_torchs_tuple_and_nccls_version_code(code, text):
    from simcli.io.detect import release_text

    assert release_text(code) == text
    assert release_text("2.27.5") is None and release_text(True) is None and release_text((2,)) is None


def test_a_release_simcli_refuses_is_said_and_not_written(monkeypatch, tmp_path):
    gpus = [GpuInfo("NVIDIA H100 80GB HBM3", 80e9, (9, 0))] * 8
    data = detect("old", gpus=gpus, topo=None, nccl="2.17.1", root=tmp_path, date="d")
    assert "nccl" not in data and "nccl.version" not in data["calibration"]["detected"]
    said = [s for s in data["sources"] if s.startswith("nccl.version 2.17.1")]
    assert len(said) == 1 and "not written" in said[0] and "older than the oldest" in said[0]
    assert profile_from_dict(yaml.safe_load(yaml.safe_dump(data)), "old").nccl.version == NCCL_TABLES_VERSION
    # a release between two carried rows is written, and the source says which row prices it
    data = detect("mid", gpus=gpus, topo=None, nccl="2.27.4", root=tmp_path, date="d")
    assert data["nccl"] == {"version": "2.27.4"}
    assert any(s.startswith("nccl.version 2.27.4: DETECTED") and "priced as" in s for s in data["sources"])


@pytest.mark.parametrize("nccl", [(2, 27, 5), RuntimeError("no NCCL")])
def test_without_cuda_or_nccl_detect_says_nothing_new(runner, monkeypatch, nccl):
    _fake_torch(monkeypatch, cuda=False, nccl=nccl)
    r = runner.invoke(app, ["profiles", "detect", "--name", "box"])
    assert r.exit_code == 0, r.output
    data = yaml.safe_load(r.stdout)
    assert "nccl" not in data and not any("nccl" in s.lower() for s in data["sources"])
    # CUDA without NCCL in torch: the GPUs are detected, the release is not
    _fake_torch(monkeypatch, cuda=True, nccl=RuntimeError("no NCCL"))
    r = runner.invoke(app, ["profiles", "detect", "--name", "gpu"])
    assert r.exit_code == 0, r.output
    data = yaml.safe_load(r.stdout)
    assert data["calibration"]["detected"]["devices"] == 8 and "nccl" not in data
