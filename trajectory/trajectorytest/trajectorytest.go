// Package trajectorytest spoils trajectory logs the way a crash, a disk
// error or a second writer would, for the tests of their readers.
package trajectorytest

import (
	"os"
	"strings"
	"testing"
)

// CorruptLine replaces line i (from 0) of the log at path with a line
// that is not JSON, keeping the lines after it.
func CorruptLine(t testing.TB, path string, i int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	if i >= len(lines)-1 {
		t.Fatalf("CorruptLine(%s, %d): the log has %d lines", path, i, len(lines)-1)
	}
	lines[i] = "{torn\n"
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
}
