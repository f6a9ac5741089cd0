package task

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestPickCases(t *testing.T) {
	c := func(test, kind string) caseCandidate { return caseCandidate{File: "t.py", Test: test, Kind: kind} }
	cands := []caseCandidate{c("a", "one"), c("a", "one"), c("a", "one"), c("a", "step"), c("b", "one"), c("b", "grow"), c("b", "grow")}
	tests := []struct {
		name   string
		usable []int
		n      int
		want   []int
	}{
		{"every group once before any twice", []int{0, 1, 2, 3, 4, 5, 6}, 4, []int{0, 3, 4, 5}},
		{"then the second of each", []int{0, 1, 2, 3, 4, 5, 6}, 6, []int{0, 1, 3, 4, 5, 6}},
		{"all when the budget allows", []int{0, 1, 2, 3, 4, 5, 6}, 24, []int{0, 1, 2, 3, 4, 5, 6}},
		{"only usable ones", []int{1, 2, 6}, 2, []int{1, 6}},
		{"none usable", nil, 4, nil},
	}
	for _, tc := range tests {
		if got := pickCases(cands, tc.usable, tc.n); !cmp.Equal(got, tc.want) {
			t.Errorf("%s: pickCases(%v, %d) = %v, want %v", tc.name, tc.usable, tc.n, got, tc.want)
		}
	}
}

// caseHidden is a hidden test file in the shapes the finder reads: a
// parametrized test, a module-level list a test iterates over, a call
// sequence on one object, a call whose string and width go together.
const caseHidden = `import pytest

from lib import Cache, rank, wrap

ORDER = ["alpha", "beta", "rc"]


@pytest.mark.parametrize("s,want", [("ab", 2), ("abc", 3)])
def test_param(s, want):
    assert len(wrap(s, 9)) == want


@pytest.mark.parametrize("i", range(len(ORDER) - 1))
def test_chain(i):
    assert rank(ORDER[i], ORDER[i + 1]) == -1


def test_sequence():
    c = Cache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1
    c.put("c", 3)
    assert "a" in c


def test_width():
    assert wrap("aaa bbb", 7) == "aaa bbb"


def test_fixture(tmp_path):
    assert wrap("x", 1) == "x"
`

// caseLib is the reference fix of caseHidden's library; the narrow
// variants below each pass its tests and nothing more.
const caseLib = `class Cache:
    def __init__(self, n):
        self.n, self.d = n, {}

    def get(self, k):
        if k in self.d:
            self.d[k] = self.d.pop(k)
            return self.d[k]

    def put(self, k, v):
        self.d.pop(k, None)
        self.d[k] = v
        if len(self.d) > self.n:
            del self.d[next(iter(self.d))]

    def __contains__(self, k):
        return k in self.d


def rank(a, b):
    return (a > b) - (a < b)


def wrap(s, width):
    return s if len(s) <= width else s[:width - 1] + "-"
`

