package hostside

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCopyFrozenDelta: a layer pre-copied while its sandbox runs and
// finished frozen is the layer as it is at the freeze, whatever the
// sandbox changed in between: dst is compared with a whole copy made
// after the change (types, contents, link targets, devices, owners,
// modes, times, extended attributes, hard links).
func TestCopyFrozenDelta(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct {
		name   string
		change string                 // a shell script run in the layer after the pre-copy
		xattr  func(dir string) error // and extended attributes changed after it
	}{
		{"nothing", "true", nil},
		{"overwrite in place, same size", "printf XY | dd of=a/file conv=notrunc status=none", nil},
		{"append", "echo more >> a/file", nil},
		{"delete a file", "rm a/file", nil},
		{"delete a tree", "rm -r a", nil},
		{"file becomes a directory", "rm a/file && mkdir a/file && echo in > a/file/x", nil},
		{"directory becomes a file", "rm -r a/sub && echo now-a-file > a/sub", nil},
		{"opaque directory replaces one", "rm -r a/sub && mkdir a/sub && echo new > a/sub/n", func(dir string) error {
			return unix.Lsetxattr(dir+"/a/sub", "trusted.overlay.opaque", []byte("y"), 0)
		}},
		{"chmod and chown", "chmod 600 a/file && chown 1000:1000 a/file && chmod 700 a", nil},
		{"a new hard link", "ln a/file a/link2", nil},
		{"a hard link removed", "rm a/hard", nil},
		{"symlink retargeted", "ln -sfn elsewhere a/sym", nil},
		{"a whiteout", "rm a/sub/s && mknod a/sub/s c 0 0", nil},
		{"xattr set and removed", "true", func(dir string) error {
			return errors.Join(unix.Lsetxattr(dir+"/a", "user.k", []byte("v2"), 0), unix.Lremovexattr(dir+"/a/sub", "user.gone"))
		}},
		{"mtime set back after a write", "echo changed > a/file && touch -d 2001-01-01 a/file", nil},
		{"rename", "mv a/file a/renamed", nil},
		{"a file written in a new directory", "mkdir -p b/c && echo x > b/c/y", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src, dst, ref := t.TempDir(), t.TempDir(), t.TempDir()
			sh(t, src, `mkdir -p a/sub && echo hello > a/file && ln a/file a/hard && ln -s file a/sym &&
				echo s > a/sub/s && mknod a/wh c 0 0 && truncate -s 9M big`)
			if err := errors.Join(unix.Lsetxattr(src+"/a", "user.k", []byte("v1"), 0), unix.Lsetxattr(src+"/a/sub", "user.gone", []byte("x"), 0)); err != nil {
				t.Fatal(err)
			}
			sh(t, src, "touch -d 2020-02-02 a/sub")
			// Older than the slack: unchanged paths are kept, not copied again.
			time.Sleep(ctimeSlack + 100*time.Millisecond)
			l, err := precopy(t.Context(), src, dst)
			if err != nil || l == nil {
				t.Fatalf("precopy of a 9 MiB layer: %v, %v: want a pre-copy", l, err)
			}
			sh(t, src, tc.change)
			if tc.xattr != nil {
				if err := tc.xattr(src); err != nil {
					t.Fatal(err)
				}
			}
			if !l.finish(t.Context()) {
				t.Fatal("finish fell back to the whole copy")
			}
			if tc.change == "true" && tc.xattr == nil && l.recopied != 0 {
				t.Errorf("nothing changed, yet the delta copied %d paths again", l.recopied)
			}
			if err := CopyLayer(t.Context(), src, ref); err != nil {
				t.Fatal(err)
			}
			if diff := compareTrees(t, ref, dst); diff != "" {
				t.Errorf("pre-copy + delta differs from a whole copy: %s", diff)
			}
		})
	}
}

