package monitor

import (
	"errors"
	"testing"
	"time"
)

// TestCheck: foreign names are mapped, bash arguments that cannot run are
// an *ArgsError naming the field, everything else passes as it is.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		tool, args string
		wantTool   string
		wantField  string // "" : no error
	}{
		{"bash", `{"command":"ls"}`, "bash", ""},
		{"bash", `{"command":"ls","timeout_sec":600}`, "bash", ""},
		{"bash", `{}`, "bash", "args.command"},
		{"bash", ``, "bash", "args.command"},
		{"bash", `{"command":"  "}`, "bash", "args.command"},
		{"bash", `[1]`, "bash", "args"},
		{"bash", `{"command":"ls","timeout_sec":-1}`, "bash", "args.timeout_sec"},
		{"bash", `{"command":"ls","timeout_sec":601}`, "bash", "args.timeout_sec"},
		{"execute_bash", `{"command":"ls"}`, "bash", ""},
		{"execute_bash", `{}`, "bash", "args.command"},
		{"str_replace_editor", `{"command":"view","path":"/workspace/a.py"}`, "read_file", ""},
		{"read_file", `{"path":"a","extra":1}`, "read_file", ""}, // the policy's to see, as an output
		{"my_tool", `{"x":1}`, "my_tool", ""},
	} {
		got, err := Check(ToolCall{Tool: tc.tool, Args: []byte(tc.args)}, 10*time.Minute)
		var ae *ArgsError
		switch {
		case tc.wantField == "" && err != nil:
			t.Errorf("Check(%s %s): %v, want no error", tc.tool, tc.args, err)
		case tc.wantField != "" && (!errors.As(err, &ae) || ae.Field != tc.wantField):
			t.Errorf("Check(%s %s): %v, want an ArgsError on %s", tc.tool, tc.args, err, tc.wantField)
		}
		if got.Tool != tc.wantTool {
			t.Errorf("Check(%s %s): tool %s, want %s", tc.tool, tc.args, got.Tool, tc.wantTool)
		}
	}
}
