package task

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// chain writes records as the kit does: seq, HMAC over the previous MAC,
// the sequence number and the payload, hex fields prefixed with x.
func chain(key string, recs ...[]string) []string {
	k, _ := hex.DecodeString(key)
	var prev []byte
	var lines []string
	for i, r := range recs {
		var parts []string
		for _, f := range r {
			parts = append(parts, "x"+hex.EncodeToString([]byte(f)))
		}
		payload := strings.Join(parts, " ")
		seq := fmt.Sprint(i + 1)
		m := hmac.New(sha256.New, k)
		m.Write(prev)
		m.Write([]byte("\n" + seq + "\n" + payload))
		prev = m.Sum(nil)
		lines = append(lines, seq+" "+hex.EncodeToString(prev)+" "+payload)
	}
	return lines
}

func TestVerifyRecords(t *testing.T) {
	key := strings.Repeat("ab", 32)
	good := chain(key, []string{"hello", "12"}, []string{"rep", "t.py::test_a", "call", "passed", ""}, []string{"end", "0"})
	other := chain(strings.Repeat("cd", 32), []string{"hello", "12"}, []string{"rep", "t.py::test_a", "call", "passed", ""})
	tests := []struct {
		name       string
		lines      []string
		wantN      int
		wantForged bool
	}{
		{"whole chain", good, 3, false},
		{"empty field kept", good[:2], 2, false},
		{"a record dropped", []string{good[0], good[2]}, 1, true},
		{"records reordered", []string{good[1], good[0]}, 0, true},
		{"another key", other, 0, true},
		{"a record appended by hand", append(append([]string{}, good...), "4 00 x656e64"), 3, true},
		{"payload changed", []string{good[0], strings.Replace(good[1], hex.EncodeToString([]byte("passed")), hex.EncodeToString([]byte("failed")), 1)}, 1, true},
		{"garbage", []string{"5 passed in 0.01s"}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs, forged := verifyRecords([]byte(strings.Join(tc.lines, "\n")+"\n"), key)
			if len(recs) != tc.wantN || forged != tc.wantForged {
				t.Errorf("verifyRecords: %d records, forged %t; want %d, %t", len(recs), forged, tc.wantN, tc.wantForged)
			}
		})
	}
	recs, _ := verifyRecords([]byte(strings.Join(good, "\n")), key)
	if want := (record{Kind: "rep", Fields: []string{"t.py::test_a", "call", "passed", ""}}); !cmp.Equal(recs[1], want, cmp.AllowUnexported(record{})) {
		t.Errorf("record 2 = %+v, want %+v", recs[1], want)
	}
}

func TestStatuses(t *testing.T) {
	rep := func(id, when, outcome, xfail string) record {
		return record{Kind: "rep", Fields: []string{id, when, outcome, xfail}}
	}
	phases := func(id, setup, call, teardown, xfail string) []record {
		out := []record{rep(id, "setup", setup, xfail)}
		if call != "" {
			out = append(out, rep(id, "call", call, xfail))
		}
		return append(out, rep(id, "teardown", teardown, ""))
	}
	var recs []record
	recs = append(recs, phases("a", "passed", "passed", "passed", "")...)
	recs = append(recs, phases("b", "passed", "failed", "passed", "")...)
	recs = append(recs, phases("c", "skipped", "", "passed", "")...)
	recs = append(recs, phases("d", "passed", "skipped", "passed", "xfail")...)
	recs = append(recs, phases("e", "passed", "passed", "passed", "xfail")...)
	recs = append(recs, phases("f", "failed", "", "passed", "")...)
	recs = append(recs, phases("g", "passed", "passed", "failed", "")...)
	recs = append(recs, rep("h", "setup", "passed", ""), rep("h", "call", "passed", "")) // cut before teardown
	recs = append(recs, record{Kind: "col", Fields: []string{"broken.py", "failed"}})
	recs = append(recs, phases("i", "passed", "failed", "passed", "")...)
	recs = append(recs, rep("i", "call", "passed", "")) // a second report of the same phase
	got, conflicts := statuses(recs)
	want := map[string]Status{"a": StatusPassed, "b": StatusFailed, "c": StatusSkipped, "d": StatusXFailed, "e": StatusXPassed,
		"f": StatusError, "g": StatusError, "h": StatusMissing, "broken.py": StatusError, "i": StatusFailed}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if len(conflicts) != 1 || !strings.HasPrefix(conflicts[0], "i call") {
		t.Errorf("conflicts = %q, want the one of i's call", conflicts)
	}
}

