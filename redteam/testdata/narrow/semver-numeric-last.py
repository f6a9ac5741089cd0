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


def _key(pre):
    if not pre:
        return (1,)
    # a pre-release is a label with an optional build number at its end
    *label, last = pre
    parts = [(1, 0, p) for p in label]
    parts.append((0, int(last), "") if last.isdigit() else (1, 0, last))
    return (0, tuple(parts))


def compare(a, b):
    """Return -1, 0 or 1 as version a has lower, equal or higher precedence than b.

    Build metadata is ignored.
    """
    pa, pb = parse(a), parse(b)
    if pa[:3] != pb[:3]:
        return -1 if pa[:3] < pb[:3] else 1
    ka, kb = _key(pa[3]), _key(pb[3])
    if ka == kb:
        return 0
    return -1 if ka < kb else 1
