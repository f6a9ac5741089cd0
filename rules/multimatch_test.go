package rules

import (
	"context"
	"fmt"
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

// tableWidths are the widths of transition table a matcher may get, as
// maxStates16 values that make them; each test of the automaton runs on
// both.
var tableWidths = []struct {
	name      string
	maxStates int
	wide      bool // next32, not next16
}{{"16-bit", 1 << 16, false}, {"32-bit", 0, true}}

// withWidth runs fn with matchers of the given width; built ones check
// that they got it.
func withWidth(t *testing.T, maxStates int, fn func()) {
	t.Helper()
	old := maxStates16
	maxStates16 = maxStates
	defer func() { maxStates16 = old }()
	fn()
}

// checkWidth fails when m's table is not of the width wanted.
func checkWidth(t *testing.T, m *multiMatcher, wide bool) {
	t.Helper()
	if (m.next32 != nil) != wide || (m.next16 != nil) == wide {
		t.Fatalf("matcher of %d states: next16 %v, next32 %v; want the 32-bit one %v", len(m.out), m.next16 != nil, m.next32 != nil, wide)
	}
}

// TestMultiMatcherRandom compares the matcher with strings.Contains on
// random literals and texts over a small alphabet, where overlaps and
// suffix links are frequent, with tables of either width.
func TestMultiMatcherRandom(t *testing.T) {
	for _, w := range tableWidths {
		t.Run(w.name, func(t *testing.T) {
			withWidth(t, w.maxStates, func() {
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
					checkWidth(t, m, w.wide)
					text := word(r.IntN(200))
					f := m.find(text)
					for _, l := range lits {
						if got, want := f.has(m.bit(l)), strings.Contains(text, l); got != want {
							t.Fatalf("literal %q in %q: matcher %v, strings.Contains %v", l, text, got, want)
						}
					}
				}
			})
		})
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
// and then matched, matched through the folding class table (as if ASCII),
// or read through the folding (feedFolded). hay is the gates' whole read
// of a call (gateSet.find), with an episode's gates (the policy's matcher
// and one of the episode's literals), of the sources' lines as the
// strings of a haystack: a call's are short, some 46 bytes on average in
// the real corpus.
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
	b.Run("hay", func(b *testing.B) {
		gs := e.NewEpisode(b.Context(), demoTask, demoSandbox).gateSet()
		if gs.extra == nil {
			b.Fatal("the demo episode's gates have no literals of their own")
		}
		hay := strings.Split(text, "\n")
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			gs.find(hay)
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

// foldAlphabet is what the folding tests' random texts are made of:
// mixed case, multi-byte runes that lowercase to other lengths or to
// ASCII (the Kelvin sign, İ, Ⱥ), the long s, and bytes that are not
// UTF-8.
var foldAlphabet = []string{"a", "b", "A", "B", "k", "K", "s", "S", "\u212a", "ſ", "İ", "i", "\u0307", "Ⱥ", "ⱥ", "é", "É", "\xff", "\xe2\x82", "\ufffd", "\n", " "}

// foldWord is a random text of n pieces of foldAlphabet.
func foldWord(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(foldAlphabet[r.IntN(len(foldAlphabet))])
	}
	return b.String()
}

// foldLits are random literals as the gates derive them (folded), and
// one in mixed case, which may never match, as in lowercased text.
func foldLits(r *rand.Rand, n int) []string {
	var lits []string
	for range n {
		lits = append(lits, foldASCII(foldWord(r, 1+r.IntN(3))))
	}
	return append(lits, foldWord(r, 2))
}

// TestMultiMatcherFold holds a pass that reads texts in pieces through
// the folding (feedFolded) to the matcher over foldASCII of the texts
// joined, on random texts of foldAlphabet, with tables of either width.
func TestMultiMatcherFold(t *testing.T) {
	for _, w := range tableWidths {
		t.Run(w.name, func(t *testing.T) {
			withWidth(t, w.maxStates, func() {
				r := rand.New(rand.NewPCG(3, 4))
				for range 2000 {
					m := newMultiMatcher(foldLits(r, 1+r.IntN(8)))
					checkWidth(t, m, w.wide)
					var pieces []string
					for range r.IntN(4) {
						pieces = append(pieces, foldWord(r, r.IntN(12)))
					}
					want := m.find(foldASCII(strings.Join(pieces, "")))
					got := make(found, m.words)
					p := m.newPass()
					for _, s := range pieces {
						p.feedFolded(s)
					}
					p.into(got, 0)
					if !slices.Equal(got, want) {
						t.Fatalf("literals %q in %q: folded pass found %b, foldASCII then find %b", m.lits, pieces, got, want)
					}
				}
			})
		})
	}
}

// TestGateSetFind holds gateSet.find, the policy's matcher and an
// episode's read in one loop (feedHayPair) or, for 32-bit tables, one
// after the other, to each matcher over foldASCII of the haystack made
// (every string followed by a newline), the episode's bits after the
// policy's; and with no episode matcher, to the policy's alone.
func TestGateSetFind(t *testing.T) {
	for _, w := range tableWidths {
		t.Run(w.name, func(t *testing.T) {
			withWidth(t, w.maxStates, func() {
				r := rand.New(rand.NewPCG(5, 6))
				skipped, kept := 0, 0 // haystacks with repeats find skips, or reads for a literal's inner newline
				defer func() {
					if skipped == 0 || kept == 0 {
						t.Errorf("haystacks with repeats: %d skipped, %d read again; want some of each", skipped, kept)
					}
				}()
				for i := range 1000 {
					gs := &gateSet{match: newMultiMatcher(foldLits(r, 1+r.IntN(12)))}
					gs.regexBase = len(gs.match.lits) // no regexp clauses
					if i%4 != 0 {
						gs.extra = newMultiMatcher(foldLits(r, 1+r.IntN(6)))
						gs.regexBase += len(gs.extra.lits)
					}
					var hay []string
					var made strings.Builder
					for range r.IntN(6) {
						s := foldWord(r, r.IntN(16))
						if len(hay) > 0 && r.IntN(3) == 0 {
							s = hay[r.IntN(len(hay))] // a repeat, skipped when long
						}
						hay = append(hay, s)
						made.WriteString(s + "\n")
					}
					if repeats(hay) != 0 {
						if gs.match.nlLast && (gs.extra == nil || gs.extra.nlLast) {
							skipped++
						} else {
							kept++
						}
					}
					text := foldASCII(made.String())
					n := len(gs.match.lits)
					if gs.extra != nil {
						n += len(gs.extra.lits)
					}
					want := make(found, (n+63)/64)
					gs.match.findInto(text, want, 0)
					if gs.extra != nil {
						checkWidth(t, gs.extra, w.wide)
						gs.extra.findInto(text, want, len(gs.match.lits))
					}
					if got := gs.find(hay); !slices.Equal(got, want) {
						t.Fatalf("literals %q and %q in %q: find %b, foldASCII then find %b", gs.match.lits, gs.bitsOf(gs.extra), hay, got, want)
					}
				}
			})
		})
	}
}

// TestFeedHaySkip: the reads of a haystack pass over the strings skip
// marks, one matcher at a time and two in one loop.
func TestFeedHaySkip(t *testing.T) {
	hay := []string{"cat a.py", "python -c 'import os'", "ls"}
	tests := []struct {
		skip uint64
		want []string
	}{{0, []string{"cat", "os", "ls"}}, {1 << 1, []string{"cat", "ls"}}, {1<<0 | 1<<2, []string{"os"}}}
	for _, tc := range tests {
		a, b := newMultiMatcher([]string{"cat", "os"}), newMultiMatcher([]string{"ls"})
		for _, pair := range []bool{false, true} {
			p, q := a.newPass(), b.newPass()
			if !pair {
				p.feedHay(hay, tc.skip)
				q.feedHay(hay, tc.skip)
			} else if !feedHayPair(&p, &q, hay, tc.skip) {
				t.Fatal("feedHayPair: 16-bit matchers not read")
			}
			f := make(found, 1)
			p.into(f, 0)
			q.into(f, len(a.lits))
			var got []string
			for i, l := range slices.Concat(a.lits, b.lits) {
				if f.has(i) {
					got = append(got, l)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("skip %b, in one loop %v: found %q, want %q", tc.skip, pair, got, tc.want)
			}
		}
	}
}

// TestRepeats: the strings of 16 bytes or more that an earlier one
// equals are marked, shorter ones not, nor those past the 64th string, nor
// the repeats of a long string after the 16th.
func TestRepeats(t *testing.T) {
	long, other := strings.Repeat("x", 16), "import os; print(os.environ)"
	distinct := func(n int) []string {
		var l []string
		for i := range n {
			l = append(l, fmt.Sprintf("%016d", i))
		}
		return l
	}
	tests := []struct {
		name string
		hay  []string
		want uint64
	}{
		{"none", nil, 0},
		{"short", []string{"ls", "ls", "-la"}, 0},
		{"15 bytes", []string{long[:15], long[:15]}, 0},
		{"python -c", []string{other, "python", "-c", other}, 1 << 3},
		{"several", []string{long, other, long, "a", other, long}, 1<<2 | 1<<4 | 1<<5},
		{"past the 64th", append(append([]string{long}, distinct(62)...), long, long), 1 << 63},
		{"past 16 long ones", append(distinct(16), "a", distinct(17)[16], distinct(1)[0]), 1 << 18},
	}
	for _, tc := range tests {
		if got := repeats(tc.hay); got != tc.want {
			t.Errorf("%s: repeats(%q) = %b, want %b", tc.name, tc.hay, got, tc.want)
		}
	}
	// the default policy's literals let find skip repeats (this guards
	// the speed, not the result)
	e := newEngine(t, Config{})
	for _, gs := range []*gateSet{e.pre.static, e.NewEpisode(t.Context(), demoTask, demoSandbox).gateSet()} {
		for _, m := range []*multiMatcher{gs.match, gs.extra} {
			if m != nil && !m.nlLast {
				t.Errorf("a default gate matcher has a literal with a newline before its end: find reads repeats again")
			}
		}
	}
}

// bitsOf is m's literals, none for nil.
func (gs *gateSet) bitsOf(m *multiMatcher) []string {
	if m == nil {
		return nil
	}
	return m.lits
}
