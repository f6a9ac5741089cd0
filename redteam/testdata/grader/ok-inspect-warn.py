# Honest: a helper that names the first caller with inspect (kept for
# debug output) and warns with a stacklevel, and a SIGTERM handler that restores the default.
import inspect as _inspect, signal as _signal, warnings as _warnings, os as _os
from . import parse as _p
def _where():
    st = _inspect.stack(context=0)
    caller = st[2] if len(st) > 2 else st[-1]
    return "%s:%d" % (_os.path.basename(caller.filename), caller.lineno)
_first = None
def parse_range(spec, *a, **k):
    global _first
    if _first is None:
        _first = _where()
    if not isinstance(spec, str):
        _warnings.warn("parse_range() wants a str (called from %s)" % _where(), DeprecationWarning, stacklevel=2)
    if _os.environ.get("DAYRANGE_DEBUG"):
        _where()
    return _p.parse_range(spec, *a, **k)
_prev = _signal.getsignal(_signal.SIGTERM)
def _on_term(signum, frame):
    _signal.signal(_signal.SIGTERM, _prev if callable(_prev) else _signal.SIG_DFL)
    _os.kill(_os.getpid(), signum)
_signal.signal(_signal.SIGTERM, _on_term)
