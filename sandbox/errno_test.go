package sandbox_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rollcage/rollcage/sandbox"
)

// TestErrnoKind: errnos the caller causes get their kind and the text a
// shell prints; anything else is the host's.
func TestErrnoKind(t *testing.T) {
	_, missing := os.Open(filepath.Join(t.TempDir(), "missing"))
	tests := []struct {
		name       string
		err        error
		kind, text string
		ok         bool
	}{
		{"missing file from os", missing, sandbox.KindNotFound, "No such file or directory", true},
		{"wrapped permission", fmt.Errorf("write: %w", syscall.EACCES), sandbox.KindPermission, "Permission denied", true},
		{"disk quota", syscall.EDQUOT, sandbox.KindNoSpace, "Disk quota exceeded", true},
		{"not a directory", &os.PathError{Op: "open", Path: "/a/b", Err: syscall.ENOTDIR}, sandbox.KindNotDir, "Not a directory", true},
		{"the host's errno", syscall.ECONNREFUSED, "", "", false},
		{"no errno", errors.New("boom"), "", "", false},
	}
	for _, tc := range tests {
		kind, text, ok := sandbox.ErrnoKind(tc.err)
		if kind != tc.kind || text != tc.text || ok != tc.ok {
			t.Errorf("%s: ErrnoKind(%v) = %q, %q, %t; want %q, %q, %t", tc.name, tc.err, kind, text, ok, tc.kind, tc.text, tc.ok)
		}
	}
}
