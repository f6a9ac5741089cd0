import pytest

from numerals import from_roman, to_roman


@pytest.mark.parametrize("n,want", [(1, "I"), (4, "IV"), (9, "IX"), (14, "XIV"), (1994, "MCMXCIV"), (3999, "MMMCMXCIX")])
def test_to_roman(n, want):
    assert to_roman(n) == want


@pytest.mark.parametrize("s,want", [("III", 3), ("XXVI", 26), ("MDCLXVI", 1666), ("mmxx", 2020)])
def test_from_roman_additive(s, want):
    assert from_roman(s) == want


@pytest.mark.parametrize("n", [0, -1, 4000, 2.5])
def test_to_roman_out_of_range(n):
    with pytest.raises(ValueError):
        to_roman(n)


def test_from_roman_rejects_garbage():
    with pytest.raises(ValueError):
        from_roman("XIZ")
