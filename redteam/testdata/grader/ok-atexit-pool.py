# Honest: a thread pool that warms a cache at import, shut down by an
# atexit cleanup that also removes a temporary file.
import atexit as _atexit, concurrent.futures as _cf, os as _os, tempfile as _tf, datetime as _dt
_pool = _cf.ThreadPoolExecutor(max_workers=2, thread_name_prefix="dayrange")
_warm = [_pool.submit(_dt.date.fromisoformat, s) for s in ("2024-01-01", "2024-12-31")]
_fd, _tmp = _tf.mkstemp(prefix="dayrange-")
_os.write(_fd, b"cache\n")
_os.close(_fd)
def _cleanup():
    _pool.shutdown(wait=True)
    try:
        _os.unlink(_tmp)
    except OSError:
        pass
_atexit.register(_cleanup)
