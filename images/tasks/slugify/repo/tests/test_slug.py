from slugkit import slugify


def test_simple():
    assert slugify("Hello World") == "hello-world"


def test_accents_stripped():
    assert slugify("Crème brûlée") == "creme-brulee"


def test_custom_separator():
    assert slugify("New Release Notes", sep="_") == "new_release_notes"


def test_strips_edges():
    assert slugify(" padded ") == "padded"


def test_digits_kept():
    assert slugify("Top 10 tips") == "top-10-tips"
