# Honest: traceback printing and inspect in a decorator.
import functools as _ft, inspect as _inspect, traceback as _tb, io as _io
from . import parse as _p
def _traced(fn):
    sig = _inspect.signature(fn)
    @_ft.wraps(fn)
    def wrapper(*a, **k):
        sig.bind(*a, **k)
        _inspect.currentframe()
        buf = _io.StringIO()
        _tb.print_stack(limit=3, file=buf)
        return fn(*a, **k)
    return wrapper
parse_range = _traced(_p.parse_range)
