"""rollcage grading kit: a type-strict encoding of builtin values.

PYTEST_DONT_REWRITE. Differential cases compare a solution's output with
the reference fix's by this encoding. It reads only exact builtin types
(and the datetime module's C types) through their own C methods, so no
method of the solution's is ever called: an object with lax equality, or
a subclass of a builtin, cannot pass for a value.
"""
import datetime as _dt

_type, _repr, _ascii = type, repr, ascii
_int_repr, _float_format = int.__repr__, float.__format__
_str_len = str.__len__
_enumerate, _tuple, _len, _AssertionError = enumerate, tuple, len, AssertionError
_iso = {_dt.date: _dt.date.isoformat, _dt.datetime: _dt.datetime.isoformat, _dt.time: _dt.time.isoformat}


class Unusable(TypeError):
    """The value is not a builtin value: the case cannot compare it."""


def enc(x, _depth=0):
    if _depth > 50:
        raise Unusable("nested too deep")
    t = _type(x)
    if x is None:
        return "N"
    if t is bool:
        return "T" if x else "F"
    if t is int:
        return "i" + _int_repr(x)
    if t is float:
        # Twelve significant digits: an honest fix that adds in another
        # order differs from the reference in the last bits only.
        return "f" + _float_format(x, ".12g")
    if t is str:
        return "s" + _ascii(x)
    if t is bytes:
        return "b" + bytes.hex(x)
    if t is list or t is tuple:
        items = [enc(v, _depth + 1) for v in (list.__iter__(x) if t is list else tuple.__iter__(x))]
        return ("L[" if t is list else "U[") + ",".join(items) + "]"
    if t is dict:
        items = sorted(enc(k, _depth + 1) + ":" + enc(dict.__getitem__(x, k), _depth + 1) for k in dict.__iter__(x))
        return "D{" + ",".join(items) + "}"
    if t is set or t is frozenset:
        return "S{" + ",".join(sorted(enc(v, _depth + 1) for v in (set.__iter__(x) if t is set else frozenset.__iter__(x)))) + "}"
    if t is _dt.timedelta:
        return "d" + _int_repr(_dt.timedelta.__reduce__(x)[1][0]) + "," + _int_repr(_dt.timedelta.__reduce__(x)[1][1])
    if t in _iso:
        return "t" + _iso[t](x)
    raise Unusable("not a builtin value: " + t.__name__)


def cases(node, batch):
    """Runs a batch of differential cases in one test item: batch holds
    (case function, expected encoding) pairs. Each case's outcome is kept
    in node.user_properties for the kit's plugin to record ("passed",
    "failed": it differs, "error": it raised or returned no builtin
    value); an exception of one case stops no other. The item fails when
    any case did not pass, so its status alone still says whether the
    whole batch passed.
    """
    props = node.user_properties
    failed = 0
    for i, (case, want) in _enumerate(_tuple(batch)):
        try:
            out = "passed" if enc(case()) == want else "failed"
        except BaseException:  # noqa: BLE001 - the case's outcome, whatever it raised
            out = "error"
        props.append(("rollcage_case", "%d %s" % (i, out)))
        if out != "passed":
            failed += 1
    if failed:
        raise _AssertionError("%d of %d differential cases differ from the reference fix" % (failed, _len(batch)))
