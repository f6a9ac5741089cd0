package monitor

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rollcage/rollcage/normalize"
	"github.com/rollcage/rollcage/toolcall"
)

// TestToolAliases: every alias the registry lists is mapped by
// FromForeign (the audit's and the gateway's vocabulary mapping) onto its
// tool, in any case, and a name no tool lists stays generic.
func TestToolAliases(t *testing.T) {
	seen := map[string]string{}
	for _, tl := range toolcall.Tools() {
		if !slices.Contains(tl.Aliases, tl.Name) {
			t.Errorf("%s: aliases %v lack the name itself", tl.Name, tl.Aliases)
		}
		for _, a := range tl.Aliases {
			if prev, dup := seen[a]; dup {
				t.Errorf("alias %q is both %s's and %s's", a, prev, tl.Name)
			}
			seen[a] = tl.Name
			for _, name := range []string{a, strings.ToUpper(a)} {
				if !IsForeign(name) {
					t.Errorf("IsForeign(%q) = false, want true (an alias of %s)", name, tl.Name)
				}
				if got := FromForeign(name, `{"path":"/w/x","command":"ls"}`); got.Tool != tl.Name {
					t.Errorf("FromForeign(%q) = %s, want %s", name, got.Tool, tl.Name)
				}
			}
		}
	}
	for _, a := range editorAliases {
		if !IsForeign(a) || seen[a] != "" {
			t.Errorf("editor alias %q: IsForeign %v, also the alias of %q", a, IsForeign(a), seen[a])
		}
	}
	if IsForeign("web_search") || FromForeign("web_search", `{"q":"x"}`).Tool != "web_search" {
		t.Errorf("web_search is no tool's alias and must stay generic")
	}
	for _, ft := range toolcall.ForeignTools() {
		if !IsForeign(ft.Name) || toolcall.IsTool(ft.Name) || !json.Valid(ft.Schema) {
			t.Errorf("foreign tool %s: IsForeign %v, IsTool %v, schema valid %v", ft.Name, IsForeign(ft.Name), toolcall.IsTool(ft.Name), json.Valid(ft.Schema))
		}
	}
}

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
			d := decodeCall(tc.call)
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

// TestPrepareArgs: a call built with typed arguments normalizes as its
// JSON decoded does, whether the arguments are the tool's own type (kept
// typed) or another (decoded from their JSON, as Prepare does).
func TestPrepareArgs(t *testing.T) {
	tests := []struct {
		name   string
		p      Prepared
		raw    string
		failed bool // a ParseError
	}{
		{"bash", PrepareArgs(toolcall.Bash, toolcall.BashArgs{Command: "cat /etc/hosts"}), "cat /etc/hosts", false},
		{"read_file", PrepareArgs(toolcall.ReadFile, toolcall.ReadFileArgs{Path: "a.py"}), "a.py", false},
		{"another type", PrepareArgs(toolcall.Bash, map[string]string{"command": "ls"}), "ls", false},
		{"unknown field", PrepareArgs(toolcall.Bash, toolcall.ReadFileArgs{Path: "a.py"}), "", false}, // read past, as ever
		{"not an object", PrepareArgs(toolcall.Bash, "ls"), `"ls"`, true},
		{"foreign", PrepareForeign("execute_bash", `{"command":"pwd"}`), "pwd", false},
		{"editor", PrepareEditor("create", "b.py", "x", "", ""), "b.py", false},
	}
	for _, tc := range tests {
		args, err := tc.p.Args()
		got, _ := normalize.Decoded(tc.p.Call, args, err, "/w", nil)
		if d := cmp.Diff(normalize.Normalize(tc.p.Call, "/w", nil), got); d != "" {
			t.Errorf("%s: typed arguments normalize otherwise (-decoded +typed):\n%s", tc.name, d)
		}
		if got.Raw != tc.raw || (got.ParseError != "") != tc.failed {
			t.Errorf("%s: Raw %q, ParseError %q; want Raw %q, an error %v", tc.name, got.Raw, got.ParseError, tc.raw, tc.failed)
		}
	}
}
