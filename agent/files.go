package agent

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rollcage/rollcage/sandbox"
)

// asUser runs fn with the sandbox user's file permissions, on one of the
// server's user threads (see userThreads).
func (s *Server) asUser(fn func() error) error {
	if s.cred == nil {
		return fn()
	}
	return s.userThreads.do(fn)
}

func checkPath(p string) error {
	if !filepath.IsAbs(p) {
		return badRequest("path %q is not absolute; give a path like /workspace/main.py", p)
	}
	return nil
}

// checkPath is checkPath plus, in a root sandbox, nestPath: what the
// policy's shells cannot see, its file operations cannot reach either.
func (s *Server) checkPath(p string) error {
	if err := checkPath(p); err != nil {
		return err
	}
	if s.nest != nil {
		return nestPath(filepath.Clean(p))
	}
	return nil
}

// maxWholeRead bounds a read without a cap of its own (read_file with
// max <= 0, edit): a bigger file is refused rather than shipped in one
// frame. A file's size is checked again while reading, since /proc and
// growing files lie about it.
const maxWholeRead = 64 << 20

// readChunk is how much one read syscall asks for; the call's deadline is
// checked between chunks.
const readChunk = 1 << 20

// readFile reads a regular file as the sandbox user. The open never
// blocks (O_NONBLOCK: a FIFO without a writer opens at once), the type is
// checked on the open descriptor (no race with a rename), and the read is
// bounded by max (or maxWholeRead) and by ctx.
func (s *Server) readFile(ctx context.Context, path string, max int64) (data []byte, truncated bool, err error) {
	if err := s.checkPath(path); err != nil {
		return nil, false, err
	}
	err = s.asUser(func() error {
		f, size, err := openRegular(path, unix.O_RDONLY)
		if err != nil {
			return err
		}
		defer f.Close()
		limit := max
		if max <= 0 {
			limit = maxWholeRead
			if size > limit {
				return tooLarge(path)
			}
		}
		buf := make([]byte, 0, min(size, limit)+1)
		chunk := make([]byte, min(limit+1, readChunk))
		for int64(len(buf)) <= limit {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("stopped after %d bytes: %w", len(buf), err)
			}
			n, err := f.Read(chunk[:min(int64(len(chunk)), limit+1-int64(len(buf)))])
			buf = append(buf, chunk[:n]...)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fileErr(path, err)
			}
		}
		if int64(len(buf)) > limit {
			if max <= 0 {
				return tooLarge(path)
			}
			buf, truncated = buf[:max], true
		}
		data = buf
		if data == nil {
			data = []byte{}
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	return data, truncated, nil
}

// writeFile writes a regular file as the sandbox user, creating parents.
// Like openRegular it never blocks on a FIFO and never writes to one, a
// device or a socket; the file is truncated only once it is known to be
// a regular file.
func (s *Server) writeFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error {
	return s.writeFileAs(ctx, "", path, data, mode)
}

// writeFileAs is writeFile as the user named user of a root sandbox
// (asNamed); "" is the sandbox user.
func (s *Server) writeFileAs(ctx context.Context, user, path string, data []byte, mode fs.FileMode) error {
	if err := s.checkPath(path); err != nil {
		return err
	}
	if mode == 0 {
		mode = 0o644
	}
	err := s.asNamed(user, func() error {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fileErr(path, err)
		}
		f, _, err := openRegular(path, unix.O_WRONLY|unix.O_CREAT, uint32(mode.Perm()))
		if err != nil {
			return err
		}
		if err := f.Truncate(0); err != nil {
			f.Close()
			return fileErr(path, err)
		}
		for len(data) > 0 {
			if err := ctx.Err(); err != nil {
				f.Close()
				return fmt.Errorf("stopped: %w", err)
			}
			n, err := f.Write(data[:min(len(data), readChunk)])
			data = data[n:]
			if err != nil {
				f.Close()
				return fileErr(path, err)
			}
		}
		if err := f.Close(); err != nil {
			return fileErr(path, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func tooLarge(path string) error {
	return refuse(sandbox.KindTooLarge, path, "file too large (over %d MiB); read part of it with a command (head, sed -n)", maxWholeRead>>20)
}

// openRegular opens path without blocking and refuses anything but a
// regular file, checked with fstat on the descriptor it opened; it
// returns the file's size as fstat saw it. The descriptor is switched
// back to blocking for the read or write.
func openRegular(path string, flags int, perm ...uint32) (*os.File, int64, error) {
	var mode uint32
	if len(perm) > 0 {
		mode = perm[0]
	}
	fd, err := unix.Open(path, flags|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, mode)
	if err != nil {
		if errors.Is(err, unix.ENXIO) {
			// O_WRONLY|O_NONBLOCK on a FIFO nobody reads, or a socket.
			return nil, 0, refuse(sandbox.KindNotRegular, path, "not a regular file (a FIFO or socket); use a command for it")
		}
		return nil, 0, fileErr(path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, 0, fileErr(path, err)
	}
	if k := st.Mode & unix.S_IFMT; k != unix.S_IFREG {
		unix.Close(fd)
		if k == unix.S_IFDIR {
			return nil, 0, refuse(sandbox.KindIsDir, path, "Is a directory")
		}
		return nil, 0, refuse(sandbox.KindNotRegular, path, "not a regular file (%s); use a command for it", fileType(k))
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, 0, fileErr(path, err)
	}
	return os.NewFile(uintptr(fd), path), st.Size, nil
}

func fileType(k uint32) string {
	switch k {
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFLNK:
		return "a symlink"
	}
	return "not a file"
}

// fileErr turns an errno the caller caused (permission, no such file, is a
// directory, a full disk, ...) into a pathError with the text a shell
// prints for it; anything else stays an internal error.
func fileErr(path string, err error) error {
	kind, reason, ok := sandbox.ErrnoKind(err)
	if !ok {
		return err
	}
	return refuse(kind, path, "%s", reason)
}

// copyIn extracts a tar into dir as root. Entries keep the tar's owner and
// mode and land inside dir: names are rooted there, and every file
// operation goes through an os.Root, so a symlink the sandbox user left in
// dir cannot send an entry elsewhere. dir itself is walked from / one name
// at a time (openDestDir), never following a symlink the sandbox user owns (a
// planted tests -> /etc), even one swapped in while the walk runs; root's
// own links (/bin, /lib) are followed.
func (s *Server) copyIn(dir string, data []byte) error {
	defer holdStart()()
	if err := s.checkPath(dir); err != nil {
		return err
	}
	dir = filepath.Clean(dir)
	root, err := openDestDir(dir)
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

// maxLinks is how many of root's symlinks openDestDir follows in one walk
// (the kernel's own limit).
const maxLinks = 40

// openDestDir opens the directory at the absolute path p as an os.Root,
// creating what is missing (mode 0755). It walks from / a name at a time
// with openat(O_NOFOLLOW|O_DIRECTORY), so a name is checked and entered
// in one step and a symlink swapped in between cannot be followed; a
// symlink it meets is followed only when root owns it (read through an
// O_PATH descriptor of the link itself, so its owner and target are those
// of one link). The os.Root is then opened by path and must be the
// directory walked to (same device and inode), or the walk was raced and
// nothing is copied.
func openDestDir(p string) (*os.Root, error) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer func() { unix.Close(fd) }()
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := "/" // the path walked, for messages
	for links := 0; len(parts) > 0; {
		part := parts[0]
		parts = parts[1:]
		if part == "" || part == "." {
			continue
		}
		if part == ".." { // in a link's target: the walk's parent, by its path
			parts = append(strings.Split(strings.TrimPrefix(filepath.Dir(cur), "/"), "/"), parts...)
			cur = "/"
			unix.Close(fd)
			if fd, err = unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
				return nil, err
			}
			continue
		}
		at := filepath.Join(cur, part)
		next, err := unix.Openat(fd, part, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			if err := unix.Mkdirat(fd, part, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				return nil, &os.PathError{Op: "mkdir", Path: at, Err: err}
			}
			next, err = unix.Openat(fd, part, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			target, lerr := rootLink(fd, part, at)
			if lerr != nil {
				return nil, lerr
			}
			if links++; links > maxLinks {
				return nil, &os.PathError{Op: "open", Path: p, Err: unix.ELOOP}
			}
			parts = append(strings.Split(target, "/"), parts...)
			if strings.HasPrefix(target, "/") {
				cur = "/"
				unix.Close(fd)
				if fd, err = unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: at, Err: err}
		}
		unix.Close(fd)
		fd, cur = next, at
	}
	var want unix.Stat_t
	if err := unix.Fstat(fd, &want); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(p)
	if err != nil {
		return nil, err
	}
	fi, err := root.Stat(".")
	if err != nil {
		root.Close()
		return nil, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Dev != want.Dev || st.Ino != want.Ino {
		root.Close()
		return nil, fmt.Errorf("%s changed while it was opened (a symlink swapped in?); refusing to copy into it", p)
	}
	return root, nil
}

// rootLink is the target of the symlink name in the directory dirfd (at
// is its path, for messages), which root must own: one the sandbox user
// left is refused.
func rootLink(dirfd int, name, at string) (string, error) {
	lfd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", &os.PathError{Op: "open", Path: at, Err: err}
	}
	defer unix.Close(lfd)
	var st unix.Stat_t
	if err := unix.Fstat(lfd, &st); err != nil {
		return "", err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return "", &os.PathError{Op: "open", Path: at, Err: unix.ENOTDIR}
	}
	if st.Uid != 0 {
		return "", fmt.Errorf("%s is a symlink not owned by root (left by the sandbox user?); refusing to follow it", at)
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(lfd, "", buf)
	if err != nil {
		return "", &os.PathError{Op: "readlink", Path: at, Err: err}
	}
	return string(buf[:n]), nil
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
	defer holdStart()()
	if err := s.checkPath(path); err != nil {
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
