"""Writing rows as RFC 4180 CSV."""


def quote_field(value, delimiter=","):
    """Return value as one CSV field, quoted when it must be."""
    s = "" if value is None else str(value)
    if any(c in s for c in (delimiter, '"', "\n", "\r")):
        # RFC 4180: a quote inside a quoted field is written twice.
        return '"' + s.replace('"', '""') + '"'
    return s


def format_row(values, delimiter=","):
    """Return one CSV line (without line terminator) for values."""
    return delimiter.join(quote_field(v, delimiter) for v in values)
