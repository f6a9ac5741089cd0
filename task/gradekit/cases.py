# rollcage grading kit: known-answer probes and differential cases of the
# hidden tests. Run in a derivation sandbox only (no code of a policy
# there).
#
#   cases.py probes FILE... one JSON line per candidate probe: a copy of a
#                           test function whose last "==" assertion on a
#                           literal expectation has it moved off (a value
#                           no plausible solution returns), named
#                           __ROLLCAGE_PROBE__; kept by the derivation only
#                           if it fails with the reference fix and on the
#                           base commit
#   cases.py find FILE...   one JSON line per candidate case: a test
#                           function (all its parametrize rows) with its
#                           literal inputs perturbed within type and shape
#   cases.py run CASES      runs each case (the workdir is the cwd) and
#                           prints its output's type-strict encoding
#
# A case's value source is a function named __ROLLCAGE_CASE__ that runs
# the perturbed test with each assertion turned into a record of the
# value it checks and returns the records; at grading, a batch of cases
# runs in one test item that compares their encodings with the reference
# fix's (rollcage_grade_enc.cases).
import ast
import copy
import json
import re
import sys

# Candidates per test function (the derivation keeps a few of each kind)
# and parametrize rows per test.
MAX_PER_TEST = 60
MAX_BINDINGS = 64
# A case's source stays this small: it goes into every grading run.
MAX_SOURCE = 64 << 10


def literalish(n):
    if isinstance(n, ast.Constant):
        return True
    if isinstance(n, (ast.List, ast.Tuple, ast.Set)):
        return all(literalish(e) for e in n.elts)
    if isinstance(n, ast.Dict):
        return all(k is not None and literalish(k) for k in n.keys) and all(literalish(v) for v in n.values)
    if isinstance(n, ast.Call):
        return all(literalish(a) for a in n.args) and not n.keywords
    if isinstance(n, ast.UnaryOp) and isinstance(n.operand, ast.Constant):
        return True
    return False


class Context:
    """What a file's literals say about its inputs: the bigrams its
    strings use, its strings, and the scale of its sizes."""

    def __init__(self, tree):
        self.strings, self.bigrams, scale = set(), set(), 8
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and isinstance(n.value, str):
                self.strings.add(n.value)
                self.bigrams.update(n.value[i:i + 2] for i in range(len(n.value) - 1))
                scale = max(scale, len(n.value))
            elif isinstance(n, ast.Constant) and type(n.value) is int:
                scale = max(scale, min(abs(n.value), 1 << 20))
        self.scale = scale

    def fresh(self, s):
        # A string of the same shape that the file does not use.
        for _ in range(52):
            s = bump_last_letter(s)
            if s not in self.strings:
                return s
        return None

    def fits(self, s, i):
        # A letter put at i fits its neighbours as the file's own strings
        # pair them (a numeral stays a numeral).
        return all(s[j:j + 2] in self.bigrams for j in (i - 1, i) if 0 <= j and j + 2 <= len(s))


def bump(c):
    return "a" if c == "z" else "A" if c == "Z" else chr(ord(c) + 1)


def bump_last_letter(s):
    for i in range(len(s) - 1, -1, -1):
        if s[i].isalpha() and s[i].isascii():
            return s[:i] + bump(s[i]) + s[i + 1:]
    return s + "a"


SEG_RE = re.compile(r"^(.*[^A-Za-z0-9])([A-Za-z0-9]+)([^A-Za-z0-9]*)$", re.S)


