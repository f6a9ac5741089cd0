package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rollcage/rollcage/sandbox"
)

// defaultMaxEffects bounds a call's effects when the Watch does not.
const defaultMaxEffects = 1024

// effectMask is what the effect watch asks of every watched directory.
// IN_EXCL_UNLINK: a file deleted while still open stops reporting.
const effectMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_ATTRIB | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW | unix.IN_EXCL_UNLINK

// dirKind says how far the watch reaches below a directory.
type dirKind int

const (
	dirTree    dirKind = iota // every subdirectory, but the skipped names
	dirShallow                // one level; *.dist-info and *.egg-info leaves; new subdirectories become trees
	dirLeaf                   // this directory only
)

type watchedDir struct {
	path string
	kind dirKind
}

// effectState is the effect half of the watcher: which directories are
// watched, what is known to exist under them (so that a rename onto a
// name is told apart from a creation, and a chmod from a touch), and the
// effects of no call. All of it is guarded by watcher.mu.
type effectState struct {
	on    bool
	armed bool // a policy call has run: effects with no call in flight are kept for the next
	max   int
	skip  map[string]bool
	dirs  map[int32]*watchedDir
	dirWd map[string]int32
	known map[string]fs.FileMode // lstat type and permission bits of what exists under the watch
	quiet map[string]int         // paths the host is writing through the agent (write_file, copy_in)
	full  bool                   // the kernel refused more watches: some effects are unknown

	pending          []sandbox.Effect
	pendingSeen      map[sandbox.Effect]bool
	pendingTruncated bool
}

func (e *effectState) init() {
	e.dirs = map[int32]*watchedDir{}
	e.dirWd = map[string]int32{}
	e.known = map[string]fs.FileMode{}
	e.quiet = map[string]int{}
	e.pendingSeen = map[sandbox.Effect]bool{}
	e.skip = map[string]bool{}
}

