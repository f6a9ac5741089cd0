"""Merging of closed integer or float intervals."""


def merge(intervals):
    """Merge overlapping closed intervals [start, end].

    Returns a list of (start, end) tuples sorted by start; the input may
    be in any order and is not modified.
    """
    result = []
    for start, end in sorted(intervals):
        if start > end:
            raise ValueError(f"interval ({start}, {end}) has start after end")
        if result and start < result[-1][1]:
            result[-1][1] = max(result[-1][1], end)
        else:
            result.append([start, end])
    return [tuple(iv) for iv in result]


def total_length(intervals):
    """Return the length covered by the union of intervals."""
    return sum(end - start for start, end in merge(intervals))
