"""Every carried NCCL release's tables (simcli.comm.releases) against that tag's src/graph/tuning.cc.

    python benchmarks/check_nccl_releases.py NCCL_GIT_DIR

NCCL_GIT_DIR is a clone (or bare mirror) of NVIDIA/nccl with its tags. For each carried release it reads
``v<release>-1:src/graph/tuning.cc``: baseLat, hwLat and the llMaxBws/perChMax*Bws tables (the
``ncclTunerConstantsDefaults`` initializer from 2.28.3 on; 2.18.1's one ``ll128MaxBwPerCh`` row caps Ring/LL128 and
Tree/LL128 alike), CollNet's baseLat/hwLat (simcli.comm.collnet's row for the release), and compares them with the
row; for the releases up to 2.20.3 it also looks for the source line of each formula switch the 2.18/2.19 rows
set (:data:`SWITCHES`). It prints each difference and exits 1 if there is one. The other switches are not read
here (docs/nccl.md, "Carried releases", says where each one is in the source).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simcli.comm import collnet, releases  # noqa: E402

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
    one = re.search(r"ll128MaxBwPerCh\[\d\]\s*=\s*(\{[^}]*\})", source)  # 2.18.1: one cap per generation
    if one is not None:
        caps = _numbers(one.group(1))
        out["ring_ll128"] = out["tree_ll128"] = [c for c in caps for _ in range(3)]
    for key, name in (
        ("ll_max", "llMaxBws["),
        ("ring_ll128", "perChMaxRingLL128Bws["),
        ("tree_ll128", "perChMaxTreeLL128Bws["),
        ("tree", "perChMaxTreeBws["),
    ):
        if name in source or key not in out:
            out[key] = _numbers(_braced(source, name) or "")
    out["nvls_tree"] = None
    return out


#: the formula switches the 2.18.1-2.19.x rows set, each as (field, the source line of tuning.cc that is there
#: exactly where the field is True), read for every carried release up to 2.20.3
SWITCHES = (
    ("tree_pattern_factor", r"graphs\[a\]->pattern == NCCL_TOPO_PATTERN_TREE\) busBw \*= \.85"),
    ("nvls_tree_2_18", r"ratio = \.70 \* nNodes / \(2\*\(nNodes-1\)\)"),
    ("nvls_ag_rs", r"coll == ncclFuncAllGather && a != NCCL_ALGO_RING && a != NCCL_ALGO_NVLS"),
)
#: the NVLS all-reduce ratio's source line, by the row's nvls_ratio (to 2.27.x)
NVLS_RATIO_LINES = {
    0.75: r"a == NCCL_ALGO_NVLS\) ratio = \.75;",
    5.0 / 6.0: r"a == NCCL_ALGO_NVLS( \|\| a == NCCL_ALGO_NVLS_TREE)?\) ratio \*?= 5\.0/6\.0;",
}


def compare_switches(row: releases.Release, source: str) -> list[str]:
    """The 2.18/2.19 switches of ``row`` against its tag's tuning.cc (releases up to 2.20.3)."""
    if row.key > releases.parse_version("2.20.3"):
        return []
    bad = []
    for field, pattern in SWITCHES:
        if bool(re.search(pattern, source)) != bool(getattr(row, field)):
            bad.append(
                f"{row.version}: {field} is {getattr(row, field)} in the row, the tag's line /{pattern}/ says not"
            )
    if not re.search(NVLS_RATIO_LINES.get(row.nvls_ratio, "^$"), source):
        bad.append(f"{row.version}: nvls_ratio {row.nvls_ratio} in the row is not the tag's")
    return bad


def compare_collnet(row: releases.Release, t: dict[str, list[float] | None]) -> list[str]:
    """CollNetDirect/CollNetChain's Simple baseLat and hwLat against simcli.comm.collnet's row for the release."""
    cn = collnet.collnet_release(row.version)
    na = len(t["base"] or []) // 3
    bad = []
    for j, a in enumerate(ALGOS[2:4]):
        ai = 2 + j
        got = t["base"][3 * ai + 2]
        if got != cn.base_us[j]:
            bad.append(f"{row.version}: baseLat[{a}][Simple] is {got} at the tag, {cn.base_us[j]} in {cn.since}'s row")
        for hi, h in enumerate(HW):
            got = t["hw"][(hi * na + ai) * 3 + 2]
            if got != cn.hw_us[h][j]:
                bad.append(f"{row.version}: hwLat[{h}][{a}][Simple] is {got} at the tag, {cn.hw_us[h][j]} in the row")
    return bad


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
        t = tables(src)
        bad += compare(row, t) + compare_collnet(row, t) + compare_switches(row, src)
    for line in bad:
        print(line)
    print(f"{len(releases.RELEASES)} releases, {len(bad)} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[1].strip())
    sys.exit(main(sys.argv[1]))
