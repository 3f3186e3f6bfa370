"""Start-up of every simcli command against a typer hello-world with the same imports. Prints ratios; asserts nothing.

The floor is what no command can avoid: a typer application with one option (so typer builds its parameter
adapters, as simcli's commands do) that imports what simcli's start-up imports (typer, rich, numpy, yaml)
and prints one line. The runs are interleaved, so that a busy machine slows a command and its floor alike:
``--repeat`` rounds, each running every command (in a shuffled order) right after a run of the floor. A
command's ratio is the median over the rounds of (its time / the floor's time just before), with the 25th and
75th percentiles of those ratios beside it; the milliseconds are medians. The goal (issue 41): the ratio of
``speedup --devices 1..64 --format json`` <= 1.5.

``--root`` times another checkout with this script (say, an older commit unpacked with ``git archive``);
``--only`` keeps the commands that contain a text.

``--collector`` prints instead, per command, the milliseconds the cyclic garbage collector spent inside one
run (gc.callbacks around ``python -m simcli``; median of ``--repeat`` runs). It needs nothing of simcli, so it
also measures an older checkout: the pause simcli.cli.common.pause_collector makes is the difference.

    python benchmarks/bench_startup.py [--repeat 25] [--only speedup] [--root DIR] [--collector]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HELLO = """\
from typing import Annotated
import numpy, rich, typer, yaml
from rich.console import Console

app = typer.Typer(add_completion=False)

@app.command()
def hello(name: Annotated[str, typer.Option("--name", help="who")] = "world") -> None:
    Console().print(f"hello {name}")

app()
"""

#: the checkout: the commands read its validation/ files
ROOT = Path(__file__).resolve().parent.parent

#: one command line of each kind a new user runs first (the output is thrown away); {out} is a file in a
#: temporary folder (calibrate writes a profile)
COMMANDS = [
    "--help",
    "speedup --devices 1..64 --format json",
    "speedup --devices 1..64:x2",
    "comm --devices 2..64:x2 --size 1KiB..1GiB:x4",
    "algorithms",
    "explain -k 64",
    "plan max-devices --min-efficiency 0.9 --devices 8..1024:x2",
    "compare --profile dgx-a100,dgx-h100 --devices 8..512:x2",
    "profiles list",
    "profiles show dgx-h100",
    "models list",
    "plan best -m llama2-7b --global-batch 4Mi-tokens --devices 64..1024:x2 --strategy ddp,fsdp",
    "plan time-to-train --model gpt2 --tokens 1e10 --devices 8..64:x2",
    "check validation/published/nccl-allreduce-16xH100-2node-ib400x8.csv -p dgx-h100",
    "validate validation/published/nccl-allreduce-8xA100-nvswitch.csv --profile dgx-a100",
    "calibrate validation/published/nccl-allreduce-8xA100-nvswitch.csv -p dgx-a100 --min-size 1GiB --holdout 0"
    " -o {out} --force",
]


#: runs simcli as ``python -m simcli`` does, with a clock on every collection; writes the total ms to argv[1]
COLLECTOR = """\
import gc, os, runpy, sys, time
sys.path.insert(0, os.getcwd())  # the checkout it runs in, as python -m simcli there would
spent, t0 = [0.0], [0.0]
def clock(phase, info):
    if phase == "start":
        t0[0] = time.perf_counter()
    else:
        spent[0] += time.perf_counter() - t0[0]
gc.callbacks.append(clock)
out, sys.argv = sys.argv[1], ["simcli", *sys.argv[2:]]
try:
    runpy.run_module("simcli", run_name="__main__")
except SystemExit:
    pass
with open(out, "w") as f:
    f.write(repr(spent[0] * 1e3))
"""


def _collector_ms(py: str, wrapper: str, out: str, cmd: list[str]) -> float:
    subprocess.run(
        [py, wrapper, out, *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=ENV, cwd=ROOT
    )
    with open(out, encoding="utf-8") as f:
        return float(f.read())


def _time(args: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=ENV, cwd=ROOT)
    return time.perf_counter() - t


def _quartiles(xs: list[float]) -> tuple[float, float, float]:
    """The 25th, 50th and 75th percentiles (statistics.quantiles' inclusive method)."""
    q1, q2, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q1, q2, q3


#: bytecode cached as an installed package has it (a shell with PYTHONDONTWRITEBYTECODE=1 would compile every
#: simcli module on every run, ~120 ms the floor's one small file does not pay)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"COLUMNS": "140"}


def main() -> None:
    global ROOT
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=25)
    ap.add_argument("--only", default="", help="only the commands that contain this text")
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout to time (default: this one)")
    ap.add_argument("--seed", type=int, default=0, help="of the shuffled order within each round")
    ap.add_argument("--collector", action="store_true", help="the garbage collector's ms per command instead")
    args = ap.parse_args()
    ROOT = args.root.resolve()
    py = sys.executable
    commands = [c for c in COMMANDS if args.only in c]
    if args.collector:
        with tempfile.TemporaryDirectory() as d:
            wrapper, out = os.path.join(d, "collector.py"), os.path.join(d, "ms")
            with open(wrapper, "w", encoding="utf-8") as f:
                f.write(COLLECTOR)
            print(f"{'command':<78} {'collector ms':>12}")
            for cmd in commands:
                argv = cmd.replace("{out}", os.path.join(d, "cal.yaml")).split()
                ms = statistics.median(_collector_ms(py, wrapper, out, argv) for _ in range(args.repeat))
                print(f"simcli {cmd:<71} {ms:12.1f}")
        return
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as d:
        hello = os.path.join(d, "hello.py")
        with open(hello, "w", encoding="utf-8") as f:
            f.write(HELLO)
        floor_cmd = [py, hello, "--name", "simcli"]
        full = {c: [py, "-m", "simcli", *c.replace("{out}", os.path.join(d, "cal.yaml")).split()] for c in commands}
        _time(floor_cmd)  # warm the file cache (and write simcli's bytecode) once
        for c in commands:
            _time(full[c])
        mine: dict[str, list[float]] = {c: [] for c in commands}
        floor: dict[str, list[float]] = {c: [] for c in commands}
        for _ in range(args.repeat):  # interleaved: each command right after a run of the floor
            for c in rng.sample(commands, len(commands)):
                floor[c].append(_time(floor_cmd))
                mine[c].append(_time(full[c]))
        print(f"{'command':<72} {'median':>7} {'floor':>7} {'ratio':>5} {'p25-p75':>9}")
        worst = 0.0
        for c in commands:
            q1, ratio, q3 = _quartiles([m / f for m, f in zip(mine[c], floor[c])])
            worst = max(worst, ratio)
            m, f0 = statistics.median(mine[c]), statistics.median(floor[c])
            print(f"simcli {c[:65]:<65} {m * 1e3:5.0f}ms {f0 * 1e3:5.0f}ms {ratio:5.2f} {q1:4.2f}-{q3:4.2f}")
    print(
        f"largest ratio {worst:.2f}; {args.repeat} rounds, {sys.version.split()[0]}, {os.cpu_count()} CPUs; goal: "
        "speedup --devices 1..64 --format json <= 1.5; floor: typer hello-world importing numpy, rich, typer, yaml"
    )


if __name__ == "__main__":
    main()
