package hostside

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// PrecopyMin is the size of a layer from which CopyFrozen copies it
// before the freeze and only what changed since while frozen; a smaller
// layer is copied whole while frozen (one copy costs less than two).
const PrecopyMin = 8 << 20

// ctimeSlack is how far before the pre-copy began a change time still
// counts as a change since: the kernel stamps change times from a coarse
// clock that may lag the one read here by a tick.
const ctimeSlack = time.Second

// FreezeFunc freezes a sandbox: it returns when the freeze began and the
// thaw, which must run even when ctx is done.
type FreezeFunc func(ctx context.Context) (time.Time, func() error, error)

// CopyFrozen copies the overlay upper directory src into dst (empty) as it
// is at one instant of the sandbox that writes it, frozen by freeze for as
// short as it can be, and returns how long it was frozen: Precopy, then
// Frozen.
func CopyFrozen(ctx context.Context, src, dst string, freeze FreezeFunc) (time.Duration, error) {
	lc, err := Precopy(ctx, src, dst)
	if err != nil {
		return 0, err
	}
	return lc.Frozen(ctx, freeze)
}

// LayerCopy is a copy of a sandbox's overlay upper directory in the
// making. A layer of PrecopyMin or more is copied by Precopy with the
// sandbox running; Frozen then brings dst to src's state by copying again
// every path whose inode or change time says it changed since (a sandbox
// cannot set a change time), removing the ones gone and setting the
// attributes of the directories that changed. A smaller layer, or
// anything unsure (the pre-copy racing a deletion, the wall clock
// stepping), is copied whole by Frozen.
type LayerCopy struct {
	src, dst string
	pre      *layerCopy // nil: Frozen copies the whole layer
}

// Precopy begins a copy of src into dst (empty), the sandbox running.
func Precopy(ctx context.Context, src, dst string) (*LayerCopy, error) {
	pre, err := precopy(ctx, src, dst)
	if err != nil {
		return nil, err
	}
	return &LayerCopy{src: src, dst: dst, pre: pre}, nil
}

// Frozen finishes the copy with the sandbox frozen by freeze, and returns
// how long it was frozen.
func (lc *LayerCopy) Frozen(ctx context.Context, freeze FreezeFunc) (time.Duration, error) {
	t0, thaw, err := freeze(ctx)
	if err != nil {
		return 0, err
	}
	var cerr error
	if lc.pre == nil || !lc.pre.finish(ctx) {
		cerr = CopyLayer(ctx, lc.src, lc.dst)
	}
	terr := thaw()
	return time.Since(t0), errors.Join(cerr, terr)
}

// layerCopy is a pre-copy of src in dst, to be finished frozen.
type layerCopy struct {
	src, dst  string
	since     time.Time         // a change time from here is a change
	wall, mon time.Time         // when it began, on the wall clock and the monotonic one
	inodes    map[string]uint64 // path (relative to src) → inode, before the pre-copy
	recopied  int               // paths the delta copied again
}

// precopy copies src into dst with the sandbox running when src is
// PrecopyMin or more; nil (and dst empty) when it is smaller or the copy
// raced a change it cannot take.
func precopy(ctx context.Context, src, dst string) (*layerCopy, error) {
	now := time.Now()
	l := &layerCopy{src: src, dst: dst, since: now.Add(-ctimeSlack), wall: now.Round(0), mon: now, inodes: map[string]uint64{}}
	var size int64
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := lstat(p)
		if err != nil {
			return err
		}
		l.inodes[rel(src, p)] = st.Ino
		size += st.Size
		return nil
	})
	if err != nil {
		return nil, nil // the whole copy, frozen, will say what is wrong
	}
	if size < PrecopyMin {
		return nil, nil
	}
	if err := CopyLayer(ctx, src, dst); err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		// A path removed under cp: start again, frozen.
		if err := EmptyDir(dst); err != nil {
			return nil, err
		}
		return nil, nil
	}
	return l, nil
}

// finish brings dst to src's state, src no longer changing; false when it
// could not, dst then emptied for the whole copy.
func (l *layerCopy) finish(ctx context.Context) bool {
	if err := l.delta(ctx); err != nil {
		return EmptyDir(l.dst) == nil
	}
	return true
}

