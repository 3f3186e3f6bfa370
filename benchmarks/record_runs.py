"""Re-record every "recorded run" block of README.md and docs/*.md: run its commands, write their output back.

Output that differs from run to run (bench measurements, fits of them, sessions whose commands read the files
earlier commands wrote) cannot be re-run by tests/test_examples.py and compared. Such a block is a recorded
run: its first line says where, when and at which commit it was recorded, and every ``$ `` line below it is
one command of the session, run in order in one fresh directory that links to the repository's top-level
entries (as tests/test_examples.py does), stdout and stderr together, with COLUMNS=140::

    ```
    # recorded run: benchmarks/record_runs.py, 2026-12-02 00:40 UTC, commit 5f4e6e4, <host>; ...
    $ simcli bench allreduce --world-sizes 2,4 --size 1KiB..16MiB:x4 -o bench.csv
    ...
    ```

Nothing else in the docs is called real output: a block with ``$ `` lines is either one re-run example (its first
line ``$ simcli ...``) or a recorded run (tests/test_examples.py checks both). Run from a checkout:

    python benchmarks/record_runs.py [FILE.md ...] [--only TEXT]   (--only: blocks whose commands contain TEXT)
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = "# recorded run:"
FENCE = re.compile(r"^\s*```")
#: the header's form: tool, date and time (UTC), commit, host, then free text
HEADER_RE = re.compile(
    r"^# recorded run: benchmarks/record_runs\.py, (\d{4}-\d\d-\d\d \d\d:\d\d) UTC, "
    r"commit ([0-9a-f]{7,}\+?), ([^;]+); .+"
)


def fenced(lines: list[str]) -> list[tuple[int, int, list[str]]]:
    """(first body line, closing fence line, body) of every fenced block of a page's lines, 0-based."""
    out, i = [], 0
    while i < len(lines):
        if FENCE.match(lines[i]):
            j = i + 1
            while j < len(lines) and not FENCE.match(lines[j]):
                j += 1
            out.append((i + 1, j, lines[i + 1 : j]))
            i = j + 1
        else:
            i += 1
    return out


def blocks(text: str) -> list[tuple[int, int, list[str]]]:
    """(first line, closing fence line, body) of every recorded-run block, 0-based."""
    return [b for b in fenced(text.splitlines()) if b[2] and b[2][0].startswith(HEADER)]


def _commit() -> str:
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return git("rev-parse", "--short", "HEAD") + ("+" if dirty else "")


def _host() -> str:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores {cpu or platform.machine()}, Python {platform.python_version()}"


def record(body: list[str]) -> list[str]:
    """The block's body again, every command's output fresh and the header re-dated."""
    note = body[0].split(";", 1)[1].strip() if ";" in body[0] else "output differs from run to run"
    commands = [line[2:] for line in body[1:] if line.startswith("$ ")]
    where = Path(tempfile.mkdtemp(prefix="simcli-record-"))
    for entry in ROOT.iterdir():
        if entry.name != ".git":
            (where / entry.name).symlink_to(entry)
    env = dict(os.environ, COLUMNS="140")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
    out = [f"{HEADER} benchmarks/record_runs.py, {stamp} UTC, commit {_commit()}, {_host()}; {note}"]
    try:
        for cmd in commands:
            shell = re.sub(r"(^|\|\s*)simcli ", lambda m: f"{m.group(1)}{sys.executable} -m simcli ", cmd)
            # stderr joins stdout as a terminal shows them; a "> FILE" of the command keeps only its stdout
            p = subprocess.run(
                ["bash", "-c", "{ " + shell + "\n} 2>&1"], cwd=where, env=env, capture_output=True, text=True
            )
            out.append(f"$ {cmd}")
            out += [line.rstrip() for line in p.stdout.rstrip("\n").splitlines()]
            if p.returncode:
                out.append(f"(exit {p.returncode})")
            print(f"  {cmd}: exit {p.returncode}", file=sys.stderr)
    finally:
        shutil.rmtree(where, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--only", default=None, help="re-record only the blocks whose commands contain this text")
    args = ap.parse_args()
    files = [f.resolve() for f in args.files] or [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for f in files:
        text = f.read_text(encoding="utf-8")
        lines = text.splitlines()
        found = blocks(text)
        for start, end, body in reversed(found):
            if args.only and not any(args.only in line for line in body if line.startswith("$ ")):
                continue
            print(f"{f.relative_to(ROOT)}:{start + 1}", file=sys.stderr)
            lines[start:end] = record(body)
        if found:
            f.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
