"""Every carried NCCL release's tables (simcli.comm.releases) against that tag's src/graph/tuning.cc.

    python benchmarks/check_nccl_releases.py NCCL_GIT_DIR

NCCL_GIT_DIR is a clone (or bare mirror) of NVIDIA/nccl with its tags. For each carried release it reads
``v<release>-1:src/graph/tuning.cc``: baseLat, hwLat and the llMaxBws/perChMax*Bws tables (the
``ncclTunerConstantsDefaults`` initializer from 2.28.3 on), and compares them with the row; it prints each
difference and exits 1 if there is one. The formula switches are not read here (docs/nccl.md, "Carried releases",
says where each one is in the source).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simcli.comm import releases  # noqa: E402

GENS = ["volta", "ampere", "hopper", "blackwell"]  # NCCL's compCapIndex order
ALGOS = ["tree", "ring", "collnet-direct", "collnet-chain", "nvls", "nvls-tree", "pat"]  # NCCL_ALGO_* order
HW = ["nvlink", "pcie", "net"]


def _numbers(text: str) -> list[float]:
    """The numbers of a C initializer, '2*36.7' multiplied out, comments dropped."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    out = []
    for m in re.finditer(r"(\d+)\s*\*\s*([\d.]+)|(\d*\.?\d+)", text):
        out.append(float(m.group(1)) * float(m.group(2)) if m.group(1) else float(m.group(3)))
    return out


def _braced(text: str, name: str) -> str | None:
    """The brace-balanced initializer that follows ``name``."""
    i = text.find(name)
    if i < 0:
        return None
    j = text.index("{", i)
    depth = 0
    for k in range(j, len(text)):
        depth += {"{": 1, "}": -1}.get(text[k], 0)
        if depth == 0:
            return text[j : k + 1]
    return None


def _groups(block: str) -> list[str]:
    """The top-level brace groups inside one initializer."""
    inner, out, depth, start = block[1:-1], [], 0, 0
    for k, ch in enumerate(inner):
        if ch == "{":
            start = k if depth == 0 else start
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                out.append(inner[start : k + 1])
    return out


def tables(source: str) -> dict[str, list[float] | None]:
    """baseLat, hwLat and the per-generation tables of one tuning.cc, as flat lists."""
    defaults = _braced(source, "ncclTunerConstantsDefaults = ")
    if defaults is not None:  # 2.28.3 on
        names = ("base", "hw", "ll_max", "ring_ll128", "tree_ll128", "tree", "nvls_tree")
        return dict(zip(names, (_numbers(g) for g in _groups(defaults))))
    out: dict[str, list[float] | None] = {"base": _numbers(_braced(source, "baseLat  [") or "")}
    out["hw"] = _numbers(_braced(source, "hwLat [") or "")
    for key, name in (
        ("ll_max", "llMaxBws["),
        ("ring_ll128", "perChMaxRingLL128Bws["),
        ("tree_ll128", "perChMaxTreeLL128Bws["),
        ("tree", "perChMaxTreeBws["),
    ):
        out[key] = _numbers(_braced(source, name) or "")
    out["nvls_tree"] = None
    return out


def compare(row: releases.Release, t: dict[str, list[float] | None]) -> list[str]:
    bad = []
    na = len(t["base"] or []) // 3
    for ai, a in enumerate(ALGOS[:na]):
        got = tuple(t["base"][3 * ai : 3 * ai + 3])
        if a in row.base_latency_us and got != tuple(row.base_latency_us[a]):
            bad.append(f"{row.version}: baseLat[{a}] is {got} at the tag, {row.base_latency_us[a]} in the row")
        for hi, h in enumerate(HW):
            got = tuple(t["hw"][(hi * na + ai) * 3 : (hi * na + ai) * 3 + 3])
            if a in row.hw_latency_us[h] and got != tuple(row.hw_latency_us[h][a]):
                bad.append(f"{row.version}: hwLat[{h}][{a}] is {got} at the tag, {row.hw_latency_us[h][a]} in the row")
    for key in ("ll_max", "ring_ll128", "tree_ll128", "tree", "nvls_tree"):
        vals = t[key]
        if vals is None:
            continue
        for gi in range(len(vals) // 3):
            g = GENS[gi]
            if row.generation_table.get(g) != g:
                if g == "blackwell":
                    bad.append(f"{row.version}: the tag has a Blackwell table, the row does not use it")
                continue
            got = tuple(round(x, 4) for x in vals[3 * gi : 3 * gi + 3])
            want = tuple(round(x, 4) for x in row.generations[g][key])
            if got != want:
                bad.append(f"{row.version}: {key}[{g}] is {got} at the tag, {want} in the row")
    return bad


def main(git_dir: str) -> int:
    bad = []
    for row in releases.RELEASES:
        src = subprocess.run(
            ["git", "-C", git_dir, "show", f"v{row.version}-1:src/graph/tuning.cc"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        bad += compare(row, tables(src))
    for line in bad:
        print(line)
    print(f"{len(releases.RELEASES)} releases, {len(bad)} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[1].strip())
    sys.exit(main(sys.argv[1]))
