# file: numerals/roman.py
"""Conversion between integers and Roman numerals."""

_VALUES = [
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"),
    (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
    (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
]

_SYMBOLS = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
_PAIRS = {"IV": 4, "IX": 9, "XL": 40, "XC": 90, "CD": 400, "CM": 900}


def to_roman(n):
    """Return the Roman numeral for 1 <= n <= 3999."""
    if not isinstance(n, int) or not 0 < n < 4000:
        raise ValueError(f"cannot convert {n!r}: need an integer from 1 to 3999")
    out = []
    for value, symbol in _VALUES:
        while n >= value:
            out.append(symbol)
            n -= value
    return "".join(out)


def from_roman(s):
    """Return the integer value of the Roman numeral s (case-insensitive)."""
    if not s:
        raise ValueError("empty numeral")
    s = s.upper()
    for ch in s:
        if ch not in _SYMBOLS:
            raise ValueError(f"invalid numeral character {ch!r}")
    total, i = 0, 0
    while i < len(s):
        if s[i:i + 2] in _PAIRS:
            total += _PAIRS[s[i:i + 2]]
            i += 2
        else:
            total += _SYMBOLS[s[i]]
            i += 1
    return total
