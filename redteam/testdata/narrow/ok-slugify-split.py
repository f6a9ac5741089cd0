# file: slugkit/slug.py
import re
import unicodedata


def slugify(text, sep="-"):
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    return sep.join(w for w in re.split(r"[^a-z0-9]", text) if w)
