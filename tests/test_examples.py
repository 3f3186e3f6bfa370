"""Every `$ simcli ...` example in README.md and docs/*.md, run again and compared with what the file shows (and
every `$ python benchmarks/...` block of a deterministic validation script, run the same way).

A fenced block whose first line is ``$ simcli ...`` is one example: that command, and below it the output it
prints (stdout and stderr as a terminal shows them; trailing spaces ignored), optionally ending in a line
``(exit N)`` with the exit status. The commands run in-process (typer's CliRunner) with the terminal width
that tests/conftest.py pins (140 columns), each in a fresh directory that links to every top-level entry of
the repository, so they see the files the examples name (tests/fixtures, validation/published, ...) and what
they write (``--output my-host.yaml``) lands outside the checkout. A command with a pipe or a redirection
(``| head -20``, ``2>/dev/null``) runs in bash instead, with ``simcli`` as ``python -m simcli`` and COLUMNS=140.

Blocks that are not deterministic (bench runs, timings) or that write files are written without the ``$``
prompt, and are not run.

When the model changes on purpose, regenerate every example's output in place:

    python tests/test_examples.py --update        (or SIMCLI_UPDATE_EXAMPLES=1 python -m pytest tests/test_examples.py)
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("COLUMNS", "140")  # as tests/conftest.py: set before simcli.io.render makes its console

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from record_runs import fenced  # noqa: E402  (one reader of the pages' fenced blocks, shared with the recorder)

FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass
class Example:
    path: Path
    line: int  #: 1-based line of the `$ simcli` line
    end: int  #: 0-based index of the closing fence
    command: str
    shown: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def examples(path: Path) -> list[Example]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [
        Example(path, start + 1, end, body[0][2:], "\n".join(body[1:]))
        for start, end, body in fenced(lines)
        if body and body[0].startswith(RERUN)
    ]


#: the first lines of a re-run block: a simcli command, or one of the deterministic validation scripts
RERUN = ("$ simcli ", "$ python benchmarks/")

ALL = [e for f in FILES if f.exists() for e in examples(f)]


EXIT = re.compile(r"^\(exit (\d+)\)$")


def _workdir() -> Path:
    """A fresh directory whose entries link to the repository's top-level files and folders."""
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="simcli-example-"))
    for entry in ROOT.iterdir():
        if entry.name != ".git":
            (d / entry.name).symlink_to(entry)
    return d


def run(command: str) -> tuple[str, int]:
    """What ``command`` prints (stdout and stderr together) and its exit status."""
    import shutil

    where = _workdir()
    try:
        return _run(command, where)
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _run(command: str, where: Path) -> tuple[str, int]:
    if any(c in command for c in "|<>;&") or command.startswith("python "):
        import subprocess

        cmd = re.sub(r"(^|\|\s*)simcli ", lambda m: f"{m.group(1)}{shlex.quote(sys.executable)} -m simcli ", command)
        cmd = re.sub(r"^python ", lambda m: f"{shlex.quote(sys.executable)} ", cmd)
        env = dict(os.environ, COLUMNS="140")
        p = subprocess.run(
            ["bash", "-o", "pipefail", "-c", cmd], cwd=where, env=env, capture_output=True, text=True, timeout=120
        )
        return p.stdout + p.stderr, p.returncode
    from typer.testing import CliRunner

    from simcli.cli import app

    argv = shlex.split(command)
    assert argv[0] == "simcli"
    cwd = os.getcwd()
    os.chdir(where)
    try:
        r = CliRunner().invoke(app, argv[1:], prog_name="simcli")
    finally:
        os.chdir(cwd)
    return r.output, r.exit_code


def split_exit(shown: str) -> tuple[str, int | None]:
    lines = shown.rstrip("\n").splitlines()
    m = EXIT.match(lines[-1].strip()) if lines else None
    return ("\n".join(lines[:-1]), int(m.group(1))) if m else (shown, None)


def render(output: str, code: int, with_exit: bool) -> str:
    return normal(output) + (f"\n({'exit'} {code})" if with_exit else "")


def normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.rstrip("\n").splitlines())


def update(paths: list[Path]) -> int:
    """Rewrite every example's output with what the command prints now; the number of blocks changed."""
    changed = 0
    for path in paths:
        lines = path.read_text(encoding="utf-8").splitlines()
        for e in reversed(examples(path)):
            out, code = run(e.command)
            fresh = render(out, code, split_exit(e.shown)[1] is not None)
            if fresh != normal(e.shown):
                lines[e.line : e.end] = fresh.splitlines()
                changed += 1
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return changed


def test_there_are_examples():
    assert len(ALL) >= 3


def test_no_example_block_holds_two_commands():
    """One `$ simcli` command per checked block: a session of several commands is written without `$`."""
    bad = [e.id for e in ALL if any(line.startswith("$ ") for line in e.shown.splitlines())]
    assert bad == []


@pytest.mark.parametrize("example", ALL, ids=[e.id for e in ALL])
def test_example_output_is_what_the_docs_show(example):
    if os.environ.get("SIMCLI_UPDATE_EXAMPLES"):
        update([example.path])
        pytest.skip("updated")
    shown, code = split_exit(example.shown)
    out, got_code = run(example.command)
    assert normal(out) == normal(shown), (
        f"{example.id}: `{example.command}` prints something else now; "
        "if that is intended: python tests/test_examples.py --update"
    )
    if code is not None:
        assert got_code == code, f"{example.id}: exit status {got_code}, the docs show {code}"


def test_every_block_of_commands_is_re_run_or_a_dated_recorded_run():
    """Nothing is shown as real output unless it is: a fenced block with `$ ` command lines is either one re-run
    example (its first line `$ simcli ...`) or a recorded run whose first line names the date, the commit and
    the host it was recorded on (benchmarks/record_runs.py writes and rewrites those)."""
    from record_runs import HEADER, HEADER_RE

    bad = []
    for f in FILES:
        for start, _, body in fenced(f.read_text(encoding="utf-8").splitlines()):
            if any(line.startswith("$ ") for line in body) and not body[0].startswith(RERUN):
                if not (body[0].startswith(HEADER) and HEADER_RE.match(body[0])):
                    bad.append(f"{f.relative_to(ROOT)}:{start + 1}: {body[0][:80]}")
    assert bad == [], "blocks of commands neither re-run nor a dated recorded run: " + "; ".join(bad)


def test_formula_table_names_every_algorithm():
    """docs/algorithms.md's formula table has a row for every algorithm of the registry."""
    from simcli.comm import registry

    text = (ROOT / "docs" / "algorithms.md").read_text(encoding="utf-8")
    missing = [a.name for a in registry.REGISTRY if not re.search(rf"^\| `{re.escape(a.name)}`", text, re.M)]
    assert missing == []


def test_links_between_pages_resolve():
    """Every relative link of README.md and docs/*.md names a file that exists, and an #anchor a heading there."""

    def slug(heading: str) -> str:
        s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
        return s.replace(" ", "-")

    bad = []
    for f in FILES:
        for target in re.findall(r"\]\(([^)\s]+)\)", f.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (f.parent / path).resolve() if path else f
            if not dest.exists():
                bad.append(f"{f.name}: {target}")
            elif anchor and dest.suffix == ".md":
                heads = [slug(h) for h in re.findall(r"^#+ (.*)$", dest.read_text(encoding="utf-8"), re.M)]
                if anchor not in heads:
                    bad.append(f"{f.name}: {target}")
    assert bad == []


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit(__doc__)
    n = update([f for f in FILES if f.exists()])
    print(f"{n} example block(s) rewritten")
