package monitor

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// leakCase is one testdata/leak/*.txt file: sections "-- secret KIND MIN
// --", "-- base --", "-- typed --" (lines the policy typed), "-- output
// --" or "-- file --" (the text checked), "-- want --" (one "rule
// severity" a line, or "none").
type leakCase struct {
	secret      Secret
	sections    map[string]string
	checkedKind string
}

func readLeakCase(t *testing.T, path string) leakCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := leakCase{sections: map[string]string{}}
	var name string
	var body []string
	flush := func() {
		if name != "" {
			c.sections[name] = strings.Join(body, "\n")
		}
	}
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if strings.HasPrefix(l, "-- ") && strings.HasSuffix(l, " --") {
			flush()
			f := strings.Fields(strings.TrimSuffix(strings.TrimPrefix(l, "-- "), " --"))
			name, body = f[0], nil
			if name == "secret" {
				c.secret.Kind = f[1]
				c.secret.MinLines, _ = strconv.Atoi(f[2])
			}
			if name == "output" || name == "file" {
				c.checkedKind = name
			}
			continue
		}
		if name == "" && strings.HasPrefix(l, "#") {
			continue
		}
		body = append(body, l)
	}
	flush()
	c.secret.Text = c.sections["secret"]
	return c
}

// TestLeakNormalized: diff markers, line numbers and indentation do not
// hide protected lines; short fixes are found; the policy's own lines,
// the base's lines and a diff's headers are never leaks; written files are
// checked like outputs, a short fix there asking the judge.
func TestLeakNormalized(t *testing.T) {
	files, _ := filepath.Glob("testdata/leak/*.txt")
	if len(files) < 10 {
		t.Fatalf("only %d leak cases", len(files))
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			c := readLeakCase(t, f)
			d := newLeakDetector([]Secret{c.secret}, c.sections["base"], Facts{})
			typed := map[string]bool{}
			for _, l := range strings.Split(c.sections["typed"], "\n") {
				if l != "" {
					typed[normLine(l)] = true
				}
			}
			own := func(l string) bool { return typed[l] }
			var got []string
			text := c.sections[c.checkedKind]
			if c.checkedKind == "file" {
				for _, fl := range d.checkFile("/workspace/x.py", text, own) {
					got = append(got, fl.Rule+" "+fl.Severity)
				}
			} else {
				out, flags := d.check(text, own)
				for _, fl := range flags {
					got = append(got, fl.Rule+" "+fl.Severity)
				}
				if len(flags) > 0 && out == text {
					t.Errorf("leaking lines left in the output: %q", out)
				}
			}
			if len(got) == 0 {
				got = []string{"none"}
			}
			want := strings.Split(strings.TrimSpace(c.sections["want"]), "\n")
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("flags (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNormLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{"+    return x", "return x"},
		{"-\treturn  x", "return x"},
		{"     return x", "return x"},
		{"    12\treturn x", "return x"},
		{"12:return x", "return x"},
		{"src/m.py:12:    return x", "return x"},
		{"src/my-mod.py-12-    return x", "return x"}, // grep -A's context line
		{"a-1-b", "b"},
		{"+++ b/m.py", "+++ b/m.py"},
		{"a: b", "a: b"},
		{"x = 1:2:3", "x = 1:2:3"},
	}
	for _, tc := range tests {
		if got := normLine(tc.in); got != tc.want {
			t.Errorf("normLine(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
