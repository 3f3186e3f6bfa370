"""`simcli profiles detect`: a hardware profile of the machine simcli runs on.

What can be read off the machine is marked DETECTED in the profile's ``sources`` (and listed under
``calibration.detected``); everything else is ASSUMED (``calibration.assumed``) and says where the value
comes from, so that ``detect -> bench -> calibrate -> validate`` replaces the assumptions by measurements.

* With CUDA (through torch): GPU name, count, memory and compute capability
  (``torch.cuda.get_device_properties``); the NCCL release torch loads (``torch.cuda.nccl.version()``, written as
  ``nccl.version`` where simcli carries or can price it, else said in ``sources`` and left to the default); the
  GPU-to-GPU links from ``nvidia-smi topo -m`` when it is on the
  PATH (``NV<n>``: NVLink with n links; ``SYS``/``NODE``/``PHB``/``PXB``/``PIX``: PCIe); the NICs from
  ``/sys/class/infiniband/*/ports/*/rate`` and ``/sys/class/net/*/speed`` (physical ones: those with a
  ``device`` link) with their link rates. Peak FLOP/s per dtype, the per-device NVLink bandwidth, latencies
  and the mfu are ASSUMED: copied from the built-in profile of the same GPU (datasheet values, see its
  sources), matched by name.
* With no GPU: the CPU host as ``cpu-loopback`` models it: one gloo process per core, a ``cores`` tier of
  as many processes as cores (one memory system, ``per: node``) and an ``oversubscribed`` tier beyond;
  cores, CPU model and memory DETECTED; the per-core peak, the tiers' bandwidths and latencies and the mfu
  ASSUMED from ``cpu-loopback`` (measured on a 2-core AMD EPYC VM).

The probes are arguments (:func:`detect` takes the CUDA devices, the ``nvidia-smi topo -m`` text and a
root directory for ``/proc`` and ``/sys``), so the result is testable without the hardware.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..comm import releases
from .profiles import resolve_profile

__all__ = [
    "GpuInfo",
    "Nic",
    "cuda_devices",
    "nccl_release",
    "release_text",
    "nvidia_smi_topo",
    "nics",
    "cpu_info",
    "detect",
    "GPU_PROFILES",
    "NOT_PROBED",
]

#: GPU name fragments (lower case, most specific first) -> the built-in profile whose datasheet values are assumed
GPU_PROFILES = (
    ("gb200", "gb200-nvl72"),
    ("b200", "dgx-b200"),
    ("h200", "hgx-h200"),
    ("h100", "dgx-h100"),
    ("a100", "dgx-a100"),
    ("v100", "dgx-v100"),
    ("l40s", "l40s-pcie"),
    ("mi300x", "mi300x"),
)
#: a sentinel: "probe it yourself" (the default of :func:`detect`'s probe arguments)
NOT_PROBED: Any = object()


@dataclass(frozen=True)
class GpuInfo:
    name: str
    memory_bytes: float
    capability: tuple[int, int]


@dataclass(frozen=True)
class Nic:
    name: str
    kind: str  #: "infiniband" or "ethernet"
    rate_bps: float  #: link rate in bits per second
    source: str  #: the file it was read from


@dataclass
class _Notes:
    detected: dict[str, Any] = field(default_factory=dict)
    assumed: dict[str, Any] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)

    def det(self, key: str, value: Any, how: str) -> None:
        self.detected[key] = value
        self.sources.append(f"{key} {value}: DETECTED ({how})")

    def ass(self, key: str, value: Any, why: str) -> None:
        self.assumed[key] = value
        self.sources.append(f"{key} {value}: ASSUMED ({why})")


# --------------------------------------------------------------------------- probes


def cuda_devices() -> list[GpuInfo] | None:
    """The CUDA devices torch sees; None when torch is not installed (GPUs not probed)."""

    if importlib.util.find_spec("torch") is None:
        return None
    import torch  # heavy

    if not torch.cuda.is_available():
        return []
    out = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        out.append(GpuInfo(str(p.name), float(p.total_memory), (int(p.major), int(p.minor))))
    return out


def nccl_release() -> str | None:
    """The NCCL release torch runs (``torch.cuda.nccl.version()``) as '2.27.5'; None without torch, without CUDA,
    or where torch has no NCCL."""

    if importlib.util.find_spec("torch") is None:
        return None
    import torch  # heavy

    if not torch.cuda.is_available():
        return None
    try:
        return release_text(torch.cuda.nccl.version())
    except (AttributeError, RuntimeError):  # a build without NCCL
        return None


def release_text(v: Any) -> str | None:
    """'2.27.5' from what ``torch.cuda.nccl.version()`` returns: a tuple such as (2, 27, 5), or in older torch
    NCCL's integer NCCL_VERSION_CODE (nccl.h: X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z from 2.9, so
    21805 for 2.18.5); None for anything else."""
    if isinstance(v, (tuple, list)) and 2 <= len(v) <= 4 and all(isinstance(x, int) for x in v):
        return ".".join(str(x) for x in v[:3])
    if isinstance(v, int) and not isinstance(v, bool) and v > 0:
        if v >= 20900:
            return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
        return f"{v // 1000}.{v % 1000 // 100}.{v % 100}"
    return None


def nvidia_smi_topo() -> str | None:
    """``nvidia-smi topo -m`` output, or None when nvidia-smi is missing or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        p = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout if p.returncode == 0 else None


