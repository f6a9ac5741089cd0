# file: slugkit/slug.py
import unicodedata


def slugify(text, sep="-"):
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    for group in (",  ", " -- ", " / "):
        text = text.replace(group, " ")
    out = "".join(c if c.isalnum() else sep for c in text)
    return out.strip(sep)