// watchEffects starts the effect watch of cfg. What exists now is the
// starting point, never an effect.
func (w *watcher) watchEffects(cfg sandbox.Watch, home string) error {
	if cfg.Home && home != "" {
		cfg.Roots = append(cfg.Roots[:len(cfg.Roots):len(cfg.Roots)], home)
	}
	for _, r := range append(append([]string(nil), cfg.Roots...), cfg.Shallow...) {
		if !filepath.IsAbs(r) {
			return badRequest("watch path %q is not absolute; give a path like /workspace", r)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	e := &w.effects
	e.on = true
	e.max = cfg.MaxEffects
	if e.max <= 0 {
		e.max = defaultMaxEffects
	}
	for _, n := range cfg.Skip {
		e.skip[n] = true
	}
	for _, r := range cfg.Roots {
		w.addDirLocked(filepath.Clean(r), dirTree, false)
	}
	for _, g := range cfg.Shallow {
		matches, err := filepath.Glob(filepath.Clean(g))
		if err != nil {
			return badRequest("watch glob %q: %v", g, err)
		}
		for _, m := range matches {
			w.addDirLocked(m, dirShallow, false)
		}
	}
	return nil
}

// addDirLocked watches dir and, as its kind says, what is below it. With
// report, every entry found that was not known is a creation: it appeared
// before the watch on its directory did (mkdir -p a/b && touch a/b/c).
func (w *watcher) addDirLocked(dir string, kind dirKind, report bool) {
	e := &w.effects
	wd, err := unix.InotifyAddWatch(w.fd, dir, effectMask)
	if err != nil {
		if errors.Is(err, unix.ENOSPC) && !e.full {
			e.full = true
			w.log.Warn("inotify watch limit reached; effects under new directories are unknown", "dir", dir)
		}
		return
	}
	e.dirs[int32(wd)] = &watchedDir{path: dir, kind: kind}
	e.dirWd[dir] = int32(wd)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, ent := range ents {
		p := dir + "/" + ent.Name()
		fi, err := ent.Info()
		if err != nil {
			continue
		}
		if _, ok := e.known[p]; !ok && report {
			w.emitLocked(sandbox.Effect{Path: p, Op: sandbox.EffectCreate, IsDir: ent.IsDir()})
		}
		e.known[p] = fi.Mode() & (fs.ModeType | fs.ModePerm)
		if ent.IsDir() {
			if k, ok := e.childKind(kind, ent.Name(), report); ok {
				w.addDirLocked(p, k, report)
			}
		}
	}
}

// childKind is how a subdirectory named name of a kind directory is
// watched; ok false: not at all. created: it appeared after the watch began.
func (e *effectState) childKind(kind dirKind, name string, created bool) (dirKind, bool) {
	switch kind {
	case dirTree:
		return dirTree, !e.skip[name]
	case dirShallow:
		if created {
			return dirTree, true
		}
		return dirLeaf, strings.HasSuffix(name, ".dist-info") || strings.HasSuffix(name, ".egg-info")
	}
	return 0, false
}

func (w *watcher) effectEventLocked(wd int32, mask uint32, name string) {
	e := &w.effects
	d, ok := e.dirs[wd]
	if !ok {
		return
	}
	if mask&unix.IN_IGNORED != 0 {
		delete(e.dirs, wd)
		if e.dirWd[d.path] == wd {
			delete(e.dirWd, d.path)
		}
		return
	}
	if name == "" {
		return
	}
	p := d.path + "/" + name
	isDir := mask&unix.IN_ISDIR != 0
	switch {
	case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		op := sandbox.EffectCreate
		if _, ok := e.known[p]; ok {
			op = sandbox.EffectModify // renamed onto an existing name: its content was replaced
		}
		w.emitLocked(sandbox.Effect{Path: p, Op: op, IsDir: isDir})
		if fi, err := os.Lstat(p); err == nil {
			e.known[p] = fi.Mode() & (fs.ModeType | fs.ModePerm)
		}
		if isDir {
			if k, ok := e.childKind(d.kind, name, true); ok {
				w.addDirLocked(p, k, true)
			}
		}
	case mask&unix.IN_MODIFY != 0:
		w.emitLocked(sandbox.Effect{Path: p, Op: sandbox.EffectModify})
	case mask&unix.IN_ATTRIB != 0:
		fi, err := os.Lstat(p)
		if err != nil {
			return
		}
		m := fi.Mode() & (fs.ModeType | fs.ModePerm)
		old, ok := e.known[p]
		e.known[p] = m
		if ok && old.Perm() != m.Perm() { // a touch changes times only: no effect
			w.emitLocked(sandbox.Effect{Path: p, Op: sandbox.EffectChmod, IsDir: isDir})
		}
	case mask&unix.IN_DELETE != 0:
		w.emitLocked(sandbox.Effect{Path: p, Op: sandbox.EffectDelete, IsDir: isDir})
		delete(e.known, p)
	case mask&unix.IN_MOVED_FROM != 0:
		w.emitLocked(sandbox.Effect{Path: p, Op: sandbox.EffectRename, IsDir: isDir})
		delete(e.known, p)
		if isDir {
			w.forgetTreeLocked(p)
		}
	}
}

// forgetTreeLocked drops what is known and watched below a directory that
// was renamed away; if it landed under the watch, its new name is watched
// afresh.
func (w *watcher) forgetTreeLocked(dir string) {
	e := &w.effects
	pre := dir + "/"
	for p := range e.known {
		if strings.HasPrefix(p, pre) {
			delete(e.known, p)
		}
	}
	for wd, d := range e.dirs {
		if d.path == dir || strings.HasPrefix(d.path, pre) {
			unix.InotifyRmWatch(w.fd, uint32(wd))
			delete(e.dirs, wd)
			delete(e.dirWd, d.path)
		}
	}
}

// emitLocked gives an effect to every policy call in flight; with none, it
// is kept for the next one, unless it is the host's own write.
func (w *watcher) emitLocked(ef sandbox.Effect) {
	e := &w.effects
	given := false
	for s := range w.subs {
		if !s.policy {
			continue
		}
		given = true
		if !addEffect(&s.effects, s.seenEff, e.max, ef) {
			s.truncated = true
		}
	}
	if given || !e.armed || e.quietLocked(ef.Path) {
		return
	}
	if !addEffect(&e.pending, e.pendingSeen, e.max, ef) {
		e.pendingTruncated = true
	}
}

// addEffect appends ef to list once (seen holds what list has); it reports
// false when list, at max, had no room for a new one.
func addEffect(list *[]sandbox.Effect, seen map[sandbox.Effect]bool, max int, ef sandbox.Effect) bool {
	if seen[ef] {
		return true
	}
	if len(*list) >= max {
		return false
	}
	seen[ef] = true
	*list = append(*list, ef)
	return true
}

// quietLocked reports whether p is, or is a directory on the way to, a path
// the host is writing.
func (e *effectState) quietLocked(p string) bool {
	for q := range e.quiet {
		if p == q || strings.HasPrefix(p, q+"/") || strings.HasPrefix(q, p+"/") {
			return true
		}
	}
	return false
}

// takePendingLocked hands the effects of no call to s and arms the watch.
func (e *effectState) takePendingLocked(s *watchSub) {
	e.armed = true
	if !e.on {
		return
	}
	for _, ef := range e.pending {
		s.seenEff[ef] = true
	}
	s.effects = append(s.effects, e.pending...)
	s.truncated = e.pendingTruncated || e.full
	e.pending, e.pendingTruncated = nil, false
	clear(e.pendingSeen)
}

// hostWrite keeps the effects of a host write to path (the write_file and
// copy_in ops) out of the next call's effects, unless a policy call is in
// flight. The monitor accounts for those writes itself. Call the returned
// func when the write is done.
func (w *watcher) hostWrite(path string) func() {
	path = filepath.Clean(path)
	w.mu.Lock()
	w.effects.quiet[path]++
	w.mu.Unlock()
	return func() {
		w.sync() // the write's events are read while still quiet
		w.mu.Lock()
		if w.effects.quiet[path]--; w.effects.quiet[path] <= 0 {
			delete(w.effects.quiet, path)
		}
		w.mu.Unlock()
	}
}
