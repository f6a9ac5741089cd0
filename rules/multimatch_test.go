package rules

import (
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestMultiMatcher(t *testing.T) {
	tests := []struct {
		lits []string
		text string
		want []string
	}{
		{[]string{"he", "she", "his", "hers"}, "ushers", []string{"he", "she", "hers"}},
		{[]string{"abc", "bcd", "c"}, "xxabcdxx", []string{"abc", "bcd", "c"}},
		{[]string{"aab", "ab"}, "aaab", []string{"aab", "ab"}},
		{[]string{"/proc", "environ"}, "cat /pro/environ", []string{"environ"}},
		{[]string{"x", ""}, "", nil},
		{nil, "anything", nil},
	}
	for _, tc := range tests {
		m := newMultiMatcher(tc.lits)
		f := m.find(tc.text)
		var got []string
		for _, l := range tc.lits {
			if l != "" && f.has(m.bit(l)) {
				got = append(got, l)
			}
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("find(%q) in %q: got %q, want %q", tc.lits, tc.text, got, tc.want)
		}
	}
}

// TestMultiMatcherRandom compares the matcher with strings.Contains on
// random literals and texts over a small alphabet, where overlaps and
// suffix links are frequent.
func TestMultiMatcherRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abc/\n"[r.IntN(5)]
		}
		return string(b)
	}
	for range 300 {
		var lits []string
		for range 1 + r.IntN(80) {
			lits = append(lits, word(1+r.IntN(6)))
		}
		m := newMultiMatcher(lits)
		text := word(r.IntN(200))
		f := m.find(text)
		for _, l := range lits {
			if got, want := f.has(m.bit(l)), strings.Contains(text, l); got != want {
				t.Fatalf("literal %q in %q: matcher %v, strings.Contains %v", l, text, got, want)
			}
		}
	}
}

// TestKeywordTable: every literal feat.go and prefilter.go pass to has is
// in the one-pass table (one that is not is still found, by a search of
// its own, so this guards the speed, not the result).
func TestKeywordTable(t *testing.T) {
	fset := token.NewFileSet()
	n := 0
	for _, name := range []string{"feat.go", "prefilter.go"} {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(x ast.Node) bool {
			call, ok := x.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "has" {
				return true
			}
			for _, a := range call.Args {
				lit, ok := a.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				n++
				if keywords.bit(s) < 0 {
					t.Errorf("%s: has(%q): not in the keyword table; add it to keywords in feat.go", fset.Position(lit.Pos()), s)
				}
			}
			return true
		})
	}
	if n < 1 {
		t.Errorf("found %d literal keywords in has calls; the test no longer sees them", n)
	}
}

// BenchmarkMultiMatcher: the keyword table over code, the policy's own
// source (about the size of a long script in a call).
func BenchmarkMultiMatcher(b *testing.B) {
	var text strings.Builder
	files, err := filepath.Glob(filepath.Join("policy", "*.rego"))
	if err != nil || len(files) == 0 {
		b.Fatalf("policy sources: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		text.Write(src)
	}
	s := strings.ToLower(text.String())
	f := make(found, keywords.words)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		clear(f)
		keywords.findInto(s, f, 0)
	}
}
