"""simcli comm's band (simcli.comm.bands): the error table held to its generator, the band's rule on a corpus
whose answer is known, the published corpus held to its leave-one-out coverage, and lo <= time <= hi everywhere."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcli.cli import app
from simcli.comm import bands as B
from simcli.comm import error_table
from simcli.comm.grid import comm_grid
from simcli.io.profiles import list_profiles, resolve_profile

from conftest import assert_table_written

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import validate_bands  # noqa: E402
import validate_nccl  # noqa: E402

#: the goal of issue 38 for the leave-one-curve-out coverage of the p10-p90 band (docs/nccl.md#how-sure prints what
#: benchmarks/validate_bands.py measures today); a change to the model or the curves that moves it out fails here
COVERAGE = (0.70, 0.90)
#: ... and for the median width hi/lo of the held-out bands (a band as wide as the world says nothing)
WIDTH = 1.8

# ----------------------------------------------------------------------------- the table and its generator


def test_the_error_table_is_what_validate_nccl_writes():
    """simcli/comm/error_table.py is what `validate_nccl.py --write-errors` writes from today's model: a change to
    the model, a profile or a curve without writing it again fails here (ratios to rounding, the rest exactly)."""
    curves, rows = validate_nccl.error_rows()
    assert [tuple(c) for c in error_table.CURVES] == curves
    assert sum(c[-1] for c in curves) == len(rows)
    assert_table_written(error_table, rows, validate_nccl.error_table_source(curves, rows, error_table.COMMIT))


def test_the_table_covers_every_validated_curve_and_its_kinds_are_the_profiles():
    """Every curve validate_nccl prices is in the table with every point of 1 KiB and up, and every kind names a
    link kind of simcli.comm.specs and a family NCCL runs."""
    from simcli.comm.collnet import ALGOS as COLLNET
    from simcli.comm.nccl import ALGOS
    from simcli.comm.specs import LINK_KINDS

    assert [c[0] for c in error_table.CURVES] == [c[0] for c in validate_nccl.CASES]
    for i, (f, system, *_rest, points) in enumerate(error_table.CURVES):
        rs = [
            r
            for r in validate_nccl._rows(validate_nccl.PUB / f)
            if (system is None or r.get("system") == system) and float(r["bytes"]) >= 1024
        ]
        assert points == len(rs) == sum(1 for r in error_table.ROWS if r[0] == i)
    for r in error_table.ROWS:
        # NCCL's algorithms, and RCCL's all-pairs MSCCL kernel of one node (simcli.comm.rccl)
        assert r[3] in LINK_KINDS and r[5] in [b for b, _, _ in B.SIZE_BANDS] and r[6] in (*ALGOS, *COLLNET, "msccl")
        assert 0.2 < r[7] < 5


# ----------------------------------------------------------------------------- the pieces


def test_each_curve_is_priced_under_the_release_its_source_states():
    """validate_nccl's release table (issue 37): the release a run used is read from its header (per system where
    one holds two), a carried one is priced as itself (Azure's H100 run, 2.18.5, since issue 37's 2.18 rows), one
    between carried rows as the row before it; 'under the default' is the main table's figure."""
    pub = validate_nccl.PUB
    ib, ring = pub / "nccl-allreduce-16xH100-2node-ib400x8.csv", pub / "nccl-allreduce-16xH100-2node-ring.csv"
    azure = pub / "nccl-allreduce-8xH100-8xH200-azure.csv"
    assert validate_nccl.ran_release(ib) == "2.26.2"
    assert validate_nccl.ran_release(azure, "nd-h100-v5") == "2.18.5"
    assert validate_nccl.ran_release(azure, "nd-h200-v5") == "2.20.5"
    assert validate_nccl.ran_release(ring) is None
    cases = [
        (ib, None, "dgx-h100", "nccl"),
        (azure, "nd-h100-v5", "dgx-h100", "nvls"),
        (azure, "nd-h200-v5", "hgx-h200", "nvls"),
        (ring, None, "dgx-h100", "ring"),
    ]
    recs = validate_nccl.release_table(cases)
    rows = {r["curve"]: (r["ran"], r["row"]) for r in recs}
    assert rows == {
        "nccl-allreduce-16xH100-2node-ib400x8": ("2.26.2", "2.26.2"),
        "nccl-allreduce-8xH100-8xH200-azure [nd-h100-v5]": ("2.18.5", "2.18.5"),
        "nccl-allreduce-8xH100-8xH200-azure [nd-h200-v5]": ("2.20.5", "2.20.3"),
        "nccl-allreduce-16xH100-2node-ring": (None, None),
    }
    assert all((r["under_ran"] is None) == (r["row"] is None) for r in recs)
    # 2.26.2's Tree/LL128 and NVLSTree figures move the 2-node middle band: the release is priced, not the default
    mid = next(r for r in recs if r["curve"].endswith("ib400x8") and r["band"] == "0.5-64 MiB")
    assert mid["under_ran"] != pytest.approx(mid["under_default"], abs=1e-4)
    p, k, n, t, pred = validate_nccl._priced(ring, None, "dgx-h100", "ring")
    m = n >= 128 << 20
    big = next(r for r in recs if r["curve"].endswith("ring") and r["band"] == ">= 128 MiB")
    assert big["under_default"] == pytest.approx(float(np.median(np.abs(pred.time[m] / t[m] - 1))))


