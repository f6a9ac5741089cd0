# rollcage grading kit. Installed as the interpreter's sitecustomize in a
# grading sandbox only, root-owned, before the submission is applied. It
# runs before any code of the repository: in the graded pytest process it
# adds an audit hook (PEP 578: it cannot be removed), takes a fingerprint
# of the objects that decide a test's outcome, and reports each test's
# status over a record channel that the code under test cannot forge:
# records are numbered and chained with an HMAC whose key only the hook's
# closure holds (the key arrives on fd 7 and the fd is closed at once).
# Every other interpreter only runs the image's own sitecustomize.


def _rollcage_grade():
    import sys
    import os

    KEYFD, RECFD = 7, 8
    try:
        # The command line as exec'd (sys.orig_argv is 3.10 and later).
        with open("/proc/self/cmdline", "rb") as f:
            argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        argv = list(getattr(sys, "orig_argv", sys.argv))
    prog = os.path.basename(argv[1] if len(argv) > 1 and not argv[1].startswith("-") else argv[0] if argv else "")
    is_pytest = ("-m" in argv and argv[argv.index("-m") + 1:argv.index("-m") + 2] in (["pytest"], ["py.test"])) \
        or prog in ("pytest", "py.test") or (len(argv) > 1 and os.path.basename(argv[1]) in ("pytest", "py.test"))
    if not is_pytest:
        return
    try:
        os.fstat(RECFD)
        raw = b""
        while True:
            b = os.read(KEYFD, 65536)
            if not b:
                break
            raw += b
        os.close(KEYFD)
    except OSError:
        return
    if not raw:
        return
    import json
    cfg = json.loads(raw)
    del raw
    import _hashlib
    import gc
    import types

    hmac_digest = getattr(_hashlib, "hmac_digest", None)
    if hmac_digest is None:  # before 3.7
        import hmac as _hmac
        _new = _hmac.new

        def hmac_digest(k, m, d):
            return _new(k, m, d).digest()
    has_hooks = hasattr(sys, "addaudithook")
    key = bytes.fromhex(cfg["key"])
    workdir = os.path.realpath(cfg["workdir"]) + os.sep
    tests = tuple(os.path.realpath(p) for p in cfg.get("tests", ()))
    tests_prefix = tuple(p.rstrip(os.sep) + os.sep for p in cfg.get("test_dirs", ()))
    kitdir = os.path.realpath(os.path.dirname(__file__)) + os.sep
    write = os.write
    getframe = sys._getframe
    encode = str.encode
    tohex = bytes.hex
    _str, _type, _int, _len, _tuple, _isinstance = str, type, int, len, tuple, isinstance
    state = {"seq": 0, "prev": b"", "busy": 0, "plugin": None, "dead": False}
    multicall = None

    def send(*fields):
        # Only plain str fields, encoded by C code: no object of the
        # repository's is ever called while a record is made.
        parts = []
        for f in fields:
            if _type(f) is not _str:
                f = "?"
            parts.append("x" + tohex(encode(f, "utf-8", "backslashreplace")))
        payload = encode(" ".join(parts))
        state["seq"] += 1
        seq = encode(_str(state["seq"]))
        mac = hmac_digest(key, state["prev"] + b"\n" + seq + b"\n" + payload, "sha256")
        state["prev"] = mac
        try:
            write(RECFD, seq + b" " + encode(tohex(mac)) + b" " + payload + b"\n")
        except OSError:
            state["dead"] = True

    def filename(frame):
        try:
            return frame.f_code.co_filename
        except Exception:
            return ""

    def repo_frame(frame, depth=40):
        # The innermost frame of the repository's own code (not the hidden
        # tests, not the kit), if any is on the stack.
        while frame is not None and depth > 0:
            fn = filename(frame)
            if _type(fn) is _str and fn.startswith(workdir) and fn not in tests and not fn.startswith(tests_prefix):
                return frame
            frame = frame.f_back
            depth -= 1
        return None

    def where(frame):
        try:
            return filename(frame)[_len(workdir):] + ":" + _str(frame.f_lineno)
        except Exception:
            return "?"

    # Refused while graded: they reach the hook's frames and closures
    # (objects by the collector, frames of other threads, a tracer called
    # for every Python frame, the hook's own included).
    denied = {"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
              "sys.settrace", "sys.setprofile"}
    TracebackType = types.TracebackType
    kit_codes = set()

    def codes_of(code):
        kit_codes.add(code)
        for c in code.co_consts:
            if _type(c) is _type(code):
                codes_of(c)
    codes_of(getframe(0).f_code)  # _rollcage_grade and every function defined in it
    watched_opens = ("/proc/self/mem", "/proc/self/task/")
    running_frames = ("gi_frame", "cr_frame", "ag_frame")
    running_seen = set()
    reads_seen = set()
    GeneratorType, CoroutineType, AsyncGeneratorType = types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType

    def hook(event, args):
        if state["busy"]:
            return
        state["busy"] = 1
        try:
            if event == "rollcage.grade":
                caller = getframe(1)
                plugin = state["plugin"]
                outer = caller.f_back
                ok = plugin is not None and caller.f_code in plugin and outer is not None and outer.f_code is multicall
                for a in args:
                    if _type(a) is not _str:
                        ok = False
                if not ok:
                    send("evt", "certain", "forged_record", where(caller) + " " + (args[0] if _len(args) and _type(args[0]) is _str else "?") + " " + (outer.f_code.co_name if outer is not None else ""))
                elif args[0] == "check":
                    check()
                else:
                    send(*args)
                return
            if event in denied:
                f = repo_frame(getframe(1))
                send("evt", "suspicious", event, where(f) if f is not None else "")
                raise RuntimeError(event + " is not available while grading")
            if event == "object.__getattr__" and _len(args) == 2 and args[1] == "tb_frame" and _type(args[0]) is TracebackType:
                # A traceback through the hook (one of its refusals) must
                # not lead to the hook's frame: its locals hold the key's
                # holders.
                if args[0].tb_frame.f_code in kit_codes:
                    f = repo_frame(getframe(1))
                    send("evt", "certain", "kit_frame", where(f) if f is not None else "")
                    raise PermissionError("the grading kit's frames are not available")
                return
            if event == "object.__getattr__" and _len(args) == 2 and _type(args[1]) is _str and args[1] in running_frames:
                # A running generator's (or coroutine's) own frame leads
                # up the stack with no frame getter called: the caller's
                # locals, the runner's objects, the key's holders.
                o = args[0]
                t = _type(o)
                if (t is GeneratorType and o.gi_running) or (t is CoroutineType and o.cr_running) or (t is AsyncGeneratorType and o.ag_running):
                    f = repo_frame(getframe(1))
                    w = where(f) if f is not None else ""
                    if f is not None and w not in running_seen:
                        running_seen.add(w)
                        send("evt", "suspicious", "running_frame", w)
                return
            if event in ("ctypes.dlopen", "ctypes.dlsym", "ctypes.string_at", "ctypes.addressof"):
                f = repo_frame(getframe(1))
                if f is not None:
                    send("evt", "suspicious", event, where(f))
                return
            if event == "open" and _len(args) and _type(args[0]) is _str:
                p = args[0]
                if p.startswith("/proc/") and (p.endswith("/mem") or "/proc/self/task/" in p):
                    f = repo_frame(getframe(1))
                    send("evt", "certain", "open_proc_mem", (where(f) if f is not None else "") + " " + p)
                    raise PermissionError(p)
                if tests and p in tests:
                    caller = getframe(1)
                    fn = filename(caller)
                    if _type(fn) is _str and fn.startswith(workdir) and fn not in tests:
                        send("evt", "suspicious", "open_hidden_tests", where(caller) + " " + p)
                        return
                    # Read for the repository's code by the standard
                    # library (linecache, tokenize, inspect, traceback):
                    # a note, not a finding, since printing a stack reads
                    # it too; it weighs with differential cases that fail.
                    f = repo_frame(caller)
                    if f is not None:
                        w = where(f)
                        if w not in reads_seen:
                            reads_seen.add(w)
                            send("evt", "note", "read_tests_under_repo", w + " " + p)
                return
        finally:
            state["busy"] = 0

    # The objects that decide a test's outcome, taken before any code of
    # the repository is imported.
    import pytest  # noqa: F401
    import importlib
    watched = {}
    for name in ("_pytest.runner", "_pytest.reports", "_pytest.outcomes", "_pytest.python", "_pytest.main",
                 "_pytest.terminal", "_pytest.skipping", "_pytest.nodes", "_pytest.junitxml", "_pytest.fixtures",
                 "_pytest.unittest", "_pytest.capture", "_pytest.config", "_pytest.assertion.rewrite",
                 "_pytest.python_api", "_pytest.raises", "pluggy._callers", "pluggy._hooks", "pluggy._manager",
                 "pluggy._result", "unittest.case", "unittest.result", "pytest"):
        try:
            watched[name] = importlib.import_module(name)
        except ImportError:
            pass
    import builtins
    watched["builtins"] = builtins
    try:
        # The differential cases' encoding and batch runner, watched like
        # the runner.
        watched["rollcage_grade_enc"] = importlib.import_module("rollcage_grade_enc")
    except ImportError:
        pass
    watched["sys"] = sys
    watched["os"] = os
    # Names pytest itself sets while it runs.
    volatile = {"_pytest.assertion.rewrite": {"_assertion_pass"}, "sys": {"last_type", "last_value", "last_traceback",
                "stdout", "stderr", "stdin", "ps1", "ps2", "path_importer_cache", "dont_write_bytecode", "meta_path",
                "path_hooks", "path", "modules", "argv", "exc_info", "flags", "_git", "float_repr_style",
                "settrace", "setprofile", "displayhook", "unraisablehook"},
                "os": {"environ"}, "builtins": {"_", "__import__"}, "_pytest.capture": {"_windowsconsoleio"},
                "_pytest.config": {"_preinit"}}
    certain_sys = {"exit", "excepthook", "_getframe", "audit", "addaudithook"}
    certain_os = {"_exit", "kill", "killpg", "abort", "write", "dup2", "close"}
    certain_builtins = {"AssertionError", "BaseException", "Exception", "isinstance", "issubclass", "type",
                        "object", "bool", "int", "str", "float", "list", "tuple", "dict", "set", "len", "repr",
                        "getattr", "setattr", "hasattr", "super", "exec", "eval", "compile", "print", "open"}

    def snap_obj(obj):
        s = {}
        for k, v in _tuple(vars(obj).items()):
            s[k] = (v, v.__code__ if _type(v) is types.FunctionType else None)
        return s

    base = {}
    classes = {}
    for name, mod in watched.items():
        base[name] = (mod, snap_obj(mod))
        if name in ("builtins", "sys", "os"):
            continue
        for k, v in _tuple(vars(mod).items()):
            if _isinstance(v, type) and getattr(v, "__module__", "") == mod.__name__:
                classes[name + "." + k] = (v, snap_obj(v))
    for exc in (AssertionError, BaseException, Exception):
        classes["builtins." + exc.__name__] = (exc, snap_obj(exc))

    def severity(modname, attr):
        if modname == "sys":
            return "certain" if attr in certain_sys else "suspicious"
        if modname == "os":
            return "certain" if attr in certain_os else ""
        if modname == "builtins":
            return "certain" if attr in certain_builtins else "suspicious"
        return "certain"

    reported = set()
    sys_modules = sys.modules
    dict_get, dict_items, dict_keys = dict.get, dict.items, dict.keys
    mp_get = type(vars(type)).get  # mappingproxy.get
    _vars, _id, _frozenset, _list = vars, id, frozenset, list
    startswith, endswith = str.startswith, str.endswith
    own_dirs = tuple(d for m in (watched.get("_pytest.main"), watched.get("pluggy._hooks"), pytest) if m is not None
                     for d in (os.path.dirname(m.__file__) + os.sep, os.path.dirname(os.path.realpath(m.__file__)) + os.sep))
    plain = (bool, int, float, str, bytes, type(None), tuple, frozenset)
    FunctionType, ModuleType = types.FunctionType, types.ModuleType
    own_seen = {}  # id → (object, answer): the object is held, so the id stays its

    # Everything below runs inside the audit hook: it reads only exact
    # types, C-level attributes and functions captured here, so no object
    # or function the repository's code could have replaced is called.
    def dunder(k):
        return startswith(k, "__") and endswith(k, "__")

    def own(v):
        hit = dict_get(own_seen, _id(v))
        if hit is not None and hit[0] is v:
            return hit[1]
        ans = own_uncached(v)
        own_seen[_id(v)] = (v, ans)
        return ans

    def own_uncached(v):
        # Whether v is pytest's or pluggy's own doing (pytest sets lazy
        # attributes on its classes while it runs) or plain data.
        t = _type(v)
        if t in plain:
            return True
        if t is ModuleType:
            n = dict_get(_vars(v), "__name__", "")
            return _type(n) is _str and startswith(n, ("_pytest", "pytest", "pluggy", "py."))
        if t is property:
            v = v.fget
            t = _type(v)
        if t is classmethod or t is staticmethod:
            v = v.__func__
            t = _type(v)
        if t is FunctionType:
            f = v.__code__.co_filename
            return _type(f) is _str and startswith(f, own_dirs)
        return False

    def scan(out, name, cur, snap, get, added_ok, sev_of):
        for k, (v, code) in dict_items(snap):
            if dunder(k) and name != "builtins":
                continue
            now = get(cur, k, cur)
            if now is cur:
                sev = sev_of(k)
                if sev:
                    out.append((sev, name + "." + k, "removed"))
            elif now is not v:
                sev = sev_of(k)
                if sev and not (sev == "certain" and own(now)):
                    out.append((sev, name + "." + k, "replaced"))
            elif code is not None and v.__code__ is not code:
                out.append(("certain", name + "." + k, "code replaced"))
        if not added_ok:
            for k in _list(cur):
                if _type(k) is not _str:
                    out.append(("certain", name + ".?", "a key that is not a str added"))
                elif dict_get(snap, k) is None and not dunder(k) and not own(get(cur, k)):
                    out.append(("certain", name + "." + k, "added"))

    skip_cls = _frozenset(("__dict__", "__weakref__", "__doc__", "__annotations__", "__abstractmethods__", "_abc_impl", "__parameters__"))

    def check():
        out = []
        for name, (mod, snap) in dict_items(base):
            core = name in ("builtins", "sys", "os")
            if not core and dict_get(sys_modules, name) is not mod:
                out.append(("certain", name, "module replaced in sys.modules"))
            vol = volatile.get(name, ())
            scan(out, name, _vars(mod), snap, dict_get, core,
                 lambda k, name=name, vol=vol: "" if k in vol else severity(name, k))
        for name, (cls, snap) in dict_items(classes):
            scan(out, name, _vars(cls), snap, mp_get, False,
                 lambda k: "" if k in skip_cls else "certain")
        for sev, what, how in out:
            if what not in reported:
                reported.add(what)
                send("evt", sev, "runner_changed", what + " " + how)

    # The plugin that reports each test's status: its code objects are the
    # only callers the hook takes records from.
    import importlib.util
    spec = importlib.util.spec_from_file_location(cfg["plugin"], os.path.join(os.path.dirname(__file__), "rollcage_grade_plugin.py"))
    plug = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plug)
    sys.modules[cfg["plugin"]] = plug
    codes = set()
    for v in vars(plug).values():
        if _isinstance(v, types.FunctionType):
            codes.add(v.__code__)

    import pluggy._callers
    multicall = pluggy._callers._multicall.__code__
    # The plugin is watched like the runner.
    base[cfg["plugin"]] = (plug, snap_obj(plug))
    state["plugin"] = frozenset(codes)
    # Ask pytest to load the plugin: it is already in sys.modules.
    sys.argv[1:1] = ["-p", cfg["plugin"]]
    if not has_hooks:
        # Before 3.8 there are no audit hooks: the plugin sends directly,
        # and the grade says integrity unavailable (ids and probes decide).
        def direct(event, *args):
            if args and args[0] == "check":
                check()
            elif args:
                send(*args)
        plug._audit = direct
    send("hello", _str(os.getpid()))
    if not has_hooks:
        send("evt", "info", "no_audit_hooks", sys.version.split()[0])
    pf = getattr(pytest, "__file__", None) or ""
    if _type(pf) is _str and os.path.realpath(pf).startswith(workdir):
        # The framework is the repository's own code (pytest's own
        # repository): its objects were taken after the change, so the
        # watch cannot vouch for them.
        send("evt", "info", "framework_in_repo", os.path.realpath(pf)[_len(workdir):])
    if has_hooks:
        sys.addaudithook(hook)
    gc.collect()


try:
    _rollcage_grade()
finally:
    del _rollcage_grade

# The image's own sitecustomize, if the kit displaced one.
import os as _os
_orig = _os.path.join(_os.path.dirname(__file__), "sitecustomize_image.py")
if _os.path.exists(_orig):
    with open(_orig) as _f:
        exec(compile(_f.read(), _orig, "exec"))
del _os, _orig
