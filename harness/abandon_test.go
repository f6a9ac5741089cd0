package harness

import (
	"errors"
	"testing"

	"github.com/rollcage/rollcage/trajectory"
)

// TestAbandonStoredUnknown holds the error of an unknown episode to one
// line that names it once: the store's error says which episode, the
// harness only what it was doing.
func TestAbandonStoredUnknown(t *testing.T) {
	st, err := trajectory.OpenStore(t.Context(), trajectory.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ok, err := AbandonStored(t.Context(), st, "ep-nope", "gateway restart")
	if ok || !errors.Is(err, trajectory.ErrNotFound) {
		t.Fatalf("AbandonStored(unknown) = %v, %v; want false and an error wrapping trajectory.ErrNotFound", ok, err)
	}
	if want := "harness: abandon: trajectory: episode ep-nope: " + trajectory.ErrNotFound.Error(); err.Error() != want {
		t.Errorf("error:\n got %s\nwant %s", err, want)
	}
}
