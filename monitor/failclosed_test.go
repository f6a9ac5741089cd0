package monitor

import (
	"slices"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/sandbox"
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
		n, internal := normalize(bash(cmd), "/workspace")
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
		n, internal := normalize(bash(tc.cmd), "/workspace")
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

// TestMonitorInternalErrorBlocks: a panic in normalization or in the rules
// flags the call certain monitor.internal_error with the error as
// evidence, and the default fail policy blocks it.
func TestMonitorInternalErrorBlocks(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(t *testing.T)
		evidence string
	}{
		{"normalizer panics", func(t *testing.T) { panicOn(t, "ls") }, "normalize: internal error: boom in ls"},
		{"rules panic", func(t *testing.T) {
			testEvalHook = func() { panic("rules boom") }
			t.Cleanup(func() { testEvalHook = nil })
		}, "rules: internal error: rules boom"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup(t)
			sb := newFake(func(string) sandbox.ExecResult { return sandbox.ExecResult{Output: "ran"} })
			ep := newEpisode(t, Config{}, sb)
			res, err := ep.Handle(t.Context(), bash("ls -la"))
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(res.Decision.Flags, func(f rules.Flag) bool { return f.Rule == RuleInternalError })
			if i < 0 {
				t.Fatalf("flags %+v, want %s", res.Decision.Flags, RuleInternalError)
			}
			if f := res.Decision.Flags[i]; f.Severity != rules.Certain || f.Evidence != tc.evidence {
				t.Errorf("flag %+v, want certain with evidence %q", f, tc.evidence)
			}
			if res.Decision.Action != decision.Block || !res.Dummy || len(sb.Ran()) != 0 {
				t.Errorf("action %s dummy %v, sandbox ran %v; want blocked, nothing run", res.Decision.Action, res.Dummy, sb.Ran())
			}
		})
	}
}
