"""Parsing of inclusive date ranges such as 2024-01-05..2024-01-10."""

from datetime import date, timedelta


def parse_range(spec):
    """Return the list of dates in spec.

    spec is "START..END" (both ISO dates, END included) or a single ISO
    date, which is a range of one day.
    """
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
    # END is included, so a range from a day to itself has one day.
    days = (end - start).days + 1
    return [start + timedelta(days=i) for i in range(days)]
