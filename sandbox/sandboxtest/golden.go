package sandboxtest

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rollcage/rollcage/internal/golden"
)

// GoldenJSON compares v, as indented JSON, with the golden file path
// (under the package's testdata), writing the file first when update is
// set: the test package's -update flag, which each package defines (a flag
// defined here would clash with theirs).
func GoldenJSON(t testing.TB, path string, v any, update bool) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	want := golden.Read(t, path, got, update, "go test")
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s changed (-golden +got); rerun with -update if intended:\n%s", path, diff)
	}
}
