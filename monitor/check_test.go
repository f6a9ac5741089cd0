package monitor

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/toolcall"
)

// TestTypedArgsRead: the monitor reads a call's arguments as the caller
// decoded them (toolcall.Check on the gateway, toolcall.Prepare in the
// built-in loop), valid or refused, and never decodes the JSON again:
// the call's JSON is swapped for a decoy after decoding, and nothing the
// decoy asks for shows (toolcall's TestDecodedOnce counts the decodes).
func TestTypedArgsRead(t *testing.T) {
	sb := newFake(func(cmd string) sandbox.ExecResult { return sandbox.ExecResult{Output: "ran: " + cmd + "\n"} })
	ep := newEpisode(t, Config{}, sb)
	for _, tc := range []struct {
		name, tool, args, decoy string
		gateway                 bool
		wantOut                 string // in the output the policy sees
	}{
		{"gateway bash", "bash", `{"command":"echo ok"}`, `{"command":"echo decoy"}`, true, "ran: echo ok"},
		{"gateway bash, unknown field", "bash", `{"command":"echo ok","cwd":"/"}`, `{"command":"echo decoy"}`, true, `unknown field "cwd"`},
		{"gateway foreign bash", "execute_bash", `{"command":"echo ok"}`, `{"command":"echo decoy"}`, true, "ran: echo ok"},
		{"gateway foreign editor", "str_replace_editor", `{"command":"create","path":"/workspace/n.py","file_text":"x = 1\n"}`, `{"path":"/workspace/decoy.py","content":"decoy"}`, true, "wrote 6 bytes to /workspace/n.py"},
		{"gateway write_file", "write_file", `{"path":"/workspace/m.py","content":"y = 2\n"}`, `{"path":"/workspace/decoy.py","content":"decoy"}`, true, "wrote 6 bytes to /workspace/m.py"},
		{"loop bash", "bash", `{"command":"echo ok"}`, `{"command":"echo decoy"}`, false, "ran: echo ok"},
		{"loop read_file, bad type", "read_file", `{"path":7}`, `{"path":"/workspace/decoy.py"}`, false, "invalid arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call := toolcall.Call{Tool: tc.tool, Args: json.RawMessage(tc.args)}
			var p toolcall.Prepared
			if tc.gateway {
				var err error
				if p, err = toolcall.Check(call, 10*time.Minute); err != nil {
					t.Fatalf("Check: %v", err)
				}
			} else {
				p = toolcall.Prepare(call)
			}
			p.Call.Args = json.RawMessage(tc.decoy)
			res, err := ep.Handle(t.Context(), numbered(ep, p))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.Output, tc.wantOut) || strings.Contains(res.Output, "decoy") {
				t.Errorf("output %q, want it to contain %q and nothing of the decoy", res.Output, tc.wantOut)
			}
		})
	}
}
