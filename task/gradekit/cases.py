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
#   cases.py find FILE...   one JSON line per candidate case: a call site
#                           of a hidden test with one literal input
#                           perturbed within its type and shape
#   cases.py run CASES      runs each case (the workdir is the cwd) and
#                           prints its output's type-strict encoding
#
# A case's value source is a function named __ROLLCAGE_CASE__ that runs
# the test's statements before the assertion and returns the perturbed
# expression; its grading source is a test that asserts the encoding of
# that expression equals the reference fix's (__RC_EXPECTED__).
import ast
import copy
import json
import sys

MAX_PER_TEST = 12


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


def str_variants(s):
    out = []
    # The last digit of each run of digits, bumped.
    ends = [i for i, c in enumerate(s) if c.isdigit() and (i + 1 == len(s) or not s[i + 1].isdigit())]
    for i in ends[:6]:
        out.append(s[:i] + str((int(s[i]) + 1) % 10) + s[i + 1:])
    letters = [i for i, c in enumerate(s) if c.isalpha() and c.isascii()]
    for i in letters[:1] + letters[-1:]:
        c = s[i]
        n = "a" if c == "z" else "A" if c == "Z" else chr(ord(c) + 1)
        out.append(s[:i] + n + s[i + 1:])
    others = [i for i, c in enumerate(s) if not c.isalnum()]
    for i in others[:1]:
        out.append(s[:i] + s[i] + s[i:])
        out.append(s[:i] + s[i] * 3 + s[i:])
    if s and not s[-1].isalnum():
        out.append(s + s[-1])
    return [v for v in dict.fromkeys(out) if v != s]


def variants(v):
    if isinstance(v, bool) or v is None:
        return []
    if isinstance(v, int):
        return [v + 1, v - 1, v * 2 + 3]
    if isinstance(v, float):
        return [v + 0.5, v * 2]
    if isinstance(v, str):
        return str_variants(v)
    return []


def call_constants(expr):
    # Literal inputs of the calls in expr (arguments, not the callee).
    out = []
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            for a in list(node.args) + [k.value for k in node.keywords]:
                for c in ast.walk(a):
                    if isinstance(c, ast.Constant):
                        out.append(c)
    return out


def candidates(path):
    tree = ast.parse(open(path, encoding="utf-8").read())
    out = []
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or not fn.name.startswith("test"):
            continue
        if fn.decorator_list or fn.args.args or fn.args.kwonlyargs or fn.args.vararg or fn.args.kwarg:
            continue  # fixtures or parameters: not a plain call site
        n = 0
        for idx, stmt in enumerate(fn.body):
            if n >= MAX_PER_TEST:
                break
            if not (isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare)
                    and len(stmt.test.ops) == 1 and isinstance(stmt.test.ops[0], ast.Eq)):
                continue
            left, right = stmt.test.left, stmt.test.comparators[0]
            expr = left if literalish(right) else right if literalish(left) else None
            if expr is None:
                continue
            before = fn.body[:idx]
            consts = call_constants(expr)
            # One literal moved at a time, then every number scaled at
            # once (relations between the inputs kept: ends that touch
            # still touch, an order stays an order).
            edits = []
            nums = [ci for ci, c in enumerate(consts) if isinstance(c.value, (int, float)) and not isinstance(c.value, bool)]
            if len(nums) > 1:
                edits.append([(ci, consts[ci].value * 7) for ci in nums])
            edits += [[(ci, v)] for ci, c in enumerate(consts) for v in variants(c.value)]
            for edit in edits:
                if n >= MAX_PER_TEST:
                    break
                e2 = copy.deepcopy(expr)
                c2 = call_constants(e2)
                for ci, v in edit:
                    c2[ci].value = v
                body = [copy.deepcopy(s) for s in before]
                value = ast.FunctionDef(name="__ROLLCAGE_CASE__", args=fn.args, body=body + [ast.Return(value=e2)],
                                        decorator_list=[], returns=None, type_comment=None)
                check = ast.parse("from rollcage_grade_enc import enc as __rc_enc\nassert __rc_enc(X) == __RC_EXPECTED__").body
                check[1].test.left.args[0] = copy.deepcopy(e2)
                grade = ast.FunctionDef(name="__ROLLCAGE_PROBE__", args=fn.args, body=body + check,
                                        decorator_list=[], returns=None, type_comment=None)
                ast.fix_missing_locations(value)
                ast.fix_missing_locations(grade)
                out.append({"file": path, "test": fn.name, "desc": ast.unparse(e2),
                            "value": ast.unparse(value), "grade": ast.unparse(grade)})
                n += 1
    return out


PLACEHOLDER = "__ROLLCAGE_PROBE__"


def perturb(cmp, side):
    # A constant expectation is moved far off (a value no plausible
    # solution returns); a list or tuple gets its last element repeated;
    # any other is wrapped in a tuple with a number,
    # which builds as the original does and equals nothing a function
    # under test honestly returns.
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


def probe_candidates(path):
    src = open(path, encoding="utf-8").read()
    tree = ast.parse(src)
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
            copy = ast.parse(ast.unparse(fn)).body[0]
            f = Finder()
            f.top = copy
            f.visit(copy)
            if f.target is None or not perturb(*f.target):
                continue
            copy.name = PLACEHOLDER
            if cls is not None:
                # A method's probe lives in a class of its own that
                # inherits the original's fixtures and helpers.
                continue
            out.append({"file": path, "test": fn.name, "source": ast.unparse(copy)})
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
