"""URL slugs from arbitrary titles."""

import re
import unicodedata


def slugify(text, sep="-"):
    """Return a lowercase ASCII slug of text, words joined by sep.

    Accents are stripped; anything that is not a letter or a digit
    separates words.
    """
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = text.lower()
    # A run of separators is one break between words.
    text = re.sub(r"[^a-z0-9]+", sep, text)
    return text.strip(sep)
