"""The layering rules of docs/ARCHITECTURE.md, checked: lint, the engine floor's imports, typer only in cli/."""

from __future__ import annotations

import ast
import io
import json
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the engine floor: pure maths on frozen data
FLOOR = (
    "version",
    "base.units",
    "base.ranges",
    "base.types",
    "step.straggler",
    "comm.nccl",
    "comm.collectives",
    "comm.grid",
    "step.buckets",
    "step.engine",
    "step.sharding",
    "step.memory",
    "io.workloads",
)
HEAVY = ("typer", "rich", "yaml", "pandas", "matplotlib", "torch")


def _ruff() -> list[str] | None:
    exe = shutil.which("ruff")
    if exe:
        return [exe]
    try:
        import ruff  # noqa: F401
    except ImportError:
        return None
    return [sys.executable, "-m", "ruff"]


def test_ruff_check_is_clean():
    cmd = _ruff()
    if cmd is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    r = subprocess.run(
        [*cmd, "check", "--no-cache", "simcli", "tests", "benchmarks"], cwd=ROOT, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_format_is_clean():
    cmd = _ruff()
    if cmd is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    r = subprocess.run(
        [*cmd, "format", "--check", "--no-cache", "simcli", "tests", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("module", FLOOR)
def test_engine_floor_imports_nothing_heavy(module):
    code = f"import sys, json; import simcli.{module}; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(r.stdout) == [], f"simcli.{module} pulls in {r.stdout.strip()}"


def _imports(path: Path) -> set[str]:
    """Top names of every module a file imports (at any depth), relative imports resolved inside simcli."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = path.relative_to(ROOT).with_suffix("").parts[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
                out.add(mod)
                out.update(f"{mod}.{a.name}" for a in node.names)
            elif node.module:
                out.add(node.module)
    return out


def test_only_cli_imports_typer():
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "simcli").rglob("*.py")
        if "cli" not in p.relative_to(ROOT / "simcli").parts[:1]
        and any(m == "typer" or m.startswith("typer.") for m in _imports(p))
    ]
    assert offenders == []


def test_torch_is_imported_only_inside_functions_and_never_by_the_command_line():
    """torch is an optional extra: no module imports it at import time, and cli/ leaves it to simcli.bench."""
    top, cli = [], []
    for p in (ROOT / "simcli").rglob("*.py"):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        where = str(p.relative_to(ROOT))
        torch = {
            n
            for n in ast.walk(tree)
            if isinstance(n, (ast.Import, ast.ImportFrom))
            and any(m == "torch" or m.startswith("torch.") for m in _imports_of(n))
        }
        top += [f"{where}:{n.lineno}" for n in tree.body if n in torch]
        if p.relative_to(ROOT / "simcli").parts[0] == "cli":
            cli += [f"{where}:{n.lineno}" for n in torch]
    assert top == [], top
    assert cli == [], cli


def _imports_of(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    return [node.module or ""] if not node.level else []


#: why an import may sit inside a function, the one word its line says (docs/ARCHITECTURE.md, the start-up rules)
IMPORT_REASONS = {
    "heavy": "torch, matplotlib (simcli.plot), pandas: only the paths that need them load them",
    "lazy": "a module deferred on purpose: importing it at the top would add to the start-up of a command that "
    "loads this module without needing it (tests/cli/test_cli.py; benchmarks/bench_startup.py)",
    "compat": "one of two spellings, tried in turn (typer's vendored click or click; platformdirs' fallback)",
}


def _unexplained_imports(source: str) -> list[int]:
    """The lines of the imports inside a function whose statement carries no ``# <reason>`` comment."""
    said: dict[int, set[str]] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            said.setdefault(tok.start[0], set()).update(w.strip().split(" ")[0] for w in tok.string.split("#")[1:])
    bad = []

    def walk(node: ast.AST, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if inside and isinstance(child, (ast.Import, ast.ImportFrom)):
                words = set().union(*(said.get(n, set()) for n in range(child.lineno, child.end_lineno + 1)))
                if not words & IMPORT_REASONS.keys():
                    bad.append(child.lineno)
            walk(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    walk(ast.parse(source), False)
    return bad


def test_imports_sit_at_the_top_unless_one_word_says_why():
    """Every import at the top of its module, where a reader sees what the module depends on; one inside a function
    says why on its line (# heavy, # lazy, # compat)."""
    bad = [
        f"{p.relative_to(ROOT)}:{line}"
        for p in sorted((ROOT / "simcli").rglob("*.py"))
        for line in _unexplained_imports(p.read_text(encoding="utf-8"))
    ]
    assert bad == [], bad
    toy = (
        "import os\n\ndef f():\n    import json\n    import torch  # heavy\n    from x import (  # lazy\n"
        "        y,\n    )\n    import re  # noqa: F401\n    s = '# lazy'; import csv\n\n"
        "class C:\n    def g(self):\n        import math\n"
    )
    assert _unexplained_imports(toy) == [4, 9, 10, 14]


def test_no_cli_module_imports_the_root_app_back():
    """Command modules own their typer apps; only simcli/cli/__init__.py imports simcli.cli.app."""
    cli = ROOT / "simcli" / "cli"
    offenders = [
        p.name
        for p in cli.glob("*.py")
        if p.name not in ("__init__.py", "app.py")
        and any(m == "simcli.cli.app" or m.startswith("simcli.cli.app.") for m in _imports(p))
    ]
    assert offenders == []
    # the shared modules import no command module: common.py only options.py and progress.py, which import
    # nothing of cli/
    assert {m.split(".")[2] for m in _imports(cli / "common.py") if m.startswith("simcli.cli.")} <= {
        "options",
        "progress",
    }
    assert not [m for m in _imports(cli / "progress.py") if m.startswith("simcli.")]
    assert not [m for m in _imports(cli / "options.py") if m.startswith("simcli.cli")]


# --------------------------------------------------------------------------- the import graph: arrows point down

#: every module's layer, lowest first (docs/ARCHITECTURE.md draws them). A module may import its own layer or a
#: lower one, never a higher one, and no module is in a circle. A name is a module or a package (then every module
#: below it, unless a longer name places it elsewhere); a package's ``__init__`` is named by the package, the root
#: package by "". A module no name places fails the test.
LAYERS: dict[str, tuple[str, ...]] = {
    "base": ("version", "base"),
    "communication": ("comm",),
    "step": ("step",),
    "inputs and outputs": ("io",),
    "fits": ("fits",),
    "checks": ("checks",),
    "decisions": ("decisions",),
    "measurement and pictures": ("bench", "plot"),
    "command line": ("cli", "__main__", ""),
}


def module_name(path: Path, root: Path) -> str:
    """``simcli/cli/app.py`` -> ``cli.app``; a package's ``__init__.py`` -> the package (the root package: "")."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_edges(root: Path) -> list[tuple[str, str, str, int]]:
    """(importer, imported module, imported name or "", line) for every import of the package at ``root`` by one
    of its own modules, at any depth (function-level and ``TYPE_CHECKING`` imports included)."""
    pkg = root.name
    modules = {module_name(p, root) for p in root.rglob("*.py")}
    edges = []
    for path in sorted(root.rglob("*.py")):
        me = module_name(path, root)
        here = me.split(".") if me else []
        if path.name != "__init__.py":
            here = here[:-1]  # the package a module sits in
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[tuple[str, str]] = []
            if isinstance(node, ast.Import):
                targets = [(a.name, "") for a in node.names]
                targets = [
                    (t[len(pkg) + 1 :] if t.startswith(pkg + ".") else ("" if t == pkg else None), n)
                    for t, n in targets
                ]
                targets = [(t, n) for t, n in targets if t is not None]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - node.level + 1]
                    mod = ".".join([*base, node.module] if node.module else base)
                elif node.module == pkg or (node.module or "").startswith(pkg + "."):
                    mod = node.module[len(pkg) + 1 :]
                else:
                    continue
                for a in node.names:
                    sub = f"{mod}.{a.name}" if mod else a.name
                    targets.append((sub, "") if sub in modules else (mod, a.name))
            for target, name in targets:
                if target in modules and target != me:
                    edges.append((me, target, name, node.lineno))
    return edges


def layer_of(module: str, layers: dict[str, tuple[str, ...]]) -> int | None:
    """The index of the layer a module belongs to: a name in a layer is the module itself or a package, which
    then holds every module below it (the longest match wins); None when no layer names it."""
    best: tuple[int, int] | None = None
    for i, names in enumerate(layers.values()):
        for n in names:
            if module == n or (n and module.startswith(n + ".")):
                if best is None or len(n) > best[1]:
                    best = (i, len(n))
    return None if best is None else best[0]


def layer_violations(root: Path, layers: dict[str, tuple[str, ...]]) -> list[str]:
    """Every import that goes up a layer, every circle between modules, every private name taken from another
    module, and every module without a layer: one line each, empty when the package obeys the rules."""
    modules = sorted({module_name(p, root) for p in root.rglob("*.py")})
    rank = {m: r for m in modules if (r := layer_of(m, layers)) is not None}
    name_of = dict(enumerate(layers))
    edges = import_edges(root)
    out = [f"{m}: has no layer" for m in modules if m not in rank]
    graph: dict[str, set[str]] = {}
    for me, target, name, line in edges:
        graph.setdefault(me, set()).add(target)
        if name.startswith("_") and not name.startswith("__"):
            out.append(f"{me}:{line} takes the private name {target}.{name}")
        if me in rank and target in rank and rank[target] > rank[me]:
            out.append(f"{me}:{line} imports {target} ({name_of[rank[target]]}) from below ({name_of[rank[me]]})")
    out += [f"circle: {' -> '.join(c)}" for c in _circles(graph)]
    return out


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_import_points_down_and_no_module_is_in_a_circle():
    assert layer_violations(ROOT / "simcli", LAYERS) == []


def test_the_layer_check_catches_an_upward_import_a_circle_and_a_private_name(tmp_path):
    pkg = tmp_path / "toy"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "low.py": "def f():\n    from .high import g  # upward, inside a function\n",
        "high.py": "from .low import f\nfrom .mid import _hidden\n",
        "mid.py": "from . import high\n",
        "sub/__init__.py": "",
        "sub/leaf.py": "from ..low import f\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text, encoding="utf-8")
    layers = {"low": ("low", "sub", "sub.leaf"), "high": ("mid", "high", "")}
    found = layer_violations(pkg, layers)
    assert any(v.startswith("low:2 imports high (high) from below (low)") for v in found), found
    assert "circle: high -> low -> mid" in found and "high:2 takes the private name mid._hidden" in found, found
    assert not [v for v in found if "sub.leaf" in v]  # a downward import from a sub-package is allowed
    # the same toy without the bad lines obeys the rules
    (pkg / "low.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    (pkg / "high.py").write_text("from .low import f\n", encoding="utf-8")
    assert layer_violations(pkg, layers) == []
    # and a module nobody placed is named
    (pkg / "stray.py").write_text("", encoding="utf-8")
    assert layer_violations(pkg, layers) == ["stray: has no layer"]


def test_the_package_shape_says_what_it_is():
    """Folders by layer (issue 25): at most 10 modules directly in simcli/, at least 4 sub-packages, each with an
    __init__ that says what it holds, and no module over 800 lines."""
    pkg = ROOT / "simcli"
    top = [p for p in pkg.glob("*.py")]
    subs = [d for d in pkg.iterdir() if d.is_dir() and (d / "__init__.py").exists()]
    assert len(top) <= 10, [p.name for p in top]
    assert len(subs) >= 4
    for d in subs:
        doc = ast.get_docstring(ast.parse((d / "__init__.py").read_text(encoding="utf-8")))
        assert doc, f"{d.name}/__init__.py says nothing about what it holds"
    long = {str(p.relative_to(ROOT)): n for p in pkg.rglob("*.py") if (n := len(p.read_text().splitlines())) > 800}
    assert long == {}, long


def test_tests_mirror_the_package_folders():
    """Issue 41, item 8: a module's tests sit in the folder of its layer (tests/comm/ for simcli/comm/, ...); only
    tests of the whole tree (architecture, documented examples, prose, names, packaging, scenario defaults, the
    shared gate) sit directly in tests/."""
    tests = ROOT / "tests"
    folders = {p.name for p in (ROOT / "simcli").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    extra = sorted(
        p.name for p in tests.iterdir() if p.is_dir() and p.name not in folders | {"fixtures", "__pycache__"}
    )
    assert not extra, f"tests/ folders that mirror no simcli/ folder: {extra}"
    assert not list(tests.glob("*/*/test_*.py")), "one level of folders, as in simcli/"
    top = sorted(p.name for p in tests.glob("test_*.py"))
    # a top-level test walks the tree (rglob) or imports from two folders of simcli, or from none (it reads files)
    for name in top:
        text = (tests / name).read_text(encoding="utf-8")
        layers = {m.split(".")[1] for m in _imports(tests / name) if m.startswith("simcli.") and m.count(".") >= 2}
        assert len(layers) != 1 or "rglob(" in text, f"tests/{name} tests one folder ({layers}): move it there"
