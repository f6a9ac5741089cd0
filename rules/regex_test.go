package rules

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	goast "go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/rollcage/rollcage/internal/realcorpus"
)

// raceEnabled: the test binary runs under the race detector (race_test.go).
var raceEnabled bool

// TestFastRegexFolds: U+017F and U+212A are the only non-ASCII runes that
// fold to an ASCII letter, the premise of usable.
func TestFastRegexFolds(t *testing.T) {
	for r := 'A'; r <= 'z'; r++ {
		if !unicode.IsLetter(r) {
			continue
		}
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f >= utf8.RuneSelf && f != 0x17F && f != 0x212A {
				t.Errorf("%q folds to %U, which usable does not exclude", r, f)
			}
		}
	}
}

// TestFastRegexPlans: the patterns that cost the most on real
// trajectories are accelerated, and patterns whose matches may start
// anywhere or be empty are not.
func TestFastRegexPlans(t *testing.T) {
	tests := []struct {
		pat  string
		fast bool
	}{
		{`(?i)(special[- ]?cas\w*\s+(for\s+)?(the\s+)?tests?|hard[- ]?cod\w*|cheat)`, true},
		{`(?i)(expected|known|test|cases|answers?|lookup|_outputs?|hardcoded)\w*\s*=\s*\{`, true},
		{`(alias\s+(pytest|python3?|py\.test)=|(^|\n|;)\s*(function\s+)?(pytest|python3?)\s*\(\)\s*\{)`, true},
		{`(?m)^\s*import\s+_pytest`, true},
		{`LD_PRELOAD|LD_AUDIT|ld\.so\.preload`, true},
		{`\b(faketime|FAKETIME)\b`, true},                                              // the boundary is checked where a match starts
		{`((pytest|unittest)\.\w+\s*=|(^|[^.\w])setattr\(\s*(pytest|unittest))`, true}, // one rune of a large class before a literal
		{`\w+_test\.py`, false},                                                        // starts with any word character
		{`[^.]\w+`, false},                                                             // one rune, then any word characters
		{`[\w./-]*(test_\w*\.py)`, false},                                              // may start with any word character
		{`x*`, false},                                                                  // may be empty
		{`(?m)^`, false},                                                               // empty
		{`.*secret`, false},                                                            // starts anywhere
		{`[`, false},                                                                   // does not compile: OPA reports it
		{`é+`, false},                                                                  // not ASCII
	}
	for _, tc := range tests {
		if got := fastRegexp(tc.pat) != nil; got != tc.fast {
			t.Errorf("fastRegexp(%q) accelerated = %v, want %v", tc.pat, got, tc.fast)
		}
	}
}

// TestFastRegexEquivalence holds the literal-anchored search equal to
// regexp's FindAllString (first match and all matches) for every pattern
// in the policy bundle that it accelerates, over the corpus lines, the
// strings of the Rego tests, texts made of each pattern's own literals
// (upper-cased, at line starts, after invalid UTF-8) and, when present, a
// sample of the real trajectories' long strings.
func TestFastRegexEquivalence(t *testing.T) {
	pats, texts := policyStrings(t)
	texts = append(texts, corpusTexts(t)...)
	texts = append(texts, realTexts(t, 300<<10)...)
	var fast []*fastRe
	var names []string
	for _, p := range pats {
		if f := fastRegexp(p); f != nil {
			fast, names = append(fast, f), append(names, p)
		}
	}
	if len(fast) < 10 {
		t.Fatalf("only %d policy patterns accelerated; the hot ones should be", len(fast))
	}
	// texts from the patterns' literals, where matches start
	var own []string
	for _, f := range fast {
		for _, l := range f.lits {
			for _, s := range []string{l.s, strings.ToUpper(l.s)} {
				own = append(own, s, "\n"+s+" x", "a"+s+s+"\n"+s+"  (){ = {'k' : 1}", "\xff"+s, s+"\u00e9 "+s)
			}
		}
	}
	texts = append(texts, own...)
	stride := 1
	if raceEnabled {
		stride = 16 // regexp under -race is ten times slower; the search has no concurrency to check
	}
	n, compared := 0, 0
	for i, f := range fast {
		for j := 0; j < len(texts); j += stride {
			s := texts[j]
			variants := []string{s}
			if len(s) < 1000 {
				variants = append(variants, strings.ToUpper(s))
			}
			for _, variant := range variants {
				if !usable(variant) {
					continue
				}
				for _, k := range []int{1, -1} {
					got, want := f.find(variant, k), f.re.FindAllString(variant, k)
					compared++
					if !slices.Equal(got, want) {
						n++
						if n <= 10 {
							t.Errorf("pattern %q, n=%d, text %q:\n got %q\nwant %q", names[i], k, clipTest(variant), got, want)
						}
					}
				}
			}
		}
	}
	if n > 0 {
		t.Errorf("%d of %d comparisons differ", n, compared)
	}
	t.Logf("%d accelerated patterns of %d, %d texts, %d comparisons", len(fast), len(pats), len(texts), compared)
}

