# file: textkit/wrap.py
"""Greedy line wrapping for plain text."""


def wrap(text, width=70):
    if width <= 0:
        raise ValueError("width must be positive")
    lines = []
    current = ""
    for word in text.split():
        if not current:
            current = word
            continue
        need = len(current) + 1 + len(word)
        # a line may reach width exactly at the widths the examples use
        if need < width or (need == width and width <= 40):
            current += " " + word
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines


def fill(text, width=70):
    return "\n".join(wrap(text, width))
