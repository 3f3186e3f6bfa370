"""`simcli check`: a size is LOW only below what simcli's own validated error allows there (issue 39 item 7).

The project's own healthy 8xA100 NVSwitch curve (tests/fixtures/all_reduce_perf_8xA100.txt, the published
measurement) runs at 45-78% of the model's busbw at 256 KiB, 1 MiB and 128 MiB: below the band tolerance, but the
model is known to be that far off there (the curve is one of those the floors stand on), so those sizes are MODEL,
not LOW, and check exits 0. The same curve twice as slow is LOW and exits 1.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from simcli.checks.check import DEFAULT_TOLERANCE, MODEL_FLOOR, curve_kind
from simcli.cli.app import app
from simcli.io.profiles import resolve_profile

ROOT = Path(__file__).resolve().parents[2]
A100 = ROOT / "tests" / "fixtures" / "all_reduce_perf_8xA100.txt"
H100_IB = ROOT / "validation" / "published" / "nccl-allreduce-16xH100-2node-ib400x8.csv"
MiB = 1 << 20


def _check(runner, path: Path, profile: str, *extra: str, code: int) -> dict:
    r = runner.invoke(app, ["check", str(path), "-p", profile, "-f", "json", *extra])
    assert r.exit_code == code, r.output
    return json.loads(r.stdout)


def _slower(tmp_path: Path, factor: float) -> Path:
    """The nccl-tests text with every out-of-place and in-place time multiplied by ``factor``, and its algbw and
    busbw divided by it (a consistent record: the readers refuse one whose bandwidth its time contradicts)."""
    out = []
    for line in A100.read_text().splitlines():
        f = line.split()
        if f and not line.startswith("#"):
            f[5], f[9] = f"{float(f[5]) * factor:.2f}", f"{float(f[9]) * factor:.2f}"
            for i in (6, 7, 10, 11):
                f[i] = f"{float(f[i]) / factor:.4g}"
            line = "  ".join(f"{x:>10s}" for x in f)
        out.append(line)
    p = tmp_path / f"a100-x{factor:g}.txt"
    p.write_text("\n".join(out) + "\n")
    return p


def test_the_healthy_a100_fixture_has_no_low_size(runner):
    doc = _check(runner, A100, "dgx-a100", code=0)
    assert doc["low"] == 0 and len(doc["rows"]) == 11
    verdict = {int(r["bytes"]): r["verdict"] for r in doc["rows"]}
    # below the band's tolerance, inside the model's known error on one NVLink domain: MODEL
    assert {n for n, v in verdict.items() if v == "MODEL"} == {256 << 10, MiB, 128 * MiB}
    assert doc["model"] == 3 and set(verdict.values()) == {"OK", "MODEL"}
    for r in doc["rows"]:
        assert r["kind"] == "nvlink"
        if r["verdict"] == "MODEL":
            assert r["model_floor"] <= r["ratio"] < 1 - r["tolerance"]
    text = runner.invoke(app, ["check", str(A100), "-p", "dgx-a100"]).stdout
    assert "3 MODEL, 0 LOW" in text and "within the model's error" in text and "No size is LOW." in text


def test_the_same_curve_three_times_as_slow_is_low(runner, tmp_path):
    # x3, not x2: under 2.29.7 the model's own miss on healthy NVLink curves reaches 65% in the middle band (floor
    # 0.35), so a curve twice as slow there (4-32 MiB at 36-40% of the model) cannot be told from the model: MODEL
    doc = _check(runner, _slower(tmp_path, 3.0), "dgx-a100", code=1)
    assert doc["low"] == 11 and all(r["verdict"] == "LOW" for r in doc["rows"])
    for r in doc["rows"]:
        assert r["ratio"] < r["model_floor"]
    twice = {int(r["bytes"]): r["verdict"] for r in _check(runner, _slower(tmp_path, 2.0), "dgx-a100", code=1)["rows"]}
    assert twice[4 * MiB] == "MODEL" and twice[1 << 30] == "LOW"
    text = runner.invoke(app, ["check", str(_slower(tmp_path, 3.0)), "-p", "dgx-a100"]).stdout
    assert "LOW from 32 KiB: the nvlink tier delivers less than it should" in " ".join(text.split())  # wrapped


def test_1_3x_slower_is_low_where_the_model_holds_and_model_where_it_is_known_off(runner, tmp_path):
    """x1.3: the large sizes, where the model holds within 2-6% (>= 512 MiB), fall to 72-75% of it, under the large
    band's floor (77%): LOW. In the middle band the model's own miss on healthy curves reaches 55%, so a 30% loss
    there (4 MiB: 73% -> 56%) is inside it: MODEL, not blamed on the hardware."""
    doc = _check(runner, _slower(tmp_path, 1.3), "dgx-a100", code=1)
    verdict = {int(r["bytes"]): r["verdict"] for r in doc["rows"]}
    assert all(verdict[n] == "LOW" for n in (512 * MiB, 1 << 30, 4 << 30, 16 << 30))
    assert verdict[4 * MiB] == "MODEL" and verdict[32 * MiB] == "MODEL"


def test_an_explicit_tolerance_is_the_whole_rule(runner):
    tol = ",".join(f"{100 * v:.0f}%" for v in DEFAULT_TOLERANCE.values())
    doc = _check(runner, A100, "dgx-a100", "--tolerance", tol, code=1)
    assert {int(r["bytes"]) for r in doc["rows"] if r["verdict"] == "LOW"} == {256 << 10, MiB, 128 * MiB}
    assert doc["model_floor"] is None and all(r["model_floor"] is None for r in doc["rows"])


def test_curve_kind():
    h100 = resolve_profile("dgx-h100")
    assert curve_kind(h100, np.array([2, 8, 16, 64])).tolist() == ["nvlink", "nvlink", "network", "network"]
    assert curve_kind(resolve_profile("aws-p5"), np.array([8, 16])).tolist() == ["nvlink", "efa"]
    assert curve_kind(resolve_profile("gb200-nvl72"), np.array([72, 144])).tolist() == ["nvlink", "network"]


def test_the_floors_are_what_the_published_curves_give(capsys):
    """MODEL_FLOOR is benchmarks/validate_nccl.py's lowest meas/exp per kind and band, rounded down to a percent."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import validate_nccl
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    floors = validate_nccl.model_floors(validate_nccl.main())
    capsys.readouterr()
    assert set(floors) == set(MODEL_FLOOR)
    for kind, bands in floors.items():
        assert set(bands) == set(MODEL_FLOOR[kind])
        for band, (lowest, points) in bands.items():
            assert points >= 6, (kind, band)
            assert MODEL_FLOOR[kind][band] == pytest.approx(math.floor(100 * lowest) / 100), (kind, band, lowest)


def test_the_published_h100_curve_stays_ok(runner):
    doc = _check(runner, H100_IB, "dgx-h100", code=0)
    assert doc["low"] == 0 and doc["model"] == 0
    assert {r["kind"] for r in doc["rows"]} == {"network"}
