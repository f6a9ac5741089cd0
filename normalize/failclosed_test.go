package normalize

import (
	"slices"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/toolcall"
)

// panicOn makes the walk panic on every command named name.
func panicOn(t *testing.T, name string) {
	t.Helper()
	testCallHook = func(n string) {
		if n == name {
			panic("boom in " + n)
		}
	}
	t.Cleanup(func() { testCallHook = nil })
}

// TestOddConstructKeepsPathRules: `pushd ”` used to panic the walk
// (an index into the empty operand), which dropped every command after
// it; now it is just a pushd.
func TestOddConstructKeepsPathRules(t *testing.T) {
	for _, cmd := range []string{
		`pushd ''; cat /opt/grader/tests/test_x.py`,
		`pushd "" && cd .. ; cat /opt/grader/tests/test_x.py`,
		`cd ''; popd; cat /opt/grader/tests/test_x.py`,
	} {
		n, internal := Decoded(bash(cmd), &toolcall.BashArgs{Command: cmd}, nil, "/workspace", nil)
		if len(internal) > 0 || !slices.Contains(n.Reads, "/opt/grader/tests/test_x.py") {
			t.Errorf("%s: reads %v, internal errors %v; want the hidden test read seen", cmd, n.Reads, internal)
		}
	}
}

// TestWalkPanicFallsBackToText: wherever the walk panics, the statements
// after it are still walked, the one that panicked is scanned as text, and
// the internal error is reported.
func TestWalkPanicFallsBackToText(t *testing.T) {
	panicOn(t, "weird")
	tests := []struct {
		cmd   string
		reads []string
	}{
		{"weird; cat /opt/grader/tests/a.py", []string{"/opt/grader/tests/a.py"}},
		{"cat /w/a; weird /opt/grader/tests/b.py; cat /w/c", []string{"/w/a", "/opt/grader/tests/b.py", "/w/c"}},
		{"(weird) && cat /opt/grader/tests/c.py", []string{"/opt/grader/tests/c.py"}},
		{`bash -c "weird; cat /opt/grader/tests/d.py"`, []string{"/opt/grader/tests/d.py"}},
		{"for f in x; do weird; done; cat /opt/grader/tests/e.py", []string{"/opt/grader/tests/e.py"}},
	}
	for _, tc := range tests {
		n, internal := Decoded(bash(tc.cmd), &toolcall.BashArgs{Command: tc.cmd}, nil, "/workspace", nil)
		if len(internal) == 0 || !n.Unparsed || !strings.Contains(n.ParseError, "boom in weird") {
			t.Errorf("%s: internal %v, Unparsed %v %q; want the panic reported", tc.cmd, internal, n.Unparsed, n.ParseError)
		}
		for _, r := range tc.reads {
			if !slices.Contains(n.Reads, r) {
				t.Errorf("%s: reads %v, want %s among them", tc.cmd, n.Reads, r)
			}
		}
	}
}
