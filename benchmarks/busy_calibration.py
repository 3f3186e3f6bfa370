"""Calibration on a busy machine (issue 12, part 3): calibrate on one bench run, validate on another, under load.

Starts a busy process (``python -c 'while True: pass'``, one core's worth of competing work), then per pair
runs the issue's command twice,

    simcli bench allreduce -k 2,3 -s 64KiB..16MiB:x4 --iters 10 -o a.csv   (and b.csv)
    simcli calibrate a.csv -o fitted.yaml            (profile from the file's backend: cpu-loopback for gloo)
    simcli validate b.csv --profile fitted.yaml

and prints each pair's median |error| (all rows, k = 2, k = 3), the run-to-run floor (median of
|t_b / t_a - 1| over the same points: what even a perfect description of run a misses on run b), the
seconds each bench run took and the share of CPU time that was idle and stolen by the hypervisor during it
(/proc/stat: a pair whose runs differ there ran on a machine whose contention changed), and at the end the
median over the pairs and the fraction within 15%. The busy process is killed in a ``finally`` (also on
Ctrl-C and SIGTERM). Not part of pytest: it takes about 40 s a pair.

    python benchmarks/busy_calibration.py [--pairs 3] [--bench-args '--max-iters 10'] [--out DIR] [--no-busy]

``--bench-args`` is appended to both bench commands: ``--max-iters 10`` is the fixed-count loop before
adaptive repetition, ``--max-iters 10 --rounds 1 --stat median`` the loop before issue 12.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
COMMAND = ["bench", "allreduce", "-k", "2,3", "-s", "64KiB..16MiB:x4", "--iters", "10"]
TARGET = 0.15


def simcli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "simcli", *args], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"busy_calibration: simcli {' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")
    return p


def times(path: Path) -> dict[tuple[int, int], float]:
    with open(path, newline="") as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        return {(int(r["world_size"]), int(r["bytes"])): float(r["time_s"]) for r in rows}


def floor(a: Path, b: Path) -> float:
    ta, tb = times(a), times(b)
    return float(np.median([abs(tb[key] / ta[key] - 1) for key in ta if key in tb]))


def cpu_ticks() -> np.ndarray:
    """/proc/stat's aggregate cpu line: user nice system idle iowait irq softirq steal (zeros elsewhere)."""
    try:
        with open("/proc/stat") as f:
            return np.array([float(x) for x in f.readline().split()[1:9]])
    except (OSError, ValueError):
        return np.zeros(8)


def one_pair(i: int, out: Path, bench_args: list[str]) -> dict:
    runs, seconds, idle, steal = [], [], [], []
    for side in "ab":
        path = out / f"pair{i}-{side}.csv"
        t0, c0 = time.monotonic(), cpu_ticks()
        simcli(*COMMAND, *bench_args, "-o", str(path), "--force")
        seconds.append(time.monotonic() - t0)
        d = cpu_ticks() - c0
        idle.append(d[3] / d.sum() if d.sum() else float("nan"))
        steal.append(d[7] / d.sum() if d.sum() else float("nan"))
        runs.append(path)
    fitted = out / f"pair{i}-fitted.yaml"
    simcli("calibrate", str(runs[0]), "-o", str(fitted), "--force")
    summary = json.loads(simcli("validate", str(runs[1]), "--profile", str(fitted), "-f", "json").stdout)["summary"]
    s = summary["time_s"]
    by_k = {k: v["mdape"] for k, v in s["by_devices"].items()}
    return {
        "median": s["overall"]["mdape"],
        "by_k": by_k,
        "floor": floor(runs[0], runs[1]),
        "seconds": seconds,
        "idle": idle,
        "steal": steal,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3, help="calibrate/validate pairs (default 3)")
    ap.add_argument("--bench-args", default="", help="extra arguments of both bench runs, e.g. '--max-iters 10'")
    ap.add_argument("--out", help="keep the runs and fitted profiles here (default: a temporary folder)")
    ap.add_argument("--no-busy", action="store_true", help="do not start the busy process (a quiet baseline)")
    args = ap.parse_args(argv)
    if args.pairs < 1:
        print(f"busy_calibration: --pairs: {args.pairs} is below 1", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="busy-calibration-"))
    out.mkdir(parents=True, exist_ok=True)
    bench_args = shlex.split(args.bench_args)
    busy = None

    def on_term(signum, frame):  # SIGTERM: leave through the finally below
        raise SystemExit(143)

    signal.signal(signal.SIGTERM, on_term)
    try:
        if not args.no_busy:
            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        load = "busy process" if busy else "no busy process"
        print(f"# {' '.join(['simcli', *COMMAND, *bench_args])}, {load}, {args.pairs} pair(s), files in {out}")
        print("pair  median |err|    k=2     k=3   floor   bench s (a, b)   idle % (a, b)   steal % (a, b)")
        results = []
        for i in range(1, args.pairs + 1):
            r = one_pair(i, out, bench_args)
            results.append(r)
            ks = "  ".join(f"{100 * r['by_k'].get(k, float('nan')):5.1f}%" for k in ("2", "3"))
            print(
                f"{i:4d}  {100 * r['median']:11.1f}%  {ks}  {100 * r['floor']:5.1f}%   "
                f"{r['seconds'][0]:3.0f}, {r['seconds'][1]:3.0f}         "
                f"{100 * r['idle'][0]:3.0f}, {100 * r['idle'][1]:3.0f}         "
                f"{100 * r['steal'][0]:3.0f}, {100 * r['steal'][1]:3.0f}",
                flush=True,
            )
        med = np.array([r["median"] for r in results])
        print(
            f"median over {len(med)} pairs {100 * np.median(med):.1f}% (max {100 * med.max():.1f}%); "
            f"within {TARGET:.0%}: {int(np.sum(med <= TARGET))} of {len(med)} ({np.mean(med <= TARGET):.0%})"
        )
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