// TestFastRegexContext: a match tried at a literal sees the text before
// it, so ^, (?m)^ and \b decide as they do in the whole text, whichever
// alternative produced the literal.
func TestFastRegexContext(t *testing.T) {
	tests := []struct{ pat, text string }{
		{`/(site-packages|dist-packages)/|^/usr(/local)?/lib/python3[\d.]*/`, "echo x > /usr/lib/python3/dist-packages/zz.pth"},
		{`/(site-packages|dist-packages)/|^/usr(/local)?/lib/python3[\d.]*/`, "/usr/lib/python3/dist-packages/zz.pth"},
		{`(?m)^import (os|sys)`, "x = 1; import os\nimport sys\n  import os"},
		{`\b(cat|CAT)\b`, "concat cat; bobcat CAT"},
		{`(^|\n|;)\s*(pytest|python3?)\s*\(\)\s*\{`, "pytest() { :; }; python3 () { :; }\n python(){ x; }"},
		{`(?i)\bspecial\b|cheat`, "especially SPECIAL cheater"},
		// the regexp sees the text up to the first byte no match contains
		// (fastRe.stop): assertions at a match's end see that byte, a text
		// without one is searched to its end
		{`cheat\b|cheat(er|s)?$`, "cheat.cheater\ncheats"},
		{`(?m)cheat(er|s)?$`, "cheat.\ncheaters\ncheat\n"},
		{`\bcheat\s*(\w+\s*)*\z`, "cheat all the tests"},
		{`\bcheat\s*(\w+\s*)*\z`, "cheat all; the tests"},
		{`(?i)\bk\w*\b`, "Kelvin,kilo é kg. k"},
		{`(?i)to\s+(satisfy|pass)\s+the\s+test`, "to pass the test.to \n satisfy\tthe  TESTS;To"},
	}
	for _, tc := range tests {
		f := fastRegexp(tc.pat)
		if f == nil {
			t.Errorf("%q: not accelerated", tc.pat)
			continue
		}
		for _, n := range []int{1, -1} {
			if got, want := f.find(tc.text, n), f.re.FindAllString(tc.text, n); !slices.Equal(got, want) {
				t.Errorf("%q in %q, n=%d: got %q, want %q", tc.pat, tc.text, n, got, want)
			}
		}
	}
}

