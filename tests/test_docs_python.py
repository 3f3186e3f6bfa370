"""Every ```python block of README.md and docs/*.md runs (issue 39): the `$ simcli` examples are re-run by
tests/test_examples.py, and the Python API's examples must not rot either.

Each block runs on its own, in a fresh namespace, in a fresh directory that links to every top-level entry of the
repository (as tests/test_examples.py does), so a block may read what the docs name (tests/fixtures, validation/,
measurements/) and what it writes (``speedup.png``) lands outside the checkout. Blocks that need torch run where
torch is installed and are skipped with the reason where it is not. A block that is intentionally not runnable
(a fragment that needs a GPU cluster, or shows a signature) starts with the line ``# not run: REASON``; that must be
rare, and the reason must say why (tested below: a marker without a reason fails).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: the first line of a block that is deliberately not run, with its reason
NOT_RUN = re.compile(r"^#\s*not run:\s*(\S.*)$")
FENCE = re.compile(r"^(\s*)(```|~~~)\s*([\w+-]*)")


@dataclass
class Block:
    path: Path
    line: int  #: 1-based line of the first line of code
    code: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def python_blocks(path: Path) -> list[Block]:
    """The ```python (or ```py) fenced blocks of a Markdown file, with the line their code starts on."""
    out, lines = [], path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.groups()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        if lang.lower() in ("python", "py", "python3"):
            body = [x[len(indent) :] if x.startswith(indent) else x for x in lines[i + 1 : j]]
            out.append(Block(path, i + 2, "\n".join(body) + "\n"))
        i = j + 1
    return out


ALL = [b for f in FILES if f.exists() for b in python_blocks(f)]


def _workdir(tmp_path: Path) -> Path:
    d = tmp_path / "docs-block"
    d.mkdir()
    for entry in ROOT.iterdir():
        if entry.name != ".git":
            (d / entry.name).symlink_to(entry)
    return d


def test_the_docs_have_python_blocks_and_the_reader_finds_them(tmp_path):
    assert any(b.path.name == "api.md" for b in ALL), "docs/api.md's examples were not found"
    md = tmp_path / "x.md"
    md.write_text("text\n```python\nx = 1\n```\n\n```bash\nls\n```\n  ```py\n  y = 2\n  ```\n")
    blocks = python_blocks(md)
    assert [(b.line, b.code) for b in blocks] == [(3, "x = 1\n"), (10, "y = 2\n")]


def test_a_not_run_marker_must_give_a_reason():
    for b in ALL:
        first = b.code.lstrip().splitlines()[0] if b.code.strip() else ""
        if first.lower().startswith("# not run"):
            assert NOT_RUN.match(first), f"{b.id}: '# not run:' needs a reason after the colon"


@pytest.mark.parametrize("block", ALL, ids=[b.id for b in ALL])
def test_python_block_runs(block, tmp_path, monkeypatch):
    first = block.code.lstrip().splitlines()[0] if block.code.strip() else ""
    m = NOT_RUN.match(first)
    if m:
        pytest.skip(f"{block.id}: not run: {m.group(1)}")
    if re.search(r"^\s*(import torch|from torch)", block.code, re.M):
        pytest.importorskip("torch", reason=f"{block.id} needs torch")
    monkeypatch.chdir(_workdir(tmp_path))
    monkeypatch.setattr(sys, "argv", [block.id])
    monkeypatch.setitem(os.environ, "MPLBACKEND", "Agg")
    code = compile("\n" * (block.line - 1) + block.code, str(block.path), "exec")  # tracebacks name the doc's line
    exec(code, {"__name__": "__docs__"})