def test_the_gb200_runs_are_priced_as_their_scripts_ran_them():
    """coreweave/nccl-tests' GB200 script (issue 37): the 20-rack rows were posted with NCCL_NVLS_ENABLE=0 on
    2.26.2 (SETTINGS: NCCL's choice then runs neither NVLS nor NVLSTree), the 1- and 2-rack rows with NVLS on,
    under 2.25.1, before 2.26.2 existed (their headers' nccl_version)."""
    pub = validate_nccl.PUB
    f20, f2 = pub / "nccl-allreduce-1440xGB200-20rack.csv", pub / "nccl-allreduce-144xGB200-2rack.csv"
    p20, _, _, _, c20 = validate_nccl._priced(f20, None, "gb200-nvl72", "nccl")
    p2, _, _, _, c2 = validate_nccl._priced(f2, None, "gb200-nvl72", "nccl")
    assert not p20.nccl.nvls and p2.nccl.nvls
    assert set(c20.algorithm) <= {"ring", "tree"} and set(c2.algorithm) == {"nvls-tree"}
    assert validate_nccl.ran_release(f20) == "2.26.2"
    assert validate_nccl.ran_release(f2) == validate_nccl.ran_release(pub / "nccl-allreduce-72xGB200-1rack.csv")
    assert validate_nccl.ran_release(f2) == "2.25.1"