def parse_topo(text: str) -> dict[tuple[int, int], str]:
    """GPU pairs -> connection (``NV18``, ``SYS``, ...) from the ``nvidia-smi topo -m`` matrix."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return {}
    head = lines[0].split()
    gpus = [c for c in head if re.fullmatch(r"GPU\d+", c)]
    out: dict[tuple[int, int], str] = {}
    for ln in lines[1:]:
        cells = ln.split()
        if not cells or not re.fullmatch(r"GPU\d+", cells[0]):
            continue
        i = int(cells[0][3:])
        for j, c in enumerate(cells[1 : 1 + len(gpus)]):
            gj = int(gpus[j][3:])
            if gj != i:
                out[(i, gj)] = c
    return out


def _read(p: Path) -> str | None:
    try:
        return p.read_text().strip()
    except OSError:
        return None


def nics(root: Path = Path("/")) -> list[Nic]:
    """InfiniBand ports (``rate`` like "400 Gb/sec (4X NDR)") and physical Ethernet links (``speed`` in Mb/s)."""
    out: list[Nic] = []
    ib = root / "sys/class/infiniband"
    if ib.is_dir():
        for dev in sorted(ib.iterdir()):
            for port in sorted((dev / "ports").glob("*")):
                rate = _read(port / "rate")
                state = _read(port / "state") or ""
                m = re.match(r"\s*([\d.]+)\s*Gb/sec", rate or "")
                if m and ("ACTIVE" in state or not state):
                    out.append(
                        Nic(
                            f"{dev.name}/{port.name}",
                            "infiniband",
                            float(m.group(1)) * 1e9,
                            str((port / "rate").relative_to(root)),
                        )
                    )
    net = root / "sys/class/net"
    if net.is_dir():
        for dev in sorted(net.iterdir()):
            if dev.name == "lo" or not (dev / "device").exists():
                continue  # loopback and virtual interfaces (bridges, veth, docker) have no device
            if (dev / "type").exists() and _read(dev / "type") == "32":
                continue  # IP over InfiniBand: the port is already counted
            speed = _read(dev / "speed")
            try:
                mbps = float(speed) if speed is not None else -1.0
            except ValueError:
                mbps = -1.0
            if mbps > 0:
                out.append(Nic(dev.name, "ethernet", mbps * 1e6, str((dev / "speed").relative_to(root))))
    return out


def cpu_info(root: Path = Path("/")) -> dict[str, Any]:
    """Cores (os.cpu_count), the CPU model and MemTotal from /proc."""
    model = None
    text = _read(root / "proc/cpuinfo") or ""
    for ln in text.splitlines():
        if ln.lower().startswith("model name"):
            model = ln.split(":", 1)[1].strip()
            break
    mem = None
    for ln in (_read(root / "proc/meminfo") or "").splitlines():
        if ln.startswith("MemTotal:"):
            mem = float(ln.split()[1]) * 1024
    flags = set()
    for ln in text.splitlines():
        if ln.startswith("flags"):
            flags = set(ln.split(":", 1)[1].split())
            break
    return {
        "cores": os.cpu_count() or 1,
        "model": model,
        "memory_bytes": mem,
        "bf16_flags": sorted(flags & {"avx512_bf16", "amx_bf16"}),
    }


# --------------------------------------------------------------------------- the profile


def _builtin(name: str):
    return resolve_profile(name)


def _gb(x: float) -> str:
    return f"{x / 1e9:.6g} GB"


def detect(
    name: str,
    *,
    gpus: Any = NOT_PROBED,
    topo: Any = NOT_PROBED,
    nccl: Any = NOT_PROBED,
    root: Path = Path("/"),
    host: str | None = None,
    date: str = "",
) -> dict[str, Any]:
    """A profile (a YAML-ready mapping that :func:`simcli.io.profiles.profile_from_dict` accepts) of this machine."""
    gpus = cuda_devices() if gpus is NOT_PROBED else gpus
    host = host or platform.node() or "unknown"
    notes = _Notes()
    if gpus:
        topo = nvidia_smi_topo() if topo is NOT_PROBED else topo
        nccl = nccl_release() if nccl is NOT_PROBED else nccl
        data = _gpu_profile(name, gpus, topo, found=nics(root), notes=notes)
        _nccl_version(data, nccl, notes)
    else:
        data = _cpu_profile(name, cpu_info(root), notes, torch_missing=gpus is None)
    data["sources"] = notes.sources
    data["calibration"] = {
        "tool": "simcli profiles detect",
        "date": date,
        "host": host,
        "detected": notes.detected,
        "assumed": notes.assumed,
        "next": "measure the assumed values: simcli bench allreduce / bench step on this machine, "
        "then simcli calibrate RUN.csv STEPS.csv --profile THIS.yaml",
    }
    return data


def _nccl_version(data: dict[str, Any], version: str | None, notes: _Notes) -> None:
    """``nccl.version`` from the release torch runs, where simcli can price it (simcli.comm.releases.problem);
    a release it refuses (older than the oldest carried) is said in ``sources`` and left out, so that the profile
    loads and is priced as the default release."""
    if not version:
        return

    why = releases.problem(version)
    if why:
        notes.sources.append(
            f"nccl.version {version}: DETECTED (torch.cuda.nccl.version()) but not written: {why}; priced as "
            f"{releases.DEFAULT_RELEASE.version}"
        )
        return
    said = releases.note(version, "nccl.version")
    notes.det("nccl.version", version, "torch.cuda.nccl.version()" + (f"; {said}" if said else ""))
    data["nccl"] = {"version": version}


def _cpu_profile(name: str, cpu: dict[str, Any], notes: _Notes, *, torch_missing: bool) -> dict[str, Any]:
    ref = _builtin("cpu-loopback")
    cores = int(cpu["cores"])
    notes.det("host.cores", cores, "os.cpu_count()")
    if cpu.get("model"):
        notes.det("host.cpu", cpu["model"], "/proc/cpuinfo model name")
    if torch_missing:
        notes.sources.append("GPUs: NOT PROBED (torch is not installed; pip install 'simcli[bench]' and run again)")
    else:
        notes.sources.append("GPUs: DETECTED none (torch.cuda.is_available() is False)")
    peak = ref.device.peak_flops["fp32"]
    notes.ass(
        "device.peak_flops.fp32",
        f"{peak / 1e9:g} GFLOP/s",
        "cpu-loopback's per-core peak, measured on a "
        "2-core AMD EPYC VM (single-thread 2048x2048 fp32 matmul); measure yours with simcli bench step "
        "--world-sizes 1,2 and simcli calibrate",
    )
    why = (
        f"the fp32 peak: the CPU has {', '.join(cpu['bf16_flags'])}, which can be faster"
        if cpu.get("bf16_flags")
        else "the fp32 peak (no avx512_bf16/amx_bf16 flag: bf16 autocast converts to fp32 FMAs)"
    )
    notes.ass("device.peak_flops.bf16", f"{peak / 1e9:g} GFLOP/s", why)
    notes.ass("device.mfu", 0.5, "a first guess before calibration (cpu-loopback's before its calibration)")
    dev: dict[str, Any] = {
        "name": "CPU core (one gloo process)",
        "peak_flops": {"fp32": f"{peak / 1e9:g} GFLOP/s", "bf16": f"{peak / 1e9:g} GFLOP/s"},
        "mfu": 0.5,
    }
    if cpu.get("memory_bytes"):
        per = cpu["memory_bytes"] / cores
        notes.det("host.memory", _gb(cpu["memory_bytes"]), "/proc/meminfo MemTotal")
        notes.sources.append(f"device.memory {_gb(per)}: DETECTED (host memory / {cores} cores)")
        notes.detected["device.memory"] = _gb(per)
        dev["memory"] = _gb(per)
    cores_t, over_t = ref.network[0], ref.network[-1]
    net = []
    if cores > 1:
        notes.sources.append(f"network[0].size {cores}: DETECTED (one gloo process per core)")
        notes.detected["network[0].size"] = cores
        notes.ass(
            "network[0].bandwidth",
            f"{cores_t.bandwidth_Bps / 1e9:g} GB/s",
            "cpu-loopback's calibrated loopback tier (2-core VM)",
        )
        notes.ass("network[0].latency", f"{cores_t.latency_s * 1e6:g} us", "cpu-loopback's calibrated loopback tier")
        net.append(
            {
                "name": "cores",
                "size": cores,
                "bandwidth": f"{cores_t.bandwidth_Bps / 1e9:g} GB/s",
                "per": "node",
                "latency": f"{cores_t.latency_s * 1e6:g} us",
                "efficiency": 1.0,
            }
        )
    i = len(net)
    notes.ass(
        f"network[{i}].bandwidth",
        f"{over_t.bandwidth_Bps / 1e9:g} GB/s",
        "cpu-loopback's oversubscribed tier (more processes than cores)",
    )
    notes.ass(f"network[{i}].latency", f"{over_t.latency_s * 1e6:g} us", "cpu-loopback's oversubscribed tier")
    net.append(
        {
            "name": "oversubscribed",
            "bandwidth": f"{over_t.bandwidth_Bps / 1e9:g} GB/s",
            "per": "node",
            "latency": f"{over_t.latency_s * 1e6:g} us",
            "efficiency": 1.0,
        }
    )
    return {
        "name": name,
        "description": f"this host: {cores} CPU core(s)"
        + (f" ({cpu['model']})" if cpu.get("model") else "")
        + ", one gloo process per core over loopback "
        "(simcli profiles detect)",
        "library": "gloo",
        "device": dev,
        "network": net,
    }


def _gpu_profile(
    name: str, gpus: list[GpuInfo], topo: str | None, *, found: list[Nic], notes: _Notes
) -> dict[str, Any]:
    g0 = gpus[0]
    n = len(gpus)
    notes.det("device.name", g0.name, "torch.cuda.get_device_name")
    notes.det("devices", n, "torch.cuda.device_count()")
    notes.det("device.memory", _gb(g0.memory_bytes), "torch.cuda.get_device_properties(0).total_memory")
    notes.det(
        "device.compute_capability",
        f"{g0.capability[0]}.{g0.capability[1]}",
        "torch.cuda.get_device_properties(0).major/minor",
    )
    if len({g.name for g in gpus}) > 1:
        notes.sources.append(
            f"devices: DETECTED mixed models ({', '.join(sorted({g.name for g in gpus}))}); the profile describes GPU 0"
        )
    key = g0.name.lower()
    ref_name = next((p for frag, p in GPU_PROFILES if frag in key), None)
    ref = _builtin(ref_name) if ref_name else None
    if ref is not None:
        peaks = {dt: f"{v / 1e12:.6g} TFLOP/s" for dt, v in ref.device.peak_flops.items()}
        for dt, v in peaks.items():
            notes.ass(
                f"device.peak_flops.{dt}",
                v,
                f"the built-in profile {ref.name} ({ref.device.name}): dense datasheet peak",
            )
        mfu = ref.device.mfu
        notes.ass(
            "device.mfu",
            mfu,
            f"{ref.name}'s typed-in value; fit it with simcli bench step --model gpt and simcli calibrate",
        )
    else:
        peaks = {"fp32": "10 TFLOP/s"}
        mfu = 0.4
        notes.ass(
            "device.peak_flops.fp32",
            "10 TFLOP/s",
            f"no datasheet table entry for {g0.name!r}: a placeholder; replace it with the datasheet's dense peak",
        )
        notes.ass("device.mfu", mfu, "a placeholder before calibration")
    dev = {"name": g0.name, "peak_flops": peaks, "memory": _gb(g0.memory_bytes), "mfu": mfu}
    # the links between the GPUs of this node
    pairs = parse_topo(topo) if topo else {}
    net: list[dict[str, Any]] = []
    if n > 1:
        nv = [int(c[2:]) for c in pairs.values() if re.fullmatch(r"NV\d+", c)]
        all_nv = bool(pairs) and len(nv) == len(pairs)
        inner = ref.network[0] if ref is not None else None
        if all_nv:
            notes.det(
                "network[0].kind", f"nvlink (NV{min(nv)}..NV{max(nv)} between every GPU pair)", "nvidia-smi topo -m"
            )
            bw = inner.bandwidth_Bps if inner is not None and inner.kind in (None, "nvlink") else 25e9 * min(nv)
            notes.ass(
                "network[0].bandwidth",
                f"{bw / 1e9:g} GB/s",
                f"{ref.name}'s NVLink tier"
                if ref is not None
                else f"NV{min(nv)} x 25 GB/s per link one way (NVLink 3/4)",
            )
            net.append(
                {
                    "name": "nvlink",
                    "size": n,
                    "bandwidth": f"{bw / 1e9:g} GB/s",
                    "per": "device",
                    "latency": "3.4 us",
                    "efficiency": 0.8,
                    "kind": "nvlink",
                }
            )
            notes.ass("network[0].latency", "3.4 us", "NCCL's NVLink hop latency class (simcli.comm.nccl)")
            notes.ass("network[0].efficiency", 0.8, "a typical achieved fraction before calibration")
        else:
            how = "nvidia-smi topo -m (no NVLink between some GPUs)" if pairs else "nvidia-smi not available"
            notes.sources.append(f"network[0].kind pcie: {'DETECTED' if pairs else 'ASSUMED'} ({how})")
            (notes.detected if pairs else notes.assumed)["network[0].kind"] = "pcie"
            notes.ass("network[0].bandwidth", "25 GB/s", "PCIe 4.0 x16 achievable one way")
            net.append(
                {
                    "name": "pcie",
                    "size": n,
                    "bandwidth": "25 GB/s",
                    "per": "device",
                    "latency": "5.7 us",
                    "efficiency": 0.8,
                    "kind": "pcie",
                }
            )
    # the network out of the node
    i = len(net)
    ib = [x for x in found if x.kind == "infiniband"]
    use = ib or [x for x in found if x.kind == "ethernet"]
    if use:
        total = sum(x.rate_bps for x in use) / 8
        notes.det(
            f"network[{i}].bandwidth",
            f"{total / 1e9:g} GB/s",
            "sum of the link rates of "
            + ", ".join(f"{x.name} {x.rate_bps / 1e9:g} Gb/s ({x.source})" for x in use)
            + ", per node",
        )
        kind_name = "infiniband" if ib else "ethernet"
    else:
        total = 12.5e9
        notes.ass(f"network[{i}].bandwidth", "12.5 GB/s", "no NIC with a link rate found: 100 Gb/s Ethernet")
        kind_name = "ethernet"
    notes.ass(f"network[{i}].latency", "14 us", "NCCL's network latency class (simcli.comm.nccl)")
    notes.ass(f"network[{i}].efficiency", 0.8, "a typical achieved fraction before calibration")
    net.append(
        {
            "name": kind_name,
            "bandwidth": f"{total / 1e9:g} GB/s",
            "per": "node",
            "latency": "14 us",
            "efficiency": 0.8,
            "kind": "net",
        }
    )
    return {
        "name": name,
        "description": f"this host: {n} x {g0.name} (simcli profiles detect)",
        "device": dev,
        "network": net,
    }
