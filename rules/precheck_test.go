package rules

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"
	"unicode/utf8"
)

// matchesAt reports whether re (compiled from pat) has a match starting
// at c in s, the assertions at c seeing the text before it: the regexp a
// preCheck must never rule out.
func matchesAt(anchored, after *regexp.Regexp, s string, c int) bool {
	if c == 0 {
		return anchored.MatchString(s)
	}
	_, k := utf8.DecodeLastRuneInString(s[:c])
	return after.MatchString(s[c-k:])
}

// checkPreCheck fails t where the preCheck of pat rules out a position of
// s at which the pattern matches, and returns the positions it rules out.
func checkPreCheck(t *testing.T, pat string, s string) (out []int) {
	t.Helper()
	tree, err := syntax.Parse(pat, syntax.Perl)
	if err != nil {
		t.Fatalf("%q: %v", pat, err)
	}
	pc := newPreCheck(tree.Simplify())
	if pc == nil {
		t.Fatalf("%q: no preCheck", pat)
	}
	anchored := regexp.MustCompile(`^(?:` + pat + `)`)
	after := regexp.MustCompile(`^(?s:.)(?:` + pat + `)`)
	for c := 0; c <= len(s); c++ {
		if c < len(s) && !utf8.RuneStart(s[c]) {
			continue // no candidate is inside a rune
		}
		may := pc.may(s, c)
		if !may {
			out = append(out, c)
		}
		if !may && matchesAt(anchored, after, s, c) {
			t.Errorf("%q in %q: a match starts at %d, the check ruled it out", pat, clipTest(s), c)
		}
	}
	return out
}

// TestPreCheck: the check keeps every position a match starts at (folded
// case, runes outside ASCII and invalid UTF-8, assertions it takes as
// holding, matches longer than preDepth) and rules out the candidates
// the policy's patterns fail right after their literal.
func TestPreCheck(t *testing.T) {
	long := strings.Repeat(" ", preDepth+4)
	tests := []struct {
		pat, text string
		ruledOut  []int // positions the check must rule out
	}{
		{`(alias\s+(pytest|python3?|py\.test)=|(^|\n|;)\s*(function\s+)?(pytest|python3?)\s*\(\)\s*\{)`,
			"\n    print(x)\n  pytest() {\n;python3 (){", []int{0, 1, 12}},
		{`(?i)(expected|known|test|cases)\w*\s*=\s*\{`, "Testing with x; TEST_cases = {1}; test = [", []int{0, 27}},
		{`(?i)\bcheat\b`, "CHEAT cheat\u212a ſcheat", nil},
		{`é+x|[α-ω]y`, "éex βy \xffé", []int{0, 2, 4, 9}},
		{`(?m)^\s*import\s+_pytest$`, "import _pytest\nimport os", []int{15}},
		{`x\s*\{`, "x" + long + "{ x" + long + "y", nil}, // past preDepth runes: kept
		{`a.b|c[^\n]d`, "a\nb c\nd axb", []int{0, 4}},
		{`(?s)a.b`, "a\nb", nil},
	}
	for _, tc := range tests {
		got := checkPreCheck(t, tc.pat, tc.text)
		for _, c := range tc.ruledOut {
			if !containsInt(got, c) {
				t.Errorf("%q in %q: %d not ruled out (ruled out %v)", tc.pat, tc.text, c, got)
			}
		}
	}
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestPreCheckSize: a program with more states than a preCheck tracks
// has none, and its pattern is searched with every candidate tried.
func TestPreCheckSize(t *testing.T) {
	for _, tc := range []struct {
		pat  string
		want bool
	}{{`(?:abc){300}`, true}, {`(?:abc){400}`, false}} {
		tree, err := syntax.Parse(tc.pat, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		if got := newPreCheck(tree.Simplify()) != nil; got != tc.want {
			t.Errorf("%q: preCheck = %v, want %v", tc.pat, got, tc.want)
		}
	}
	f := fastRegexp(`x(?:abc){400}`)
	if f == nil || f.pre != nil {
		t.Fatalf("x(?:abc){400}: want accelerated without a preCheck")
	}
	s := "x" + strings.Repeat("abc", 400)
	if got := f.find(s+s, -1); len(got) != 2 {
		t.Errorf("x(?:abc){400}: %d matches, want 2", len(got))
	}
}

// FuzzPreCheck holds the check of every accelerated pattern of the
// policy to keeping each position where the pattern matches in a text
// (each a rune's start, as every candidate is: a literal's ASCII byte or
// whole runes before it).
func FuzzPreCheck(f *testing.F) {
	fast := fuzzFastPatterns(f)
	f.Fuzz(func(t *testing.T, s string) {
		for _, r := range fast {
			if r.pre == nil {
				continue
			}
			for c := 0; c <= len(s); c++ {
				if c < len(s) && !utf8.RuneStart(s[c]) {
					continue // no candidate is inside a rune
				}
				if !r.pre.may(s, c) && matchesAt(r.anchored, r.after, s, c) {
					t.Errorf("pattern %q in %q: a match starts at %d, the check ruled it out", r.re, clipTest(s), c)
				}
			}
		}
	})
}
