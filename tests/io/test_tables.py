"""simcli.io.tables (saved tables read back and recognised) and simcli.fits.calibration (the pure calibration)."""

from __future__ import annotations

import datetime
import json

import numpy as np
import pytest

from simcli.base.types import InputError, Tier
from simcli.comm import collectives, specs
from simcli.fits.calibration import calibrate_profile
from simcli.fits.fit_comm import CalibrationOptions
from simcli.io import tables
from simcli.io.measured.table import read_measurements
from simcli.io.profiles import load_profile


@pytest.mark.parametrize(
    "cols, kind",
    [
        ({"devices", "speedup"}, "speedup"),
        ({"devices", "bytes", "fastest"}, "algorithms"),
        ({"devices", "bytes", "time_s"}, "comm"),
        ({"world_size", "bytes", "time_s"}, "bench"),
        ({"world_size", "t_step_s"}, "step"),
        ({"metric", "measured", "predicted", "devices"}, "validation"),
    ],
)
def test_detect_kind_by_columns(cols, kind):
    assert tables.detect_kind([dict.fromkeys(cols, 1)], "t.csv") == kind


def test_unknown_columns_are_one_clear_error():
    with pytest.raises(InputError, match="t.csv: columns a, b are not a table simcli draws"):
        tables.detect_kind([{"a": 1, "b": 2}], "t.csv")


def test_read_table_json_and_csv(tmp_path):
    j = tmp_path / "s.json"
    j.write_text(json.dumps({"records": [{"devices": 1, "speedup": 1.0}]}))
    assert tables.read_table(str(j)) == [{"devices": 1, "speedup": 1.0}]
    c = tmp_path / "s.csv"
    c.write_text("# comment\ndevices,speedup\n1,1.0\n2,\n")
    assert tables.read_table(str(c)) == [{"devices": 1, "speedup": 1.0}, {"devices": 2, "speedup": None}]
    with pytest.raises(InputError, match="give a .csv or .json"):
        (tmp_path / "s.txt").write_text("x")
        tables.read_table(str(tmp_path / "s.txt"))


def test_busbw_uses_the_collectives_factor():
    assert tables.busbw_GBps(8e9, 8, 1.0) == pytest.approx(8.0 * 2 * 7 / 8)
    assert tables.busbw_GBps(8e9, 8, 1.0) == pytest.approx(8.0 * float(specs.busbw_factor(8)))
    assert tables.busbw_GBps(1.0, 2, None) is None


def test_calibration_is_a_pure_function_of_its_inputs(tmp_path):
    net = (Tier("loopback", 3e9, 60e-6, per="node"),)
    k = np.repeat([2, 4], 6)
    n = np.tile(np.geomspace(1e3, 1e8, 6), 2)
    t = collectives.allreduce("ring", net, k, nbytes=n).time
    lines = [
        "# synthetic",
        "collective,backend,world_size,bytes,dtype,iters,time_s,time_p10_s,time_p90_s,algbw_GBps,busbw_GBps",
    ]
    algbw = n / t / 1e9  # algbw and busbw as the times give them (a reader refuses a record they contradict)
    busbw = algbw * specs.busbw_factor(k)
    lines += [
        f"allreduce,gloo,{kk},{int(nn)},fp32,10,{tt!r},{tt!r},{tt!r},{a!r},{b!r}"
        for kk, nn, tt, a, b in zip(k.tolist(), n.tolist(), t.tolist(), algbw.tolist(), busbw.tolist())
    ]
    csv = tmp_path / "run.csv"
    csv.write_text("\n".join(lines) + "\n")
    base = tmp_path / "base.yaml"
    base.write_text(
        "name: base\nsources: [test]\ndevice: {name: cpu, peak_flops: {fp32: 50 GFLOP/s}, mfu: 0.5}\n"
        "network:\n  - {name: loopback, bandwidth: 1 GB/s, per: node, latency: 10 us}\n"
    )
    now = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)

    def run():
        return calibrate_profile(
            load_profile(base),
            read_measurements(csv),
            None,
            opts=CalibrationOptions(name="cal", now=now, host="testhost", algorithm="ring", loss="linear"),
        )

    a, b = run(), run()
    assert a["yaml"] == b["yaml"]
    assert "2026-01-02T03:04:05Z" in a["yaml"] and "testhost" in a["yaml"]
    assert a["profile"].network[0].latency_s == pytest.approx(60e-6, rel=1e-6)
