package rules

import (
	"fmt"
	"strings"
	"testing"
)

// indexAny is the first position at or after from where one of lits
// occurs in text, or -1, one strings.Index per literal: what a litSet
// finds in one pass.
func indexAny(text string, lits []string, from int) int {
	best := -1
	if from > len(text) {
		return best
	}
	for _, l := range lits {
		if j := strings.Index(text[from:], l); j >= 0 && (best < 0 || from+j < best) {
			best = from + j
		}
	}
	return best
}

// TestLitSet holds litSet.index to indexAny from every position of each
// text: literals sharing their first byte (IndexByte) or not (the masks,
// in each of the four positions read at once and in the tail), one-byte
// literals at the text's last byte, literals longer than what is left,
// prefixes of one another, bytes past ASCII and a full set of 64.
func TestLitSet(t *testing.T) {
	var all []string
	for i := range 64 {
		all = append(all, fmt.Sprintf("%c%c", 'a'+i%26, '0'+i/26))
	}
	tests := []struct {
		lits []string
		text string
	}{
		{[]string{"/tmp/", "/opt/", "/o"}, "a/b/opt/x/tmp/ /op"},
		{[]string{"cheat", "hard", "x"}, "0cheat12hard456x7890123cheat0123hard01234x"},
		{[]string{"cheat", "hard", "x"}, "no match in here at all, not one"},
		{[]string{"[", "?", "*"}, "ab?cd[ef*"},
		{[]string{"abc", "xy"}, "zzxyzzab"},
		{[]string{"te", "test", "tests", "st"}, "a test of tests: tte ttest"},
		{[]string{"\n\t", "\n ", "\ni"}, "x\n\n import\n\tos\ni"},
		{[]string{"é", "ab"}, "\xffxé\xc3ab"},
		{[]string{"p"}, "pppp"},
		{[]string{"ab"}, ""},
		{all, "the quick brown fox jumps over the lazy dog: a1 z2 b0 m1 l2"},
	}
	for _, tc := range tests {
		s := newLitSet(tc.lits)
		for from := 0; from <= len(tc.text)+1; from++ {
			if got, want := s.index(tc.text, from), indexAny(tc.text, tc.lits, from); got != want {
				t.Errorf("%q in %q from %d: got %d, want %d", tc.lits, tc.text, from, got, want)
			}
		}
	}
}

// FuzzLitSet holds litSet.index to indexAny for literals (the fuzz
// string split at '|') over a text from a position.
func FuzzLitSet(f *testing.F) {
	f.Add("cheat|hard|x", "0cheat12hard456x7890123cheat", uint8(0))
	f.Add("/tmp/|/opt/", "a/b/opt/x/tmp/", uint8(3))
	f.Add("[|?", "ab?cd[", uint8(5))
	f.Add("\n\t|\n |\ni", "x\n\n import\n\tos\ni", uint8(1))
	f.Fuzz(func(t *testing.T, lits, text string, from uint8) {
		var ls []string
		for _, l := range strings.Split(lits, "|") {
			if l != "" && len(ls) < 64 {
				ls = append(ls, l)
			}
		}
		if len(ls) == 0 || int(from) > len(text) {
			return
		}
		if got, want := newLitSet(ls).index(text, int(from)), indexAny(text, ls, int(from)); got != want {
			t.Errorf("%q in %q from %d: got %d, want %d", ls, text, from, got, want)
		}
	})
}

// TestLitGroups: the groups and single literals of every accelerated
// pattern of the policy are its literals, and each group's candidates are
// the least of its literals' own (lit.candidate), over the policy's and
// its tests' strings, the corpus lines and texts of the patterns'
// literals (at a line's start, after multi-byte runes): each candidate in
// turn as each finds them, and from every position of texts under 100
// bytes.
func TestLitGroups(t *testing.T) {
	pats, texts := policyStrings(t)
	texts = append(texts, corpusTexts(t)...)
	var fast []*fastRe
	for _, p := range pats {
		if f := fastRegexp(p); f != nil {
			fast = append(fast, f)
		}
	}
	for _, f := range fast {
		for _, l := range f.lits {
			texts = append(texts, l.s, "\n"+l.s, "é"+l.s+" €€"+l.s+"\n"+l.s)
		}
	}
	// same reports whether group k of f finds the candidate its
	// literals do from from; next is that candidate
	same := func(f *fastRe, k int, low string, from int) (next int, ok bool) {
		t.Helper()
		g := f.groups[k]
		want := -1
		for _, l := range f.lits {
			member := l.at == litLineStart && g.line || l.at == litAnywhere && l.s != "" && l.back == g.back && !g.line
			if c := l.candidate(low, from); member && c >= 0 && (want < 0 || c < want) {
				want = c
			}
		}
		if got := g.candidate(low, from); got != want {
			t.Errorf("%q, group %d of %d, in %q from %d: got %d, want %d", f.re, k, len(f.groups), clipTest(low), from, got, want)
			return want, false
		}
		return want, true
	}
	for _, f := range fast {
		covered := len(f.single)
		for _, g := range f.groups {
			covered += len(g.set.lits)
		}
		if covered != len(f.lits) {
			t.Errorf("%q: groups and singles hold %d literals of %d", f.re, covered, len(f.lits))
		}
		stride := 1
		if raceEnabled {
			stride = 16 // as in TestFastRegexEquivalence
		}
		for j := 0; j < len(texts); j += stride {
			low := lowered(texts[j])
			for k := range f.groups {
				c, ok := same(f, k, low, 0)
				for ok && c >= 0 {
					c, ok = same(f, k, low, c+1)
				}
				for from := 1; from <= len(low) && len(low) < 100; from++ {
					same(f, k, low, from)
				}
			}
		}
	}
}