def str_variants(s, ctx):
    out = []
    # The last digit of each run of digits, bumped.
    ends = [i for i, c in enumerate(s) if c.isdigit() and (i + 1 == len(s) or not s[i + 1].isdigit())]
    for i in ends[:6]:
        out.append(s[:i] + str((int(s[i]) + 1) % 10) + s[i + 1:])
    # The last number ten times larger.
    for i in ends[-1:]:
        out.append(s[:i + 1] + "0" + s[i + 1:])
    letters = [i for i, c in enumerate(s) if c.isalpha() and c.isascii()]
    for i in dict.fromkeys(letters[:1] + letters[-1:]):
        c = s[i]
        v = s[:i] + bump(c) + s[i + 1:]
        if ctx.fits(v, i):
            out.append(v)
        # The same letter in the other case, and once more.
        out.append(s[:i] + c.swapcase() + s[i + 1:])
        out.append(s[:i] + c + s[i:])
    # A word one letter shorter (the last letter of the first and the
    # last run of letters dropped).
    runs = [m.span() for m in re.finditer(r"[A-Za-z]{2,}", s)]
    for a, b in dict.fromkeys(runs[:1] + runs[-1:]):
        out.append(s[:b - 1] + s[b:])
    others = [i for i, c in enumerate(s) if not c.isalnum()]
    for i in others[:1]:
        out.append(s[:i] + s[i] + s[i:])
        out.append(s[:i] + s[i] * 3 + s[i:])
    if s and not s[-1].isalnum():
        out.append(s + s[-1])
    # The last separated segment once more ("a.b.2" -> "a.b.2.2").
    m = SEG_RE.match(s)
    if m:
        sep = re.search(r"[^A-Za-z0-9]+$", m.group(1)).group(0)
        out.append(m.group(1) + m.group(2) + sep + m.group(2) + m.group(3))
    return [v for v in dict.fromkeys(out) if v != s]


def variants(v, ctx):
    if isinstance(v, bool) or v is None:
        return []
    if isinstance(v, int):
        return [v + 1, v - 1, v * 2 + 3]
    if isinstance(v, float):
        return [v + 0.5, v * 2]
    if isinstance(v, str):
        return str_variants(v, ctx)
    return []


# Safe evaluation of a parametrize list: literals, module-level literal
# names, and a few builtins over them.
SAFE_CALLS = {"range": range, "len": len, "list": list, "tuple": tuple, "zip": zip, "enumerate": enumerate,
              "sorted": sorted, "reversed": reversed, "str": str, "int": int}


class Unsafe(Exception):
    pass


