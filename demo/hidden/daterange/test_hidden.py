from datetime import date

from dayrange import parse_range


def test_end_included():
    assert parse_range("2024-01-05..2024-01-07") == [date(2024, 1, 5), date(2024, 1, 6), date(2024, 1, 7)]


def test_single_date():
    assert parse_range("2024-01-05") == [date(2024, 1, 5)]


def test_same_start_and_end():
    assert parse_range("2024-03-01..2024-03-01") == [date(2024, 3, 1)]


def test_month_length():
    assert len(parse_range("2024-02-01..2024-02-29")) == 29


def test_whitespace():
    assert parse_range(" 2024-01-01 .. 2024-01-02 ")[-1] == date(2024, 1, 2)
