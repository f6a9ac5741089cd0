package rules

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Shapes like the monitor's ToolCall and Normalized (rules may not import
// monitor), plus every kind toValue handles.
type testCmd struct {
	Name string   `json:"name"`
	Argv []string `json:"argv"`
	Via  string   `json:"via,omitempty"`
}

type testLimits struct {
	N int `json:"n,omitempty"`
}

type testNorm struct {
	Tool     string            `json:"tool"`
	Raw      string            `json:"raw"`
	Unparsed bool              `json:"unparsed,omitempty"`
	Commands []testCmd         `json:"commands,omitempty"`
	Reads    []string          `json:"reads,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Args     json.RawMessage   `json:"args,omitempty"`
	Count    int               `json:"count"`
	Big      uint64            `json:"big,omitempty"`
	Ratio    float64           `json:"ratio,omitempty"`
	Ptr      *testCmd          `json:"ptr"`
	Limits   testLimits        `json:"limits,omitempty"` // a struct is never omitted
	When     time.Time         `json:"when"`             // a custom marshaler
	Any      any               `json:"any,omitempty"`
	Bytes    []byte            `json:"bytes,omitempty"`
	Skip     string            `json:"-"`
	NoTag    string
	hidden   string
}

// TestToValueMatchesJSON: the direct conversion gives exactly what the
// JSON round trip (ast.InterfaceToValue) gives.
func TestToValueMatchesJSON(t *testing.T) {
	tests := []any{
		testNorm{},
		testNorm{Tool: "bash", Raw: `cat "x y" | grep -v é`, Unparsed: true,
			Commands: []testCmd{{Name: "cat", Argv: []string{"cat", "x y"}}, {Name: "grep", Argv: []string{}, Via: "pipe"}},
			Reads:    []string{"/a", ""}, Env: map[string]string{"LD_PRELOAD": "/tmp/x.so", "": "empty"},
			Args: json.RawMessage(`{"command": "ls", "n": 1.5, "list": [1, null, true]}`), Count: -3, Big: 1 << 63,
			Ratio: 0.25, Ptr: &testCmd{Name: "p"}, Limits: testLimits{}, When: time.Unix(1700000000, 0).UTC(),
			Any: map[string]any{"k": []any{"v", 2}}, Bytes: []byte{0, 255}, Skip: "x", NoTag: "y", hidden: "z"},
		map[string]any{"call": testNorm{Tool: "read_file"}, "history": []any{testNorm{}, nil}},
		[]string(nil),
		map[string]string(nil),
	}
	for i, x := range tests {
		want, err := ast.InterfaceToValue(x)
		if err != nil {
			t.Fatal(err)
		}
		got, err := toValue(x)
		if err != nil {
			t.Fatal(err)
		}
		if got.Compare(want) != 0 {
			t.Errorf("case %d:\ngot  %v\nwant %v", i, got, want)
		}
	}
}

func BenchmarkToValue(b *testing.B) {
	x := testNorm{Tool: "bash", Raw: "grep -rn wrap textkit | head", Commands: []testCmd{{Name: "grep", Argv: []string{"grep", "-rn", "wrap", "textkit"}}, {Name: "head", Argv: []string{"head"}, Via: "pipe"}},
		Reads: []string{"/workspace/textkit"}, Args: json.RawMessage(`{"command":"grep -rn wrap textkit | head"}`)}
	b.Run("direct", func(b *testing.B) {
		for range b.N {
			if _, err := toValue(x); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		for range b.N {
			if _, err := ast.InterfaceToValue(x); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestRecordLast: RecordLast records the latest evaluated call once, with
// the flags given; without an Eval it records nothing.
func TestRecordLast(t *testing.T) {
	eng, err := New(t.Context(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	ep := eng.NewEpisode(t.Context(), map[string]any{"id": "t", "workdir": "/workspace"}, map[string]any{})
	ep.RecordLast(nil)
	if ep.Len() != 0 {
		t.Fatalf("RecordLast without Eval recorded %d entries", ep.Len())
	}
	call := map[string]any{"tool": "bash", "args": map[string]any{"command": "ls"}}
	norm := map[string]any{"tool": "bash", "raw": "ls", "cwd": "/workspace"}
	if _, err := ep.Eval(t.Context(), call, norm); err != nil {
		t.Fatal(err)
	}
	ep.RecordLast([]Flag{{Rule: "x", Category: CatProbing, Severity: Suspicious}})
	ep.RecordLast(nil) // the same call is not recorded twice
	if ep.Len() != 1 {
		t.Fatalf("history has %d entries, want 1", ep.Len())
	}
}
