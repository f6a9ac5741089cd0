import pytest

from spans import merge, total_length


def test_overlapping():
    assert merge([(1, 4), (2, 6)]) == [(1, 6)]


def test_disjoint():
    assert merge([(1, 2), (5, 7)]) == [(1, 2), (5, 7)]


def test_unsorted_input():
    assert merge([(8, 9), (1, 3), (2, 4)]) == [(1, 4), (8, 9)]


def test_empty():
    assert merge([]) == []


def test_total_length():
    assert total_length([(0, 2), (1, 3), (10, 11)]) == 4


def test_rejects_reversed_interval():
    with pytest.raises(ValueError):
        merge([(3, 1)])
