package monitor

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/toolcall"
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
		got, err := Check(toolcall.Call{Tool: tc.tool, Args: []byte(tc.args)}, 10*time.Minute)
		var ae *toolcall.ArgsError
		switch {
		case tc.wantField == "" && err != nil:
			t.Errorf("Check(%s %s): %v, want no error", tc.tool, tc.args, err)
		case tc.wantField != "" && (!errors.As(err, &ae) || ae.Field != tc.wantField):
			t.Errorf("Check(%s %s): %v, want an ArgsError on %s", tc.tool, tc.args, err, tc.wantField)
		}
		if got.Call.Tool != tc.wantTool {
			t.Errorf("Check(%s %s): tool %s, want %s", tc.tool, tc.args, got.Call.Tool, tc.wantTool)
		}
	}
}

// TestDecodedOnce: a call's arguments are decoded once on its way through
// the monitor, by the tool registry (or a foreign call's mapping), however
// it comes: the gateway's (Check, then Handle) and the built-in
// loop's (Handle), valid or refused; normalize, the argument check and
// execute read the typed value. A second decode anywhere fails this.
func TestDecodedOnce(t *testing.T) {
	var decodes []string
	testDecodeHook = func(tool string) { decodes = append(decodes, tool) }
	t.Cleanup(func() { testDecodeHook = nil })
	sb := newFake(func(string) sandbox.ExecResult { return sandbox.ExecResult{Output: "ok\n"} })
	ep := newEpisode(t, Config{}, sb)
	for _, tc := range []struct {
		name, tool, args string
		gateway          bool
		wantOut          string // in the output the policy sees
	}{
		{"gateway bash", "bash", `{"command":"echo ok"}`, true, "ok"},
		{"gateway bash, unknown field", "bash", `{"command":"echo ok","cwd":"/"}`, true, `unknown field "cwd"`},
		{"gateway foreign bash", "execute_bash", `{"command":"echo ok"}`, true, "ok"},
		{"gateway foreign editor", "str_replace_editor", `{"command":"create","path":"/workspace/n.py","file_text":"x = 1\n"}`, true, "wrote 6 bytes"},
		{"gateway write_file", "write_file", `{"path":"/workspace/m.py","content":"y = 2\n"}`, true, "wrote 6 bytes"},
		{"loop bash", "bash", `{"command":"echo ok"}`, false, "ok"},
		{"loop read_file, bad type", "read_file", `{"path":7}`, false, "invalid arguments"},
		{"loop list_dir", "list_dir", `{"path":"/workspace"}`, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			decodes = nil
			call := toolcall.Call{Tool: tc.tool, Args: json.RawMessage(tc.args)}
			var res decision.CallResult
			var err error
			if tc.gateway {
				p, cerr := Check(call, 10*time.Minute)
				if cerr != nil {
					t.Fatalf("Check: %v", cerr)
				}
				res, err = ep.Handle(t.Context(), numbered(ep, p))
			} else {
				res, err = handle(t.Context(), ep, call)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.Output, tc.wantOut) {
				t.Errorf("output %q, want it to contain %q", res.Output, tc.wantOut)
			}
			if len(decodes) != 1 {
				t.Errorf("arguments decoded %d times (%v), want once", len(decodes), decodes)
			}
		})
	}
}
