package monitor

import (
	"slices"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/normalize"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/toolcall"
)

// normalizerFails makes the normalizer report an internal error, as it
// does for a panic it recovered from (normalize's
// TestWalkPanicFallsBackToText), on every command that starts with name.
func normalizerFails(t *testing.T, name string) {
	t.Helper()
	normalizeArgs = func(call toolcall.Call, args any, err error, cwd string, files *normalize.Files) (toolcall.Normalized, []string) {
		n, internal := normalize.Decoded(call, args, err, cwd, files)
		if strings.HasPrefix(n.Raw, name) {
			msg := "normalize: internal error: boom in " + name
			n.Unparsed, n.ParseError, internal = true, msg, append(internal, msg)
		}
		return n, internal
	}
	t.Cleanup(func() { normalizeArgs = normalize.Decoded })
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
		{"normalizer panics", func(t *testing.T) { normalizerFails(t, "ls") }, "normalize: internal error: boom in ls"},
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
			res, err := handle(t.Context(), ep, bash("ls -la"))
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
