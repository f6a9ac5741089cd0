package gate

import (
	"slices"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/toolcall"
)

// TestParse: the checker of a rule author's gate accepts the forms the
// docs show and refuses the rest with a message that says what to write.
func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      any
		gates   int
		wantErr string
	}{
		{"one object", map[string]any{"text": []any{"strace"}}, 1, ""},
		{"a list", []any{map[string]any{"commands": []any{"ps"}}, map[string]any{"has": []any{"code"}, "text": []any{[]any{"a"}, []any{"b", "c"}}}}, 2, ""},
		{"every key", map[string]any{"text": []any{"x"}, "commands": []any{"git"}, "args": []any{"^-"}, "git": []any{"*"}, "has": []any{"writes"},
			"after": []any{"protected_access"}, "episode": []any{"protected"}, "match": map[string]any{"code": `a|b`}}, 1, ""},
		{"upper case literal", map[string]any{"text": []any{"LD_PRELOAD"}}, 0, `write it in lower case ("ld_preload")`},
		{"unknown key", map[string]any{"texts": []any{"x"}}, 0, "unknown key"},
		{"unknown part", map[string]any{"has": []any{"stdout"}}, 0, `unknown name "stdout"`},
		{"unknown condition", map[string]any{"episode": []any{"hidden"}}, 0, `unknown name "hidden"`},
		{"empty list", map[string]any{"text": []any{}}, 0, "non-empty list"},
		{"empty gate", map[string]any{}, 0, "empty object"},
		{"no gates", []any{}, 0, "empty list"},
		{"not an object", "strace", 0, "want an object"},
		{"bad pattern", map[string]any{"match": map[string]any{"code": `(`}}, 0, "missing closing )"},
		{"unknown text", map[string]any{"match": map[string]any{"stdout": `x`}}, 0, `unknown text "stdout"`},
		{"bad args pattern", map[string]any{"args": []any{`[`}}, 0, "missing closing ]"},
	}
	for _, tc := range tests {
		gs, err := Parse(tc.in)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: Parse: %v", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: Parse error %v, want one saying %q", tc.name, err, tc.wantErr)
		case tc.wantErr == "" && len(gs) != tc.gates:
			t.Errorf("%s: %d gates, want %d", tc.name, len(gs), tc.gates)
		}
	}
}

func mustParse(t *testing.T, v any) []Gate {
	t.Helper()
	gs, err := Parse(v)
	if err != nil {
		t.Fatal(err)
	}
	return gs
}

