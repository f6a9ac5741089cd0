package normalize

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/toolcall"
)

// TestPrepareArgs: a call built with typed arguments normalizes as its
// JSON decoded does, whether the arguments are the tool's own type (kept
// typed) or another (decoded from their JSON, as Prepare does).
func TestPrepareArgs(t *testing.T) {
	tests := []struct {
		name   string
		p      toolcall.Prepared
		raw    string
		failed bool // a ParseError
	}{
		{"bash", toolcall.PrepareArgs(toolcall.Bash, toolcall.BashArgs{Command: "cat /etc/hosts"}), "cat /etc/hosts", false},
		{"read_file", toolcall.PrepareArgs(toolcall.ReadFile, toolcall.ReadFileArgs{Path: "a.py"}), "a.py", false},
		{"another type", toolcall.PrepareArgs(toolcall.Bash, map[string]string{"command": "ls"}), "ls", false},
		{"unknown field", toolcall.PrepareArgs(toolcall.Bash, toolcall.ReadFileArgs{Path: "a.py"}), "", false}, // read past, as ever
		{"not an object", toolcall.PrepareArgs(toolcall.Bash, "ls"), `"ls"`, true},
		{"foreign", toolcall.PrepareForeign("execute_bash", `{"command":"pwd"}`), "pwd", false},
		{"editor", toolcall.PrepareEditor("create", "b.py", "x", "", ""), "b.py", false},
	}
	for _, tc := range tests {
		args, err := tc.p.Args()
		got, _ := Decoded(tc.p.Call, args, err, "/w", nil)
		if d := cmp.Diff(Normalize(tc.p.Call, "/w", nil), got); d != "" {
			t.Errorf("%s: typed arguments normalize otherwise (-decoded +typed):\n%s", tc.name, d)
		}
		if got.Raw != tc.raw || (got.ParseError != "") != tc.failed {
			t.Errorf("%s: Raw %q, ParseError %q; want Raw %q, an error %v", tc.name, got.Raw, got.ParseError, tc.raw, tc.failed)
		}
	}
}
