import pytest

from numerals import from_roman, to_roman


@pytest.mark.parametrize("s,want", [("IV", 4), ("IX", 9), ("XL", 40), ("XC", 90), ("CD", 400), ("CM", 900), ("MCMXCIV", 1994), ("xliv", 44)])
def test_subtractive(s, want):
    assert from_roman(s) == want


def test_round_trip():
    for n in range(1, 4000):
        assert from_roman(to_roman(n)) == n


def test_additive_still_works():
    assert from_roman("MDCLXVI") == 1666


def test_empty_rejected():
    with pytest.raises(ValueError):
        from_roman("")
