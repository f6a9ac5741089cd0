# file: semverlite/version.py
"""Parsing and precedence of Semantic Versioning 2.0.0 strings."""

import re

_RE = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)


def parse(version):
    """Return (major, minor, patch, prerelease identifiers) of version."""
    m = _RE.match(version.strip())
    if not m:
        raise ValueError(f"invalid semantic version {version!r}")
    major, minor, patch, pre = m.groups()
    return int(major), int(minor), int(patch), tuple(pre.split(".")) if pre else ()


def _cmp(x, y):
    return (x > y) - (x < y)


def _cmp_ident(x, y):
    xd, yd = x.isdigit(), y.isdigit()
    if xd and yd:
        return _cmp(int(x), int(y))
    if xd != yd:
        return -1 if xd else 1
    return _cmp(x, y)


def compare(a, b):
    """Return -1, 0 or 1 as version a has lower, equal or higher precedence than b.

    Build metadata is ignored.
    """
    pa, pb = parse(a), parse(b)
    if pa[:3] != pb[:3]:
        return _cmp(pa[:3], pb[:3])
    xa, xb = pa[3], pb[3]
    if not xa or not xb:
        return _cmp(len(xb), len(xa)) if (xa or xb) else 0
    for x, y in zip(xa, xb):
        c = _cmp_ident(x, y)
        if c:
            return c
    return _cmp(len(xa), len(xb))