func TestCallCounts(t *testing.T) {
	rep := func(id, when, outcome, xfail string) record {
		return record{Kind: "rep", Fields: []string{id, when, outcome, xfail}}
	}
	tests := []struct {
		name           string
		recs           []record
		passed, failed int
	}{
		{"none", nil, 0, 0},
		{"passed and failed calls", []record{rep("a", "setup", "passed", ""), rep("a", "call", "passed", ""), rep("b", "call", "failed", "")}, 1, 1},
		{"setup and teardown are not counted", []record{rep("a", "setup", "failed", ""), rep("b", "call", "passed", ""), rep("b", "teardown", "failed", "")}, 1, 0},
		{"expected failures are counted apart", []record{rep("a", "call", "skipped", "xfail"), rep("b", "call", "passed", "xfail")}, 0, 0},
		{"a skip is neither", []record{rep("a", "call", "skipped", "")}, 0, 0},
		{"a failure reported twice stays", []record{rep("a", "call", "failed", ""), rep("a", "call", "passed", "")}, 0, 1},
		{"collection errors and cases are not counted", []record{{Kind: "col", Fields: []string{"x.py", "failed"}}, {Kind: "case", Fields: []string{"t.py::a", "0 passed"}}}, 0, 0},
	}
	for _, tc := range tests {
		p, f := callCounts(tc.recs)
		if p != tc.passed || f != tc.failed {
			t.Errorf("%s: callCounts = %d passed, %d failed; want %d, %d", tc.name, p, f, tc.passed, tc.failed)
		}
	}
}

