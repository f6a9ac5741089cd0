package sandboxtest

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rollcage/rollcage/internal/golden"
)

// GoldenJSON compares v, as indented JSON, with the golden file path
// (under the package's testdata), writing the file first under -update
// (golden.Read).
func GoldenJSON(t testing.TB, path string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	want := golden.Read(t, path, got, "go test")
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s changed (-golden +got); rerun with -update if intended:\n%s", path, diff)
	}
}