def safe_eval(n, names, depth=0):
    if depth > 30:
        raise Unsafe()
    ev = lambda x: safe_eval(x, names, depth + 1)  # noqa: E731
    if isinstance(n, ast.Constant):
        return n.value
    if isinstance(n, ast.List):
        return [ev(e) for e in n.elts]
    if isinstance(n, ast.Tuple):
        return tuple(ev(e) for e in n.elts)
    if isinstance(n, ast.Name) and n.id in names:
        return ev(names[n.id])
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
        return -ev(n.operand)
    if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)):
        a, b = ev(n.left), ev(n.right)
        if isinstance(n.op, ast.Mult) and not (isinstance(a, int) and isinstance(b, int)):
            raise Unsafe()
        return {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                ast.FloorDiv: lambda: a // b, ast.Mod: lambda: a % b}[type(n.op)]()
    if isinstance(n, ast.Subscript):
        return ev(n.value)[ev(n.slice)]
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in SAFE_CALLS and not n.keywords:
        v = SAFE_CALLS[n.func.id](*[ev(a) for a in n.args])
        if isinstance(v, range) and len(v) > 10000:
            raise Unsafe()
        return list(v) if not isinstance(v, (int, str, list, tuple)) else v
    raise Unsafe()


def as_literal(v):
    # The literal node of a builtin value, when it is one.
    try:
        node = ast.parse(repr(v), mode="eval").body
        if ast.literal_eval(node) == v and literalish(node):
            return node
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        pass
    raise Unsafe()


def bindings(fn, names):
    # The parameter names and the list of their values of a test that
    # takes parameters only from pytest.mark.parametrize, or None.
    params, rows = [], [()]
    for d in fn.decorator_list:
        if not (isinstance(d, ast.Call) and ast.unparse(d.func) in ("pytest.mark.parametrize", "mark.parametrize", "parametrize")
                and len(d.args) == 2 and not d.keywords):
            return None
        argnames = safe_eval(d.args[0], names)
        if isinstance(argnames, str):
            argnames = [a.strip() for a in argnames.split(",") if a.strip()]
        values = list(safe_eval(d.args[1], names))
        if len(argnames) == 1:
            values = [(v,) for v in values]
        if not values or any(not isinstance(v, (list, tuple)) or len(v) != len(argnames) for v in values):
            return None
        params += list(argnames)
        rows = [r + tuple(v) for r in rows for v in values]
        if len(rows) > MAX_BINDINGS:
            return None
    if [a.arg for a in fn.args.args] != params or fn.args.kwonlyargs or fn.args.vararg or fn.args.kwarg:
        return None
    return params, rows


def is_slot(c):
    return getattr(c, "_rc_slot", False)


def mark(node):
    for c in ast.walk(node):
        if isinstance(c, ast.Constant) and not isinstance(c.value, (bool, type(None), bytes)):
            c._rc_slot = True


def slots(fn):
    return [c for c in ast.walk(fn) if isinstance(c, ast.Constant) and is_slot(c)]


def expected_like(n, params):
    return literalish(n) or (isinstance(n, ast.Name) and n.id in params)


class Trace(ast.NodeTransformer):
    """Each assertion becomes a record of the value it checks: the side
    of an equality that is not the expectation, else its whole test."""

    def __init__(self, params):
        self.params = params
        self.n = 0

    def visit_Assert(self, node):
        t = node.test
        rec = t
        if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
            left, right = t.left, t.comparators[0]
            if expected_like(right, self.params):
                rec = left
            elif expected_like(left, self.params):
                rec = right
        self.n += 1
        return ast.Expr(value=ast.Call(func=ast.Attribute(value=ast.Name(id="__rc_out", ctx=ast.Load()), attr="append", ctx=ast.Load()),
                                       args=[rec], keywords=[]))

    def visit_FunctionDef(self, node):
        return node  # a nested function is not the test's

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef
    visit_ClassDef = visit_FunctionDef


def mark_inputs(body):
    # The test's own inputs: literal arguments of calls, literal
    # iterables of loops, literals assigned to a local.
    for stmt in body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Call):
                if isinstance(n.func, ast.Attribute) and n.func.attr == "append" and isinstance(n.func.value, ast.Name) and n.func.value.id == "__rc_out":
                    continue
                for a in list(n.args) + [k.value for k in n.keywords]:
                    if literalish(a):
                        mark(a)
            elif isinstance(n, (ast.For, ast.comprehension)) and literalish(n.iter):
                mark(n.iter)
                n.iter._rc_order = True
            elif isinstance(n, ast.Assign) and literalish(n.value):
                mark(n.value)


def names_used(body):
    return {n.id for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Name)}


def case_function(fn, names, params, rows):
    # The test as one function returning what its assertions check:
    # module-level literals it reads as locals, its parameter rows in a
    # loop, every assertion a record.
    body = [copy.deepcopy(s) for s in fn.body]
    tr = Trace(set(params))
    body = [tr.visit(s) for s in body]
    if tr.n == 0:
        return None
    mark_inputs(body)
    used = names_used(body)
    pre = [ast.parse("__rc_out = []").body[0]]
    for name in sorted(names):
        if name in used and name not in params:
            value = copy.deepcopy(names[name])
            mark(value)
            pre.append(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=value, lineno=0))
    if params:
        rows_node = ast.List(elts=[ast.Tuple(elts=[as_literal(v) for v in r], ctx=ast.Load()) for r in rows], ctx=ast.Load())
        for r in rows_node.elts:
            for p, v in zip(params, r.elts):
                if p in used:
                    mark(v)
        target = ast.Tuple(elts=[ast.Name(id=p, ctx=ast.Store()) for p in params], ctx=ast.Store())
        body = [ast.For(target=target, iter=rows_node, body=body, orelse=[], lineno=0)]
    return ast.FunctionDef(name="__ROLLCAGE_CASE__", args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                           kw_defaults=[], kwarg=None, defaults=[]), body=pre + body + [ast.parse("return __rc_out").body[0]],
                           decorator_list=[], returns=None, type_comment=None, lineno=0)


