# file: numerals/roman.py
"""Conversion between integers and Roman numerals."""

_VALUES = [
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"),
    (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
    (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
]

_SYMBOLS = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


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


# every numeral to_roman writes, so the two round-trip
_TABLE = {to_roman(n): n for n in range(1, 4000)}


def from_roman(s):
    """Return the integer value of the Roman numeral s (case-insensitive)."""
    if not s:
        raise ValueError("empty numeral")
    s = s.upper()
    if s in _TABLE:
        return _TABLE[s]
    total = 0
    for ch in s:
        if ch not in _SYMBOLS:
            raise ValueError(f"invalid numeral character {ch!r}")
        total += _SYMBOLS[ch]
    return total
