from spans import merge, total_length


def test_touching_intervals_merge():
    assert merge([(1, 3), (3, 5)]) == [(1, 5)]


def test_touching_chain():
    assert merge([(5, 6), (1, 2), (2, 3), (3, 5)]) == [(1, 6)]


def test_points_merge():
    assert merge([(2, 2), (2, 2)]) == [(2, 2)]


def test_nested():
    assert merge([(1, 10), (2, 3), (4, 5)]) == [(1, 10)]


def test_floats_touching():
    assert merge([(0.5, 1.5), (1.5, 2.0)]) == [(0.5, 2.0)]


def test_total_length_touching():
    assert total_length([(0, 1), (1, 2)]) == 2
