package monitor

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rollcage/rollcage/normalize"
	"github.com/rollcage/rollcage/toolcall"
)

// TestArgsTypes: the registry's tools are toolcall's own, with the
// argument types toolcall decodes them into (normalize.Normalize decodes
// by toolcall.NewArgs, the monitor by its registry).
func TestArgsTypes(t *testing.T) {
	for _, s := range registry {
		if !toolcall.IsTool(s.Name) || reflect.TypeOf(toolcall.NewArgs(s.Name)) != s.argsType {
			t.Errorf("%s: toolcall.IsTool %v, toolcall.NewArgs %T; want true, %v", s.Name, toolcall.IsTool(s.Name), toolcall.NewArgs(s.Name), s.argsType)
		}
	}
	for _, name := range []string{"web_search", "execute_bash", "Bash", ""} {
		if toolcall.IsTool(name) || toolcall.NewArgs(name) != nil || byName[name] != nil {
			t.Errorf("%q: toolcall.IsTool %v, NewArgs %T, in the registry %v; want a generic tool", name, toolcall.IsTool(name), toolcall.NewArgs(name), byName[name] != nil)
		}
	}
	if len(registry) != 6 {
		t.Errorf("the registry has %d tools, toolcall.IsTool knows 6", len(registry))
	}
}

// TestDecodeStrict: the arguments that run are decoded strictly once;
// what fails is what the policy is told, and the rules still see the
// call as json.Unmarshal reads it.
func TestDecodeStrict(t *testing.T) {
	tests := []struct {
		name    string
		call    toolcall.Call
		wantErr string // in argsError; "" is none
		raw     string // Normalized.Raw
	}{
		{"ok", toolcall.Call{Tool: toolcall.Bash, Args: json.RawMessage(`{"command":"ls"}`)}, "", "ls"},
		{"unknown field", toolcall.Call{Tool: toolcall.Bash, Args: json.RawMessage(`{"command":"ls","cwd":"/"}`)}, `unknown field "cwd"`, "ls"},
		{"trailing text", toolcall.Call{Tool: toolcall.ReadFile, Args: json.RawMessage(`{"path":"a"} {"path":"b"}`)}, "after the arguments", `{"path":"a"} {"path":"b"}`},
		{"wrong type", toolcall.Call{Tool: toolcall.ReadFile, Args: json.RawMessage(`{"path":3}`)}, "cannot unmarshal number", `{"path":3}`},
		{"reserved session", toolcall.Call{Tool: toolcall.Bash, Session: "rollcage-grade", Args: json.RawMessage(`{"command":"ls"}`)}, "reserved", "ls"},
		{"generic", toolcall.Call{Tool: "web_search", Args: json.RawMessage(`{"q":"x"}`)}, "", `{"q":"x"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := decodedOf(toolcall.Prepare(tc.call))
			msg := argsError(tc.call, d)
			if (tc.wantErr == "") != (msg == "") || !strings.Contains(msg, tc.wantErr) {
				t.Errorf("argsError = %q, want one containing %q", msg, tc.wantErr)
			}
			n, _ := normalizeCall(tc.call, d, "/w", nil)
			if n.Raw != tc.raw {
				t.Errorf("Normalized.Raw = %q, want %q", n.Raw, tc.raw)
			}
			if off := normalize.Normalize(tc.call, "/w", nil); !cmp.Equal(off, n) {
				t.Errorf("the monitor's normalization differs from Normalize's:\n%s", cmp.Diff(off, n))
			}
		})
	}
}
