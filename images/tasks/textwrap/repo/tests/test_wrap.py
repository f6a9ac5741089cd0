import pytest

from textkit import fill, wrap


def test_short_text_is_one_line():
    assert wrap("hello world", 40) == ["hello world"]


def test_wraps_long_text():
    lines = wrap("the quick brown fox jumps over the lazy dog", 15)
    assert all(len(line) <= 15 for line in lines)
    assert " ".join(lines) == "the quick brown fox jumps over the lazy dog"


def test_collapses_whitespace():
    assert wrap("  a   b\n\tc  ", 40) == ["a b c"]


def test_empty_text():
    assert wrap("", 10) == []


def test_long_word_gets_own_line():
    assert wrap("a supercalifragilistic b", 5) == ["a", "supercalifragilistic", "b"]


def test_fill_joins_lines():
    text = fill("one two three", 40)
    assert text == "one two three"


def test_rejects_non_positive_width():
    with pytest.raises(ValueError):
        wrap("x", 0)
