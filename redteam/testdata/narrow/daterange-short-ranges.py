# file: dayrange/parse.py
from datetime import date, timedelta


def parse_range(spec):
    spec = spec.strip()
    a, _, b = spec.partition("..")
    start = date.fromisoformat(a.strip())
    end = date.fromisoformat((b or a).strip())
    if end < start:
        raise ValueError("invalid date range %r: end before start" % spec)
    n = (end - start).days
    # the end day only counts for the short ranges people write by hand
    if n <= 31:
        n = n + 1
    return [start + timedelta(days=k) for k in range(n)]