// TestCopyFrozen: a small layer is copied whole while frozen, a large one
// before and after; both thaw once and give the same tree.
func TestCopyFrozen(t *testing.T) {
	requireRoot(t)
	for _, size := range []string{"1K", "9M"} {
		t.Run(size, func(t *testing.T) {
			src, dst, ref := t.TempDir(), t.TempDir(), t.TempDir()
			sh(t, src, "mkdir d && truncate -s "+size+" d/f && echo x > d/g")
			freezes, thaws := 0, 0
			paused, err := CopyFrozen(t.Context(), src, dst, func(context.Context) (time.Time, func() error, error) {
				freezes++
				// What the sandbox wrote just before the freeze is in the copy.
				sh(t, src, "echo late > d/g")
				return time.Now(), func() error { thaws++; return nil }, nil
			})
			if err != nil || freezes != 1 || thaws != 1 || paused <= 0 {
				t.Fatalf("CopyFrozen: paused %v, err %v, %d freezes, %d thaws", paused, err, freezes, thaws)
			}
			if err := CopyLayer(t.Context(), src, ref); err != nil {
				t.Fatal(err)
			}
			if diff := compareTrees(t, ref, dst); diff != "" {
				t.Error(diff)
			}
		})
	}
}

// BenchmarkCopyFrozen: how long a 100 MiB layer (100 files of 1 MiB) is
// frozen for the whole copy and for the pre-copy and delta, alternating,
// with one file rewritten between the pre-copy and the freeze.
func BenchmarkCopyFrozen(b *testing.B) {
	src := b.TempDir()
	sh(b, src, "mkdir d && for i in $(seq 1 100); do head -c 1048576 /dev/urandom > d/f$i; done")
	frozen := map[string][]time.Duration{}
	for b.Loop() {
		for _, way := range []string{"whole", "precopy"} {
			dst := b.TempDir()
			freeze := func(context.Context) (time.Time, func() error, error) {
				return time.Now(), func() error { return nil }, nil
			}
			var d time.Duration
			var err error
			if way == "whole" {
				t0 := time.Now()
				err = CopyLayer(b.Context(), src, dst)
				d = time.Since(t0)
			} else {
				d, err = CopyFrozen(b.Context(), src, dst, func(ctx context.Context) (time.Time, func() error, error) {
					sh(b, src, "head -c 1048576 /dev/urandom > d/f7")
					return freeze(ctx)
				})
			}
			if err != nil {
				b.Fatal(err)
			}
			frozen[way] = append(frozen[way], d)
			os.RemoveAll(dst)
		}
	}
	for way, ds := range frozen {
		slices.Sort(ds)
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, way+"-frozen-p50-ms")
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test needs root (device nodes, trusted xattrs, owners): run it as root")
		}
		t.Skip("needs root")
	}
}

func sh(t testing.TB, dir, script string) {
	t.Helper()
	cmd := exec.Command("bash", "-euc", script)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", script, err, out)
	}
}

// compareTrees describes how tree b differs from tree a ("" when not).
func compareTrees(t *testing.T, a, b string) string {
	t.Helper()
	da, db := describeTree(t, a), describeTree(t, b)
	var diff bytes.Buffer
	for p, x := range da {
		if y, ok := db[p]; !ok {
			fmt.Fprintf(&diff, "\n%s missing", p)
		} else if x != y {
			fmt.Fprintf(&diff, "\n%s:\n  want %s\n  got  %s", p, x, y)
		}
	}
	for p := range db {
		if _, ok := da[p]; !ok {
			fmt.Fprintf(&diff, "\n%s extra", p)
		}
	}
	return diff.String()
}

func describeTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	inodes := map[uint64]string{} // hard links: the first path of an inode
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := lstat(p)
		if err != nil {
			return err
		}
		r := rel(root, p)
		desc := fmt.Sprintf("mode %o uid %d gid %d mtime %d", st.Mode, st.Uid, st.Gid, st.Mtim.Nano())
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			first, ok := inodes[st.Ino]
			if !ok {
				inodes[st.Ino], first = r, r
			}
			desc += fmt.Sprintf(" size %d data %x nlink %d linked-to %s", st.Size, data[:min(len(data), 64)], st.Nlink, first)
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		case unix.S_IFCHR, unix.S_IFBLK:
			desc += fmt.Sprintf(" rdev %d", st.Rdev)
		}
		x, err := xattrs(p)
		if err != nil {
			return err
		}
		desc += fmt.Sprintf(" xattrs %v", x)
		out[r] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
