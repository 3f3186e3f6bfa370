import math

import pytest

from simcli.base.units import UnitError, fmt_bytes, fmt_count, fmt_rate, fmt_time, parse


@pytest.mark.parametrize(
    "text,kind,expected",
    [
        ("400 Gb/s", "bandwidth", 50e9),  # bits: 400 Gb/s = 50 GB/s
        ("400 Gbit/s", "bandwidth", 50e9),
        ("400 Gbps", "bandwidth", 50e9),
        ("50 GB/s", "bandwidth", 50e9),
        ("1 GiB/s", "bandwidth", 2.0**30),
        ("3.35 TB/s", "bandwidth", 3.35e12),
        ("100 Mb/s", "bandwidth", 12.5e6),
        ("3 us", "time", 3e-6),
        ("3 µs", "time", 3e-6),
        ("250 ns", "time", 250e-9),
        ("1.5 ms", "time", 1.5e-3),
        ("80 GB", "bytes", 80e9),
        ("64 GiB", "bytes", 64 * 2.0**30),
        ("1KiB", "bytes", 1024),
        ("1 KB", "bytes", 1000),
        ("989 TFLOP/s", "flops", 989e12),
        ("2.25 PFLOP/s", "flops", 2.25e15),
        ("1e12", "flops", 1e12),
        (42, "bytes", 42.0),
    ],
)
def test_parse(text, kind, expected):
    assert parse(text, kind) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "text,kind",
    [
        ("400 Gbps/s", "bandwidth"),
        ("400 GB", "bandwidth"),
        ("3 parsecs", "time"),
        ("GB/s", "bandwidth"),
        ("", "bytes"),
        ("nan", "bytes"),
        ("inf", "time"),
        (True, "bytes"),
        (None, "time"),
        ([1], "bytes"),
        ("50 GB/s", "time"),
        ("1 TFLOP", "flops"),
    ],
)
def test_parse_refuses(text, kind):
    with pytest.raises(UnitError):
        parse(text, kind)


def test_bandwidth_error_suggests_units():
    with pytest.raises(UnitError, match=r"'400 Gbps/s' is not a bandwidth \(try '400 Gb/s' or '50 GB/s'\)"):
        parse("400 Gbps/s", "bandwidth")


def test_gb_is_decimal_gib_is_binary():
    assert parse("1 GB", "bytes") == 1e9
    assert parse("1 GiB", "bytes") == 2**30
    assert parse("8 Gb/s", "bandwidth") == parse("1 GB/s", "bandwidth")


def test_formatting():
    assert fmt_bytes(2**30) == "1 GiB"
    assert fmt_bytes(1e9, binary=False) == "1 GB"
    assert fmt_time(1.5e-3) == "1.5 ms"
    assert fmt_time(3e-6) == "3 µs"
    assert fmt_rate(50e9) == "50 GB/s"
    # a 175B model is 175 G, not 162.98 (no division by 1024 for counts)
    assert fmt_count(175e9) == "175 G"
    assert fmt_count(1695.17e12) == "1.7 P"
    assert fmt_bytes(1023.9) == "1024 B" and fmt_time(9999.5) == "2.78 h"
    assert not math.isnan(parse("0.5 s", "time"))