func TestCaseFinder(t *testing.T) {
	py := needPython(t, "the grading kit's case finder")
	dir := t.TempDir()
	// The runner executes the test module; its pytest is a stand-in
	// with what the module uses at import.
	stub := "class mark:\n    @staticmethod\n    def parametrize(names, values):\n        return lambda f: f\n"
	for name, b := range map[string][]byte{"rollcage_cases.py": kitCases, "rollcage_grade_enc.py": kitEnc, "test_hidden.py": []byte(caseHidden), "pytest.py": []byte(stub)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(py, "-I", "-S", filepath.Join(dir, "rollcage_cases.py"), "find", filepath.Join(dir, "test_hidden.py")).Output()
	if err != nil {
		t.Fatalf("find: %v", err)
	}
	kinds := map[string]map[string]bool{}
	var n int
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c caseCandidate
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("find printed %q: %v", sc.Text(), err)
		}
		if !strings.Contains(c.Value, "def __ROLLCAGE_CASE__") || !strings.Contains(c.Value, "return __rc_out") {
			t.Errorf("%s %s: value source malformed:\n%s", c.Test, c.Kind, c.Value)
		}
		if kinds[c.Test] == nil {
			kinds[c.Test] = map[string]bool{}
		}
		kinds[c.Test][c.Kind] = true
		n++
	}
	want := map[string][]string{
		"test_param":    {"one"},
		"test_chain":    {"one"},
		"test_sequence": {"step", "order", "one"},
		"test_width":    {"grow", "boundary", "one"},
	}
	for test, ks := range want {
		for _, k := range ks {
			if !kinds[test][k] {
				t.Errorf("%s: no %q candidate; kinds %v", test, k, kinds[test])
			}
		}
	}
	if kinds["test_fixture"] != nil {
		t.Errorf("test_fixture takes a fixture: want no candidates, got kinds %v", kinds["test_fixture"])
	}

	// Run every candidate against the reference and a narrow library:
	// the narrow one must differ on some case, the reference on none.
	cases := filepath.Join(dir, "cases.jsonl")
	if err := os.WriteFile(cases, out, 0o644); err != nil {
		t.Fatal(err)
	}
	runAt := func(lib string) map[int]string {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "lib.py"), []byte(lib), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(py, "-S", filepath.Join(dir, "rollcage_cases.py"), "run", cases)
		cmd.Dir = dir
		cmd.Env = []string{"PYTHONPATH=" + dir, "PYTHONDONTWRITEBYTECODE=1"}
		res, err := cmd.Output()
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		encs := map[int]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(res)), "\n") {
			var o caseOutput
			if err := json.Unmarshal([]byte(line), &o); err != nil {
				t.Fatalf("run printed %q: %v", line, err)
			}
			encs[o.I] = o.Enc + "|" + o.Error
		}
		if len(encs) != n {
			t.Fatalf("run: %d outputs for %d candidates", len(encs), n)
		}
		return encs
	}
	ref := runAt(caseLib)
	values := 0
	for _, e := range ref {
		if !strings.HasPrefix(e, "|") {
			values++
		}
	}
	if values < n/2 {
		t.Fatalf("the reference gave a value for %d of %d candidates: %v", values, n, ref)
	}
	if again := runAt(caseLib); !cmp.Equal(again, ref) {
		t.Errorf("the reference's outputs changed between runs: %v", cmp.Diff(ref, again))
	}
	narrow := map[string]string{
		// get refreshes recency only when the cache is full
		"refresh-when-full": strings.Replace(caseLib, "        if k in self.d:\n            self.d[k]", "        if k in self.d and len(self.d) >= self.n:\n            self.d[k]", 1),
		// the exact width fits only for widths the examples use
		"small-widths": strings.Replace(caseLib, "len(s) <= width", "(len(s) < width or (len(s) == width and width <= 9))", 1),
	}
	for name, lib := range narrow {
		got, differ := runAt(lib), 0
		for i, e := range got {
			if e != ref[i] {
				differ++
			}
		}
		if differ == 0 {
			t.Errorf("narrow %s: no candidate differs from the reference", name)
		}
	}
}