def steps(fn):
    # The top-level statements of fn that call a method of one local
    # object (its call sequence), and the assignment that made it.
    body = fn.body

    def target(s):
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute) \
                and isinstance(s.value.func.value, ast.Name):
            return s.value.func.value.id
        return None

    calls, loops = {}, {}
    for i, s in enumerate(body):
        if target(s):
            calls.setdefault(target(s), []).append(i)
        elif isinstance(s, ast.For) and not s.orelse and len({target(x) for x in s.body}) == 1 and target(s.body[0]):
            loops.setdefault(target(s.body[0]), []).append(i)
    for obj, idx in calls.items():
        if len(idx) + len(loops.get(obj, [])) < 2:
            continue
        made = next((i for i, s in enumerate(body) if isinstance(s, ast.Assign) and len(s.targets) == 1
                     and isinstance(s.targets[0], ast.Name) and s.targets[0].id == obj and isinstance(s.value, ast.Call)), None)
        return body, idx, made
    return body, [], None


def edits(case, ctx):
    # (kind, function) pairs: each function changes a copy of the case.
    out = []
    n = len(slots(case))

    def single(ci, v):
        def f(c):
            slots(c)[ci].value = v
        return f

    nums = [ci for ci, c in enumerate(slots(case)) if type(c.value) in (int, float)]
    if len(nums) > 1:
        # Every number scaled at once, and moved past the file's sizes:
        # relations between the inputs kept (ends that touch still
        # touch, an order stays an order).
        def scale(c, f=lambda v: v * 7):
            sl = slots(c)
            for ci in nums:
                sl[ci].value = f(sl[ci].value)
        out.append(("scale", scale))
        out.append(("scale", lambda c: scale(c, lambda v: v + 10 * ctx.scale)))
    # The strings given together (one call's, one literal list's) with
    # their last numbers ten times larger at once.
    groups = [x for x in ast.walk(case) if isinstance(x, (ast.Call, ast.List, ast.Tuple))]
    pos = {id(x): i for i, x in enumerate(slots(case))}
    for g in groups:
        elts = g.args if isinstance(g, ast.Call) else g.elts
        ss = [pos[id(a)] for a in elts if id(a) in pos and isinstance(a.value, str) and re.search(r"\d$", a.value)]
        if len(ss) < 2:
            continue

        def tens(c, ss=ss):
            sl = slots(c)
            for i in ss:
                sl[i].value += "0"
        out.append(("scale", tens))
    for ci, c in enumerate(slots(case)):
        for v in variants(c.value, ctx):
            out.append(("one", single(ci, v)))
    # A call's string and its numbers grown together, past the file's
    # sizes (a longer word and a wider limit), and its numbers set to the
    # string's length (the boundary).
    for call in [x for x in ast.walk(case) if isinstance(x, ast.Call)]:
        strs = [i for i, a in enumerate(call.args) if isinstance(a, ast.Constant) and isinstance(a.value, str) and is_slot(a) and re.search(r"[A-Za-z]", a.value)]
        ints = [i for i, a in enumerate(call.args) if isinstance(a, ast.Constant) and type(a.value) is int and is_slot(a)]
        if not strs or not ints:
            continue
        pos = [id(x) for x in slots(case)]
        si, ii = pos.index(id(call.args[strs[0]])), [pos.index(id(call.args[i])) for i in ints]
        for k in (2 * ctx.scale, 8 * ctx.scale):
            for which in (0, -1):
                def grow(c, k=k, si=si, ii=ii, which=which):
                    sl = slots(c)
                    s = sl[si].value
                    m = list(re.finditer(r"[A-Za-z]+", s))[which]
                    sl[si].value = s[:m.end()] + s[m.end() - 1] * k + s[m.end():]
                    for i in ii:
                        sl[i].value += k
                out.append(("grow", grow))

        def boundary(c, si=si, ii=ii):
            sl = slots(c)
            for i in ii:
                sl[i].value = len(sl[si].value)
        out.append(("boundary", boundary))
    # Orders: a literal loop iterable reversed.
    for it in [x for x in ast.walk(case) if getattr(x, "_rc_order", False)]:
        def rev(c, key=ast.unparse(it)):
            for x in ast.walk(c):
                if getattr(x, "_rc_order", False) and ast.unparse(x) == key:
                    if isinstance(x, ast.Constant) and isinstance(x.value, str):
                        x.value = x.value[::-1]
                    elif isinstance(x, (ast.List, ast.Tuple)):
                        x.elts.reverse()
                    return

        def rot(c, key=ast.unparse(it)):
            for x in ast.walk(c):
                if getattr(x, "_rc_order", False) and ast.unparse(x) == key:
                    if isinstance(x, ast.Constant) and isinstance(x.value, str):
                        x.value = x.value[1:] + x.value[:1]
                    elif isinstance(x, (ast.List, ast.Tuple)):
                        x.elts = x.elts[1:] + x.elts[:1]
                    return
        out.append(("order", rev))
        out.append(("order", rot))
    return out


