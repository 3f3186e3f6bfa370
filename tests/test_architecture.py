"""The layering rules of docs/ARCHITECTURE.md, checked: lint, the engine floor's imports, typer only in cli/."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the engine floor: pure maths on frozen data
FLOOR = ("units", "ranges", "model", "collectives", "engine", "comm", "workloads", "sharding", "memory")
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


def test_bench_worker_and_step_import_each_other_only_lazily():
    """bench.step imports bench.worker for a type only; the worker imports the step module inside a function."""
    text = (ROOT / "simcli" / "bench" / "step.py").read_text(encoding="utf-8")
    head = text.split("if TYPE_CHECKING:")[0]
    assert "from .worker import" not in head


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
    # the shared modules import no command module: common.py only options.py, options.py nothing of cli/
    assert {m.split(".")[2] for m in _imports(cli / "common.py") if m.startswith("simcli.cli.")} <= {"options"}
    assert not [m for m in _imports(cli / "options.py") if m.startswith("simcli.cli")]