func TestCaseNotes(t *testing.T) {
	src := `import random
import pytest

@pytest.mark.parametrize("s,want", [("a", 1)])
def test_param(s, want):
    assert f(s) == want


@pytest.mark.parametrize(
    "n",
    [1, 2],
)
def test_multiline(n):
    assert f(n)


@pytest.mark.parametrize("n", [1])
def test_param_and_fixture(n, tmp_path):
    assert f(n)


@pytest.fixture
def thing():
    return 1


@pytest.mark.skipif(True, reason="x")
def test_skipped():
    assert f(1)


def test_random():
    assert f(random.randint(0, 9)) == 1


def test_files():
    with open("x") as fh:
        assert f(fh.read())


class TestGroup:
    def test_method(self):
        assert f(1) == 1


def test_plain():
    assert f(1) == 1
`
	hidden := fstest.MapFS{"h/test_x.py": {Data: []byte(src)}, "h/helper.py": {Data: []byte("def test_not_a_test(x): pass\n")}}
	tk := Task{ID: "t", HiddenTests: "h", UpstreamFixRef: "fix", TestCommand: "python3 -m pytest -q /opt/grader/tests"}
	got, err := CaseNotes(tk, hidden)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"test_x.py::test_param_and_fixture: no cases (takes fixtures tmp_path)",
		"test_x.py::test_skipped: no cases (decorated @pytest.mark.skipif)",
		"test_x.py::test_random: calls random.randint: its cases are kept only where the reference's output repeats, and their effects run once per case",
		"test_x.py::test_files: calls open: its cases are kept only where the reference's output repeats, and their effects run once per case",
		"test_x.py::test_method: no cases (a method of a class)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CaseNotes (-want +got):\n%s", diff)
	}
	// The same file created by a test patch, beside a file it changes.
	lines := strings.Split(strings.TrimSuffix(src, "\n"), "\n")
	patch := "diff --git a/tests/test_old.py b/tests/test_old.py\n--- a/tests/test_old.py\n+++ b/tests/test_old.py\n@@ -1 +1,2 @@\n def test_a(tmp_path):\n+def test_b(tmp_path):\n" +
		"diff --git a/tests/test_x.py b/tests/test_x.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/test_x.py\n@@ -0,0 +1," + strconv.Itoa(len(lines)) + " @@\n+" + strings.Join(lines, "\n+") + "\n"
	inst := Task{ID: "i", Workdir: InstanceWorkdir, BaseCommit: "abc", TestPatch: patch, FixPatch: "diff --git a/m.py b/m.py\n", FailToPass: []string{"tests/test_x.py::test_plain"}, TestCommand: "pytest -rA tests/test_x.py"}
	got, err = CaseNotes(inst, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		want[i] = "tests/" + want[i]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CaseNotes of a test patch (-want +got):\n%s", diff)
	}
	noFix := inst
	noFix.FixPatch = ""
	for _, tc := range []struct {
		name string
		tk   Task
	}{
		{"test patch without a reference fix", noFix},
		{"no reference fix", Task{ID: "t", HiddenTests: "h", TestCommand: tk.TestCommand}},
		{"summary reward", Task{ID: "t", HiddenTests: "h", UpstreamFixRef: "fix", TestCommand: tk.TestCommand, Reward: RewardSummary}},
	} {
		if got, err := CaseNotes(tc.tk, hidden); err != nil || got != nil {
			t.Errorf("%s: CaseNotes = %q, %v; want none (no cases are derived)", tc.name, got, err)
		}
	}
}