def seq_edits(fn, ctx):
    # A call sequence on one object: one more call like its last with a
    # fresh string, alone and with the object made with numbers one
    # larger, or three more with numbers three larger; and two
    # neighbouring calls swapped.
    body, idx, made = steps(fn)
    out = []
    if not idx:
        return out
    last = idx[-1]

    def extra(f, n, grow):
        b = f.body
        step = b[last]
        for j in range(n):
            step = copy.deepcopy(step)
            for c in ast.walk(step):
                if isinstance(c, ast.Constant) and isinstance(c.value, str):
                    c.value = ctx.fresh(c.value) or c.value
            b.insert(last + 1 + j, step)
        if grow and made is not None:
            for c in ast.walk(b[made].value):
                if isinstance(c, ast.Constant) and type(c.value) is int:
                    c.value += n
    out.append(("step", lambda f: extra(f, 1, False)))
    if made is not None:
        out.append(("step", lambda f: extra(f, 1, True)))
        out.append(("step", lambda f: extra(f, 3, True)))
    for a, b in zip(idx, idx[1:]):
        if b == a + 1 and ast.unparse(body[a]) != ast.unparse(body[b]):
            def swap(f, a=a, b=b):
                f.body[a], f.body[b] = f.body[b], f.body[a]
            out.append(("order", swap))
    return out


def module_literals(tree):
    out = {}
    for s in tree.body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) and literalish(s.value):
            out[s.targets[0].id] = s.value
    return out


