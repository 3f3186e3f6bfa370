import numpy as np
import pytest

from simcli.base.ranges import parse_devices, parse_sizes
from simcli.base.types import InputError


@pytest.mark.parametrize(
    "text,expected",
    [
        ("1..8", list(range(1, 9))),
        ("1..64:x2", [1, 2, 4, 8, 16, 32, 64]),
        ("1,2,8,32", [1, 2, 8, 32]),
        ("1..8,16..64:x2", [1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64]),
        ("8,1,8,2", [1, 2, 8]),  # sorted and de-duplicated
        ("8..64:+8", [8, 16, 24, 32, 40, 48, 56, 64]),
        ("3..100:x3", [3, 9, 27, 81]),
        ("5", [5]),
    ],
)
def test_devices(text, expected):
    assert parse_devices(text).tolist() == expected


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("0", "at least 1"),
        ("-4", "at least 1"),
        ("64..1", "runs backwards; write it as 1..64"),
        ("1..", "no upper end"),
        ("abc", "not a whole number"),
        ("1..64:x1", "greater than 1"),
        ("", "empty"),
        ("1,,2", "empty item"),
        ("1..100000000000", "add a step"),
        ("2.5", "not a whole number"),
    ],
)
def test_devices_refused(text, fragment):
    with pytest.raises(InputError, match="--devices") as e:
        parse_devices(text)
    assert fragment in str(e.value)


def test_large_range_is_cheap_and_exact():
    k = parse_devices("1..100000")
    assert k.size == 100000 and k[0] == 1 and k[-1] == 100000 and k.dtype == np.int64


def test_sizes():
    assert parse_sizes("1KiB..1MiB:x4").tolist() == [1024, 4096, 16384, 65536, 262144, 1048576]
    assert parse_sizes("32MiB,1GiB").tolist() == [32 * 2**20, 2**30]
    assert parse_sizes("1.5KiB").tolist() == [1536]
    assert parse_sizes("1KB").tolist() == [1000]


@pytest.mark.parametrize("text", ["1KiB..1GiB", "1 parsec", "0B", "1GiB..1KiB:x2", "0.5B"])
def test_sizes_refused(text):
    with pytest.raises(InputError, match="--size"):
        parse_sizes(text)
