package task

import (
	"bufio"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// chainHidden has expectations of each shape a chain shifts: a number in
// a call in a list, a bare count, a year (the day and month too small), a
// string letter, small and signed numbers, and one it cannot shift (a
// string whose letters sit at their class's ends).
const chainHidden = `from datetime import date

from dayrange import parse_range


def test_list():
    # a comment stays
    assert parse_range("2024-01-05..2024-01-07") == [date(2024, 1, 5), date(2024, 1, 7)]


@mark.slow
def test_count():
    assert len(parse_range("2024-02-01..2024-02-29")) == 29


def test_year():
    assert parse_range('2024-03-01')[-1] == date(2024, 3, 1)


def test_letter():
    assert slug("A b") == 'a-b-gamma'


def test_small():
    assert f(1) == [1, 2]


def test_signed():
    assert cmp("a", "b") == -1


def test_ends():
    assert f(1) == "az"
`

func TestChainProbes(t *testing.T) {
	py := needPython(t, "the grading kit's probe finder")
	dir := t.TempDir()
	for name, b := range map[string][]byte{"rollcage_cases.py": kitCases, "test_hidden.py": []byte(chainHidden)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(py, "-I", "-S", filepath.Join(dir, "rollcage_cases.py"), "probes", filepath.Join(dir, "test_hidden.py")).Output()
	if err != nil {
		t.Fatalf("probes: %v", err)
	}
	got := map[string]map[int]string{} // test → step → source (stride 1)
	strides := map[string]int{}        // "test stride" → members at strides over 1
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var c struct {
			Test, Source string
			Step, Stride int
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		if c.Stride > 1 {
			strides[c.Test+" "+strconv.Itoa(c.Stride)]++
			continue
		}
		if got[c.Test] == nil {
			got[c.Test] = map[int]string{}
		}
		if _, dup := got[c.Test][c.Step]; dup && c.Step != 0 {
			t.Errorf("%s: step %d twice", c.Test, c.Step)
		}
		got[c.Test][c.Step] = c.Source
	}
	// A member is the test's own text with one atom shifted by its
	// step: the old and new text of the atom at steps -4 and +1.
	tests := []struct {
		test     string
		old      string
		minus4   string
		plus1    string
		noChains bool
	}{
		{test: "test_list", old: "date(2024, 1, 7)]", minus4: "date(2024, 1, 3)]", plus1: "date(2024, 1, 8)]"},
		{test: "test_count", old: "== 29", minus4: "== 25", plus1: "== 30"},
		{test: "test_year", old: "date(2024, 3, 1)", minus4: "date(2020, 3, 1)", plus1: "date(2025, 3, 1)"},
		{test: "test_letter", old: "'a-b-gamma'", minus4: "'a-b-gamia'", plus1: "'a-b-gamna'"},
		{test: "test_small", old: "2]", minus4: "-2]", plus1: "3]"},
		{test: "test_signed", old: "== -1", minus4: "== -5", plus1: "== 0"},
		{test: "test_ends", noChains: true},
	}
	for _, tc := range tests {
		steps := got[tc.test]
		if tc.noChains {
			if len(steps) != 1 || steps[0] == "" {
				t.Errorf("%s: steps %v, want only step-0 (single-edit) probes", tc.test, slices.Sorted(maps.Keys(steps)))
			}
			continue
		}
		if steps[0] == "" {
			t.Errorf("%s: no single-edit probe beside the chains (the fallback when no chain is whole)", tc.test)
		}
		if strides[tc.test+" 2"] != 2*(chainLen-1) {
			t.Errorf("%s: %d stride-2 members, want %d", tc.test, strides[tc.test+" 2"], 2*(chainLen-1))
		}
		if want := []int{-4, -3, -2, -1, 0, 1, 2, 3, 4}; !slices.Equal(slices.Sorted(maps.Keys(steps)), want) {
			t.Errorf("%s: steps %v, want %v", tc.test, slices.Sorted(maps.Keys(steps)), want)
			continue
		}
		orig := testSource(t, chainHidden, tc.test)
		for step, atom := range map[int]string{-4: tc.minus4, 1: tc.plus1} {
			want := strings.Replace(strings.Replace(orig, tc.old, atom, 1), "def "+tc.test+"(", "def "+probePlaceholder+"(", 1)
			if steps[step] != want {
				t.Errorf("%s step %d:\n%s\nwant\n%s", tc.test, step, steps[step], want)
			}
		}
	}
}

// testSource is name's text in src, its decorators first.
func testSource(t *testing.T, src, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?ms)^(@[^\n]*\n)*def ` + name + `\(.*?\n\n\n`).FindString(src + "\n\n")
	if m == "" {
		t.Fatalf("no %s in the source", name)
	}
	return strings.TrimRight(m, "\n")
}

// chainOf is test's chains in file at strides 1 and 2, with a
// single-edit probe.
func chainOf(file, test string) []Probe {
	ps := []Probe{{File: file, Test: test, Source: "far", MustFail: true}}
	for _, stride := range []int{1, 2} {
		for _, s := range []int{-4, -3, -2, -1, 1, 2, 3, 4} {
			ps = append(ps, Probe{File: file, Test: test, Source: "m", MustFail: true, Step: s, Stride: stride})
		}
	}
	return ps
}

// TestChooseProbes: every grading runs chainLen-1 members per chain, a
// window of consecutive steps holding 0, each of its chainLen places
// about as often; other probes always.
func TestChooseProbes(t *testing.T) {
	var probes []Probe
	for _, test := range []string{"test_x", "test_y"} {
		probes = append(probes, completeChains(chainOf("a.py", test), chainOf("a.py", test))...)
	}
	probes = append(probes, literalProbes()...)
	const n = 5000
	lows := map[string]map[int]int{}
	for range n {
		got := chooseProbes(probes)
		steps := map[string][]int{}
		other := 0
		for _, p := range got {
			if p.Step == 0 {
				other++
				continue
			}
			steps[p.Test] = append(steps[p.Test], p.Step)
		}
		if other != 2 {
			t.Fatalf("%d literal probes kept, want 2", other)
		}
		for test, s := range steps {
			lo := min(s[0], 0)
			want := []int{}
			for k := lo; k < lo+chainLen; k++ {
				if k != 0 {
					want = append(want, k)
				}
			}
			if !slices.Equal(s, want) {
				t.Fatalf("%s: steps %v, want a window holding 0: %v", test, s, want)
			}
			if lows[test] == nil {
				lows[test] = map[int]int{}
			}
			lows[test][lo]++
		}
	}
	for test, m := range lows {
		for lo := -(chainLen - 1); lo <= 0; lo++ {
			// Uniform: n/chainLen = 1000 each; 5 standard deviations is 141.
			if c := m[lo]; c < 1000-141 || c > 1000+141 {
				t.Errorf("%s: window from %d chosen %d times of %d, want about %d", test, lo, c, n, n/chainLen)
			}
		}
	}
}

func TestCompleteChains(t *testing.T) {
	cands := append(chainOf("a.py", "test_x"), chainOf("a.py", "test_y")...)
	type kept struct{ n, stride int } // a test's probes kept, their stride
	tests := []struct {
		name string
		drop func(Probe) bool // the candidates the derivation did not keep
		want map[string]kept
	}{
		{"all kept", func(Probe) bool { return false }, map[string]kept{"test_x": {8, 1}, "test_y": {8, 1}}},
		{"a stride-1 member lost", func(p Probe) bool { return p.Test == "test_x" && p.Step == -1 && p.Stride == 1 },
			map[string]kept{"test_x": {8, 2}, "test_y": {8, 1}}},
		{"every chain lost a member", func(p Probe) bool { return p.Test == "test_x" && p.Step == 4 },
			map[string]kept{"test_x": {1, 0}, "test_y": {8, 1}}},
		{"the single edit lost", func(p Probe) bool { return p.Test == "test_y" && p.Step == 0 },
			map[string]kept{"test_x": {8, 1}, "test_y": {8, 1}}},
	}
	for _, tc := range tests {
		got := map[string]kept{}
		for _, p := range completeChains(slices.DeleteFunc(slices.Clone(cands), tc.drop), cands) {
			k := got[p.Test]
			if k.n > 0 && k.stride != p.Stride {
				t.Errorf("%s: %s keeps strides %d and %d", tc.name, p.Test, k.stride, p.Stride)
			}
			got[p.Test] = kept{k.n + 1, p.Stride}
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s: kept %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPlaceProbes: probes go among the module-level tests, which keep
// their order; a test is at each rank among its copies about equally
// often; a decorated probe stays below the statement its decorator may
// need; the file still compiles.
func TestPlaceProbes(t *testing.T) {
	src := "import pytest\n\n\ndef test_a():\n    assert f(1) == 2\n\n\nROWS = [1,\n    2]\n\n\n@pytest.mark.parametrize(\n    \"r\", ROWS)\ndef test_b(r):\n    assert f(r) == 10\n\n\nclass TestK:\n    def test_m(self):\n        pass\n\n\ndef test_c():\n    assert f(3) == 30\n"
	orig := map[string]string{"test_a": "test_a", "test_b": "test_b", "test_c": "test_c"}
	var pp []placedProbe
	for k := range 4 {
		pp = append(pp, placedProbe{Probe{Test: "test_a"}, "def test_pa" + string(rune('0'+k)) + "():\n    assert f(1) == 3"})
		pp = append(pp, placedProbe{Probe{Test: "test_b"}, "@pytest.mark.parametrize(\n    \"r\", ROWS)\ndef test_pb" + string(rune('0'+k)) + "(r):\n    assert f(r) == 11"})
	}
	pp = append(pp, placedProbe{Probe{}, "def test_lit():\n    assert 'x' == 'y'"})
	const n = 3000
	ranks := map[string]map[int]int{"test_a": {}, "test_b": {}}
	var sample []byte
	for i := range n {
		out := string(placeProbes([]byte(src), orig, slices.Clone(pp)))
		if i == 0 {
			sample = []byte(out)
		}
		at := func(s string) int {
			i := strings.Index(out, s)
			if i < 0 {
				t.Fatalf("no %q in\n%s", s, out)
			}
			return i
		}
		a, b, c, rows := at("def test_a("), at("@pytest.mark.parametrize(\n    \"r\", ROWS)\ndef test_b("), at("def test_c("), at("ROWS = [")
		if !(a < b && b < c) || at("class TestK") > c || at("class TestK") < b {
			t.Fatalf("tests out of order:\n%s", out)
		}
		ra, rb := 0, 0
		for k := range 4 {
			if at("def test_pa"+string(rune('0'+k))) < a {
				ra++
			}
			pb := at("def test_pb" + string(rune('0'+k)))
			if pb < rows {
				t.Fatalf("a decorated probe above the statement its decorator needs:\n%s", out)
			}
			if pb < b {
				rb++
			}
		}
		ranks["test_a"][ra]++
		ranks["test_b"][rb]++
	}
	for test, m := range ranks {
		for r := range 5 {
			// Uniform: n/5 = 600 each; 5 standard deviations is 110.
			if c := m[r]; c < 600-110 || c > 600+110 {
				t.Errorf("%s at rank %d among its copies %d times of %d, want about %d", test, r, c, n, n/5)
			}
		}
	}
	if py, err := exec.LookPath("python3"); err == nil {
		cmd := exec.Command(py, "-I", "-S", "-c", "import ast, sys; ast.parse(sys.stdin.read())")
		cmd.Stdin = strings.NewReader(string(sample))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("placed file does not parse: %v: %s\n%s", err, out, sample)
		}
	}
}

// needPython is python3's path; without it the test is skipped, or fails
// in CI. what says what it runs.
func needPython(t *testing.T, what string) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no python3 on PATH to run " + what + ": install Debian's python3")
		}
		t.Skip("no python3 on PATH to run " + what)
	}
	return py
}
