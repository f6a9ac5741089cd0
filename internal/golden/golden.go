package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// Update reports whether the test runs with -update.
func Update() bool { return *update }

// Read returns the golden file at path. Under -update it first writes got
// there (making its directory); a file that cannot be read fails t, the
// message ending with how to create it: run says which go test command.
func Read(t testing.TB, path string, got []byte, run string) []byte {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run %s -update to create it)", err, run)
	}
	return want
}