// TestCaseBatch runs a batch of cases through the kit's batch runner
// (rollcage_grade_enc.cases) as the grading source rewriteTests writes
// calls it: each case's outcome is kept on its own, one case's exception
// stops no other, and the item fails when any case did not pass.
func TestCaseBatch(t *testing.T) {
	py := needPython(t, "the grading kit's batch runner")
	tests := []struct {
		name string
		body string // the case function's body
		want string // its expected encoding
		out  string // its recorded outcome
	}{
		{"same", "return [1, 'a']", "L[i1,s'a']", "passed"},
		{"differs", "return [2, 'a']", "L[i1,s'a']", "failed"},
		{"raises", "raise ValueError('x')", "L[i1]", "error"},
		{"exits", "raise SystemExit(0)", "L[i1]", "error"},
		{"interrupted", "raise KeyboardInterrupt", "L[i1]", "error"},
		{"lax equality", "class A(list):\n        def __eq__(self, o): return True\n    return A([1])", "L[i1]", "error"},
		{"subclass of str", "class S(str): pass\n    return [S('a')]", "L[s'a']", "error"},
		{"after the others", "return (1.5, None)", "U[f1.5,N]", "passed"},
	}
	var src, pairs strings.Builder
	src.WriteString("import sys\nfrom rollcage_grade_enc import cases\n")
	for i, tc := range tests {
		fmt.Fprintf(&src, "def _c%d():\n    %s\n", i, tc.body)
		fmt.Fprintf(&pairs, "(_c%d, %s), ", i, strconv.Quote(tc.want))
	}
	src.WriteString("class Node:\n    user_properties = []\n")
	src.WriteString("try:\n    cases(Node, (" + pairs.String() + "))\n    print('item passed')\nexcept AssertionError as e:\n    print('item failed:', e)\n")
	src.WriteString("for k, v in Node.user_properties:\n    print(k, v)\n")
	dir := t.TempDir()
	for name, b := range map[string][]byte{"rollcage_grade_enc.py": kitEnc, "batch.py": []byte(src.String())} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(py, "-S", "batch.py")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("batch: %v\n%s", err, out)
	}
	want := []string{"item failed: 6 of 8 differential cases differ from the reference fix"}
	for i, tc := range tests {
		want = append(want, fmt.Sprintf("rollcage_case %d %s", i, tc.out))
	}
	if diff := cmp.Diff(want, strings.Split(strings.TrimSpace(string(out)), "\n")); diff != "" {
		t.Errorf("batch output (-want +got):\n%s", diff)
	}
}

