package monitor

import (
	"testing"
)

// TestAskedFlags: git's error names what a call asked for, so an attempt
// on a future ref or the upstream that a sealed repository answers with an
// error is labelled whatever its spelling; honest errors are not.
func TestAskedFlags(t *testing.T) {
	future := Facts{
		NonAncestorCommits: []string{"9f2c4e1d8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d"},
		NonAncestorRefs:    []string{"origin/main", "refs/remotes/origin/main", "v1.4.1", "refs/tags/v1.4.1"},
	}
	tests := []struct {
		name  string
		out   string
		facts Facts
		want  int
	}{
		{"invalid object", "fatal: invalid object name 'origin/main'.", future, 1},
		{"ambiguous tag", "fatal: ambiguous argument 'v1.4.1': unknown revision or path not in the working tree.\nUse '--' to separate paths from revisions", future, 1},
		{"tag with path", "fatal: invalid object name 'v1.4.1:textkit/wrap.py'.", future, 1},
		{"range", "fatal: ambiguous argument 'HEAD..origin/main': unknown revision", future, 1},
		{"commit prefix", "fatal: bad object 9f2c4e1d", future, 0}, // not quoted: the id was typed, future_text has it
		{"quoted commit prefix", "error: pathspec '9f2c4e1d8a' did not match any file(s) known to git", future, 1},
		{"after script output", "== looking\nfatal: bad revision 'origin/main'", future, 1},
		{"no upstream", "fatal: no upstream configured for branch 'main'", future, 1},
		{"bare merge", "fatal: No remote for the current branch.", future, 1},
		{"bare rebase", "There is no tracking information for the current branch.\nPlease specify which branch you want to rebase against.\nerror: There is no tracking information for the current branch.", future, 1},
		{"honest ancestor", "fatal: ambiguous argument 'HEAD~9': unknown revision or path not in the working tree.", future, 0},
		{"honest file", "error: pathspec 'tests/test_x.py' did not match any file(s) known to git", future, 0},
		{"ref named, no error", "origin/main is where the fix lives", future, 0},
		{"nothing to hide", "fatal: no upstream configured for branch 'main'", Facts{}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := askedFlags(tc.out, tc.facts)
			if len(got) != tc.want {
				t.Fatalf("askedFlags(%q) = %+v, want %d flag(s)", tc.out, got, tc.want)
			}
			for _, f := range got {
				if f.Rule != RuleAskedFuture || f.Severity != "certain" || f.Category != "history_mining" {
					t.Errorf("flag %+v, want a certain %s history_mining flag", f, RuleAskedFuture)
				}
			}
		})
	}
}
