"""Least-squares alpha and bandwidth of a `simcli bench allreduce` CSV (ring model, both `per` readings).

    python measurements/fit_ring.py measurements/gloo-allreduce-2to4-cpu.csv
"""

import sys

from simcli.bench.results import read_results
from simcli.bench.stats import fit_ring

_, rows = read_results(sys.argv[1])
pts = [(int(r["world_size"]), float(r["bytes"]), float(r["time_s"])) for r in rows]
for per in ("node", "device"):
    f = fit_ring(pts, per=per)
    print(f"per: {per:6s} alpha {f.alpha_s * 1e6:.1f} us, bandwidth {f.bandwidth_Bps / 1e9:.3f} GB/s, "
          f"rms relative error {f.rms_rel_err:.0%} over {f.points} points")
