"""Is `simcli comm`'s band held to its word? Leave one curve out, read the band without it, count its points inside.

For each published curve of simcli/comm/error_table.py in turn: the band of each of its points is read from the
other curves' points alone (simcli.comm.bands.ratio_band: the kind's p10-p90 of t_pred/t_meas, backing off to a
coarser grouping below MIN_ROWS points or MIN_CURVES curves, the widest band of its neighbours where no other curve
has a point of the kind), and the point counts as covered where its own ratio lies inside. A band that says "80% of
runs fall here" should cover about 80% of curves it never saw; docs/nccl.md#how-sure holds the numbers.

    python benchmarks/validate_bands.py [-v]

Per kind (transport, past NCCL's node, size band, family) and overall; ``-v`` adds one line per curve. Nothing is
fitted: the bands are read from the table as `simcli comm` reads them.

The second table does the same for the training step (simcli.step.errors on simcli/step/error_table.py): leave
one published DDP/FSDP scaling series out, read the band of r = predicted / measured throughput per device without
it, count its rows inside; per kind (strategy, base, node band) and overall (docs/model.md#measured-against-
training-runs).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simcli.base import ratio_bands as RB  # noqa: E402
from simcli.comm import bands as B  # noqa: E402
from simcli.step import errors as SE  # noqa: E402


def coverage_table(corpus: B.Corpus, inside: np.ndarray) -> list[tuple[str, int, int, float]]:
    """(kind in words, points, curves, fraction covered) per kind, finest grouping, in the table's order."""
    out = []
    kinds = sorted({corpus.kind(i) for i in range(corpus.ratio.size)})
    for kind in kinds:
        m = corpus.masks(kind)[0]
        words = ", ".join([kind[0], "across nodes" if kind[1] else "inside a node", B.SIZE_BANDS[kind[2]][0], kind[3]])
        curves = len(set(corpus.curve[m].tolist()))
        out.append((words, int(m.sum()), curves, float(inside[m].mean())))
    return out


def main(verbose: bool = False) -> float:
    corpus = B.published()
    inside = B.leave_one_out(corpus)
    print(f"{'kind (transport, node, size band, family)':58s} {'points':>6s} {'curves':>6s} {'covered':>8s}")
    for words, points, curves, frac in coverage_table(corpus, inside):
        print(f"{words:58s} {points:6d} {curves:6d} {frac:8.0%}")
    if verbose:
        print_groups(corpus, inside)
    overall = float(inside.mean())
    print(f"{'overall (leave one curve out)':58s} {inside.size:6d} {len(set(corpus.curve.tolist())):6d} {overall:8.0%}")
    width = widths(corpus)
    print(
        f"width of the held-out bands, hi/lo: median {float(np.median(width)):.2f}, "
        f"p90 {float(np.quantile(width, 0.9)):.2f} (a band as wide as the world says nothing)"
    )
    return overall


def step_coverage_table(corpus: SE.Corpus, inside: np.ndarray) -> list[tuple[str, int, int, float]]:
    """(kind in words, rows, series, fraction covered) per step kind, then ("overall", ...)."""
    out = []
    for kind in sorted({corpus.kind(i) for i in range(corpus.ratio.size)}):
        m = corpus.masks(kind)[0]
        out.append((SE.kind_words(kind), int(m.sum()), len(set(corpus.series[m].tolist())), float(inside[m].mean())))
    out.append(("overall", int(inside.size), len(set(corpus.series.tolist())), float(inside.mean())))
    return out


def step_main(verbose: bool = False) -> float:
    corpus = SE.published()
    inside = SE.leave_one_out(corpus)
    print(f"{'step kind (strategy, base, node band)':58s} {'rows':>6s} {'series':>6s} {'covered':>8s}")
    table = step_coverage_table(corpus, inside)
    for words, rows, series, frac in table:
        label = "overall (leave one series out)" if words == "overall" else words
        print(f"{label:58s} {rows:6d} {series:6d} {frac:8.0%}")
    if verbose:
        print_groups(corpus, inside)
    width = widths(corpus, SE.ratio_band)
    med, p90 = float(np.median(width)), float(np.quantile(width, 0.9))
    print(f"width of the held-out bands, hi/lo: median {med:.2f}, p90 {p90:.2f}")
    return table[-1][3]


def print_groups(corpus: B.Corpus | SE.Corpus, inside: np.ndarray) -> None:
    """One line per curve (series): its points (rows) and the fraction covered, after a blank line."""
    print()
    for label in sorted(set(corpus.labels.tolist())):
        m = corpus.labels == label
        print(f"{label:58s} {int(m.sum()):6d} {'':6s} {float(inside[m].mean()):8.0%}")


def widths(corpus: B.Corpus | SE.Corpus, band: Callable[[Any, Any], RB.RatioBand] = B.ratio_band) -> np.ndarray:
    """hi/lo of each point's (row's) band read without its own curve (series): the band leave_one_out judges it by;
    ``band``: comm's ratio_band or the step's."""
    out = np.zeros(corpus.ratio.shape)
    for label in sorted(set(corpus.labels.tolist())):
        rest = corpus.without(label)
        for i in np.flatnonzero(corpus.labels == label):
            rb = band(rest, corpus.kind(int(i)))
            out[i] = rb.hi / rb.lo
    return out


if __name__ == "__main__":
    main("-v" in sys.argv)
    print()
    step_main("-v" in sys.argv)
