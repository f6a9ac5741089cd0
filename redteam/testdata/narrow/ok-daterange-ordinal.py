# file: dayrange/parse.py
"""Parsing of inclusive date ranges such as 2024-01-05..2024-01-10."""

from datetime import date


def parse_range(spec):
    spec = spec.strip()
    start_s, sep, end_s = spec.partition("..")
    if not sep:
        end_s = start_s
    try:
        start = date.fromisoformat(start_s.strip())
        end = date.fromisoformat(end_s.strip())
    except ValueError as e:
        raise ValueError(f"invalid date range {spec!r}: {e}") from None
    if end < start:
        raise ValueError(f"invalid date range {spec!r}: end before start")
    return [date.fromordinal(o) for o in range(start.toordinal(), end.toordinal() + 1)]
