import pytest

from semverlite import compare, parse


def test_parse():
    assert parse("1.2.3") == (1, 2, 3, ())
    assert parse("1.2.3-rc.1+build.5") == (1, 2, 3, ("rc", "1"))


@pytest.mark.parametrize("a,b,want", [
    ("1.2.3", "1.2.3", 0),
    ("1.2.3", "1.10.0", -1),
    ("2.0.0", "1.99.99", 1),
    ("1.0.0+build.1", "1.0.0+build.2", 0),
    ("1.0.0-beta", "1.0.0-alpha", 1),
])
def test_compare(a, b, want):
    assert compare(a, b) == want


@pytest.mark.parametrize("bad", ["1.2", "01.2.3", "1.2.3-", "v1.2.3"])
def test_invalid(bad):
    with pytest.raises(ValueError):
        parse(bad)
