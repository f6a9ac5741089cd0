package monitor

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/internal/realcorpus"
	"github.com/rollcage/rollcage/rules"
)

// scriptRegexps are the normalizer's patterns, by name.
var scriptRegexps = map[string]*rules.Regexp{
	"reOpen": reOpen, "rePathOp": rePathOp, "reFSRead": reFSRead, "reFSWrite": reFSWrite,
	"reFSDelete": reFSDelete, "reFSList": reFSList, "reCopy": reCopy, "reURL": reURL,
	"reHTTPConn": reHTTPConn, "reSocket": reSocket, "reSubList": reSubList, "reQuoted": reQuoted,
	"reSystem": reSystem, "reBacktick": reBacktick, "reAbsPath": reAbsPath,
}

// TestScriptRegexps holds the normalizer's literal-anchored patterns
// (rules.Regexp) to regexp's matches and groups over the golden cases'
// commands, the corpus lines' arguments, scripts written for the purpose
// and, when present, the real trajectories' strings; and the costly
// ones on long scripts (the file-API tables, open, system) accelerated.
func TestScriptRegexps(t *testing.T) {
	for _, name := range []string{"reOpen", "reFSRead", "reFSWrite", "reFSDelete", "reFSList", "reSystem", "reCopy", "reURL"} {
		if !scriptRegexps[name].Accelerated() {
			t.Errorf("%s is not accelerated", name)
		}
	}
	texts := []string{
		"import os, shutil\nos.remove('tests/test_a.py'); shutil.rmtree(\"/w/tests\")\nfopen('x')",
		"with open('a.txt') as f, open(\"b\", mode='w+') as g: reopen('c')",
		"Path('t.py').write_text(s); pathlib.Path( \"/w/x\" ) . unlink()",
		"subprocess.run(['pytest', '-q']); os.system(\"cat /opt/grader/x\"); exec('x')",
		"File.read('/etc/passwd'); IO.readlines(\"x\"); JSON.load('y'); np.load('z.npy')",
		"`cat /x` %x{ls /y} HTTPSConnection('h.example') socket.connect(('1.2.3.4', 80))",
		"curl HTTP://a.b/c?d=1 'https://e.f/g' ftp://h/i wss://j",
		"\u212aopen('k')", "os.makedirs('/w/out', exist_ok=True)\nos.mkdir(\"d\")",
	}
	texts = append(texts, goldenTexts(t)...)
	texts = append(texts, realScriptTexts(t)...)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range scriptRegexps {
			if !yield(n) {
				return
			}
		}
	})
	bad, compared := 0, 0
	for _, name := range names {
		r := scriptRegexps[name]
		re := regexp.MustCompile(r.String())
		for _, s := range texts {
			compared++
			if got, want := r.FindAllStringSubmatch(s, -1), re.FindAllStringSubmatch(s, -1); !reflect.DeepEqual(got, want) {
				if bad++; bad <= 10 {
					t.Errorf("%s in %.200q:\n got %q\nwant %q", name, s, got, want)
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d comparisons differ", bad, compared)
	}
	t.Logf("%d patterns, %d texts, %d comparisons", len(names), len(texts), compared)
}

// goldenTexts are the commands of the golden cases and the arguments of
// the corpus lines.
func goldenTexts(t *testing.T) []string {
	t.Helper()
	var out []string
	files, _ := filepath.Glob("testdata/normalize/*.json")
	more, _ := filepath.Glob("testdata/corpus/*.jsonl")
	for _, p := range append(files, more...) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if strings.HasSuffix(p, ".json") {
				line = string(data) // one case per file
			}
			var v any
			if json.Unmarshal([]byte(line), &v) == nil {
				out = append(out, realcorpus.Strings(v, 0, true)...)
			}
			if strings.HasSuffix(p, ".json") {
				break
			}
		}
	}
	if len(out) < 100 {
		t.Fatalf("only %d texts from testdata", len(out))
	}
	return out
}

// realScriptTexts are strings of one in eight of the real trajectories
// (strings holding JSON walked too) that a script pattern may be about,
// each clipped to 16 KB, 1 MB in all (regexp's side of the comparison is
// the slow one). Outside CI the real corpus may be absent; in CI it is
// there.
func realScriptTexts(t *testing.T) []string {
	t.Helper()
	files := realcorpus.Files(t)
	var out []string
	budget := 1 << 20
	for i := 0; i < len(files) && budget > 0; i += 8 {
		for _, s := range realcorpus.FileStrings(t, files[i], 40, true) {
			if strings.ContainsAny(s, "(`") && budget > 0 {
				s = s[:min(len(s), 16<<10)]
				out, budget = append(out, s), budget-len(s)
			}
		}
	}
	return out
}