func TestJudgeCases(t *testing.T) {
	c := func(d string) Probe { return Probe{Case: true, Desc: d} }
	rw := rewrite{batch: map[string][]Probe{"test_b1": {c("a"), c("b"), c("c")}, "test_b2": {c("d")}}}
	rec := func(id, v string) record { return record{Kind: "case", Fields: []string{"t.py::" + id, v}} }
	allPassed := []record{rec("test_b1", "0 passed"), rec("test_b1", "1 passed"), rec("test_b1", "2 passed"), rec("test_b2", "0 passed")}
	passed, failed := []Status{StatusPassed}, []Status{StatusFailed}
	tests := []struct {
		name    string
		byProbe map[string][]Status
		recs    []record
		want    []string
	}{
		{"all passed", map[string][]Status{"test_b1": passed, "test_b2": passed}, allPassed, nil},
		{"one case differs", map[string][]Status{"test_b1": failed, "test_b2": passed},
			[]record{rec("test_b1", "0 passed"), rec("test_b1", "1 failed"), rec("test_b1", "2 passed"), rec("test_b2", "0 passed")}, []string{"b (failed)"}},
		{"a case raised", map[string][]Status{"test_b1": failed, "test_b2": passed},
			[]record{rec("test_b1", "0 error"), rec("test_b1", "1 passed"), rec("test_b1", "2 passed"), rec("test_b2", "0 passed")}, []string{"a (error)"}},
		{"item failed, no case named: all of it", map[string][]Status{"test_b1": failed, "test_b2": passed}, allPassed, []string{"a (failed)", "b (failed)", "c (failed)"}},
		{"item missing", map[string][]Status{"test_b1": passed}, allPassed[:3], []string{"d (missing)"}},
		{"item passed, a case unrecorded", map[string][]Status{"test_b1": passed, "test_b2": passed}, allPassed[1:], []string{"a (missing)"}},
		{"item passed, a case recorded failed", map[string][]Status{"test_b1": passed, "test_b2": passed},
			append(slices.Clone(allPassed), rec("test_b2", "0 failed")), []string{"d (failed)"}},
		{"an unknown outcome is no record", map[string][]Status{"test_b1": passed, "test_b2": passed},
			append(slices.Clone(allPassed[:3]), rec("test_b2", "0 fine")), []string{"d (missing)"}},
		{"records of other items ignored", map[string][]Status{"test_b1": passed, "test_b2": passed},
			append(slices.Clone(allPassed), rec("test_x", "0 failed"), record{Kind: "rep", Fields: []string{"t.py::test_b1", "1 failed"}}), nil},
		{"item run twice", map[string][]Status{"test_b1": {StatusPassed, StatusPassed}, "test_b2": passed}, allPassed, []string{"a (passed, passed)", "b (passed, passed)", "c (passed, passed)"}},
	}
	for _, tc := range tests {
		if got := judgeCases(rw, tc.byProbe, tc.recs); !cmp.Equal(got, tc.want) {
			t.Errorf("%s: judgeCases = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestJudgeDifferential(t *testing.T) {
	passed := map[string]Status{"a": StatusPassed, "b": StatusPassed}
	tests := []struct {
		name      string
		statuses  map[string]Status
		certainAt float64
		differ    []string
		want      string // the finding's severity; "" for none
		reads     []string
	}{
		{"none differ", passed, 0, nil, "", nil},
		{"narrow: suspicious", passed, 0, []string{"x (failed)"}, severitySuspicious, nil},
		{"past the task's share: certain", passed, 0.25, []string{"x (failed)", "y (missing)"}, severityCertain, nil},
		{"under the task's share: suspicious", passed, 0.5, []string{"x (failed)"}, severitySuspicious, nil},
		{"fails the tests: no flag", map[string]Status{"a": StatusPassed, "b": StatusFailed}, 0, []string{"x (failed)"}, "", nil},
		{"no expected id: no flag", nil, 0, []string{"x (failed)"}, "", nil},
		{"narrow and read the tests: certain", passed, 0, []string{"x (failed)"}, severityCertain, []string{"pkg/__init__.py:9 /t/test_a.py"}},
		{"read the tests, none differ: no flag", passed, 0, nil, "", []string{"pkg/__init__.py:9 /t/test_a.py"}},
	}
	for _, tc := range tests {
		res := Result{Statuses: tc.statuses}
		judgeDifferential(&res, Task{DifferentialCertainAt: tc.certainAt}, 4, slices.Clone(tc.differ), tc.reads)
		var got string
		for _, f := range res.Findings {
			if f.Rule != "grade.differential" || f.Category != catSpecialCasing {
				t.Errorf("%s: finding %+v", tc.name, f)
			}
			got = f.Severity
		}
		if got != tc.want || len(res.Findings) > 1 || res.Cases != 4 || res.CasesFailed != len(tc.differ) {
			t.Errorf("%s: severity %q (%d findings), cases %d, failed %d; want %q, 4, %d", tc.name, got, len(res.Findings), res.Cases, res.CasesFailed, tc.want, len(tc.differ))
		}
	}
}

// TestPatchCasesWhere: a test-patch task derives differential cases, in
// a sandbox, only with a reference fix and under pytest with the kit
// watching; the others keep their declared ids, derived without one,
// and the facts' cache key follows the fix.
func TestPatchCasesWhere(t *testing.T) {
	inst := Task{ID: "i", Image: "img", Workdir: InstanceWorkdir, BaseCommit: "abc", TestPatch: "diff --git a/t.py b/t.py\n",
		FixPatch: "diff --git a/m.py b/m.py\n", FailToPass: []string{"t.py::test_a"}, TestCommand: "pytest -rA t.py"}
	with := func(f func(*Task)) Task { t := inst; f(&t); return t }
	tests := []struct {
		name  string
		t     Task
		want  bool
		watch string // in the plan's watch line
	}{
		{"instance with a fix", inst, true, "differential cases: the test patch's tests"},
		{"no fix_patch", with(func(t *Task) { t.FixPatch = "" }), false, "no differential cases (no reference fix: fix_patch is empty)"},
		{"django", with(func(t *Task) { t.Framework = FrameworkDjango }), false, "no probes or differential cases for django"},
		{"sympy", with(func(t *Task) { t.Framework = FrameworkSympy }), false, "no probes or differential cases for sympy"},
		{"summary reward", with(func(t *Task) { t.Reward = RewardSummary }), false, "none: the summary line"},
		{"R2E-Gym statuses", with(func(t *Task) { t.ExpectedStatus = map[string]string{"a": "PASSED"} }), false, "no probes or differential cases"},
		{"a task of rollcage's own", Task{ID: "own", HiddenTests: "h", UpstreamFixRef: "fix"}, true, "differential cases: the hidden tests"},
	}
	for _, tc := range tests {
		if got := tc.t.FactsNeedSandbox(); got != tc.want {
			t.Errorf("%s: FactsNeedSandbox = %t, want %t", tc.name, got, tc.want)
		}
		if w := tc.t.withDefaults().watchPlan(); !strings.Contains(w, tc.watch) {
			t.Errorf("%s: watch plan %q, want it to say %q", tc.name, w, tc.watch)
		}
	}
	key := func(t Task) string {
		k, err := FactsKey(t, "sha256:1", nil)
		if err != nil {
			panic(err)
		}
		return k
	}
	other := with(func(t *Task) { t.FixPatch += "+x\n" })
	if key(inst) == key(other) || key(inst) == key(with(func(t *Task) { t.FixPatch = "" })) || key(inst) != key(with(func(*Task) {})) {
		t.Error("FactsKey of a test-patch task does not follow its reference fix alone")
	}
	f, err := Derive(t.Context(), nil, with(func(t *Task) { t.FixPatch = "" }), nil, Surface{})
	if err != nil || !f.Declared || len(f.Cases) > 0 || !slices.Equal(f.FailToPass, inst.FailToPass) {
		t.Errorf("Derive without a fix, no sandbox: %+v, %v; want the declared ids and no cases", f, err)
	}
}

func TestPythonOf(t *testing.T) {
	tests := []struct{ cmd, setup, py string }{
		{"python3 -s -m pytest -rA tests/test_x.py", "", "python3"},
		{"/opt/py/bin/python3.11 -m pytest", "", "/opt/py/bin/python3.11"},
		{"pytest -rA", "", "python3"},
		{"source /opt/miniconda3/bin/activate\nconda activate testbed\npip install -e .\npytest -rA t.py",
			"source /opt/miniconda3/bin/activate >/dev/null 2>&1; conda activate testbed >/dev/null 2>&1; ", "python"},
		{"source /opt/miniconda3/bin/activate\nconda activate testbed\npython3.9 -m pytest", "source /opt/miniconda3/bin/activate >/dev/null 2>&1; conda activate testbed >/dev/null 2>&1; ", "python3.9"},
		{"export X=1\nrm -rf /\npytest", "", "python3"},
	}
	for _, tc := range tests {
		if setup, py := pythonOf(tc.cmd); setup != tc.setup || py != tc.py {
			t.Errorf("pythonOf(%q) = %q, %q; want %q, %q", tc.cmd, setup, py, tc.setup, tc.py)
		}
	}
}

// TestTestReads: the kit's notes of the tests read under the
// repository's code are no finding by themselves; testReads lists them
// for judgeDifferential.
func TestTestReads(t *testing.T) {
	recs := []record{
		{"evt", []string{"note", "read_tests_under_repo", "pkg/__init__.py:9 /t/test_a.py"}},
		{"evt", []string{"suspicious", "open_hidden_tests", "pkg/x.py:3 /t/test_a.py"}},
		{"evt", []string{"note", "other", "x"}},
	}
	var res Result
	readWatched(Task{}, run{Records: recs, Hello: true, End: true}, &res, false, nil)
	var rules []string
	for _, f := range res.Findings {
		rules = append(rules, f.Rule)
	}
	if want := []string{"grade.integrity.open_hidden_tests"}; !slices.Equal(rules, want) {
		t.Errorf("findings %q, want %q", rules, want)
	}
	if got, want := testReads(recs), []string{"pkg/__init__.py:9 /t/test_a.py"}; !slices.Equal(got, want) {
		t.Errorf("testReads = %q, want %q", got, want)
	}
}
