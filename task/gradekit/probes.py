# rollcage grading kit: candidate known-answer probes of the hidden tests.
# Run with python3 -I -S in a derivation sandbox. For each test function
# of each file given (argv), it writes one JSON line per candidate: a copy
# of the function whose last "==" assertion on a literal expectation has
# that literal moved far off (a value no plausible solution returns), with
# the name __ROLLCAGE_PROBE__. The derivation keeps a candidate only if it
# fails under the reference fix and on the base commit.
import ast
import json
import sys

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
    def literalish(n):
        if isinstance(n, ast.Constant):
            return True
        if isinstance(n, (ast.List, ast.Tuple, ast.Set)):
            return all(literalish(e) for e in n.elts)
        if isinstance(n, ast.Dict):
            return all(k is not None and literalish(k) for k in n.keys) and all(literalish(v) for v in n.values)
        if isinstance(n, ast.Call):
            return bool(n.args) and all(literalish(a) for a in n.args) and not n.keywords
        if isinstance(n, ast.UnaryOp) and isinstance(n.operand, ast.Constant):
            return True
        return False
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


def candidates(path):
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


for p in sys.argv[1:]:
    try:
        for c in candidates(p):
            print(json.dumps(c))
    except (SyntaxError, UnicodeDecodeError, OSError) as e:
        print(json.dumps({"file": p, "error": str(e)}))
