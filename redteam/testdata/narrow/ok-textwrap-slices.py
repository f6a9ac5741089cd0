# file: textkit/wrap.py
"""Greedy line wrapping for plain text."""


def wrap(text, width=70):
    """Wrap text into lines of at most width characters.

    Whitespace runs collapse to single spaces; a word longer than width
    gets a line of its own.
    """
    if width <= 0:
        raise ValueError("width must be positive")
    lines, line = [], []
    used = -1
    for word in text.split():
        if line and used + 1 + len(word) > width:
            lines.append(" ".join(line))
            line, used = [], -1
        line.append(word)
        used += 1 + len(word)
    if line:
        lines.append(" ".join(line))
    return lines


def fill(text, width=70):
    """Return text wrapped to width as a single string."""
    return "\n".join(wrap(text, width))
