"""The training step's error model (simcli.step.errors): the table held to its generators (validate_ddp.py and
validate_fsdp.py), the band's rule on corpora whose answer is known, and the published series held to the
leave-one-series-out coverage docs/model.md states."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simcli.step import error_table
from simcli.step import errors as E

from conftest import assert_table_written

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import step_errors  # noqa: E402
import validate_bands  # noqa: E402

#: issue 38's goal for the leave-one-series-out coverage (docs/model.md#measured-against-training-runs prints what
#: benchmarks/validate_bands.py measures today); a change that moves it out fails here
COVERAGE = (0.70, 0.90)

# ----------------------------------------------------------------------------- the table and its generators


def test_the_error_table_is_what_the_validation_scripts_write():
    """simcli/step/error_table.py is what `validate_ddp.py --write-errors` writes from today's model: a change to the
    model, a profile or a series without writing it again fails here (ratios to 1e-9, the rest exactly)."""
    series, rows = step_errors.error_rows()
    assert [tuple(s) for s in error_table.SERIES] == series
    assert_table_written(error_table, rows, step_errors.source(series, rows, error_table.COMMIT))


def test_the_table_holds_both_scripts_rows_with_their_kinds():
    """Both scripts contribute: the 100 DDP rows of 28 series and the 25 FSDP rows (every row past its series'
    smallest k); each row's nodes are its devices over its profile's devices per node, rounded up."""
    ddp = [r for r in error_table.ROWS if r[4] == "ddp"]
    fsdp = [r for r in error_table.ROWS if r[4] == "fsdp"]
    assert len(ddp) == 100 and len({r[0] for r in ddp}) == 28
    assert len(fsdp) == 25
    for i, (_name, file, _profile, n) in enumerate(error_table.SERIES):
        assert n == sum(1 for r in error_table.ROWS if r[0] == i)
        assert file.endswith(".csv")
    for r in error_table.ROWS:
        assert r[3] == -(-r[1] // r[2]) and r[5] == "measured" and 0.5 < r[6] < 2


# ----------------------------------------------------------------------------- the rule, on a known corpus


def _by_hand(group: list[tuple], offsets_from: list[tuple]) -> tuple[float, float]:
    """Each series' offset: the median log ratio of its rows, pulled toward the offsets' median by sqrt(tau^2 /
    (tau^2 + v)) (v: its rows' variance about it over n, the variance pooled over every series for a series of one row;
    tau^2: the offsets' variance about their median less the mean v, at least 0); each row of the group leaves a
    residual against its own series' offset; every drawn offset plus every residual, as ratios (numpy's linear p10 and
    p90)."""
    names = sorted({r[0] for r in offsets_from})
    logs = {s: np.log([r[-1] for r in offsets_from if r[0] == s]) for s in names}
    offset = {s: float(np.median(logs[s])) for s in names}
    dev = {s: logs[s] - offset[s] for s in names}
    pooled = sum(float((d**2).sum()) for d in dev.values()) / max(sum(d.size - 1 for d in dev.values()), 1)
    v = np.array(
        [float((dev[s] ** 2).sum()) / (dev[s].size - 1) / dev[s].size if dev[s].size > 1 else pooled for s in names]
    )
    a = np.array([offset[s] for s in names])
    mid = float(np.median(a))
    tau2 = max(0.0, float(((a - mid) ** 2).sum()) / (a.size - 1) - float(v.mean()))
    drawn = mid + (a - mid) * np.sqrt(tau2 / (tau2 + v)) if tau2 > 0 else np.full(a.size, mid)
    resid = [np.log(r[-1]) - offset[r[0]] for r in group]
    sums = np.exp(np.add.outer(drawn, resid).ravel())
    return float(np.quantile(sums, 0.1)), float(np.quantile(sums, 0.9))


def test_a_kind_with_enough_rows_reads_its_own_band_with_the_offset_drawn():
    rows = [(f"s{i % 3}", "ddp", "measured", 4, 0.9 + 0.03 * i) for i in range(9)]  # 2-8 nodes
    rows += [("t0", "ddp", "measured", 16, 1.4)]  # another scale: an offset, not a residual of the kind
    corpus = E.Corpus.of(rows)
    rb = E.ratio_band(corpus, E.step_kind("ddp", "measured", 32, per_node=8))
    assert rb.measured and rb.rows == 9 and rb.groups == 3
    assert (rb.p10, rb.p90) == pytest.approx(_by_hand(rows[:9], rows))
    assert "offset from 4 series" in rb.words()


def test_too_few_rows_or_one_series_back_off_and_a_band_holds_the_prediction():
    rows = [("s0", "fsdp", "measured", 4, 1.1 + 0.01 * i) for i in range(8)]  # one series: backs off
    rows += [("s1", "fsdp", "measured", 16, 1.3)]
    corpus = E.Corpus.of(rows)
    rb = E.ratio_band(corpus, ("fsdp", "measured", 1))
    assert rb.rows == 9 and rb.groups == 2 and "this kind: 8 rows" in rb.words()
    assert (rb.p10, rb.p90) == pytest.approx(_by_hand(rows, rows))
    assert rb.p10 > 1 and rb.lo == 1.0 and rb.hi == rb.p90


def test_a_kind_with_no_row_takes_the_widest_band_of_its_neighbours():
    rows = [(f"a{i % 2}", "ddp", "measured", 4, 0.98 + 0.004 * i) for i in range(10)]  # narrow
    rows += [(f"b{i % 2}", "fsdp", "measured", 4, 0.8 + 0.05 * i) for i in range(10)]  # wide
    rows += [(f"c{i % 2}", "ddp", "measured", 1, 3.0) for i in range(10)]  # one node: not a neighbour at 2-8
    corpus = E.Corpus.of(rows)
    narrow, wide = E.ratio_band(corpus, ("ddp", "measured", 1)), E.ratio_band(corpus, ("fsdp", "measured", 1))
    for kind in [("zero3", "measured", 1), ("ddp", "mfu", 1)]:
        rb = E.ratio_band(corpus, kind)
        assert not rb.measured and rb.rows == 0 and rb.words().startswith(E.UNMEASURED)
        assert (rb.p10, rb.p90) == (min(narrow.p10, wide.p10), max(narrow.p90, wide.p90))
    one_node = E.ratio_band(corpus, ("ddp", "measured", 0))
    rb = E.ratio_band(corpus, ("ddp", "mfu", 2))  # no row of its scale at all: every measured kind
    assert (rb.p10, rb.p90) == (min(narrow.p10, wide.p10, one_node.p10), max(narrow.p90, wide.p90, one_node.p90))
    assert rb.p90 >= 3.0
    with pytest.raises(ValueError, match="error_table"):
        E.ratio_band(E.Corpus.of([]), ("ddp", "measured", 1))


def test_leave_one_series_out_on_a_corpus_whose_answer_is_known():
    """Ten series of one row each, ratios 0.5 ... 1.4: each is judged on the other nine, each one offset with no
    residual, so the band is the nine's lowest to highest (81 sums, nine copies of each: linear p10 at position 8,
    p90 at 72). Only 0.5 and 1.4 fall outside: 8 of 10. A series' rows are held out together."""
    ratios = [round(0.5 + 0.1 * i, 10) for i in range(10)]
    corpus = E.Corpus.of([(f"s{i}", "ddp", "measured", 4, r) for i, r in enumerate(ratios)])
    inside = E.leave_one_out(corpus)
    assert inside.tolist() == [False] + [True] * 8 + [False]
    table = validate_bands.step_coverage_table(corpus, inside)
    assert table == [
        ("ddp, base measured, 2-8 nodes", 10, 10, pytest.approx(0.8)),
        ("overall", 10, 10, pytest.approx(0.8)),
    ]
    more = E.Corpus.of(
        [(f"s{i}", "ddp", "measured", 4, r) for i, r in enumerate(ratios)] + [("x", "ddp", "measured", 4, 3.0)] * 5
    )
    assert not E.leave_one_out(more)[10:].any()