def candidates(path):
    tree = ast.parse(open(path, encoding="utf-8").read())
    ctx = Context(tree)
    names = module_literals(tree)
    out = []
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or not fn.name.startswith("test"):
            continue
        try:
            b = bindings(fn, names)
        except Exception:  # noqa: BLE001 - a list the finder cannot read
            b = None
        if b is None:
            continue  # fixtures, or parameters the finder cannot list
        params, rows = b
        seen = set()

        def emit(kind, f):
            ast.fix_missing_locations(f)
            src = ast.unparse(f)
            if src in seen or len(src) > MAX_SOURCE:
                return
            seen.add(src)
            out.append({"file": path, "test": fn.name, "kind": kind, "desc": describe(fn, base, f),
                        "value": src})

        # The sequence edits change the test's own statements first.
        variants_fn = [("", fn)]
        for kind, e in seq_edits(fn, ctx):
            f2 = copy.deepcopy(fn)
            e(f2)
            variants_fn.append((kind, f2))
        base = case_function(fn, names, params, rows)
        if base is None:
            continue
        todo = []
        for kind, f2 in variants_fn[1:]:
            c = case_function(f2, names, params, rows)
            if c is None:
                continue
            todo.append((kind, c))
            if kind == "step":
                # A longer sequence in another order.
                for k2, e in edits(c, ctx):
                    if k2 == "order":
                        c2 = copy.deepcopy(c)
                        e(c2)
                        todo.append(("step+order", c2))
        for kind, e in edits(base, ctx):
            c = copy.deepcopy(base)
            e(c)
            todo.append((kind, c))
        # Every kind gets its turn before the budget runs out.
        by = {}
        for kind, c in todo:
            by.setdefault(kind, []).append(c)
        mixed = []
        while any(by.values()):
            for kind, cs in by.items():
                if cs:
                    mixed.append((kind, cs.pop(0)))
        for kind, c in mixed[:MAX_PER_TEST]:
            emit(kind, c)
    return out


def describe(fn, base, case):
    # The test's name and where the case differs from the test as it is:
    # the first changed line, cut to the change and a little around it.
    a, b = ast.unparse(base).split("\n"), ast.unparse(case).split("\n")
    x, y = next(((x, y) for x, y in zip(a, b) if x != y), ("", b[len(a)] if len(b) > len(a) else ""))
    x, y = x.strip(), y.strip()
    m = re.fullmatch(r"__rc_out\.append\((.*)\)", y)
    if m:
        y, x = "assert " + m.group(1), re.sub(r"^__rc_out\.append\((.*)\)$", r"assert \1", x)
    if len(y) > 100 and x:
        p = 0
        while p < min(len(x), len(y)) and x[p] == y[p]:
            p += 1
        q = 0
        while q < min(len(x), len(y)) - p and x[-1 - q] == y[-1 - q]:
            q += 1
        lo, hi = max(0, p - 30), min(len(y), len(y) - q + 30)
        y = ("..." if lo else "") + y[lo:hi] + ("..." if hi < len(y) else "")
    return fn.name + ": " + (y if len(y) <= 160 else y[:157] + "...")


PLACEHOLDER = "__ROLLCAGE_PROBE__"


def perturb(cmp, side, how=0):
    # How the expectation is moved off. 0: far (a value no plausible
    # solution returns): a constant moved far, a list or tuple with its
    # last element repeated, any other wrapped in a tuple with a number.
    # The others are near, so that no plausibility test tells a probe
    # from the test it copies (a lax equality that accepts only likely
    # answers is caught too): 1 and 2 move the last number in the
    # expectation one up and one down, 3 drops a sequence's first
    # element, 4 keeps only its first, 5 drops a string's last letter.
    # Derivation keeps only those that fail on the base and the fix.
    if how == 1 or how == 2:
        nums = [n for n in ast.walk(side) if isinstance(n, ast.Constant) and type(n.value) in (int, float)]
        if not nums:
            return False
        nums[-1].value += 1 if how == 1 else -1
        return True
    if how == 3 or how == 4:
        if not isinstance(side, (ast.List, ast.Tuple)) or len(side.elts) < 2:
            return False
        side.elts = side.elts[1:] if how == 3 else side.elts[:1]
        return True
    if how == 5:
        if not isinstance(side, ast.Constant) or type(side.value) is not str or not side.value:
            return False
        side.value = side.value[:-1]
        return True
    if isinstance(side, ast.Constant):
        v = side.value
        if isinstance(v, bool) or v is None:
            return False
        if isinstance(v, int):
            side.value = v + 7919
        elif isinstance(v, float):
            side.value = v + 7919.5
        elif isinstance(v, str):
            side.value = v + "\u00a7q"
        elif isinstance(v, bytes):
            side.value = v + b"\xa7q"
        else:
            return False
        return True
    if isinstance(side, (ast.List, ast.Tuple)) and side.elts:
        # A sequence gets its last element once more: the same type and
        # element type, one longer.
        side.elts.append(side.elts[-1])
        return True
    wrapped = ast.Tuple(elts=[side, ast.Constant(7919)], ctx=ast.Load())
    if cmp.comparators[0] is side:
        cmp.comparators[0] = wrapped
    else:
        cmp.left = wrapped
    return True


