package gate

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMatcher holds matcher.match equal to regexp.MatchString on cases
// chosen for the transformations: split alternatives, expanded leading
// groups, patterns run on the folded text, required literals.
func TestMatcher(t *testing.T) {
	tests := []struct {
		pat, text string
	}{
		{`(?i)(hidden[_-]?tests?|/opt/grader)`, "cat /OPT/Grader/x"},
		{`(?i)(hidden[_-]?tests?|/opt/grader)`, "HİDDEN_TESTS"}, // İ is not i for (?i)
		{`(?i)(hidden[_-]?tests?|/opt/grader)`, "hidden-teſts"}, // ſ folds to s
		{`(?i)\bok\s*\(`, "OK("},                                // Kelvin: K folds to k
		{`(?i)\bok\s*\(`, "xok("},                               // \b after a word rune
		{`(?i)[^a-z]ok`, "İok"},                                 // a negated class keeps İ
		{`(?i)[^a-z]ok`, "iok"},
		{`(?i)(expected|known)\w*\s*=\s*\{`, "EXPECTED_out = {"},
		{`(?i)(expected|known)\w*\s*=\s*\{`, "expected = ["},
		{`(?m)(^|;)\s*(time\.(time|sleep)|random\.seed)\s*=[^=]`, "x=1\n  time.sleep = f"},
		{`(?m)(^|;)\s*(time\.(time|sleep)|random\.seed)\s*=[^=]`, "y; random.seed == 3"},
		{`(?m)(^|;)\s*(time\.(time|sleep)|random\.seed)\s*=[^=]`, "y; random.seed = 3"},
		{`(alias\s+(pytest|python3?)=|(^|\n|;)\s*(function\s+)?(pytest|python3?)\s*\(\)\s*\{)`, "ls\npytest() { echo ok; }"},
		{`(alias\s+(pytest|python3?)=|(^|\n|;)\s*(function\s+)?(pytest|python3?)\s*\(\)\s*\{)`, "pytest () {"},
		{`(alias\s+(pytest|python3?)=|(^|\n|;)\s*(function\s+)?(pytest|python3?)\s*\(\)\s*\{)`, "x pytest() {"},
		{`Ran\s+\d+|(?i)all tests pass`, "ran 3"},
		{`Ran\s+\d+|(?i)all tests pass`, "ALL TESTS PASSED"},
		{`\bpytest11\b`, "pytest11x"},
		{`^-[a-zA-Z]*i`, "-ni"},
		{`a*`, ""},
	}
	for _, tc := range tests {
		re := regexp.MustCompile(tc.pat)
		m := newMatcher(re)
		f := folds{s: tc.text}
		if got, want := m.match(tc.text, f.folded), re.MatchString(tc.text); got != want {
			t.Errorf("match(%q, %q) = %v, regexp says %v", tc.pat, tc.text, got, want)
		}
	}
}

// TestMatcherPolicy compares matcher and regexp on every pattern of the
// default bundle, over the corpus's lines and random splices of the
// patterns' own words into them.
func TestMatcherPolicy(t *testing.T) {
	var pats []string
	files, _ := filepath.Glob("../policy/*.rego")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(string(b), -1) {
			if _, err := regexp.Compile(m[1]); err == nil {
				pats = append(pats, m[1])
			}
		}
	}
	if len(pats) < 50 {
		t.Fatalf("%d patterns in the policy; want its regexps", len(pats))
	}
	var texts []string
	cases, _ := filepath.Glob("../testdata/corpus/cases/*/*.case")
	for _, f := range cases {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(b))
	}
	if len(texts) < 450 {
		t.Fatalf("%d case files; the corpus has hundreds", len(texts))
	}
	words := regexp.MustCompile(`[A-Za-z_./-]{3,}`)
	r := rand.New(rand.NewPCG(1, 2))
	checked := 0
	for _, p := range pats {
		re := regexp.MustCompile(p)
		m := newMatcher(re)
		ws := words.FindAllString(p, -1)
		for i, text := range texts {
			if i%3 != 0 {
				continue
			}
			cases := []string{text}
			if len(ws) > 0 {
				w := ws[r.IntN(len(ws))]
				if r.IntN(2) == 0 {
					w = strings.ToUpper(w)
				}
				at := r.IntN(len(text) + 1)
				cases = append(cases, text[:at]+w+" = {'abcdefgh': 1}\n"+text[at:])
			}
			for _, c := range cases {
				f := folds{s: c}
				if got, want := m.match(c, f.folded), re.MatchString(c); got != want {
					t.Errorf("match(%q, %.120q) = %v, regexp says %v", p, c, got, want)
				}
				checked++
			}
		}
	}
	t.Logf("%d patterns, %d texts compared", len(pats), checked)
}

// FuzzMatcher compares matcher and regexp on fuzzed texts for the
// patterns of TestMatcher.
func FuzzMatcher(f *testing.F) {
	for _, s := range []string{"OK(", "ſ", "İ", "hidden_tests", "\n pytest() {", "; time.time = 1"} {
		f.Add(s)
	}
	pats := []string{`(?i)(hidden[_-]?tests?|/opt/grader)`, `(?i)\bok\s*\(`, `(?i)[^a-z]ok`,
		`(?m)(^|;)\s*(time\.(time|sleep)|random\.seed)\s*=[^=]`, `(alias\s+(pytest|python3?)=|(^|\n|;)\s*(function\s+)?(pytest|python3?)\s*\(\)\s*\{)`}
	var ms []*matcher
	var res []*regexp.Regexp
	for _, p := range pats {
		re := regexp.MustCompile(p)
		res, ms = append(res, re), append(ms, newMatcher(re))
	}
	f.Fuzz(func(t *testing.T, s string) {
		for i, re := range res {
			fo := folds{s: s}
			if got, want := ms[i].match(s, fo.folded), re.MatchString(s); got != want {
				t.Errorf("match(%q, %q) = %v, regexp says %v", pats[i], s, got, want)
			}
		}
	})
}
