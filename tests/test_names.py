"""Every dotted ``simcli.…`` name that the code, the docs, the profiles and the data files mention resolves
(issue 41, item 8): a module, or an attribute of one. A name that moved is a reference that rots."""

from __future__ import annotations

import importlib
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NAME = re.compile(r"\bsimcli(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
#: names meant not to resolve: the CLI test of an unknown module, and this file's own moved-name case
ON_PURPOSE = {"simcli.nope", "simcli.memory"}


def _files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        names = out.split()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an sdist): every file there
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file()]
    kinds = (".py", ".md", ".yaml", ".yml", ".toml", ".csv")
    return [ROOT / n for n in names if Path(n).suffix in kinds and not _recorded(ROOT / n)]


def _recorded(path: Path) -> bool:
    """A file a `simcli bench` run wrote (its first line says so): its comments quote the tool as it was then."""
    if path.suffix != ".csv":
        return False
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.readline().startswith("# simcli bench")


def resolves(name: str) -> bool:
    """A module, or a chain of attributes of the longest importable module prefix."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def mentioned() -> dict[str, list[str]]:
    seen: dict[str, list[str]] = {}
    for path in _files():
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for m in NAME.finditer(text):
            name = m.group(0)
            if name.endswith((".py", ".md", ".yaml", ".sh", ".fish", ".ps1")):  # a file name, not a dotted name
                name = name.rsplit(".", 1)[0]
            seen.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return seen


def test_every_dotted_name_resolves():
    bad = {n: sorted(set(f))[:3] for n, f in mentioned().items() if n not in ON_PURPOSE and not resolves(n)}
    assert not bad, bad


@pytest.mark.parametrize("name, ok", [("simcli.step.memory.for_scenario", True), ("simcli.memory", False)])
def test_the_resolver_tells_a_moved_name(name, ok):
    assert resolves(name) is ok