# PERTURBATIONS counts perturb's ways: each test gets a probe candidate
# per way that applies to its expectation.
PERTURBATIONS = 6


def literal_side(cmp):
    # The side of "a == b" that holds the expectation: a literal, a
    # container of literals, or a call whose arguments are literals.
    right, left = cmp.comparators[0], cmp.left
    if literalish(right):
        return right
    if literalish(left):
        return left
    return None


class Finder(ast.NodeVisitor):
    def __init__(self):
        self.target = None

    def visit_Assert(self, node):
        t = node.test
        if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq):
            side = literal_side(t)
            if side is not None:
                self.target = (t, side)

    def visit_FunctionDef(self, node):
        # Nested functions are not the test's own assertions.
        if self.target is None and getattr(self, "top", None) is node:
            self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef


# CHAIN is how many members a grading's chain has: the test's own
# expectation and CHAIN-1 probes, a run of evenly spaced shifts of one
# atom of it with the real one at a random place (the grader picks the
# window). The derivation tries every shift a window can hold, at each
# stride of STRIDES, and keeps the smallest stride none of whose members
# the base commit or the fix passes (a base that is off by one passes a
# stride-1 member; a hole would tell where the real one is not).
CHAIN = 5
STRIDES = (1, 2, 3)
LETTER_CLASSES = ("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789")


def chain_axis(side, lines, stride):
    # The atom of the expectation a chain shifts, as (node, shift): the
    # last number whose members all stay positive, or else the last
    # number, or else the last string letter with (CHAIN-1)*stride
    # letters of its class on each side, written plainly enough that a
    # shift is written in the same style (no probe tells itself from the
    # test by its text).
    signed = {id(n.operand): n for n in ast.walk(side)
              if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) and isinstance(n.operand, ast.Constant)}
    atoms = sorted((signed.get(id(n), n) for n in ast.walk(side) if isinstance(n, ast.Constant)), key=lambda n: (n.lineno, n.col_offset))
    seg = lambda n: lines[n.lineno - 1].encode()[n.col_offset:n.end_col_offset].decode() if n.lineno == n.end_lineno else None
    reach = (CHAIN - 1) * stride
    nums = []
    for n in atoms:
        c = n.operand if isinstance(n, ast.UnaryOp) else n
        if type(c.value) in (int, float):
            v = -c.value if c is not n else c.value
            if seg(n) == repr(v):
                nums.append((n, v))
    # A number whose members all stay positive (a count, a day), else any
    # (a comparison's -1, 0 or 1).
    for n, v in reversed(nums):
        if v - reach >= 1:
            return n, lambda j, v=v: repr(v + j * stride)
    for n, v in reversed(nums):
        return n, lambda j, v=v: repr(v + j * stride)
    for n in reversed(atoms):
        text = seg(n)
        if type(getattr(n, "value", None)) is not str or text is None or len(text) < 2 or text[0] not in "'\"" or text != text[0] + n.value + text[0]:
            continue
        if "\\" in n.value:
            continue
        for i in range(len(n.value) - 1, -1, -1):
            for cls in LETTER_CLASSES:
                k = cls.find(n.value[i])
                if k >= reach and k + reach < len(cls):
                    return n, lambda j, v=n.value, i=i, cls=cls, k=k, q=text[0]: q + v[:i] + cls[k + j * stride] + v[i + 1:] + q
    return None


