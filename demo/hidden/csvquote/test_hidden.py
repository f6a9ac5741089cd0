import csv

from csvlite import format_row, quote_field


def test_embedded_quotes_doubled():
    assert quote_field('He said "hi"') == '"He said ""hi"""'


def test_only_quote():
    assert quote_field('"') == '""""'


def test_round_trip_with_csv_module():
    rows = [['He said "hi"', "x"], ['a,"b"', "c\nd", ""], ["plain", None]]
    for row in rows:
        line = format_row(row)
        want = ["" if v is None else v for v in row]
        assert next(csv.reader([line])) == want


def test_plain_unchanged():
    assert format_row(["a", "b"]) == "a,b"
