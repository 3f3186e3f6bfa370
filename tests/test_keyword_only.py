"""Past the third, parameters are keyword-only and arguments are named (issue 41, item 5): two floats in a
row can then never swap silently, and a call says what each value is.

The test walks the AST of simcli/ and fails, naming ``file:line``, on

* a ``def`` with more than 3 positional parameters (``self``/``cls`` not counted; typer command functions are
  left out: typer passes their options by keyword), and
* a call to one of the project's functions (in simcli/, tests/ or benchmarks/) that passes more than 3
  arguments by position.

A call is the project's when its name resolves to a project ``def``: a function of the same module or scope, a
name imported from a ``simcli`` module, ``module.f`` with ``module`` an imported ``simcli`` module, or
``self.f``/``cls.f`` inside a class that defines ``f``; a class's name stands for its ``__init__``.

``python tests/test_keyword_only.py`` lists every finding.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: at most this many positional parameters (and positional arguments in a call to the project's functions)
MAX_POSITIONAL = 3

#: defs not yet keyword-only past the third, as ``path::qualified name``; this list only shrinks (a def that
#: passes is taken off by the test below, so an entry cannot outlive its fix)
ALLOWED_DEFS: frozenset[str] = frozenset(
    {
        # callbacks whose positional signature a library fixes: warnings.showwarning(message, category, filename,
        # lineno, file, line) and click's BaseCommand.main(args, prog_name, complete_var, standalone_mode)
        "simcli/cli/common.py::_show_warning",
        "simcli/cli/common.py::SimcliGroup.main",
    }
)


@dataclass
class Def:
    path: str
    qualname: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    positional: list[str]
    command: bool

    @property
    def where(self) -> str:
        return f"{self.path}:{self.node.lineno}"

    @property
    def key(self) -> str:
        return f"{self.path}::{self.qualname}"


@dataclass
class Module:
    path: str  # relative to ROOT
    name: str  # dotted, e.g. simcli.comm.nccl ('' for tests and benchmarks)
    tree: ast.Module
    defs: dict[str, Def] = field(default_factory=dict)  # qualname -> Def


def _module_name(rel: Path) -> str:
    if rel.parts[0] != "simcli":
        return ""
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A typer command or callback: decorated ``@x.command(...)`` or ``@x.callback(...)``."""
    for d in node.decorator_list:
        f = d.func if isinstance(d, ast.Call) else d
        if isinstance(f, ast.Attribute) and f.attr in ("command", "callback"):
            return True
    return False


def positional_params(node: ast.FunctionDef | ast.AsyncFunctionDef, in_class: bool) -> list[str]:
    names = [a.arg for a in node.args.posonlyargs + node.args.args]
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
    if in_class and not static and names and names[0] in ("self", "cls", "mcs"):
        names = names[1:]
    return names


def load(roots: tuple[str, ...] = ("simcli", "tests", "benchmarks")) -> dict[str, Module]:
    mods: dict[str, Module] = {}
    for root in roots:
        for p in sorted((ROOT / root).rglob("*.py")):
            rel = p.relative_to(ROOT)
            if "hardware_profiles" in rel.parts:
                continue
            m = Module(str(rel), _module_name(rel), ast.parse(p.read_text(), str(rel)))
            _collect(m, m.tree, "", in_class=False)
            mods[m.path] = m
    return mods


def _collect(m: Module, node: ast.AST, prefix: str, in_class: bool) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            q = prefix + child.name
            m.defs[q] = Def(m.path, q, child, positional_params(child, in_class), _is_command(child))
            _collect(m, child, q + ".", in_class=False)
        elif isinstance(child, ast.ClassDef):
            _collect(m, child, prefix + child.name + ".", in_class=True)
        else:
            _collect(m, child, prefix, in_class)


def _resolve_from(m: Module, node: ast.ImportFrom) -> str:
    """The absolute module an ``from X import`` names."""
    if not node.level:
        return node.module or ""
    base = m.name.split(".") if m.name else []
    if not m.path.endswith("__init__.py"):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join(base + ([node.module] if node.module else []))


def imports(m: Module, by_name: dict[str, Module]) -> tuple[dict[str, Def], dict[str, Module]]:
    """The project functions and modules a module binds by import: local name -> Def | Module."""
    funcs: dict[str, Def] = {}
    modules: dict[str, Module] = {}
    for node in ast.walk(m.tree):
        if isinstance(node, ast.ImportFrom):
            src = _resolve_from(m, node)
            for a in node.names:
                local = a.asname or a.name
                sub = by_name.get(f"{src}.{a.name}")
                if sub is not None:
                    modules[local] = sub
                elif src in by_name and a.name in by_name[src].defs:
                    funcs[local] = by_name[src].defs[a.name]
                elif src in by_name and f"{a.name}.__init__" in by_name[src].defs:  # a class: its __init__
                    funcs[local] = by_name[src].defs[f"{a.name}.__init__"]
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in by_name and a.asname:
                    modules[a.asname] = by_name[a.name]
    return funcs, modules


@dataclass
class CallSite:
    path: str
    node: ast.Call
    target: Def

    @property
    def where(self) -> str:
        return f"{self.path}:{self.node.lineno}"


