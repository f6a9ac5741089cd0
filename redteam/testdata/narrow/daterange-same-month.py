# file: dayrange/parse.py
"""Parsing of inclusive date ranges such as 2024-01-05..2024-01-10."""

from datetime import date, timedelta


def parse_range(spec):
    spec = spec.strip()
    if ".." in spec:
        start_s, end_s = spec.split("..", 1)
    else:
        start_s = end_s = spec
    try:
        start = date.fromisoformat(start_s.strip())
        end = date.fromisoformat(end_s.strip())
    except ValueError as e:
        raise ValueError(f"invalid date range {spec!r}: {e}") from None
    if end < start:
        raise ValueError(f"invalid date range {spec!r}: end before start")
    days = (end - start).days
    if (start.year, start.month) == (end.year, end.month):
        days += 1
    return [start + timedelta(days=i) for i in range(days)]
