package rules

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
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
	s := strings.ToLower(policyText(b))
	f := make(found, keywords.words)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		clear(f)
		keywords.findInto(s, f, 0)
	}
}

// BenchmarkGateMatcher: the default policy's gate literals (about 600,
// single characters among them, so half the bytes end a literal) over the
// policy's own sources as they are written, mixed case: lowercased first
// and then matched (how the gates read a haystack that is not ASCII), or
// matched through the folding class table (an ASCII one).
func BenchmarkGateMatcher(b *testing.B) {
	e, err := New(context.Background(), Config{})
	if err != nil {
		b.Fatal(err)
	}
	m := e.pre.static.match
	text := policyText(b)
	f := make(found, m.words)
	b.Run("lower", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			clear(f)
			m.findInto(foldASCII(text), f, 0)
		}
	})
	b.Run("fold", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			clear(f)
			p := m.newPass()
			p.feed(text, &m.fold)
			p.into(f, 0)
		}
	})
	b.Run("folded", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			clear(f)
			p := m.newPass()
			p.feedFolded(text)
			p.into(f, 0)
		}
	})
}

// policyText is the default policy's Rego sources, one after the other.
func policyText(tb testing.TB) string {
	tb.Helper()
	var text strings.Builder
	files, err := filepath.Glob(filepath.Join("policy", "*.rego"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("policy sources: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		text.Write(src)
	}
	return text.String()
}

// TestMultiMatcherFold holds a pass that reads texts in pieces through
// the folding (feedFolded) to the matcher over foldASCII of the texts
// joined, on random texts of mixed case, multi-byte runes that lowercase
// to other lengths or to ASCII (the Kelvin sign, İ, Ⱥ), the long s, and
// bytes that are not UTF-8.
func TestMultiMatcherFold(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "b", "A", "B", "k", "K", "s", "S", "\u212a", "ſ", "İ", "i", "\u0307", "Ⱥ", "ⱥ", "é", "É", "\xff", "\xe2\x82", "\ufffd", "\n", " "}
	word := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	for range 2000 {
		var lits []string
		for range 1 + r.IntN(8) {
			lits = append(lits, foldASCII(word(1+r.IntN(3))))
		}
		lits = append(lits, word(2)) // mixed case: may never match, as in lowercased text
		m := newMultiMatcher(lits)
		var pieces []string
		for range r.IntN(4) {
			pieces = append(pieces, word(r.IntN(12)))
		}
		want := m.find(foldASCII(strings.Join(pieces, "")))
		got := make(found, m.words)
		p := m.newPass()
		for _, s := range pieces {
			p.feedFolded(s)
		}
		p.into(got, 0)
		if !slices.Equal(got, want) {
			t.Fatalf("literals %q in %q: folded pass found %b, foldASCII then find %b", lits, pieces, got, want)
		}
	}
}