func (l *layerCopy) delta(ctx context.Context) error {
	// The wall clock stepped: change times and since no longer compare.
	if d := time.Since(l.mon) - time.Now().Round(0).Sub(l.wall); d > 100*time.Millisecond || d < -100*time.Millisecond {
		return fmt.Errorf("the wall clock moved by %v", d)
	}
	var copies []string       // paths to copy again (directories with all below)
	dirs := map[string]bool{} // directories whose attributes to set again
	seen := make(map[string]bool, len(l.inodes))
	err := filepath.WalkDir(l.src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r := rel(l.src, p)
		seen[r] = true
		st, err := lstat(p)
		if err != nil {
			return err
		}
		ino, had := l.inodes[r]
		changed := !time.Unix(st.Ctim.Unix()).Before(l.since)
		switch {
		case r == ".":
			if changed {
				dirs[r] = true
			}
		case !had || ino != st.Ino: // new, or replaced: copied whole
			copies = append(copies, r)
			dirs[filepath.Dir(r)] = true
			if d.IsDir() {
				return filepath.SkipDir
			}
		case changed && d.IsDir():
			dirs[r] = true
		case changed:
			copies = append(copies, r)
			dirs[filepath.Dir(r)] = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	var gone []string
	for r := range l.inodes {
		if !seen[r] {
			gone = append(gone, r)
		}
	}
	for _, r := range slices.Concat(gone, copies) {
		if err := os.RemoveAll(filepath.Join(l.dst, r)); err != nil {
			return err
		}
		dirs[filepath.Dir(r)] = true
	}
	l.recopied = len(copies)
	if len(copies) > 0 {
		// One cp for all, so hard links among them stay links.
		cmd := exec.CommandContext(ctx, "cp", append([]string{"-a", "--reflink=auto", "--parents", "-t", l.dst, "--"}, copies...)...)
		cmd.Dir = l.src
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("copy the changed paths: %w: %s", err, strings.TrimSpace(string(out)))
		}
	}
	for r := range dirs {
		err := copyAttrs(filepath.Join(l.src, r), filepath.Join(l.dst, r))
		if err != nil && !errors.Is(err, fs.ErrNotExist) { // a directory gone with its parent
			return err
		}
	}
	return nil
}

// copyAttrs gives the directory dst the owner, mode, extended attributes
// and times of src.
func copyAttrs(src, dst string) error {
	st, err := lstat(src)
	if err != nil {
		return err
	}
	if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if err := os.Chmod(dst, os.FileMode(st.Mode&0o7777)|modeBits(st.Mode)); err != nil {
		return err
	}
	want, err := xattrs(src)
	if err != nil {
		return err
	}
	have, err := xattrs(dst)
	if err != nil {
		return err
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			if err := unix.Lremovexattr(dst, k); err != nil {
				return fmt.Errorf("remove xattr %s of %s: %w", k, dst, err)
			}
		}
	}
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			if err := unix.Lsetxattr(dst, k, []byte(v), 0); err != nil {
				return fmt.Errorf("set xattr %s of %s: %w", k, dst, err)
			}
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(st.Atim.Nano()), unix.NsecToTimespec(st.Mtim.Nano())}
	return unix.UtimesNanoAt(unix.AT_FDCWD, dst, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// modeBits are os.FileMode's setuid, setgid and sticky bits of a raw mode.
func modeBits(m uint32) os.FileMode {
	var out os.FileMode
	if m&syscall.S_ISUID != 0 {
		out |= os.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		out |= os.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		out |= os.ModeSticky
	}
	return out
}

// xattrs are a path's extended attributes (not followed).
func xattrs(p string) (map[string]string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(p, buf)
	if errors.Is(err, unix.ERANGE) {
		if n, err = unix.Llistxattr(p, nil); err == nil {
			buf = make([]byte, n)
			n, err = unix.Llistxattr(p, buf)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("list xattrs of %s: %w", p, err)
	}
	out := map[string]string{}
	for name := range strings.SplitSeq(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		sz, err := unix.Lgetxattr(p, name, nil)
		if err != nil {
			return nil, fmt.Errorf("xattr %s of %s: %w", name, p, err)
		}
		v := make([]byte, sz)
		if sz, err = unix.Lgetxattr(p, name, v); err != nil {
			return nil, fmt.Errorf("xattr %s of %s: %w", name, p, err)
		}
		out[name] = string(v[:sz])
	}
	return out, nil
}

func lstat(p string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

func rel(root, p string) string {
	r, err := filepath.Rel(root, p)
	if err != nil {
		return p
	}
	return r
}

// EmptyDir removes everything in dir, not dir, by file descriptor
// (os.RemoveAll), so no path in it is too long.
func EmptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