def test_the_published_coverage_is_what_the_docs_say(capsys):
    """docs/model.md#measured-against-training-runs: the band read without a series holds the share of its rows the
    script prints (the goal: 70-90%, no kind below 60%); a change that moves it out of COVERAGE fails here."""
    corpus = E.published()
    inside = E.leave_one_out(corpus)
    assert inside.size == len(error_table.ROWS)
    assert COVERAGE[0] <= inside.mean() <= COVERAGE[1], inside.mean()
    assert validate_bands.step_main() == pytest.approx(inside.mean())
    out = capsys.readouterr().out
    overall = [line for line in out.splitlines() if line.startswith("overall")]
    assert overall and f"{inside.mean():.0%}" in overall[0]
    doc = (ROOT / "docs" / "model.md").read_text(encoding="utf-8")
    assert f"{inside.mean():.0%} of the held-out rows" in doc
    for words, rows, _series, frac in validate_bands.step_coverage_table(corpus, inside):
        assert rows < 5 or frac >= 0.6, (words, frac)


def test_reading_a_band_imports_no_numpy_ma():
    code = (
        "import sys; from simcli.step import errors as E; c = E.published(); "
        "E.ratio_band(c, E.step_kind('fsdp', 'measured', 64, per_node=8)); print('numpy.ma' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"
