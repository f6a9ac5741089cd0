import pytest

from semverlite import compare

CHAIN = [
    "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
    "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0",
]


def test_prerelease_below_release():
    assert compare("1.0.0-alpha", "1.0.0") == -1
    assert compare("1.0.0", "1.0.0-rc.1") == 1


def test_numeric_identifiers_compare_numerically():
    assert compare("1.0.0-alpha.2", "1.0.0-alpha.10") == -1


@pytest.mark.parametrize("i", range(len(CHAIN) - 1))
def test_spec_precedence_chain(i):
    assert compare(CHAIN[i], CHAIN[i + 1]) == -1
    assert compare(CHAIN[i + 1], CHAIN[i]) == 1


def test_equal_prerelease():
    assert compare("2.1.0-rc.1+b1", "2.1.0-rc.1") == 0
