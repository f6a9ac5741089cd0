package fake

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/rollcage/rollcage/sandbox"
)

// files is where a Sandbox keeps its files: in memory (memFiles) or in
// a host directory (dirFiles). Paths are clean, in the sandbox's terms;
// the Sandbox's mu guards every call.
type files interface {
	// read returns a regular file's content or a *sandbox.PathError
	// saying why it cannot (its Op and Path are filled in by the
	// caller); so does write.
	read(p string) ([]byte, error)
	write(p string, data []byte, mode fs.FileMode) error
	// below returns the regular files at p or below it, sorted.
	below(p string) ([]string, error)
	// clone copies the files for a fork child; false when they cannot be
	// copied apart.
	clone() (files, bool)
}

func pathErr(kind, reason string) *sandbox.PathError {
	return &sandbox.PathError{Kind: kind, Reason: reason}
}

// hostPathErr is what a host file operation's error says to the
// sandbox user: a *sandbox.PathError where the caller caused it, err
// itself where the host failed.
func hostPathErr(err error) error {
	if kind, reason, ok := sandbox.ErrnoKind(err); ok {
		return pathErr(kind, reason)
	}
	return err
}

// memFiles keeps the files in a map; a directory is a path with files
// below it.
type memFiles map[string]string

func (m memFiles) read(p string) ([]byte, error) {
	if c, ok := m[p]; ok {
		return []byte(c), nil
	}
	if len(m.belowDir(p)) > 0 {
		return nil, pathErr(sandbox.KindIsDir, "Is a directory")
	}
	return nil, pathErr(sandbox.KindNotFound, "No such file or directory")
}

func (m memFiles) write(p string, data []byte, _ fs.FileMode) error {
	m[p] = string(data)
	return nil
}

func (m memFiles) belowDir(p string) []string {
	var names []string
	for f := range m {
		if strings.HasPrefix(f, p+"/") {
			names = append(names, f)
		}
	}
	return names
}

func (m memFiles) below(p string) ([]string, error) {
	names := m.belowDir(p)
	if _, ok := m[p]; ok {
		names = append(names, p)
	}
	slices.Sort(names)
	return names, nil
}

func (m memFiles) clone() (files, bool) { return maps.Clone(m), true }

// dirFiles keeps the files in a host directory: the sandbox's path p is
// the host's root+p.
type dirFiles struct{ root string }

func (d dirFiles) host(p string) string { return filepath.Join(d.root, p) }

func (d dirFiles) read(p string) ([]byte, error) {
	h := d.host(p)
	fi, err := os.Stat(h)
	switch {
	case errors.Is(err, syscall.ENOTDIR): // a file on the way: as cat says
		return nil, pathErr(sandbox.KindNotFound, "No such file or directory")
	case err != nil:
		return nil, hostPathErr(err)
	case fi.IsDir():
		return nil, pathErr(sandbox.KindIsDir, "Is a directory")
	case !fi.Mode().IsRegular():
		return nil, pathErr(sandbox.KindNotRegular, "not a regular file")
	}
	data, err := os.ReadFile(h)
	if err != nil {
		return nil, hostPathErr(err)
	}
	return data, nil
}

// write makes the parent directories and the file; mode 0 is 0644.
func (d dirFiles) write(p string, data []byte, mode fs.FileMode) error {
	h := d.host(p)
	if mode == 0 {
		mode = 0o644
	}
	if err := os.MkdirAll(filepath.Dir(h), 0o755); err != nil {
		return hostPathErr(err)
	}
	if err := os.WriteFile(h, data, mode); err != nil {
		return hostPathErr(err)
	}
	return nil
}

func (d dirFiles) below(p string) ([]string, error) {
	var names []string
	err := filepath.WalkDir(d.host(p), func(h string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			names = append(names, filepath.Join("/", strings.TrimPrefix(h, d.root)))
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	slices.Sort(names)
	return names, err
}

// clone cannot: the sandboxes of a Backend share its directory.
func (d dirFiles) clone() (files, bool) { return nil, false }
