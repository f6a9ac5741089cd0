package agent

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// asUser runs fn with the sandbox user's file permissions. It switches the
// filesystem uid/gid of one locked OS thread only and never unlocks it, so
// the runtime throws that thread away afterwards instead of reusing a
// thread with foreign credentials. Changing the fsuid away from 0 also
// drops the thread's file capabilities (DAC_OVERRIDE, FOWNER, ...).
func (s *Server) asUser(fn func() error) error {
	if s.cred == nil {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setgroups(nil); err != nil {
			errc <- fmt.Errorf("drop groups: %w", err)
			return
		}
		unix.Setfsgid(int(s.cred.Gid))
		unix.Setfsuid(int(s.cred.Uid))
		if got, _ := unix.SetfsuidRetUid(-1); got != int(s.cred.Uid) {
			errc <- fmt.Errorf("switch to uid %d failed (agent lacks CAP_SETUID?)", s.cred.Uid)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

func checkPath(p string) error {
	if !filepath.IsAbs(p) {
		return badRequest("path %q is not absolute; give a path like /workspace/main.py", p)
	}
	return nil
}

func (s *Server) readFile(path string, max int64) (data []byte, truncated bool, err error) {
	if err := checkPath(path); err != nil {
		return nil, false, err
	}
	err = s.asUser(func() error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return badRequest("%s is a directory; list it with a command instead", path)
		}
		var r io.Reader = f
		if max > 0 {
			r = io.LimitReader(f, max+1)
		}
		data, err = io.ReadAll(r)
		if err != nil {
			return err
		}
		if max > 0 && int64(len(data)) > max {
			data, truncated = data[:max], true
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	return data, truncated, nil
}

func (s *Server) writeFile(path string, data []byte, mode fs.FileMode) error {
	if err := checkPath(path); err != nil {
		return err
	}
	if mode == 0 {
		mode = 0o644
	}
	err := s.asUser(func() error {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// copyIn extracts a tar into dir as root. Entries keep the tar's owner and
// mode and land inside dir: names are rooted there, and every file
// operation goes through an os.Root, so a symlink the sandbox user left in
// dir cannot send an entry elsewhere. dir itself may not pass through a
// symlink the sandbox user owns (a planted tests -> /etc); root's own
// links (/bin, /lib) are fine.
func (s *Server) copyIn(dir string, data []byte) error {
	if err := checkPath(dir); err != nil {
		return err
	}
	dir = filepath.Clean(dir)
	if err := noForeignLinks(dir); err != nil {
		return fmt.Errorf("copy in %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("copy in %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("copy in %s: %w", dir, err)
	}
	defer root.Close()
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return badRequest("copy in %s: bad tar: %v", dir, err)
		}
		// Rooting the name before cleaning drops any leading "..".
		name := strings.TrimPrefix(filepath.Clean("/"+h.Name), "/")
		if name == "" {
			continue // the archive's own top directory
		}
		if err := extract(root, tr, h, name); err != nil {
			return fmt.Errorf("copy in %s: %s: %w", dir, h.Name, err)
		}
	}
}

// noForeignLinks refuses a path that passes through a symlink owned by
// anyone but root.
func noForeignLinks(p string) error {
	cur := "/"
	for _, part := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // the rest is created
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != 0 {
			return fmt.Errorf("%s is a symlink not owned by root (left by the sandbox user?); refusing to follow it", cur)
		}
	}
	return nil
}

func extract(root *os.Root, tr *tar.Reader, h *tar.Header, name string) error {
	mode := fs.FileMode(h.Mode).Perm()
	if d := filepath.Dir(name); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if err := root.MkdirAll(name, mode); err != nil {
			return err
		}
	case tar.TypeReg:
		root.Remove(name) // replace, never write through an existing symlink
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	case tar.TypeSymlink:
		root.Remove(name)
		if err := root.Symlink(h.Linkname, name); err != nil {
			return err
		}
		return root.Lchown(name, h.Uid, h.Gid)
	default:
		return nil // devices, fifos, hard links: not needed for source trees
	}
	if err := root.Lchown(name, h.Uid, h.Gid); err != nil {
		return err
	}
	return root.Chmod(name, mode) // after chown, which clears setuid bits, and past the umask
}

// copyOut tars path as root; a directory's entries are named under its base
// name, like `docker cp`.
func (s *Server) copyOut(path string) ([]byte, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	path = filepath.Clean(path)
	if _, err := os.Lstat(path); err != nil {
		return nil, fmt.Errorf("copy out %s: %w", path, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	parent := filepath.Dir(path)
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return nil // sockets and the like have no tar form
		}
		rel, _ := filepath.Rel(parent, p)
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.CopyN(tw, f, h.Size); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("copy out %s: %w", path, err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("copy out %s: %w", path, err)
	}
	return buf.Bytes(), nil
}
