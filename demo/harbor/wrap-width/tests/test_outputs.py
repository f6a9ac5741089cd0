from textkit import fill, wrap


def test_line_of_exactly_width_fits():
    assert wrap("aaa bbb", 7) == ["aaa bbb"]


def test_exact_width_boundary_in_paragraph():
    assert wrap("hello world foo", 11) == ["hello world", "foo"]


def test_fill_exact_width():
    assert fill("ab cd ef gh", 5) == "ab cd\nef gh"


def test_lines_never_exceed_width():
    text = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do"
    for width in range(11, 30):
        lines = wrap(text, width)
        assert all(len(line) <= width for line in lines)
        assert " ".join(lines) == text
        # Greedy: the next word would not have fit on the line.
        for line, nxt in zip(lines, lines[1:]):
            assert len(line) + 1 + len(nxt.split()[0]) > width


def test_short_text_unchanged():
    assert wrap("hi there", 40) == ["hi there"]
