package rules

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/rollcage/rollcage/toolcall"
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
	// a normalized call: written out (normalizedValue) and by reflection
	n := toolcall.Normalized{Tool: "bash", Raw: "cd /workspace && grep -rn wrap textkit | head -5", Cwd: "/workspace",
		Commands: []toolcall.Command{{Name: "cd", Argv: []string{"cd", "/workspace"}}, {Name: "grep", Argv: []string{"grep", "-rn", "wrap", "textkit"}},
			{Name: "head", Argv: []string{"head", "-5"}, Via: "pipe"}},
		Reads: []string{"/workspace/textkit"}, Lists: []string{"/workspace/textkit"}}
	b.Run("normalized", func(b *testing.B) {
		for b.Loop() {
			normalizedValue(&n)
		}
	})
	b.Run("normalized-reflect", func(b *testing.B) {
		for b.Loop() {
			if _, err := fastValue(reflect.ValueOf(n)); err != nil {
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
	ep.RecordLast(nil, Shown{})
	if ep.Len() != 0 {
		t.Fatalf("RecordLast without Eval recorded %d entries", ep.Len())
	}
	call := map[string]any{"tool": "bash", "args": map[string]any{"command": "ls"}}
	norm := map[string]any{"tool": "bash", "raw": "ls", "cwd": "/workspace"}
	if _, err := ep.Eval(t.Context(), call, norm); err != nil {
		t.Fatal(err)
	}
	ep.RecordLast([]Flag{{Rule: "x", Category: CatProbing, Severity: Suspicious}}, Shown{})
	ep.RecordLast(nil, Shown{}) // the same call is not recorded twice
	if ep.Len() != 1 {
		t.Fatalf("history has %d entries, want 1", ep.Len())
	}
}

// fill sets every field of v, recursively, to a value that is not empty
// (lists of two, maps of one entry), so a conversion that leaves a field
// out differs.
func fill(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("s-" + v.Type().String())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range v.Len() {
			fill(t, v.Index(i))
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k)
		fill(t, e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, v.Field(i))
		}
	default:
		t.Fatalf("fill: a %s field; teach fill and normalizedValue its kind", v.Type())
	}
}

// TestNormalizedValueMatchesJSON: the written-out conversion of a
// normalized call gives what the JSON round trip gives, with every field
// set, with none, and with the lists that are not omitempty nil and the
// others empty but not nil.
func TestNormalizedValueMatchesJSON(t *testing.T) {
	var full toolcall.Normalized
	fill(t, reflect.ValueOf(&full).Elem())
	edge := toolcall.Normalized{Tool: "bash", Commands: []toolcall.Command{{Name: "ls"}, {Argv: []string{}}},
		Git:   []toolcall.GitOp{{Sub: "log"}, {Args: []string{}, Flags: []string{}, Refs: []string{}}},
		Reads: []string{}, Scripts: []string{""}, Env: map[string]string{}}
	two := toolcall.Normalized{Env: map[string]string{"A": "1", "B": ""}, Cwd: "/w"}
	for _, tc := range []struct {
		name string
		n    toolcall.Normalized
	}{{"full", full}, {"zero", toolcall.Normalized{}}, {"edge", edge}, {"env", two}} {
		want, err := ast.InterfaceToValue(tc.n)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range []any{tc.n, &tc.n} {
			got, err := toValue(x)
			if err != nil {
				t.Fatal(err)
			}
			if got.Compare(want) != 0 {
				t.Errorf("%s (%T):\ngot  %v\nwant %v", tc.name, x, got, want)
			}
		}
	}
}

// quickValidCases: JSON that quickValid accepts, and texts json.Valid
// rejects, which it must too.
var quickValidCases = []struct {
	text string
	want bool
}{
	{`{"command": "cat <<'EOF' > x.py\nprint(\"é\\u00e9\\/\")\nEOF"}`, true},
	{` {"path":"/w/a.py","old":"x","new":"y","n":-1.5e+3,"ok":true,"no":false,"z":null,"l":[1,[],{}]} `, true},
	{`[0, -0, 0.5, 1E9, 12e-1, "\b\f\n\r\t\"\\"]`, true},
	{"\"\xff\xfe not UTF-8\"", true}, // encoding/json reads bytes, not runes
	{``, false}, {` `, false}, {`{`, false}, {`{"a"}`, false}, {`{"a":}`, false}, {`{"a":1,}`, false},
	{`[1,]`, false}, {`[1 2]`, false}, {`{"a":1]`, false}, {`[1}`, false}, {`01`, false}, {`1.`, false},
	{`.5`, false}, {`-`, false}, {`1e`, false}, {`+1`, false}, {`tru`, false}, {`nul`, false}, {`"a`, false},
	{`"\x"`, false}, {`"\u12g4"`, false}, {`"\u123"`, false}, {"\"a\tb\"", false}, {`{} {}`, false},
	{`{1:2}`, false}, {"\ufeff{}", false}, {`'a'`, false},
	{strings.Repeat("[", 64) + strings.Repeat("]", 64), true},
}

func TestQuickValid(t *testing.T) {
	for _, tc := range quickValidCases {
		if got := quickValid([]byte(tc.text)); got != tc.want {
			t.Errorf("quickValid(%q) = %v, want %v", tc.text, got, tc.want)
		}
		if json.Valid([]byte(tc.text)) != tc.want {
			t.Errorf("json.Valid(%q) != %v: the case is wrong", tc.text, tc.want)
		}
	}
	deep := []byte(strings.Repeat("[", 1000) + strings.Repeat("]", 1000))
	if !quickValid(deep) || !json.Valid(deep) {
		t.Errorf("nesting of 1,000: quickValid and json.Valid should accept it")
	}
}

// FuzzQuickValid: quickValid and json.Valid agree (up to jsontext's
// nesting limit of 10,000 levels, which a fuzzed input does not reach).
func FuzzQuickValid(f *testing.F) {
	for _, tc := range quickValidCases {
		f.Add([]byte(tc.text))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		q, v := quickValid(b), json.Valid(b)
		if q && !v {
			t.Fatalf("quickValid accepts %q, json.Valid does not", b)
		}
		if v && !q && depth(b) <= 10000 {
			t.Fatalf("quickValid rejects %q, which json.Valid accepts", b)
		}
	})
}

// depth is the deepest nesting of brackets in b, strings aside.
func depth(b []byte) int {
	d, most, in := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && (c == '[' || c == '{'):
			d++
			most = max(most, d)
		case !in && (c == ']' || c == '}'):
			d--
		}
	}
	return most
}

// BenchmarkValidArgs: a call's arguments, a heredoc of 4 KB, checked by
// quickValid and by json.Valid.
func BenchmarkValidArgs(b *testing.B) {
	script := strings.Repeat("    assert wrap(\"a b c\", width=3) == [\"a\", \"b\", \"c\"]  # é\n", 64)
	args, err := json.Marshal(map[string]string{"command": "cat <<'EOF' > test_x.py\n" + script + "EOF"})
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range []struct {
		name  string
		valid func([]byte) bool
	}{{"quick", quickValid}, {"json", json.Valid}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(len(args)))
			for b.Loop() {
				if !v.valid(args) {
					b.Fatal("not valid")
				}
			}
		})
	}
}
