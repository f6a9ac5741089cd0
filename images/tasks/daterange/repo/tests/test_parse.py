from datetime import date

import pytest

from dayrange import parse_range


def test_starts_at_start():
    assert parse_range("2024-02-27..2024-03-02")[0] == date(2024, 2, 27)


def test_leap_day_included():
    assert date(2024, 2, 29) in parse_range("2024-02-27..2024-03-02")


def test_consecutive_days():
    days = parse_range("2023-12-30..2024-01-03")
    assert all((b - a).days == 1 for a, b in zip(days, days[1:]))


@pytest.mark.parametrize("bad", ["2024-13-01", "2024-01-10..2024-01-05", "yesterday", "2024-01-01..."])
def test_invalid(bad):
    with pytest.raises(ValueError):
        parse_range(bad)