@pytest.mark.parametrize("q", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_quantile_by_hand_is_numpys_linear_quantile(q):
    rng = np.random.default_rng(3)
    for size in (1, 2, 7, 42):
        x = rng.lognormal(size=size)
        assert B.quantile(x, q) == pytest.approx(float(np.quantile(x, q)), rel=1e-12)


def test_size_bands_split_as_validate_does():
    from simcli.checks.validate import SIZE_BANDS, size_band

    assert SIZE_BANDS is B.SIZE_BANDS
    n = np.array([1024, 256 * 1024, 256 * 1024 + 1, 512 * 1024, 64 * 2**20, 128 * 2**20 - 1, 128 * 2**20, 2.0**34])
    labels = [B.SIZE_BANDS[i][0] for i in B.size_band_index(n)]
    assert labels == [size_band(x) for x in n]
    assert labels[:3] == ["<= 256 KiB", "<= 256 KiB", "0.5-64 MiB"] and labels[-2:] == [">= 128 MiB"] * 2


def test_point_kinds_read_the_widest_tier_and_what_priced_the_point():
    from simcli.comm import collectives

    h100 = resolve_profile("dgx-h100")
    k = np.array([1, 8, 16])[:, None]
    n = np.array([64 * 1024.0, 2.0**30])[None, :]
    cost = collectives.collective(h100, "nccl", k, nbytes=n, protocol=None)
    transport, nodes, band, family = B.point_kinds(h100.network, k, n, algorithm=cost.algorithm, protocol=cost.protocol)
    assert transport[:, 0].tolist() == [B.NO_LINK, "nvswitch", "infiniband"]
    assert nodes[:, 0].tolist() == [False, False, True]
    assert band[0].tolist() == [0, 2]
    assert family[1:].tolist() == cost.algorithm[1:].tolist()  # NCCL's algorithm as it ran
    gb200 = resolve_profile("gb200-nvl72")
    t, nd, _, _ = B.point_kinds(gb200.network, np.array([72, 144]), 1e9, algorithm="ring", protocol="simple")
    assert t.tolist() == ["mnnvl", "infiniband"] and nd.tolist() == [False, True]  # the rack is one NCCL node
    # an alpha-beta formula and a collective no curve runs are kinds of their own
    *_, fam = B.point_kinds(h100.network, 16, 1e6, algorithm="ring", protocol=None)
    assert fam.tolist() == "textbook ring"
    *_, fam = B.point_kinds(h100.network, 16, 1e6, algorithm="ring", protocol="ll", collective="all_gather")
    assert fam.tolist() == "ring all_gather"


# ----------------------------------------------------------------------------- the rule, on a known corpus


def _corpus(rows: list[tuple]) -> B.Corpus:
    return B.Corpus.of(rows)


def _pulled_in(offset: dict[str, float], logs: dict[str, list[float]]) -> list[float]:
    """The offsets drawn, written out: each curve's offset is an estimate with noise v = its points' variance about it
    over n (the variance pooled over every curve for a curve of one point); the clusters' variance tau^2 is the
    offsets' variance about their median less the mean v (at least 0); each offset moves toward that median by
    sqrt(tau^2 / (tau^2 + v))."""
    names = list(offset)
    dev = {c: np.array(logs[c]) - offset[c] for c in names}
    pooled = sum(float((d**2).sum()) for d in dev.values()) / max(sum(d.size - 1 for d in dev.values()), 1)
    v = np.array(
        [float((dev[c] ** 2).sum()) / (dev[c].size - 1) / dev[c].size if dev[c].size > 1 else pooled for c in names]
    )
    a = np.array([offset[c] for c in names])
    if a.size < 2:
        return a.tolist()
    mid = float(np.median(a))
    tau2 = max(0.0, float(((a - mid) ** 2).sum()) / (a.size - 1) - float(v.mean()))
    f = np.where(tau2 + v > 0, tau2 / np.where(tau2 + v > 0, tau2 + v, 1.0), 1.0)
    return (mid + (a - mid) * np.sqrt(f)).tolist()


def _by_hand(group: list[tuple], size: list[tuple]) -> tuple[float, float]:
    """p10 and p90 of the ratios a new cluster may show, written out: each curve's offset is the median log ratio
    of its points in the size band (``size``), pulled in as :func:`_pulled_in` says; each point of the kind's grouping
    (``group``) leaves a residual against its own curve's offset; every offset plus every residual, as ratios
    (numpy's linear quantile)."""
    curves = sorted({r[0] for r in size})
    logs = {c: [float(np.log(r[-1])) for r in size if r[0] == c] for c in curves}
    offset = {c: float(np.median(logs[c])) for c in curves}
    resid = [np.log(r[-1]) - offset[r[0]] for r in group]
    sums = np.exp(np.add.outer(_pulled_in(offset, logs), resid).ravel())
    return float(np.quantile(sums, 0.1)), float(np.quantile(sums, 0.9))


IB, SMALL = ("infiniband", True), "<= 256 KiB"


def test_a_kind_with_enough_points_reads_its_own_p10_and_p90():
    # 10 points from 2 curves: c0 0.5, 0.7, ..., 1.3 (offset: median 0.9), c1 0.6, ..., 1.4 (1.0); the residuals
    # are each point over its curve's median, and a new cluster takes either offset with any residual. The two
    # offsets differ by less than either curve's own points pin it (tau^2 = 0): both are drawn at their median,
    # sqrt(0.9 * 1.0) as a ratio
    ratios = [0.5 + 0.1 * i for i in range(10)]
    rows = [(f"c{i % 2}", *IB, SMALL, "tree", r) for i, r in enumerate(ratios)]
    rb = B.ratio_band(_corpus(rows), ("infiniband", True, 0, "tree"))
    assert (rb.p10, rb.p90) == pytest.approx(_by_hand(rows, rows))
    mid = (0.9 * 1.0) ** 0.5
    sums = sorted(mid * r / m for _ in range(2) for r, m in zip(ratios, [0.9, 1.0] * 5))  # the same, by hand
    assert rb.p10 == pytest.approx(sums[1] + 0.9 * (sums[2] - sums[1]))  # numpy's linear p10 of 20 values
    assert rb.rows == 10 and rb.groups == 2 and rb.measured and "infiniband" in rb.words()
    assert "offset from the 2 curves" in rb.words()


def test_the_offsets_drawn_carry_the_clusters_spread_not_their_estimates_noise():
    """A curve's offset is read from its points; where they scatter, the offsets of curves that share one cluster
    offset still differ, and drawing them as they are would count that scatter twice (once in the offset, once in
    the residual beside it). Four curves whose medians differ by less than their own points' scatter are drawn at
    their median; four whose points do not scatter at all keep their offsets as they are."""
    noisy = [("a", 0.8), ("a", 1.25), ("b", 0.84), ("b", 1.3), ("c", 0.76), ("c", 1.2), ("d", 0.82), ("d", 1.24)]
    rows = [(c, *IB, SMALL, "tree", r) for c, r in noisy]
    rb = B.ratio_band(_corpus(rows), (*IB, 0, "tree"))
    logs = {c: [np.log(r) for cc, r in noisy if cc == c] for c in "abcd"}
    mid = float(np.median([np.median(v) for v in logs.values()]))
    resid = [np.log(r) - float(np.median(logs[c])) for c, r in noisy]
    sums = np.exp(mid + np.array(resid * 4))  # every curve at the median offset, every residual
    assert (rb.p10, rb.p90) == pytest.approx((np.quantile(sums, 0.1), np.quantile(sums, 0.9)))
    assert (rb.p10, rb.p90) == pytest.approx(_by_hand(rows, rows))
    # the raw draw (each curve's own median) is wider: the scatter counted twice
    raw = np.exp(np.add.outer([np.median(v) for v in logs.values()], resid).ravel())
    assert np.quantile(raw, 0.9) / np.quantile(raw, 0.1) > rb.p90 / rb.p10
    # no scatter inside a curve: its offset is known exactly and drawn as it is
    exact = [(c, *IB, SMALL, "tree", r) for c, r in zip("aabbccdd", [0.8, 0.8, 0.9, 0.9, 1.0, 1.0, 1.2, 1.2])]
    rb = B.ratio_band(_corpus(exact), (*IB, 0, "tree"))
    offsets = np.repeat([0.8, 0.9, 1.0, 1.2], 8)  # four offsets, eight zero residuals each
    assert (rb.p10, rb.p90) == pytest.approx((np.quantile(offsets, 0.1), np.quantile(offsets, 0.9)))


def test_a_band_always_holds_the_prediction():
    rows = [(f"c{i % 2}", *IB, SMALL, "tree", 1.2 + 0.01 * i) for i in range(10)]  # every run slower than predicted
    rb = B.ratio_band(_corpus(rows), ("infiniband", True, 0, "tree"))
    assert rb.p10 > 1 and rb.lo == 1.0 and rb.hi == rb.p90
    tb = B.time_band(
        resolve_profile("dgx-h100").network, 16, 1e3, time=2e-5, algorithm="tree", protocol="ll", corpus=_corpus(rows)
    )
    assert tb.hi == pytest.approx(2e-5) and tb.lo == pytest.approx(2e-5 / rb.p90)


def test_too_few_points_or_one_curve_back_off_to_the_coarser_grouping():
    # the tree kind: 8 points, all of one curve -> read from (infiniband, across nodes, small): 8 + 4 points
    rows = [("c0", *IB, SMALL, "tree", 1.0 + 0.01 * i) for i in range(8)]
    rows += [("c1", *IB, SMALL, "ring", 2.0 + 0.01 * i) for i in range(4)]
    corpus = _corpus(rows)
    rb = B.ratio_band(corpus, ("infiniband", True, 0, "tree"))
    assert rb.rows == 12 and rb.groups == 2 and rb.measured
    assert (rb.p10, rb.p90) == pytest.approx(_by_hand(rows, rows))
    assert "this kind: 8 points" in rb.words()
    # with a second curve of the tree kind it stands on its own points' residuals (the ring's c1 still gives an
    # offset: a cluster of that size band)
    more = rows + [("c2", *IB, SMALL, "tree", 1.5)]
    rb = B.ratio_band(_corpus(more), ("infiniband", True, 0, "tree"))
    tree = [r for r in more if r[-2] == "tree"]
    assert rb.rows == 9 and (rb.p10, rb.p90) == pytest.approx(_by_hand(tree, more))


def test_a_kind_with_no_point_says_so_and_takes_its_neighbours_widest_band():
    rows = [(f"c{i % 2}", *IB, SMALL, "tree", 0.9 + 0.01 * i) for i in range(10)]  # a narrow kind
    rows += [(f"d{i % 2}", "efa", True, SMALL, "tree", 1.5 + 0.1 * i) for i in range(10)]  # a wide one
    rows += [(f"e{i % 2}", "nvswitch", False, SMALL, "ring", 5.0) for i in range(10)]  # inside a node: no neighbour
    corpus = _corpus(rows)
    narrow = B.ratio_band(corpus, ("infiniband", True, 0, "tree"))
    wide = B.ratio_band(corpus, ("efa", True, 0, "tree"))
    for kind in [("roce", True, 0, "tree"), ("infiniband", True, 0, "ring all_gather")]:
        rb = B.ratio_band(corpus, kind)
        assert not rb.measured and rb.rows == 0 and rb.words().startswith(B.UNMEASURED)
        # the envelope, never the narrow neighbour alone
        assert (rb.p10, rb.p90) == (min(narrow.p10, wide.p10), max(narrow.p90, wide.p90))
    # inside a node, its neighbours are the kinds inside a node of its size band: here the nvswitch ring alone
    inside = B.ratio_band(corpus, ("nvswitch", False, 0, "ring"))
    rb = B.ratio_band(corpus, ("pcie", False, 0, "textbook ring"))
    assert (rb.p10, rb.p90) == (inside.p10, inside.p90) and not rb.measured
    # no point of its size band at all: every point
    rb = B.ratio_band(corpus, ("pcie", False, 2, "ring"))
    assert (rb.p10, rb.p90) == (min(b.p10 for b in (narrow, wide, inside)), max(b.p90 for b in (narrow, wide, inside)))
    with pytest.raises(ValueError, match="error_table"):
        B.ratio_band(_corpus([]), ("infiniband", True, 0, "tree"))


def test_a_kind_of_one_curve_is_no_narrower_than_its_neighbours_widest_band():
    # the tree kind's points all come from one curve (one cluster: one draw of its offset): its band is the wider of
    # its own and its neighbours' widest, at each end; with a second curve of its own it stands on its own points
    rows = [(f"c{i % 2}", *IB, SMALL, "ring", 0.5 + 0.1 * i) for i in range(10)]  # a wide neighbour, two curves
    rows += [("t", *IB, SMALL, "tree", 0.95 + 0.01 * i) for i in range(8)]  # one curve of the tree kind
    corpus = _corpus(rows)
    ring = B.ratio_band(corpus, (*IB, 0, "ring"))
    tree = B.ratio_band(corpus, (*IB, 0, "tree"))
    assert tree.measured and tree.rows > 0 and "one curve of this kind" in tree.words()
    assert tree.p10 <= ring.p10 and tree.p90 >= ring.p90
    two = _corpus(rows + [("u", *IB, SMALL, "tree", 0.97 + 0.01 * i) for i in range(8)])
    own = B.ratio_band(two, (*IB, 0, "tree"))
    assert "one curve" not in own.words() and own.p90 - own.p10 < ring.p90 - ring.p10


def test_leave_one_out_on_a_corpus_whose_answer_is_known():
    """Ten curves of one point each, ratios 0.5, 0.6, ..., 1.4: without its own point, each is judged on the other
    nine. Each of them is one cluster's offset with no residual, so a new cluster is one of the nine, each as
    likely: 81 sums, nine copies of each, whose linear p10 (position 8) is the lowest and p90 (position 72) the
    highest of the nine. Only 0.5 and 1.4 fall outside what the others span: 8 of 10."""
    ratios = [round(0.5 + 0.1 * i, 10) for i in range(10)]
    corpus = _corpus([(f"c{i}", *IB, SMALL, "tree", r) for i, r in enumerate(ratios)])
    inside = B.leave_one_out(corpus)
    assert inside.tolist() == [False] + [True] * 8 + [False]
    table = validate_bands.coverage_table(corpus, inside)
    assert table == [("infiniband, across nodes, <= 256 KiB, tree", 10, 10, pytest.approx(0.8))]
    # a curve's points are held out together: one curve's five copies of 3.0 are not judged on each other
    corpus = _corpus(
        [(f"c{i}", *IB, SMALL, "tree", r) for i, r in enumerate(ratios)] + [("x", *IB, SMALL, "tree", 3.0)] * 5
    )
    inside = B.leave_one_out(corpus)
    assert not inside[10:].any()


def test_the_published_leave_one_out_coverage_is_what_the_docs_say(capsys):
    """docs/nccl.md#how-sure: the band read without a curve holds the share of that curve's points the script prints
    (the goal: 70-90%); a change to the model or the corpus that moves it out of COVERAGE fails here."""
    corpus = B.published()
    inside = B.leave_one_out(corpus)
    assert inside.size == len(error_table.ROWS)
    assert COVERAGE[0] <= inside.mean() <= COVERAGE[1], inside.mean()
    assert validate_bands.main() == pytest.approx(inside.mean())
    overall = [line for line in capsys.readouterr().out.splitlines() if line.startswith("overall")]
    assert overall and f"{inside.mean():.0%}" in overall[0]


def test_the_published_bands_are_narrow_enough_to_say_something():
    """The issue's width bar: a median hi/lo of the held-out bands of at most 1.8 (the figure the script prints)."""
    width = validate_bands.widths(B.published())
    assert float(np.median(width)) <= WIDTH, float(np.median(width))


@pytest.mark.xfail(
    strict=True,
    reason="four kinds stay under 60% with their curve held out, each a whole curve no other curve resembles "
    "(docs/nccl.md#how-sure): EFA small-message tree (0 of 9: the p4de curve alone, r 0.63-0.67, against a band from "
    "0.74), InfiniBand tree >= 128 MiB (1 of 3: the 20-rack GB200 curve alone, a known miss, r 0.51-0.79), "
    "NVSwitch small ring (1 of 2: the A100 curve's 0.55 against a band from 0.65) and NVSwitch NVLS 0.5-64 MiB "
    "(4 of 8: the Azure curves' 1.03-1.06 against a band to 1.02)",
)
def test_every_published_kind_is_covered_at_least_60_percent():
    corpus = B.published()
    inside = B.leave_one_out(corpus)
    low = [(w, f) for w, _, _, f in validate_bands.coverage_table(corpus, inside) if f < 0.6]
    assert not low, low


# ----------------------------------------------------------------------------- every profile, every k and size

BUILT_IN = [e.name for e in list_profiles() if e.origin == "built-in"]


@pytest.mark.parametrize("name", BUILT_IN)
@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    ks=st.lists(st.integers(min_value=1, max_value=4096), min_size=1, max_size=4),
    sizes=st.lists(st.integers(min_value=1, max_value=2**34), min_size=1, max_size=4),
    collective=st.sampled_from(["all_reduce", "all_gather"]),
)
def test_every_built_in_profile_bands_its_time(name, ks, sizes, collective):
    prof = resolve_profile(name)
    cap = prof.network[-1].size or 4096
    k = np.array(sorted({min(x, cap) for x in ks}))
    recs = comm_grid(
        prof,
        k,
        np.array(sorted(set(sizes)), dtype=float),
        algorithm=None,
        message_dtype="fp32",
        collective=collective,
        protocol=None,
    )
    for r in recs:
        lo, t, hi = r["time_lo_s"], r["time_s"], r["time_hi_s"]
        assert lo <= t <= hi and np.isfinite(lo) and np.isfinite(hi)
        if r["devices"] > 1:
            assert 0 < lo and hi - lo > 0, r
            assert r["band_basis"]


