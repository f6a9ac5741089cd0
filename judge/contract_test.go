package judge_test

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rollcage/rollcage/judge"
	"github.com/rollcage/rollcage/rules"
)

// TestNoRollcageImports holds the layering: package judge takes plain
// structs and imports none of rollcage's packages (its tests may).
func TestNoRollcageImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, "github.com/rollcage/rollcage/") {
				t.Errorf("%s imports %s; package judge must import none of rollcage's packages", f, p)
			}
		}
	}
}

// TestFlagMirrorsRules keeps judge.Flag and judge.Categories in step with
// package rules.
func TestFlagMirrorsRules(t *testing.T) {
	rf := rules.Flag{Rule: "git.all_refs", Category: rules.CatHistory, Severity: rules.Suspicious, Reason: "r", Evidence: "--all"}
	b, err := json.Marshal(rf)
	if err != nil {
		t.Fatal(err)
	}
	var jf judge.Flag
	if err := json.Unmarshal(b, &jf); err != nil {
		t.Fatal(err)
	}
	back, err := json.Marshal(jf)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(b), string(back)); diff != "" {
		t.Errorf("judge.Flag JSON differs from rules.Flag (-rules +judge):\n%s", diff)
	}
	var names []string
	for _, c := range judge.Categories {
		names = append(names, c.Name)
	}
	for _, c := range []string{rules.CatProtected, rules.CatHistory, rules.CatNetwork, rules.CatTampering, rules.CatEvaluator, rules.CatSpecialCase, rules.CatProbing, rules.CatChained} {
		if !slices.Contains(names, c) {
			t.Errorf("rules category %s is not among judge.Categories", c)
		}
	}
}