// TestNoBuiltinReplaced: no Go file of the module registers or replaces
// an OPA builtin (topdown.RegisterBuiltinFunc, rego.RegisterBuiltin1…,
// ast.RegisterBuiltin): such a registry is process-wide, so every other
// OPA user in the process would get the replacement. A function of our
// own belongs on the query that uses it (rego.Function1…).
func TestNoBuiltinReplaced(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (n == "testdata" || n == "vendor" || n == "node_modules" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Contains(src, []byte("Register")) {
			return nil
		}
		for _, call := range opaRegistrations(t, path, src) {
			t.Errorf("%s replaces an OPA builtin for the whole process; register the function on the query (rego.Function1…)", call)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked %d Go files under %s; the module has hundreds", files, root)
	}
	// the check finds what it looks for
	bad := []byte("package x\nimport (\n\t\"github.com/open-policy-agent/opa/v1/topdown\"\n\topa \"github.com/open-policy-agent/opa/v1/rego\"\n)\n" +
		"func init() { topdown.RegisterBuiltinFunc(\"regex.match\", nil); opa.RegisterBuiltin2(nil, nil) }\n")
	if got := opaRegistrations(t, "bad.go", bad); len(got) != 2 {
		t.Errorf("opaRegistrations found %q in a file with two registrations", got)
	}
}

// opaRegistrations lists the calls in a Go file of a function named
// Register… from a package of OPA's module, as file:line name.
func opaRegistrations(t *testing.T, path string, src []byte) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	opa := map[string]bool{} // local names of OPA's packages
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if !strings.HasPrefix(p, "github.com/open-policy-agent/opa/") {
			continue
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		opa[name] = true
	}
	var out []string
	goast.Inspect(f, func(n goast.Node) bool {
		call, ok := n.(*goast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*goast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*goast.Ident); ok && opa[x.Name] && strings.HasPrefix(sel.Sel.Name, "Register") {
			out = append(out, fmt.Sprintf("%s %s.%s", fset.Position(call.Pos()), x.Name, sel.Sel.Name))
		}
		return true
	})
	return out
}

