"""Numbers quoted in the prose of README.md and docs/cookbook.md come from a command (issue 39, item 9).

A figure that a page states in words beside an example ("one H100 does 2.5x the work of one A100") is a
result of that example's command: each such figure is registered below with the example it comes from, and
the test runs the command (as tests/test_examples.py runs it) and reads the figure from its output at the
precision the prose gives. Inputs written in the prose (90% efficiency, 2 T tokens, a price) are the
command's own arguments, not results, and are not registered. A new figure in prose is registered here or
removed; the README stays a first page (at most 200 lines).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_examples import examples, run

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Quote:
    page: str  #: the page, relative to the repository
    prose: str  #: a regular expression over the page's text; group 1 is the quoted number
    command: str  #: the start of the page's `$ simcli` example the figure comes from
    output: str  #: a regular expression over the command's output (multi-line); group 1 is the figure

    @property
    def id(self) -> str:
        return f"{self.page}:{self.prose[:40]}"


QUOTES = [
    Quote(
        "docs/cookbook.md",
        r"one H100 does ([\d.]+)x the work of one A100",
        "simcli compare --profile dgx-a100,dgx-h100",
        r"^\s*8 │ dgx-h100 │.*│ x([\d.]+)\s*$",
    ),
    Quote(
        "docs/cookbook.md",
        r"DDP keeps a whole replica: ([\d.]+) GB per GPU for 7B",
        "simcli compare --model llama2-7b",
        r"^\s*8 │ ddp .*NO \(([\d.]+) GB\)",
    ),
]


def _example(q: Quote):
    found = [e for e in examples(ROOT / q.page) if e.command.startswith(q.command)]
    assert found, f"{q.page}: no `$ {q.command}` example"
    return found[0]


@pytest.mark.parametrize("q", QUOTES, ids=[q.id for q in QUOTES])
def test_a_quoted_figure_is_what_its_command_prints(q):
    text = (ROOT / q.page).read_text(encoding="utf-8")
    said = re.search(q.prose, text.replace("\n", " "))
    assert said, f"{q.page}: the prose no longer says {q.prose!r}; update or remove this quote"
    out, code = run(_example(q).command)
    assert code == 0, out
    printed = re.search(q.output, out, re.MULTILINE)
    assert printed, f"`{q.command}` no longer prints {q.output!r}"
    quoted, value = said.group(1), float(printed.group(1))
    decimals = len(quoted.split(".")[1]) if "." in quoted else 0
    assert float(quoted) == pytest.approx(round(value, decimals), abs=10**-decimals / 2), (quoted, value)


def test_the_readme_is_a_first_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[:2] == ["## Set up", "## Three examples (real output)"]
    assert sum(line.startswith("$ simcli ") for line in lines) == 3
    # validation history lives in CHANGELOG.md, not on the first page
    assert not re.search(r"\bwas \d", "\n".join(lines))
