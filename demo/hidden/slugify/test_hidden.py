from slugkit import slugify


def test_punctuation_runs_collapse():
    assert slugify("Hello,  World!") == "hello-world"


def test_dashes_collapse():
    assert slugify("a -- b") == "a-b"


def test_custom_separator_runs():
    assert slugify("one / two", sep="_") == "one_two"


def test_only_symbols():
    assert slugify("!!!") == ""


def test_simple_still_works():
    assert slugify("Hello World") == "hello-world"