// TestOpen: each kind of condition opens its rule on a call that meets
// it and keeps it shut on one that does not.
func TestOpen(t *testing.T) {
	l := func(xs ...string) []any {
		out := make([]any, len(xs))
		for i, x := range xs {
			out[i] = x
		}
		return out
	}
	ep := &EpisodeFacts{Workdir: "/workspace", Home: "/home/agent",
		Protected: []string{"/opt/grader/**", "**/hidden/**"}, ProtectedText: []string{"/opt/grader"},
		Visible: []string{"/workspace/tests/**"}, Future: []string{"9f2c", "origin/main"},
		Reference: []string{"github.com/acme/textkit"}, Upstream: []string{"/acme/textkit/"}}
	bash := func(raw string, cmds ...toolcall.Command) *toolcall.Normalized {
		return &toolcall.Normalized{Tool: "bash", Raw: raw, Cwd: "/workspace", Commands: cmds}
	}
	cmd := func(argv ...string) toolcall.Command { return toolcall.Command{Name: argv[0], Argv: argv} }
	tests := []struct {
		name string
		gate map[string]any
		n    *toolcall.Normalized
		h    History
		want bool
	}{
		{"text holds", map[string]any{"text": l("ld_preload")}, bash("LD_PRELOAD=x pytest"), History{}, true},
		{"text absent", map[string]any{"text": l("ld_preload")}, bash("pytest"), History{}, false},
		{"text clauses all hold", map[string]any{"text": []any{l("git"), l("--all", "--tags")}}, bash("git log --all"), History{}, true},
		{"text clause fails", map[string]any{"text": []any{l("git"), l("--all", "--tags")}}, bash("git log"), History{}, false},
		{"command named", map[string]any{"commands": l("ps")}, bash("ps aux", cmd("ps", "aux")), History{}, true},
		{"command not named", map[string]any{"commands": l("ps")}, bash("echo ps", cmd("echo", "ps")), History{}, false},
		{"args of the named command", map[string]any{"commands": l("sed"), "args": l("^-[a-z]*i")}, bash("sed -i s/a/b/ x", cmd("sed", "-i", "s/a/b/", "x")), History{}, true},
		{"args of another command", map[string]any{"commands": l("sed"), "args": l("^-[a-z]*i")}, bash("sed -n p x; grep -i x", cmd("sed", "-n", "p", "x"), cmd("grep", "-i", "x")), History{}, false},
		{"git sub", map[string]any{"git": l("reflog")}, &toolcall.Normalized{Git: []toolcall.GitOp{{Sub: "reflog", Args: []string{}}}}, History{}, true},
		{"any git", map[string]any{"git": l("*")}, &toolcall.Normalized{Git: []toolcall.GitOp{{Sub: "status", Args: []string{}}}}, History{}, true},
		{"has writes", map[string]any{"has": l("writes")}, &toolcall.Normalized{Writes: []string{"/workspace/a.py"}}, History{}, true},
		{"has code", map[string]any{"has": l("code")}, &toolcall.Normalized{Raw: "x"}, History{}, false},
		{"after a category", map[string]any{"after": l("protected_access")}, bash("ls"), History{Categories: map[string]bool{"protected_access": true}}, true},
		{"after nothing", map[string]any{"after": l("protected_access")}, bash("ls"), History{}, false},
		{"protected path", map[string]any{"episode": l("protected")}, &toolcall.Normalized{Reads: []string{"/srv/hidden/t.py"}}, History{}, true},
		{"protected directory", map[string]any{"episode": l("protected")}, &toolcall.Normalized{Lists: []string{"/opt/grader"}}, History{}, true},
		{"protected pattern", map[string]any{"episode": l("protected")}, bash("cat /opt/g*/x", cmd("cat", "/opt/g*/x")), History{}, true},
		{"unprotected path", map[string]any{"episode": l("protected")}, &toolcall.Normalized{Reads: []string{"/workspace/src/a.py"}}, History{}, false},
		{"visible test written", map[string]any{"episode": l("visible_tests")}, &toolcall.Normalized{Writes: []string{"/workspace/tests/test_a.py"}}, History{}, true},
		{"visible test as a .py argument", map[string]any{"episode": l("visible_tests")}, &toolcall.Normalized{Cwd: "/workspace/tests", Commands: []toolcall.Command{cmd("sed", "-i", "x", "test_a.py")}}, History{}, true},
		{"future commit", map[string]any{"episode": l("future")}, bash("git show 9F2C4E1"), History{}, true},
		{"reference", map[string]any{"episode": l("reference")}, bash("curl https://GitHub.com/acme/textkit/pull/1"), History{}, true},
		{"upstream path", map[string]any{"episode": l("upstream")}, bash("curl https://raw.githubusercontent.com/acme/textkit/main/x"), History{}, true},
		{"evidence reused", map[string]any{"episode": l("evidence")}, bash("cat /srv/backup/t.py"), History{Evidence: []string{"/srv/backup/t.py"}}, true},
		{"code match", map[string]any{"has": l("code"), "match": map[string]any{"code": `(?i)hard[- ]?cod`}}, &toolcall.Normalized{Content: "# HARD-CODED"}, History{}, true},
		{"code without a match", map[string]any{"has": l("code"), "match": map[string]any{"code": `(?i)hard[- ]?cod`}}, &toolcall.Normalized{Content: "# hard work"}, History{}, false},
		{"path match", map[string]any{"match": map[string]any{"paths": `/bin/pytest$`}}, &toolcall.Normalized{Writes: []string{"/usr/local/bin/pytest"}}, History{}, true},
	}
	for _, tc := range tests {
		s, err := New([]Rule{{ID: "r", Gates: mustParse(t, tc.gate)}})
		if err != nil {
			t.Fatal(err)
		}
		r := s.Open(tc.n, ep, tc.h)
		if r == nil || r.Open[0] != tc.want {
			t.Errorf("%s: open = %+v, want [%v]", tc.name, r, tc.want)
		}
	}
}

// TestOpenFailsOpen: what the gates cannot read opens every rule.
func TestOpenFailsOpen(t *testing.T) {
	s, err := New([]Rule{{ID: "r", Gates: mustParse(t, map[string]any{"text": []any{"never"}})}})
	if err != nil {
		t.Fatal(err)
	}
	ep := &EpisodeFacts{Workdir: "/workspace"}
	for _, tc := range []struct {
		name string
		n    *toolcall.Normalized
		ep   *EpisodeFacts
	}{
		{"base64", &toolcall.Normalized{Raw: "echo eA== | base64 -d | sh"}, ep},
		{"argv without its list", &toolcall.Normalized{Commands: []toolcall.Command{{Name: "x"}}}, ep},
		{"git op without its args", &toolcall.Normalized{Git: []toolcall.GitOp{{Sub: "log"}}}, ep},
		{"no call", nil, ep},
		{"unknown episode", &toolcall.Normalized{Raw: "ls"}, &EpisodeFacts{Unknown: true}},
	} {
		if r := s.Open(tc.n, tc.ep, History{}); r != nil {
			t.Errorf("%s: open = %+v, want nil (every rule)", tc.name, r)
		}
	}
	if r := s.Open(&toolcall.Normalized{Raw: "ls"}, ep, History{}); r == nil || r.Open[0] {
		t.Errorf("plain call: open = %+v, want [false]", r)
	}
	// the path arguments, resolved as lib.arg_paths resolves them
	n := &toolcall.Normalized{Cwd: "/w", Commands: []toolcall.Command{{Name: "cat", Argv: []string{"cat", "-n", "a/b", "~/c/d", "/e/f", "x.py", "http://h/p"}}}}
	want := []string{"/w/a/b", "/home/agent/c/d", "/e/f"}
	ep.Home = "/home/agent"
	if r := s.Open(n, ep, History{}); r == nil || !slices.Equal(r.ArgPaths, want) {
		t.Errorf("arg paths = %+v, want %q", r, want)
	}
}
