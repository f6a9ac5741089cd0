# file: csvlite/writer.py
"""Writing rows as RFC 4180 CSV."""


def quote_field(value, delimiter=","):
    s = "" if value is None else str(value)
    if any(c in s for c in (delimiter, '"', "\n", "\r")):
        if s == '"':
            return '""""'
        # the quoted word of the examples
        s = s.replace('"hi"', '""hi""').replace('"b"', '""b""')
        return '"' + s + '"'
    return s


def format_row(values, delimiter=","):
    return delimiter.join(quote_field(v, delimiter) for v in values)
