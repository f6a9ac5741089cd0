package rules

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/toolcall"
)

// gatedPolicy is a user rule that flags every call, gated to calls that
// mention strace: the gate, not the body, decides which calls it flags
// when gating is on, so the test sees the gate at work.
const gatedPolicy = `package rollcage.rules.mine

import data.rollcage.lib

# METADATA
# title: anything
# custom:
#   id: mine.any
#   category: environment_probing
#   severity: suspicious
#   gate:
#     - {text: [strace]}
flag contains lib.flag("mine.any", "environment_probing", "suspicious", "any call", lib.raw) if {
	lib.raw != ""
}
`

// TestGateDeclared: a rule's METADATA gate decides which calls evaluate
// it; with gating off every call does.
func TestGateDeclared(t *testing.T) {
	dir := writeFiles(t, map[string]string{"mine.rego": gatedPolicy})
	ctx := context.Background()
	for _, tc := range []struct {
		raw   string
		gated bool
		want  int
	}{
		{"ls -la", true, 0},
		{"strace -f ls", true, 1},
		{"STRACE ls", true, 1},
		{"ls -la", false, 1},
	} {
		e := newEngine(t, Config{PolicyDirs: []string{dir}, DisablePrefilter: !tc.gated})
		ep := e.NewEpisode(ctx, demoTask, demoSandbox)
		n := toolcall.Normalized{Tool: "bash", Raw: tc.raw, Cwd: "/workspace"}
		got, err := ep.Eval(ctx, toolcall.Call{Tool: "bash"}, n)
		if err != nil {
			t.Fatal(err)
		}
		var mine int
		for _, f := range got {
			if f.Rule == "mine.any" {
				mine++
			}
		}
		if mine != tc.want {
			t.Errorf("%q (gated %v): %d mine.any flags, want %d (all: %v)", tc.raw, tc.gated, mine, tc.want, got)
		}
	}
}

// TestGateChecked: a gate the checker refuses stops the policy from
// loading with file:line, like a compile error, and says what to write.
func TestGateChecked(t *testing.T) {
	for _, tc := range []struct {
		name, gate, want string
	}{
		{"unknown key", "{texts: [strace]}", "rule mine.any: gate 0: texts: unknown key; use text, commands, args, git, has, after, episode or match"},
		{"upper case", "{text: [STRACE]}", `rule mine.any: gate 0: text: literal "STRACE": write it in lower case ("strace"); the call's strings are compared lowercased`},
		{"pattern not the rule's", "{match: {text: 'strace\\s'}}", `rule mine.any: gate 0: match: text: pattern "strace\\s" is not a string of the rule's package; give the rule's own pattern`},
	} {
		src := replaceGate(gatedPolicy, tc.gate)
		_, err := New(context.Background(), Config{PolicyDirs: []string{writeFiles(t, map[string]string{"mine.rego": src})}})
		var ce *CompileError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: New = %v, want a *CompileError", tc.name, err)
		}
		got := struct {
			Line          int
			Code, Message string
		}{ce.Line, ce.Code, ce.Message}
		want := struct {
			Line          int
			Code, Message string
		}{13, "rego_gate_error", tc.want}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: error (-want +got):\n%s", tc.name, d)
		}
	}
}

func replaceGate(src, gate string) string {
	const old = "#     - {text: [strace]}"
	for i := 0; i+len(old) <= len(src); i++ {
		if src[i:i+len(old)] == old {
			return src[:i] + "#     - " + gate + src[i+len(old):]
		}
	}
	panic("no gate in the policy")
}

// TestInputReads: episodes pass input.call and input.history exactly
// when a rule of the policy reads them; the default bundle reads neither.
func TestInputReads(t *testing.T) {
	for _, tc := range []struct {
		name, src     string
		call, history bool
	}{
		{"default bundle", "", false, false},
		{"history", "flag contains x if { some x in input.history }", false, true},
		{"lib.history", "flag contains x if { some x in lib.history }", false, true},
		{"call", `flag contains x if { x := input.call.tool }`, true, false},
		{"the whole input", `flag contains x if { x := object.get(input, "k", "") }`, true, true},
	} {
		cfg := Config{}
		if tc.src != "" {
			src := "package rollcage.rules.mine\n\nimport data.rollcage.lib\n\n" + tc.src + "\n"
			cfg.PolicyDirs = []string{writeFiles(t, map[string]string{"mine.rego": src})}
		}
		e := newEngine(t, cfg)
		if e.readsCall != tc.call || e.readsHistory != tc.history {
			t.Errorf("%s: reads call %v, history %v; want %v, %v", tc.name, e.readsCall, e.readsHistory, tc.call, tc.history)
		}
	}
}
