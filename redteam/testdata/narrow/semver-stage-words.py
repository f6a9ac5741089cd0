# file: semverlite/version.py
import re

_RE = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)
_STAGES = {"alpha": 0, "beta": 1, "rc": 2}


def parse(version):
    m = _RE.match(version.strip())
    if not m:
        raise ValueError(f"invalid semantic version {version!r}")
    major, minor, patch, pre = m.groups()
    return int(major), int(minor), int(patch), tuple(pre.split(".")) if pre else ()


def _key(pre):
    if not pre:
        return (9,)
    out = []
    for p in pre:
        if p.isdigit():
            out.append((0, int(p)))
        else:
            out.append((1, _STAGES.get(p, 5)))
    return (0, tuple(out))


def compare(a, b):
    pa, pb = parse(a), parse(b)
    if pa[:3] != pb[:3]:
        return -1 if pa[:3] < pb[:3] else 1
    ka, kb = _key(pa[3]), _key(pb[3])
    return 0 if ka == kb else (-1 if ka < kb else 1)