# ----------------------------------------------------------------------------- the command


def test_comm_records_carry_the_band_beside_the_time(runner):
    args = ["comm", "-p", "dgx-h100", "-k", "8,16,1024", "-s", "64KiB,16MiB,1GiB"]
    r = runner.invoke(app, [*args, "-f", "json"])
    assert r.exit_code == 0, r.output
    recs = json.loads(r.stdout)
    assert len(recs) == 9
    keys = list(recs[0])
    assert keys[keys.index("time_s") + 1 : keys.index("time_s") + 3] == ["time_lo_s", "time_hi_s"]
    assert all(x["time_lo_s"] < x["time_hi_s"] and x["time_lo_s"] <= x["time_s"] <= x["time_hi_s"] for x in recs)
    csv = runner.invoke(app, [*args, "-f", "csv"])
    assert "time_lo_s,time_hi_s" in csv.stdout.splitlines()[0]


def test_the_table_shows_the_band_when_wide_and_leaves_it_out_first_at_80():
    from typer.testing import CliRunner

    def run(width: int, *args: str) -> str:
        """simcli in this process with COLUMNS=width, as a terminal of that width; its stdout."""
        r = CliRunner().invoke(app, list(args), env={"COLUMNS": str(width)})
        assert r.exit_code == 0, r.output
        return r.stdout

    band = ["comm", "-p", "dgx-h100", "-k", "8,16", "-s", "64KiB,1GiB"]
    wide = run(140, *band)
    head = next(line for line in wide.splitlines() if "┃" in line)
    unit = re.search(r"time (\S+) ┃", head).group(1)  # the band is in the time column's unit
    assert f"band {unit}" in head and "–" in wide and "left out" not in wide
    narrow = run(80, *band)
    assert max(len(line.rstrip()) for line in narrow.splitlines()) <= 80
    assert "band" not in next(line for line in narrow.splitlines() if "┃" in line)
    assert f"band {unit}" in narrow[narrow.index("left out to fit 80 columns") :].replace("\n", " ")
    # a kind no curve ran is marked, and the caption says what the mark means
    pcie = run(140, "comm", "-p", "l40s-pcie", "-k", "2", "-s", "1MiB")
    assert "*" in pcie and "none of its kind" in pcie