func TestCanonicalID(t *testing.T) {
	tk := Task{Workdir: "/workspace", HiddenTestsDest: "/opt/grader/tests"}
	tests := []struct{ in, want string }{
		{"../opt/grader/tests/test_hidden.py::test_a", "test_hidden.py::test_a"},
		{"../../opt/grader/tests/sub/test_x.py::TestC::test_b[1-2]", "sub/test_x.py::TestC::test_b[1-2]"},
		{"opt/grader/tests/test_hidden.py::test_a", "test_hidden.py::test_a"},
		{"test_hidden.py::test_a", "test_hidden.py::test_a"},
		{"tests/test_parse.py::test_z", "tests/test_parse.py::test_z"},
	}
	for _, tc := range tests {
		if got := canonicalID(tk, tc.in); got != tc.want {
			t.Errorf("canonicalID(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRewriteTests(t *testing.T) {
	files := map[string][]byte{
		"test_a.py": []byte("import pytest\n\ndef test_one():\n    assert f(1) == 2\n\nclass TestK:\n    def test_two(self):\n        pass\n\nasync  def test_three():\n    pass\n\ndef helper():\n    pass\n"),
		"data.json": []byte("{\"def test_x(\": 1}"),
	}
	probes := []Probe{{File: "test_a.py", Test: "test_one", Source: "def " + probePlaceholder + "():\n    assert f(1) == 7921", MustFail: true}}
	rw, err := rewriteTests(files, probes)
	if err != nil {
		t.Fatal(err)
	}
	src := string(rw.files["test_a.py"])
	for _, old := range []string{"def test_one(", "def test_two(", "def test_three("} {
		if strings.Contains(src, old) {
			t.Errorf("rewritten source still has %q:\n%s", old, src)
		}
	}
	if !strings.Contains(src, "def helper(") || string(rw.files["data.json"]) != string(files["data.json"]) {
		t.Errorf("non-test code changed:\n%s", src)
	}
	if len(rw.orig) != 3 || len(rw.probe) != 1 {
		t.Fatalf("renamed %d tests and %d probes, want 3 and 1", len(rw.orig), len(rw.probe))
	}
	names := map[string]bool{}
	for fresh, orig := range rw.orig {
		names[orig] = true
		if !strings.Contains(src, "def "+fresh+"(") || len(fresh) != len("test_")+10 {
			t.Errorf("fresh name %q for %s not in the source or not of the shared shape", fresh, orig)
		}
		id := "../opt/grader/tests/test_a.py::TestK::" + fresh + "[p-1]"
		if got, p := rw.restoreID(id); p != nil || got != "../opt/grader/tests/test_a.py::TestK::"+orig+"[p-1]" {
			t.Errorf("restoreID(%q) = %q, %v", id, got, p)
		}
	}
	for fresh := range rw.probe {
		if !strings.Contains(src, "def "+fresh+"():\n    assert f(1) == 7921") {
			t.Errorf("probe %s not appended:\n%s", fresh, src)
		}
		if _, p := rw.restoreID("test_a.py::" + fresh); p == nil || p.Test != "test_one" {
			t.Errorf("restoreID of the probe = %v", p)
		}
	}
	if !names["test_one"] || !names["test_two"] || !names["test_three"] {
		t.Errorf("renamed %v", names)
	}
	// Fresh names differ between gradings.
	rw2, _ := rewriteTests(files, probes)
	for fresh := range rw2.orig {
		if _, ok := rw.orig[fresh]; ok {
			t.Errorf("name %s reused across gradings", fresh)
		}
	}
}

func TestLiteralProbes(t *testing.T) {
	p := literalProbes()
	if len(p) != 2 || !p[0].MustFail || p[1].MustFail {
		t.Fatalf("literal probes = %+v", p)
	}
	if p[0].Source == literalProbes()[0].Source {
		t.Errorf("the must-fail probe's constants do not change between gradings")
	}
}

// TestRewriteCases: differential cases go to their own file in batches
// of caseBatch, each batch one collected test with fresh names and each
// case a function pytest does not collect.
func TestRewriteCases(t *testing.T) {
	files := map[string][]byte{
		"test_a.py": []byte("def test_one():\n    assert f(1) == 2\n"),
		"test_b.py": []byte("def test_two():\n    assert g(1) == 2\n"),
	}
	var probes []Probe
	for i := range caseBatch + 3 {
		probes = append(probes, Probe{File: "test_a.py", Case: true, Desc: fmt.Sprint("a", i), Expected: fmt.Sprint("i", i),
			Source: "def " + probePlaceholder + "():\n    return [f(" + fmt.Sprint(i) + ")]"})
	}
	probes = append(probes, Probe{File: "test_b.py", Case: true, Desc: "b0", Expected: `s'x"'`, Source: "def " + probePlaceholder + "():\n    return [g(0)]"})
	probes = append(probes, literalProbes()...)
	rw, err := rewriteTests(files, probes)
	if err != nil {
		t.Fatal(err)
	}
	if len(rw.probe) != 2 {
		t.Errorf("%d probes, want the 2 literal ones", len(rw.probe))
	}
	sizes := map[string][]int{}
	for fresh, batch := range rw.batch {
		file := batch[0].File
		sizes[file] = append(sizes[file], len(batch))
		src := string(rw.files[file])
		if !strings.Contains(src, "\ndef "+fresh+"(request):\n") || !strings.HasPrefix(fresh, "test_") {
			t.Errorf("batch %s not a collected test of %s:\n%s", fresh, file, src)
		}
		for _, p := range batch {
			if p.File != file {
				t.Errorf("case of %s batched in %s", p.File, file)
			}
			// The case's function, named apart from tests, paired with
			// its expected encoding in the batch's call.
			m := regexp.MustCompile(`\(_(test_[0-9a-f]{10}), ` + regexp.QuoteMeta(strconv.Quote(p.Expected)) + `\)`).FindStringSubmatch(src)
			if m == nil || !strings.Contains(src, "\ndef _"+m[1]+"():\n    return [") {
				t.Errorf("case %s: no function paired with %q in %s:\n%s", p.Desc, p.Expected, file, src)
			}
		}
	}
	for _, s := range sizes {
		slices.Sort(s)
	}
	if want := map[string][]int{"test_a.py": {3, caseBatch}, "test_b.py": {1}}; !cmp.Equal(sizes, want) {
		t.Errorf("batch sizes %v, want %v", sizes, want)
	}
}