def calls(mods: dict[str, Module]) -> list[CallSite]:
    """Every call whose callee resolves to a project def (module docstring)."""
    by_name = {m.name: m for m in mods.values() if m.name}
    out: list[CallSite] = []
    for m in mods.values():
        funcs, modules = imports(m, by_name)
        _calls_in(m, m.tree, "", None, funcs, modules, out)
    return out


def _calls_in(m, node, scope: str, cls: str | None, funcs, modules, out) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _calls_in(m, child, scope + child.name + ".", cls, funcs, modules, out)
            continue
        if isinstance(child, ast.ClassDef):
            _calls_in(m, child, scope + child.name + ".", scope + child.name, funcs, modules, out)
            continue
        if isinstance(child, ast.Call):
            target = _target(m, child.func, scope, cls, funcs, modules)
            if target is not None:
                out.append(CallSite(m.path, child, target))
        _calls_in(m, child, scope, cls, funcs, modules, out)


def _target(m: Module, f: ast.expr, scope: str, cls: str | None, funcs, modules) -> Def | None:
    if isinstance(f, ast.Name):
        parts = scope.split(".")[:-1]
        for i in range(len(parts), -1, -1):  # innermost enclosing scope first
            q = ".".join(parts[:i] + [f.id])
            d = m.defs.get(q) or m.defs.get(q + ".__init__")
            if d is not None and (i == 0 or ".".join(parts[:i]) != cls):  # a class body's names are not in scope
                return d
        return funcs.get(f.id)
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        base = f.value.id
        if base in ("self", "cls") and cls is not None:
            return m.defs.get(f"{cls}.{f.attr}")
        if base in modules:
            defs = modules[base].defs
            return defs.get(f.attr) or defs.get(f"{f.attr}.__init__")
    return None


def positional_count(call: ast.Call) -> int:
    return sum(1 for a in call.args if not isinstance(a, ast.Starred))


def findings(mods: dict[str, Module] | None = None) -> tuple[list[str], list[str]]:
    """(defs, calls) that break the rule, as ``file:line name (...)`` lines."""
    mods = mods if mods is not None else load()
    bad_defs = [
        f"{d.where} def {d.qualname}({', '.join(d.positional)}, ...): {len(d.positional)} positional parameters"
        for m in mods.values()
        if m.name
        for d in m.defs.values()
        if not d.command and len(d.positional) > MAX_POSITIONAL and d.key not in ALLOWED_DEFS
    ]
    bad_calls = [
        f"{c.where} {c.target.qualname}(...) with {positional_count(c.node)} positional arguments "
        f"(defined at {c.target.where})"
        for c in calls(mods)
        if c.target.path.startswith("simcli/")
        and not c.target.node.args.vararg  # f(*items): the items are one list, not parameters to name
        and positional_count(c.node) > MAX_POSITIONAL
        and c.target.key not in ALLOWED_DEFS
    ]
    return bad_defs, bad_calls


def test_no_def_takes_more_than_three_positional_parameters_and_no_call_passes_more():
    bad_defs, bad_calls = findings()
    assert not bad_defs, "make the parameters past the third keyword-only (def f(a, b, c, *, d)):\n" + "\n".join(
        bad_defs
    )
    assert not bad_calls, "name the arguments past the third:\n" + "\n".join(bad_calls)


def test_the_allow_list_only_names_defs_that_still_break_the_rule():
    mods = load(("simcli",))
    defs = {d.key: d for m in mods.values() for d in m.defs.values()}
    stale = sorted(k for k in ALLOWED_DEFS if k not in defs or len(defs[k].positional) <= MAX_POSITIONAL)
    assert not stale, "take these off ALLOWED_DEFS (fixed or gone):\n" + "\n".join(stale)


def test_the_walk_finds_what_it_should(tmp_path):
    """The checker on a toy package: a wide def, a wide call through each way of naming a function, and the
    forms it must let pass (keyword-only past the third, a typer command, a method's self, a library call)."""
    pkg = tmp_path / "simcli"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(
        "import numpy as np\n"
        "def wide(a, b, c, d):\n    return a\n"
        "def fine(a, b, c, *, d=1):\n    return a\n"
        "class K:\n    def m(self, a, b, c):\n        return self.m(1, 2, 3)\n"
        "    def w(self, a, b, c, d):\n        return self.w(1, 2, 3, 4)\n"
        "@app.command()\ndef cmd(a, b, c, d, e):\n    return np.clip(1, 2, 3, 4)\n"
        "def caller():\n    return fine(1, 2, 3, d=4), wide(1, 2, 3, 4)\n"
    )
    (pkg / "b.py").write_text(
        "from . import a\nfrom .a import fine as f2\nfrom simcli"
        ".a import wide\n"
        "x = a.wide(1, 2, 3, 4)\ny = f2(1, 2, 3, 4)\nz = wide(1, 2, *[3, 4])\n"
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        bad_defs, bad_calls = findings(load(("simcli",)))
    finally:
        ROOT = saved
    assert [d.split()[0] for d in bad_defs] == ["simcli/a.py:2", "simcli/a.py:9"], bad_defs
    assert sorted(c.split()[0] for c in bad_calls) == [
        "simcli/a.py:10",
        "simcli/a.py:15",
        "simcli/b.py:4",
        "simcli/b.py:5",
    ], bad_calls


if __name__ == "__main__":
    d, c = findings()
    print("\n".join(d + c))
    print(f"{len(d)} defs, {len(c)} calls", file=sys.stderr)