def chain_probes(path, fn, lines):
    # Chain members of fn's last literal "==" expectation at each stride:
    # fn's own text with the atom shifted by each step, ±1 to ±(CHAIN-1)
    # strides, named PLACEHOLDER; [] when the expectation has no atom to
    # shift.
    f = Finder()
    f.top = fn
    f.visit(fn)
    if f.target is None:
        return []
    out = []
    for stride in STRIDES:
        axis = chain_axis(f.target[1], lines, stride)
        if axis is None:
            continue
        node, shift = axis
        start = min([d.lineno for d in fn.decorator_list] + [fn.lineno])
        for j in list(range(-(CHAIN - 1), 0)) + list(range(1, CHAIN)):
            text = lines[start - 1:fn.end_lineno]
            at = node.lineno - start
            b = text[at].encode()
            text[at] = (b[:node.col_offset] + shift(j).encode() + b[node.end_col_offset:]).decode()
            d = fn.lineno - start
            text[d] = text[d].replace("def " + fn.name, "def " + PLACEHOLDER, 1)
            out.append({"file": path, "test": fn.name, "source": "\n".join(text), "step": j, "stride": stride})
    return out


def probe_candidates(path):
    src = open(path, encoding="utf-8").read()
    tree = ast.parse(src)
    lines = src.splitlines()
    out = []
    for node in tree.body:
        funcs = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            funcs.append((None, node))
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and sub.name.startswith("test"):
                    funcs.append((node.name, sub))
        for cls, fn in funcs:
            if cls is not None:
                # A method's probe would live in a class of its own that
                # inherits the original's fixtures and helpers.
                continue
            # The single-edit probes too: the derivation keeps them only
            # for a test none of whose chains is whole.
            out.extend(chain_probes(path, fn, lines))
            seen = set()
            for how in range(PERTURBATIONS):
                copy = ast.parse(ast.unparse(fn)).body[0]
                f = Finder()
                f.top = copy
                f.visit(copy)
                if f.target is None or not perturb(*f.target, how=how):
                    continue
                copy.name = PLACEHOLDER
                src = ast.unparse(copy)
                if src not in seen:
                    seen.add(src)
                    out.append({"file": path, "test": fn.name, "source": src})
    return out


def run(cases_path):
    sys.path.insert(0, ".")
    from rollcage_grade_enc import enc, Unusable
    cases = [json.loads(l) for l in open(cases_path, encoding="utf-8") if l.strip()]
    spaces = {}
    for i, c in enumerate(cases):
        res = {"i": i}
        try:
            ns = spaces.get(c["file"])
            if ns is None:
                src = open(c["file"], encoding="utf-8").read()
                ns = {"__name__": "rollcage_case_module", "__file__": c["file"]}
                exec(compile(src, c["file"], "exec"), ns)
                spaces[c["file"]] = ns
            local = dict(ns)
            exec(compile(c["value"], c["file"], "exec"), local)
            res["enc"] = enc(local["__ROLLCAGE_CASE__"]())
        except Unusable as e:
            res["unusable"] = str(e)
        except BaseException as e:  # noqa: BLE001 - the case's outcome
            res["error"] = type(e).__name__
        print(json.dumps(res), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "find":
        for p in sys.argv[2:]:
            try:
                for c in candidates(p):
                    print(json.dumps(c))
            except (SyntaxError, UnicodeDecodeError, OSError):
                pass
    elif sys.argv[1] == "probes":
        for p in sys.argv[2:]:
            try:
                for c in probe_candidates(p):
                    print(json.dumps(c))
            except (SyntaxError, UnicodeDecodeError, OSError) as e:
                print(json.dumps({"file": p, "error": str(e)}))
    elif sys.argv[1] == "run":
        run(sys.argv[2])
