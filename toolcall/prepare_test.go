package toolcall

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
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
		got, err := Check(Call{Tool: tc.tool, Args: []byte(tc.args)}, 10*time.Minute)
		var ae *ArgsError
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

// TestToolAliases: every alias the registry lists is mapped by
// FromForeign (the audit's and the gateway's vocabulary mapping) onto its
// tool, in any case, and a name no tool lists stays generic.
func TestToolAliases(t *testing.T) {
	seen := map[string]string{}
	for _, tl := range Tools() {
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
	for _, ft := range ForeignTools() {
		if !IsForeign(ft.Name) || IsTool(ft.Name) || !json.Valid(ft.Schema) {
			t.Errorf("foreign tool %s: IsForeign %v, IsTool %v, schema valid %v", ft.Name, IsForeign(ft.Name), IsTool(ft.Name), json.Valid(ft.Schema))
		}
	}
}

// TestDecodedOnce: a call's arguments are decoded once, by its tool (or
// a foreign call's mapping), however it comes: the gateway's Check and
// the built-in loop's Prepare, valid or refused; Args then reads the
// typed value (the monitor's TestTypedArgsRead holds Handle to it).
func TestDecodedOnce(t *testing.T) {
	var decodes []string
	testDecodeHook = func(tool string) { decodes = append(decodes, tool) }
	t.Cleanup(func() { testDecodeHook = nil })
	for _, tc := range []struct {
		name, tool, args string
		gateway          bool
	}{
		{"gateway bash", "bash", `{"command":"echo ok"}`, true},
		{"gateway bash, unknown field", "bash", `{"command":"echo ok","cwd":"/"}`, true},
		{"gateway foreign bash", "execute_bash", `{"command":"echo ok"}`, true},
		{"gateway foreign editor", "str_replace_editor", `{"command":"create","path":"/workspace/n.py","file_text":"x = 1\n"}`, true},
		{"gateway write_file", "write_file", `{"path":"/workspace/m.py","content":"y = 2\n"}`, true},
		{"loop bash", "bash", `{"command":"echo ok"}`, false},
		{"loop read_file, bad type", "read_file", `{"path":7}`, false},
		{"loop list_dir", "list_dir", `{"path":"/workspace"}`, false},
	} {
		decodes = nil
		call := Call{Tool: tc.tool, Args: json.RawMessage(tc.args)}
		var p Prepared
		if tc.gateway {
			p, _ = Check(call, 10*time.Minute)
		} else {
			p = Prepare(call)
		}
		for range 3 {
			p.Args()
		}
		if len(decodes) != 1 {
			t.Errorf("%s: arguments decoded %d times (%v), want once", tc.name, len(decodes), decodes)
		}
	}
}
