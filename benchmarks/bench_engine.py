"""Speed of the engine and the command line, as ratios against their floors. Prints; asserts nothing.

1. The engine's all-reduce cost over 10^6 (k, size) points against a bare numpy evaluation of the
   same closed-form ring formula (the floor for a vectorised approach); and NCCL's choice (every
   (algorithm, protocol) pair, the tuner's pick, per-tier terms) against a bare numpy minimum over the
   same pairs' latency + size / bandwidth.
2. `simcli speedup --devices 1..64 --format json` against `python -c "import typer, rich, numpy, yaml"`
   (the floor for start-up: the libraries the CLI cannot avoid).
3. `simcli speedup --devices 1..100000` against `--devices 1..64` (both --format json to /dev/null).

Usage: python benchmarks/bench_engine.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import numpy as np


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def in_turn(fn, floor, repeat: int) -> tuple[float, float]:
    """Medians of ``fn`` and ``floor`` timed one after the other, ``repeat`` times: a busy spell of this shared
    machine slows both alike rather than only the one being timed then."""
    a, b = [], []
    for _ in range(repeat):
        a.append(best_of(fn, 1))
        b.append(best_of(floor, 1))
    return statistics.median(a), statistics.median(b)


def engine_vs_numpy(repeat: int) -> tuple[float, float]:
    from simcli.comm.collectives import allreduce
    from simcli.io.profiles import resolve_profile

    prof = resolve_profile("dgx-h100")
    k = np.unique(np.geomspace(1, 1 << 20, 1000).astype(np.int64))
    k = np.resize(k, 1000)
    n = np.geomspace(1e3, 1e10, 1000)
    net = prof.network

    def engine():
        allreduce("ring", net, k[:, None], nbytes=n[None, :])

    # the floor: alpha and B already known per k, the formula evaluated once
    from simcli.comm.topology import ring_params

    alpha, bus, _ = ring_params(net, k)
    a, b, kf = alpha[:, None], bus[:, None], k[:, None].astype(float)

    def bare():
        np.where(kf >= 2, 2 * (kf - 1) * a + 2 * (kf - 1) / kf * n[None, :] / b, 0.0)

    return in_turn(engine, bare, repeat)


def nccl_vs_numpy(repeat: int, version: str | None = None) -> tuple[float, float]:
    """NCCL's choice over 10^6 (k, size) points under the NCCL release ``version`` (None: the default): the engine
    (every term, per-tier arrays, the choice) against a bare numpy minimum over the same (algorithm, protocol)
    pairs' latency + size / bandwidth."""
    from simcli.comm import collectives as C
    from simcli.comm import nccl, nccl_choice, topology
    from simcli.io.profiles import resolve_profile, with_nccl_version

    prof = with_nccl_version(resolve_profile("dgx-h100"), version)
    k = np.resize(np.unique(np.geomspace(2, 1 << 20, 1000).astype(np.int64)), 1000)
    n = np.geomspace(1e3, 1e10, 1000)

    def engine():
        C.collective(prof, "nccl", k[:, None], nbytes=n[None, :], protocol=None)

    prs = nccl.pairs(
        prof.network,
        nccl_choice.nccl_spec(prof),
        k[:, None],
        tier_Bps=topology.tier_bandwidth(prof.network, k[:, None]),
    )
    lat = [p.latency for p in prs]
    bw = [p.alg_Bps for p in prs]
    nn = n[None, :]

    def bare():
        best = lat[0] + nn / bw[0]
        for a, b in zip(lat[1:], bw[1:]):
            np.minimum(best, a + nn / b, out=best)

    return in_turn(engine, bare, repeat)


def cmd_time(args: list[str], repeat: int) -> float:
    def run():
        subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)

    run()  # warm the file cache
    return best_of(run, repeat)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument(
        "--releases", action="store_true", help="only NCCL's choice, once per carried release (issue 37: within 3x)"
    )
    args = ap.parse_args()
    rep = args.repeat
    if args.releases:
        from simcli.comm.releases import RELEASES

        for r in RELEASES:
            e2, f2 = nccl_vs_numpy(rep, r.version)
            print(
                f"NCCL {r.version:7s} choice, 10^6 points: {e2 * 1e3:8.1f} ms   bare numpy min over pairs "
                f"{f2 * 1e3:8.1f} ms   ratio {e2 / f2:5.2f}"
            )
        print(f"(median of {rep} runs; python {sys.version.split()[0]}; {time.strftime('%Y-%m-%d')})")
        return
    py = sys.executable
    e, f = engine_vs_numpy(rep)
    print(
        f"engine, 10^6 (k, size) points:        {e * 1e3:8.1f} ms   bare numpy formula {f * 1e3:8.1f} ms"
        f"   ratio {e / f:5.2f}"
    )
    e2, f2 = nccl_vs_numpy(rep)
    print(
        f"NCCL choice, 10^6 (k, size) points:   {e2 * 1e3:8.1f} ms   bare numpy min over pairs {f2 * 1e3:8.1f} ms"
        f"   ratio {e2 / f2:5.2f}"
    )
    s = cmd_time([py, "-m", "simcli", "speedup", "--devices", "1..64", "--format", "json"], rep)
    floor = cmd_time([py, "-c", "import typer, rich, numpy, yaml"], rep)
    print(
        f"simcli speedup --devices 1..64 --json: {s * 1e3:8.1f} ms   import typer, rich, numpy, yaml"
        f" {floor * 1e3:6.1f} ms   ratio {s / floor:5.2f}"
    )
    big = cmd_time([py, "-m", "simcli", "speedup", "--devices", "1..100000", "--format", "json"], max(3, rep // 2))
    print(
        f"--devices 1..100000 (json):           {big * 1e3:8.1f} ms   --devices 1..64 {s * 1e3:8.1f} ms"
        f"   ratio {big / s:5.2f}"
    )
    print(f"(median of {rep} runs; python {sys.version.split()[0]}; {time.strftime('%Y-%m-%d')})")


if __name__ == "__main__":
    main()
