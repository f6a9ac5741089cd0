package task

import (
	"bufio"
	"bytes"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/mtibben/confusables"
)

// compiledCode says why p, a file of the change, is compiled code the
// grader's interpreter would run with no source any check reads: a
// sourceless .pyc (imported in place of a module), a native extension.
// A .pyc in __pycache__ beside its own source is not reported here: it
// is dropped before grading (BesideSource).
func compiledCode(p string, inTree map[string]bool) string {
	base := path.Base(p)
	switch ext := path.Ext(base); {
	case ext == ".pyc" || ext == ".pyo":
		if src := pycSource(p); src != "" && inTree[src] {
			return ""
		}
		return "compiled Python with no source beside it: the interpreter imports it in place of any module of its name"
	case ext == ".so" || ext == ".pyd" || ext == ".dylib" || strings.Contains(base, ".so."):
		return "a native library: the interpreter loads its machine code and no check reads it"
	}
	return ""
}

// pycSource is the source a __pycache__ entry belongs to
// ("pkg/__pycache__/mod.cpython-311.pyc" → "pkg/mod.py"), or "".
func pycSource(p string) string {
	dir, base := path.Split(p)
	if path.Base(dir) != "__pycache__" {
		return ""
	}
	mod, _, ok := strings.Cut(base, ".")
	if !ok {
		return ""
	}
	return path.Join(path.Dir(path.Clean(dir)), mod+".py")
}

// BesideSource are the compiled files of sub that sit in __pycache__
// beside their own source: the grader drops them before applying the
// change (the interpreter compiles the source afresh), and the grade
// event names them.
func BesideSource(sub Submission) []string {
	inTree := map[string]bool{}
	for _, p := range sub.Tree {
		inTree[p] = true
	}
	var out []string
	for _, f := range sub.Files {
		if f.Status == "D" {
			continue
		}
		if ext := path.Ext(f.Path); (ext == ".pyc" || ext == ".pyo") && pycSource(f.Path) != "" && inTree[pycSource(f.Path)] {
			out = append(out, f.Path)
		}
	}
	return out
}

// knownNames are the ASCII names a look-alike could pass for: every
// path component and module name of the submitted tree, and what the
// grader imports from outside it.
func knownNames(tree []string, surf Surface) map[string]bool {
	out := map[string]bool{}
	for _, p := range tree {
		for _, c := range strings.Split(p, "/") {
			if isASCII(c) {
				out[c] = true
				out[strings.TrimSuffix(c, ".py")] = true
			}
		}
	}
	for n := range surf.Shadowable {
		out[n] = true
	}
	return out
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// confusableName returns the component of p and the name it passes for,
// when a non-ASCII component's skeleton (Unicode TS #39) is a known name.
func confusableName(p string, known map[string]bool) string {
	for _, c := range strings.Split(p, "/") {
		if isASCII(c) {
			continue
		}
		for _, cand := range []string{c, strings.TrimSuffix(c, ".py")} {
			if sk := confusables.Skeleton(cand); sk != cand && known[sk] {
				return c + " looks like " + sk
			}
		}
	}
	return ""
}

var importRE = regexp.MustCompile(`^\s*(?:from\s+(\S+)\s+import|import\s+([^#;]+))`)

// confusableImport returns the first added import line that names a
// non-ASCII module whose skeleton is a known name.
func confusableImport(lines []string, known map[string]bool) string {
	for _, l := range lines {
		if isASCII(l) {
			continue
		}
		m := importRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		names := m[1] + "," + m[2]
		for _, n := range strings.FieldsFunc(names, func(r rune) bool { return r == ',' || r == '.' || r == ' ' || r == '\t' }) {
			if !isASCII(n) {
				if sk := confusables.Skeleton(n); sk != n && known[sk] {
					return strings.TrimSpace(l)
				}
			}
		}
	}
	return ""
}

// symlinks maps each symbolic link the diff adds (git mode 120000) to its
// target.
func symlinks(diff []byte) map[string]string {
	out := map[string]string{}
	var file string
	link := false
	sc := bufio.NewScanner(bytes.NewReader(diff))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "diff --git "):
			file, link = "", false
		case strings.HasPrefix(l, "+++ b/"):
			file = strings.TrimPrefix(l, "+++ b/")
		case l == "new file mode 120000" || l == "new mode 120000":
			link = true
		case link && file != "" && strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++"):
			if _, ok := out[file]; !ok {
				out[file] = strings.TrimPrefix(l, "+")
			}
		}
	}
	return out
}

// linkOutside says why a link at p (workdir-relative) to target leaves
// the repository or points where the grader keeps its files.
func linkOutside(t Task, p, target string) string {
	abs := target
	if !path.IsAbs(target) {
		abs = path.Join(t.Workdir, path.Dir(p), target)
	}
	abs = path.Clean(abs)
	switch {
	case abs == path.Clean(t.HiddenTestsDest) || strings.HasPrefix(abs, path.Clean(t.HiddenTestsDest)+"/"):
		return "a symbolic link to where the hidden tests are placed"
	case !strings.HasPrefix(abs, path.Clean(t.Workdir)+"/"):
		return "a symbolic link out of the repository, to " + abs
	}
	return ""
}
