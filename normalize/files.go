package normalize

import (
	"maps"
	"path"
	"regexp"
	"strings"

	"github.com/rollcage/rollcage/toolcall"
)

// Bounds of the script files an episode keeps.
const (
	maxScriptFiles    = 64       // files kept per episode
	maxScriptFileSize = 64 << 10 // bytes per file
)

// Files are the contents of files the policy wrote earlier in the episode,
// by absolute path. A call that runs one of them as a script (sh FILE,
// bash FILE, source FILE, python3 FILE, ./FILE) is normalized as if the
// file's text were inline, so a script written in one call and run in a
// later one meets the same rules as the same commands typed directly,
// however the file was written. The zero value is ready; nil ignores
// writes and knows no file.
type Files struct {
	m     map[string]string
	found map[string]*fileMatches // by path: the matches of its content, for runs of it
}

// fileMatches are a Python file's matches of the program patterns, kept
// while its content stays: a script run again and again (python
// reproduce.py after every edit of the code it tests) is searched once.
// The matches are of the text alone; what they mean (paths against the
// cwd, nested commands) is worked out again on every run.
type fileMatches struct {
	src string
	by  map[*regexp.Regexp][][]string
}

// matches is the memo of path's content src, new when src is not what
// the memo was for.
func (f *Files) matches(p, src string) *fileMatches {
	if fm := f.found[p]; fm != nil && fm.src == src {
		return fm
	}
	if f.found == nil {
		f.found = map[string]*fileMatches{}
	}
	fm := &fileMatches{src: src, by: map[*regexp.Regexp][][]string{}}
	f.found[p] = fm
	return fm
}

// findAll is findAll, remembered by pattern for the file's text; a nil
// memo remembers nothing.
func (fm *fileMatches) findAll(re *regexp.Regexp, src string, anchors ...string) [][]string {
	if fm == nil {
		return findAll(re, src, anchors...)
	}
	if m, ok := fm.by[re]; ok {
		return m
	}
	m := findAll(re, src, anchors...)
	fm.by[re] = m
	return m
}

// Set records path's content, as written by the policy; too large a file
// or one past the episode's bound is forgotten, as a deleted one is.
func (f *Files) Set(p, content string) {
	if f == nil || p == "" {
		return
	}
	delete(f.found, p)
	if len(content) > maxScriptFileSize {
		delete(f.m, p)
		return
	}
	if f.m == nil {
		f.m = map[string]string{}
	}
	if _, ok := f.m[p]; !ok && len(f.m) >= maxScriptFiles {
		return
	}
	f.m[p] = content
}

// Clone is a copy of the files known, for a fork of the episode.
func (f *Files) Clone() Files { return Files{m: maps.Clone(f.m)} }

// Delete forgets path.
func (f *Files) Delete(p string) {
	if f != nil {
		delete(f.m, p)
		delete(f.found, p)
	}
}

// Get returns path's content when the policy wrote it.
func (f *Files) Get(p string) (string, bool) {
	if f == nil {
		return "", false
	}
	s, ok := f.m[p]
	return s, ok
}

// Record keeps what a call wrote when the call itself says it: the content
// of write_file, or of the one file a bash call writes from a heredoc or
// echo/printf (Normalized.Content). For offline replays, where nothing can
// be read back; online the monitor reads the files back instead.
func (f *Files) Record(call toolcall.Call, n toolcall.Normalized) {
	switch {
	case call.Tool == toolcall.WriteFile && len(n.Writes) == 1:
		f.Set(n.Writes[0], n.Content)
	case call.Tool == toolcall.Bash && n.Content != "" && len(n.Writes) == 1:
		f.Set(n.Writes[0], n.Content)
	}
	for _, p := range n.Deletes {
		f.Delete(p)
	}
}

// Replay is one step of an offline replay (the corpus evaluator's, rules
// check's): the call normalized with the files written before it, then
// what it wrote recorded (Record).
func (f *Files) Replay(call toolcall.Call, cwd string) toolcall.Normalized {
	n := Normalize(call, cwd, f)
	f.Record(call, n)
	return n
}

// scriptKind says how a file run directly (./x, /tmp/x) is interpreted:
// by its #! line, else by its name, else as a shell script.
func scriptKind(p, src string) string {
	if first, _, _ := strings.Cut(src, "\n"); strings.HasPrefix(first, "#!") {
		if strings.Contains(first, "python") {
			return "py"
		}
		return "sh"
	}
	if path.Ext(p) == ".py" {
		return "py"
	}
	return "sh"
}

// runFile follows a script file the call runs into its text, when the
// episode knows it. kind is "sh", "py" or "" (decide by the file). Each
// file is followed once per call. A program's text was checked when it was
// written (where a scratch file of the policy's own is no tampering); what
// running it adds is the commands it runs and the files it touches, so a
// Python file adds those and not its text (program). A shell file is
// walked as a script: its lines are commands.
func (w *walker) runFile(p, kind string) {
	a := w.a
	if a.files == nil || a.ran[p] {
		return
	}
	src, ok := a.files.Get(p)
	if !ok || src == "" {
		return
	}
	if a.ran == nil {
		a.ran = map[string]bool{}
	}
	a.ran[p] = true
	if kind == "" {
		kind = scriptKind(p, src)
	}
	if kind == "py" {
		w.program(src, false, a.files.matches(p, src))
		return
	}
	w.nested(src, "file")
}
