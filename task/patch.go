package task

import (
	"fmt"
	"regexp"
	"strings"
)

// PatchFiles are the files a unified diff (git's format) touches: those
// that exist before it (modified, renamed or deleted; the old path) and
// those it creates.
func PatchFiles(patch string) (existing, created []string) {
	for _, f := range splitDiff(patch) {
		if f.oldPath == "" {
			created = append(created, f.newPath)
		} else {
			existing = append(existing, f.oldPath)
		}
	}
	return existing, created
}

// createdFiles are the files a patch creates, by name, with the content
// it creates them with (their added lines).
func createdFiles(patch string) map[string][]byte {
	out := map[string][]byte{}
	for i, seg := range strings.Split(patch, "\ndiff --git ") {
		if i > 0 {
			seg = "diff --git " + seg
		}
		for _, f := range splitDiff(seg) {
			if f.oldPath == "" && f.newPath != "" {
				out[f.newPath] = []byte(strings.Join(AddedLines(seg), "\n") + "\n")
			}
		}
	}
	return out
}

// AddedLines are the lines a patch adds (without the leading '+'), in
// order: for a test patch, the hidden tests' content; for a fix, the
// fix's. The leak checks look for them in what the policy sees and writes.
func AddedLines(patch string) []string { return patchLines(patch, '+') }

// RemovedLines are the lines a patch removes (without the leading '-'):
// for SWE-smith's bug patch, the code a fix restores.
func RemovedLines(patch string) []string { return patchLines(patch, '-') }

func patchLines(patch string, sign byte) []string {
	var out []string
	inHunk := false
	for _, line := range strings.Split(patch, "\n") {
		line = strings.TrimSuffix(line, "\r")
		switch {
		case strings.HasPrefix(line, "diff --git "):
			inHunk = false
		case strings.HasPrefix(line, "@@"):
			inHunk = true
		case inHunk && len(line) > 0 && line[0] == sign:
			out = append(out, line[1:])
		}
	}
	return out
}

type diffFile struct{ oldPath, newPath string } // "" for /dev/null

var diffHeaderRE = regexp.MustCompile(`^diff --git a/(.*) b/(.*)$`)

// splitDiff reads the files of a git diff from its headers: "diff --git
// a/X b/Y", then "--- a/X" or "--- /dev/null" and "+++ b/Y" or "+++
// /dev/null" (absent for a rename or mode change without content).
func splitDiff(patch string) []diffFile {
	var out []diffFile
	cur := -1
	inHunk := false
	for _, line := range strings.Split(patch, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if m := diffHeaderRE.FindStringSubmatch(line); m != nil {
			out = append(out, diffFile{oldPath: m[1], newPath: m[2]})
			cur, inHunk = len(out)-1, false
			continue
		}
		if cur < 0 {
			continue
		}
		switch {
		case strings.HasPrefix(line, "@@"):
			inHunk = true
		case inHunk:
		case line == "--- /dev/null" || strings.HasPrefix(line, "new file mode"):
			out[cur].oldPath = ""
		case line == "+++ /dev/null" || strings.HasPrefix(line, "deleted file mode"):
			out[cur].newPath = ""
		}
	}
	return out
}

// ApplyTestPatchScript is the bash script that puts t's test patch in
// place in the grading sandbox, as SWE-bench's harness does: in Workdir,
// the files the patch changes are reset to BaseCommit and the files it
// creates removed (so the solution's edits to a test file the patch
// rewrites do not matter), then the patch, copied beforehand to
// patchPath, is applied with git apply. The script exits non-zero when the
// patch does not apply, which is a grading failure, not the solution's: the
// reset made the files what the patch expects.
func (t Task) ApplyTestPatchScript(patchPath string) (string, error) {
	t = t.withDefaults()
	if t.TestPatch == "" {
		return "", fmt.Errorf("task %s has no test patch", t.ID)
	}
	if t.BaseCommit == "" {
		return "", fmt.Errorf("task %s: a test patch needs base_commit to reset its files to", t.ID)
	}
	existing, created := PatchFiles(t.TestPatch)
	lines := []string{"set -e", "cd " + quoteArgs([]string{t.Workdir})}
	if len(existing) > 0 {
		lines = append(lines, "git checkout "+t.BaseCommit+" -- "+quoteArgs(existing))
	}
	if len(created) > 0 {
		lines = append(lines, "rm -rf -- "+quoteArgs(created))
	}
	lines = append(lines, "git apply -v "+quoteArgs([]string{patchPath}))
	return strings.Join(lines, "\n") + "\n", nil
}