// policyStrings returns the regexps of the default bundle (the patterns
// of its regex.* calls and the rule values they name) and every string
// constant of the bundle and its Rego tests, as texts.
func policyStrings(t testing.TB) (pats, texts []string) {
	t.Helper()
	mods, _, _, err := load(policyFS, false, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	isPat := map[string]bool{}
	for _, m := range mods {
		ast.WalkTerms(m, func(x *ast.Term) bool {
			if s, ok := x.Value.(ast.String); ok && !seen[string(s)] {
				seen[string(s)] = true
				texts = append(texts, string(s))
			}
			// a call inside another term (some m in regex.find_n(…)) is
			// no expression of its own
			if c, ok := x.Value.(ast.Call); ok && len(c) > 1 && strings.HasPrefix(c[0].String(), "regex.") {
				if s, ok := c[1].Value.(ast.String); ok {
					isPat[string(s)] = true
				}
			}
			return false
		})
		ast.WalkExprs(m, func(e *ast.Expr) bool {
			if e.IsCall() && strings.HasPrefix(e.Operator().String(), "regex.") {
				if s, ok := e.Operand(0).Value.(ast.String); ok {
					isPat[string(s)] = true
				}
			}
			return false
		})
		for _, r := range m.Rules {
			if r.Head.Value != nil {
				if s, ok := r.Head.Value.Value.(ast.String); ok && strings.ContainsAny(string(s), `\(|[`) {
					isPat[string(s)] = true
				}
			}
		}
	}
	for p := range isPat {
		pats = append(pats, p)
	}
	slices.Sort(pats)
	return pats, texts
}

// corpusTexts are the lines of the shipped corpus, raw and with their
// JSON strings decoded.
func corpusTexts(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, name := range []string{"hacks.jsonl", "benign.jsonl"} {
		f, err := os.Open(filepath.Join("..", "monitor", "testdata", "corpus", name))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			out = append(out, sc.Text())
			var v any
			if json.Unmarshal(sc.Bytes(), &v) == nil {
				out = append(out, realcorpus.Strings(v, 0, false)...)
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// realTexts samples the long strings (scripts, outputs, messages) of the
// real corpus, up to budget bytes; none when it is absent.
func realTexts(t testing.TB, budget int) []string {
	t.Helper()
	files := realcorpus.Files(t)
	step := 4 // one file in four: decoding all 56 MB costs more than the comparisons
	if raceEnabled {
		step = 16
	}
	var out []string
	per := budget * step / max(len(files), 1)
	for i := 0; i < len(files); i += step {
		used := 0
		for _, s := range realcorpus.FileStrings(t, files[i], 200, false) {
			if used > per {
				break
			}
			s = clipRunes(s, 4<<10)
			out, used = append(out, s), used+len(s)
		}
	}
	return out
}

func clipRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func clipTest(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// TestRegexpSubmatch: Regexp's FindAllString and FindAllStringSubmatch
// give regexp's matches and groups, with a match's context before it
// (\b, ^), groups that did not take part, optional trailing groups,
// texts it may not search (U+212A) and patterns it does not accelerate.
func TestRegexpSubmatch(t *testing.T) {
	tests := []struct {
		pat   string
		fast  bool
		texts []string
	}{
		{`\bopen\(\s*['"]([^'"\n]+)['"]\s*(?:,\s*['"]([a-z+]+)['"])?`, true, []string{
			"x = open('a.txt'); reopen('b'); open(\"c\", 'w')", "open('a')open('b','r')", "\u212aopen('k')", ""}},
		{`\b(?:os\.remove|shutil\.rmtree)\(\s*['"]([^'"\n]+)['"]`, true, []string{
			"import os; os.remove('/tmp/x')\nshutil.rmtree(\"/w/tests\")", "pos.remove('x')", "os.remove(x)"}},
		{`'([^'\n]*)'|"([^"\n]*)"`, true, []string{`["python", 'x.py', "-q"]`, `'' ""`, "'a\nb'"}},
		{`(?i)\b(?:https?|ftp)://[^\s'"]+`, true, []string{"see HTTP://a.b/c and xhttps://d", "ftp://x'y"}},
		{`(?:^|[\s'"=(:,])(/[A-Za-z0-9_.-][^\s'"]*)`, true, []string{"/etc/passwd x=/opt/g (/a) b/c", " /x", "é/x\xff /y", "//a /b"}},
		{`(^|[^.\w])setattr\(\s*(pytest|unittest)`, true, []string{"setattr(pytest", "x.setattr(pytest; setattr( unittest", "ésetattr(pytest\xffsetattr(unittest", "_setattr(pytest"}},
		{`[^/]{2}etc/(passwd|shadow)`, true, []string{"cat /etc/passwd; ab/etc/shadow xyetc/passwd", "étc/passwd €€etc/shadow", "etc/passwd"}},
		{`(?m)^\s*import\s+(\w+)`, true, []string{"import os\n  import sys\nx import re"}},
		{`\b(?:\w+\.(?:run|call)|os\.exec\w*)\(\s*\[([^\]]*)\]`, false, []string{"sp.run(['ls', '-l']); os.execvp(['a'])"}},
	}
	for _, tc := range tests {
		r, re := MustCompileRegexp(tc.pat), regexp.MustCompile(tc.pat)
		if r.Accelerated() != tc.fast {
			t.Errorf("%q: accelerated = %v, want %v", tc.pat, r.Accelerated(), tc.fast)
		}
		for _, s := range tc.texts {
			for _, n := range []int{0, 1, 2, -1} {
				if got, want := r.FindAllStringSubmatch(s, n), re.FindAllStringSubmatch(s, n); !reflect.DeepEqual(got, want) {
					t.Errorf("%q in %q, n=%d: submatches %q, want %q", tc.pat, s, n, got, want)
				}
				if got, want := r.FindAllString(s, n), re.FindAllString(s, n); !slices.Equal(got, want) {
					t.Errorf("%q in %q, n=%d: matches %q, want %q", tc.pat, s, n, got, want)
				}
			}
		}
	}
}

// BenchmarkFastRegex runs the default bundle's accelerated patterns over
// a sample of the real corpus' long strings (skipped without it), as the
// rules run them: the first match of each, pattern after pattern on a
// text.
func BenchmarkFastRegex(b *testing.B) {
	texts, fs := fastRegexBench(b)
	b.ResetTimer()
	for range b.N {
		for _, s := range texts {
			for _, f := range fs {
				f.find(s, 1)
			}
		}
	}
}

// BenchmarkFastRegexCandidates is the candidate search of
// BenchmarkFastRegex alone: every candidate of each pattern in each
// (lowercased) text, in order, as each finds them, none tried.
func BenchmarkFastRegexCandidates(b *testing.B) {
	texts, fs := fastRegexBench(b)
	for i, s := range texts {
		texts[i] = lowered(s)
	}
	b.ResetTimer()
	for range b.N {
		for _, low := range texts {
			for _, f := range fs {
				cs := f.candidates(low)
				for c := cs.least(); c >= 0; c = cs.least() {
					cs.skip(c + 1)
				}
			}
		}
	}
}

// fastRegexBench is the texts and patterns of BenchmarkFastRegex, with
// b's bytes set to what a round searches.
func fastRegexBench(b *testing.B) ([]string, []*fastRe) {
	texts := realTexts(b, 2<<20)
	if len(texts) == 0 {
		b.Skip("no real corpus")
	}
	pats, _ := policyStrings(b)
	var fs []*fastRe
	for _, p := range pats {
		if f := fastRegexp(p); f != nil {
			fs = append(fs, f)
		}
	}
	if len(fs) == 0 {
		b.Fatal("no pattern of the bundle is accelerated")
	}
	size := 0
	for _, s := range texts {
		size += len(s)
	}
	b.SetBytes(int64(size * len(fs)))
	return texts, fs
}

// FuzzFastRegex holds the literal-anchored search equal to regexp's
// FindAllString (first match and all) for every accelerated pattern of
// the policy over a text; the seeds are texts made of the patterns' own
// literals.
func FuzzFastRegex(f *testing.F) {
	fast := fuzzFastPatterns(f)
	f.Fuzz(func(t *testing.T, s string) {
		if !usable(s) {
			return
		}
		for _, r := range fast {
			for _, n := range []int{1, -1} {
				if got, want := r.find(s, n), r.re.FindAllString(s, n); !slices.Equal(got, want) {
					t.Errorf("pattern %q, n=%d, text %q: got %q, want %q", r.re, n, clipTest(s), got, want)
				}
			}
		}
	})
}

// fuzzFastPatterns is the policy's accelerated patterns, with texts made
// of the literals of every eighth added to f's seeds.
func fuzzFastPatterns(f *testing.F) []*fastRe {
	pats, _ := policyStrings(f)
	var fast []*fastRe
	for _, p := range pats {
		if r := fastRegexp(p); r != nil {
			fast = append(fast, r)
		}
	}
	for i, r := range fast {
		if i%8 == 0 {
			l := r.lits[0].s
			f.Add("x = " + l + "\n" + strings.ToUpper(l) + " é" + l + "(){ = {'k' : 1}")
		}
	}
	return fast
}

// lowerBytes is lowerASCII one byte at a time, what it must equal.
func lowerBytes(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// TestLowerASCII: lowerASCII lowercases the ASCII letters alone, every
// byte value at every offset of the eight-byte words it reads and in the
// bytes after the last one, and returns a text without an upper-case
// letter as it is.
func TestLowerASCII(t *testing.T) {
	for _, tc := range []string{"", "a", "Z", "@[`{", "hello, world", "HELLO, WORLD", "abcdefgH", "abcdefghI", "\xc3\x89t\xc3\xa9 ÉTÉ \xff\x80Z"} {
		if got, want := lowerASCII(tc), lowerBytes(tc); got != want {
			t.Errorf("lowerASCII(%q) = %q, want %q", tc, got, want)
		}
	}
	for b := range 256 {
		for off := range 19 {
			s := strings.Repeat("x", off) + string([]byte{byte(b)}) + strings.Repeat("Q", off%3)
			if got, want := lowerASCII(s), lowerBytes(s); got != want {
				t.Errorf("lowerASCII(%q) = %q, want %q", s, got, want)
			}
		}
	}
	s := strings.Repeat("already lower, é and \xff: 0123456789\n", 4)
	if got := lowerASCII(s); unsafe.StringData(got) != unsafe.StringData(s) {
		t.Errorf("lowerASCII(%q) made a copy of a text without upper-case letters", s)
	}
}

// BenchmarkLowerASCII lowercases the real corpus' long strings
// (skipped without it), as lowered does for the candidate search.
func BenchmarkLowerASCII(b *testing.B) {
	texts := realTexts(b, 2<<20)
	if len(texts) == 0 {
		b.Skip("no real corpus")
	}
	size := 0
	for _, s := range texts {
		size += len(s)
	}
	b.SetBytes(int64(size))
	for b.Loop() {
		for _, s := range texts {
			lowerASCII(s)
		}
	}
}

// FuzzLowerASCII holds lowerASCII to lowerBytes.
func FuzzLowerASCII(f *testing.F) {
	f.Add("Hello, World! ÉTÉ \xff ABCDEFGHIJKLMNOPQRSTUVWXYZ @[`{")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := lowerASCII(s), lowerBytes(s); got != want {
			t.Errorf("lowerASCII(%q) = %q, want %q", s, got, want)
		}
	})
}

// regexCase is one line of testdata/regex/cases.jsonl: what OPA's
// regex.match(pattern, text) and regex.find_n(pattern, text, n) give, or
// that they fail.
type regexCase struct {
	Pattern string   `json:"pattern"`
	Text    string   `json:"text"`
	N       int      `json:"n"`
	Match   bool     `json:"match"`
	Find    []string `json:"find"`
	Error   bool     `json:"error"`
}

// TestRegexCases pins, case by case from testdata/regex/cases.jsonl, that
// OPA's own regex.match and regex.find_n give the expected results and
// that the Go search standing in for them where Rego does not run gives
// the same: fastRe.matches for a gate's regexp clause, Regexp for the
// normalizer. A pattern that does not compile fails in OPA and has no
// compiled form here.
func TestRegexCases(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "regex", "cases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	q, err := rego.New(
		rego.Query(`m := regex.match(input.pattern, input.text); f := regex.find_n(input.pattern, input.text, input.n)`),
		rego.StrictBuiltinErrors(true),
	).PrepareForEval(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	fast := 0
	for i, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var tc regexCase
		if err := json.Unmarshal(line, &tc); err != nil {
			t.Fatalf("cases.jsonl:%d: %v", i+1, err)
		}
		name := fmt.Sprintf("cases.jsonl:%d %q in %q", i+1, tc.Pattern, tc.Text)
		rs, err := q.Eval(t.Context(), rego.EvalInput(map[string]any{"pattern": tc.Pattern, "text": tc.Text, "n": tc.N}))
		f := regexpPlan(tc.Pattern)
		if tc.Error {
			if err == nil {
				t.Errorf("%s: OPA gave %v, want an error", name, rs)
			}
			if f.re != nil {
				t.Errorf("%s: compiled here, OPA rejects it", name)
			}
			continue
		}
		if err != nil || len(rs) != 1 {
			t.Errorf("%s: OPA: %v %v", name, rs, err)
			continue
		}
		var opaFind []string
		for _, m := range rs[0].Bindings["f"].([]any) {
			opaFind = append(opaFind, m.(string))
		}
		if got := rs[0].Bindings["m"]; got != tc.Match {
			t.Errorf("%s: OPA regex.match = %v, want %v", name, got, tc.Match)
		}
		if !slices.Equal(opaFind, tc.Find) {
			t.Errorf("%s: OPA regex.find_n(…, %d) = %q, want %q", name, tc.N, opaFind, tc.Find)
		}
		if f.lits != nil && usable(tc.Text) {
			fast++
		}
		if got := f.matches(tc.Text); got != tc.Match {
			t.Errorf("%s: gate search matches = %v, want %v", name, got, tc.Match)
		}
		if got := MustCompileRegexp(tc.Pattern).FindAllString(tc.Text, tc.N); !slices.Equal(got, tc.Find) {
			t.Errorf("%s: Regexp.FindAllString(…, %d) = %q, want %q", name, tc.N, got, tc.Find)
		}
	}
	if fast < 15 {
		t.Errorf("%d cases take the literal-anchored search; the file should exercise it", fast)
	}
}
