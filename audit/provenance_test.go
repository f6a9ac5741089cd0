package audit

import (
	"slices"
	"testing"

	"github.com/rollcage/rollcage/toolcall"
)

// TestProvenanceCreated follows which files an episode created through
// sequences of calls: a write of a file nothing showed before creates it;
// one the instruction, an earlier output, read or listing showed does not;
// an output only later naming a file does not undo an earlier creation,
// and a name looked for before and not found is found once an output
// holds it (the search goes on where it stopped).
func TestProvenanceCreated(t *testing.T) {
	type call struct {
		out           string
		reads, writes []string
	}
	w := func(files ...string) call { return call{writes: files} }
	r := func(out string, files ...string) call { return call{out: out, reads: files} }
	for _, tc := range []struct {
		name        string
		instruction string
		calls       []call
		want        []string
	}{
		{"new file", "fix the bug", []call{w("/repo/repro.py")}, []string{"/repo/repro.py (step 1)"}},
		{"named in the instruction", "see repro.py", []call{w("/repo/repro.py")}, nil},
		{"shown by an earlier output", "fix it", []call{r("src/\nrepro.py\n"), w("/repo/repro.py")}, nil},
		{"read before", "fix it", []call{r("", "/repo/a.py"), w("/repo/a.py")}, nil},
		{"written again after an output names it", "fix it",
			[]call{w("/repo/t.py"), r("t.py\n"), w("/repo/t.py")}, []string{"/repo/t.py (step 1)"}},
		{"looked for, then shown, then another path with that name", "fix it",
			[]call{w("/repo/a/x.py"), r("x.py\n"), w("/repo/b/x.py")}, []string{"/repo/a/x.py (step 1)"}},
		{"looked for in many outputs, found in the last", "fix it",
			[]call{w("/repo/a.py"), r("one"), w("/repo/b.py"), r("two"), r("three has c.py"), w("/repo/c.py")},
			[]string{"/repo/a.py (step 1)", "/repo/b.py (step 3)"}},
		{"not found, then found", "fix it",
			[]call{r("nothing"), w("/tmp/s/c.py"), r("c.py"), w("/repo/c.py")}, []string{"/tmp/s/c.py (step 2)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProvenance(tc.instruction)
			for i, c := range tc.calls {
				s := Step{Output: c.out}
				n := toolcall.Normalized{Tool: toolcall.Bash, Reads: c.reads, Writes: c.writes}
				p.before(i, s, n)
				p.after(s, n)
			}
			if got := p.list(); !slices.Equal(got, tc.want) {
				t.Errorf("created %q, want %q", got, tc.want)
			}
		})
	}
}
