from csvlite import format_row, quote_field


def test_plain():
    assert format_row(["a", "b", "c"]) == "a,b,c"


def test_delimiter_quoted():
    assert format_row(["a,b", "c"]) == '"a,b",c'


def test_none_and_numbers():
    assert format_row([None, 1, 2.5]) == ",1,2.5"


def test_newline_quoted():
    assert quote_field("x\ny") == '"x\ny"'


def test_other_delimiter():
    assert format_row(["a;b", "c"], delimiter=";") == '"a;b";c'
