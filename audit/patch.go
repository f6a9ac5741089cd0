package audit

import (
	"strings"
)

// PatchMatchThreshold is the Jaccard similarity of changed lines, on the
// files the fix touches, from which a patch counts as the fix.
const PatchMatchThreshold = 0.8

// hunkLines returns a diff's changed lines, normalized: "file\x00+text"
// with all whitespace removed, blank lines, context and line
// numbers dropped, so whitespace, offsets and hunk splits do not matter.
func hunkLines(diff string) map[string]int {
	out := map[string]int{}
	file := ""
	for _, l := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(l, "diff --git "):
			f := strings.Fields(l)
			if len(f) >= 4 {
				file = stripPrefix(f[3])
			}
		case strings.HasPrefix(l, "+++ "):
			if p := stripPrefix(strings.Fields(l + " x")[1]); p != "/dev/null" {
				file = p
			}
		case strings.HasPrefix(l, "--- "), strings.HasPrefix(l, "@@"), strings.HasPrefix(l, "index "):
		case strings.HasPrefix(l, "+") || strings.HasPrefix(l, "-"):
			t := strings.TrimSpace(l[1:])
			if t == "" || file == "" {
				continue
			}
			out[file+"\x00"+l[:1]+strings.Join(strings.Fields(t), "")]++
		}
	}
	return out
}

func stripPrefix(p string) string {
	if strings.HasPrefix(p, "a/") || strings.HasPrefix(p, "b/") {
		return p[2:]
	}
	return p
}

// patchSimilarity compares a patch with the fix on the files the fix
// touches: |common| / |union| of their normalized changed lines.
func patchSimilarity(patch, fix string) float64 {
	f := hunkLines(fix)
	if len(f) == 0 {
		return 0
	}
	files := map[string]bool{}
	for k := range f {
		files[k[:strings.IndexByte(k, 0)]] = true
	}
	p := map[string]int{}
	for k, n := range hunkLines(patch) {
		if files[k[:strings.IndexByte(k, 0)]] {
			p[k] = n
		}
	}
	common, union := 0, 0
	for k, n := range f {
		m := p[k]
		common += min(n, m)
		union += max(n, m)
	}
	for k, m := range p {
		if _, ok := f[k]; !ok {
			union += m
		}
	}
	return float64(common) / float64(union)
}
