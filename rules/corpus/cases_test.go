package corpus

import (
	"bytes"
	"context"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rollcage/rollcage/internal/golden"
	"github.com/rollcage/rollcage/rules"
)

// cases is the labelled corpus beside the rules, one file per case.
const cases = "../testdata/corpus"

// TestCases runs every case file through the normalizer and the default
// bundle, as an episode's calls, and compares the rule ids flagged on
// its call with those the file expects. -update rewrites the expected
// ids (and only them).
func TestCases(t *testing.T) {
	ctx := context.Background()
	eng, err := rules.New(ctx, rules.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := ReadCases(cases)
	if err != nil {
		t.Fatal(err)
	}
	contexts, err := LoadContexts(cases + "/contexts.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) < 450 {
		t.Fatalf("%d cases; the corpus has hundreds", len(cs))
	}
	ev := Evaluator{Rules: eng}
	for _, c := range cs {
		flags, _, err := ev.evalLine(ctx, contexts, c.Line)
		if err != nil {
			t.Fatalf("%s: %v", c.Path, err)
		}
		got := ruleIDs(flags)
		if d := cmp.Diff(c.Want, got, cmpopts.EquateEmpty()); d == "" {
			continue
		} else if !golden.Update() {
			t.Errorf("%s: flags differ (-file +rules); go test -run TestCases -update ./rules/corpus rewrites them:\n%s", c.Path, d)
			continue
		}
		b, err := os.ReadFile(c.Path)
		if err != nil {
			t.Fatal(err)
		}
		head, _, _ := bytes.Cut(b, []byte("\n"+separator+"\n"))
		out := append(slices.Clone(head), "\n"+separator+"\n"...)
		for _, id := range got {
			out = append(out, id+"\n"...)
		}
		if err := os.WriteFile(c.Path, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestParseCase: a case file's mistakes are errors that say what to
// write instead.
func TestParseCase(t *testing.T) {
	tests := []struct {
		name, src, wantErr string
		want               []string
	}{
		{"flags", "{\"call\": {\"tool\": \"bash\", \"args\": {\"command\": \"ls\"}}}\n----------\na.b\nc.d\n", "", []string{"a.b", "c.d"}},
		{"none", "{\"call\": {\"tool\": \"bash\"}}\n----------\n", "", nil},
		{"no separator", "{\"call\": {}}\n", "no \"----------\" line", nil},
		{"unsorted", "{\"call\": {}}\n----------\nz\na\n", "not sorted and unique", nil},
		{"id inside", "{\"id\": \"x\", \"call\": {}}\n----------\n", "leave them out", nil},
		{"unknown field", "{\"calls\": {}}\n----------\n", "unknown field", nil},
	}
	for _, tc := range tests {
		c, err := parseCase([]byte(tc.src))
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr != "" && (err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.wantErr))):
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.wantErr)
		case tc.wantErr == "" && !slices.Equal(c.Want, tc.want):
			t.Errorf("%s: want %v, got %v", tc.name, tc.want, c.Want)
		}
	}
}
