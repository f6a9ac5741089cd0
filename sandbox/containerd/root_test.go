package containerd

import (
	"errors"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/sandbox"
)

// TestRootRefused: the containerd backend cannot give a root sandbox
// safely and says why, without creating anything.
func TestRootRefused(t *testing.T) {
	b := newTestBackend(t, Config{})
	_, err := b.Create(t.Context(), sandbox.Spec{Image: testImage(), EpisodeID: "root", User: sandbox.UserRoot})
	if !errors.Is(err, sandbox.ErrUnsupported) || !strings.Contains(err.Error(), "remapped snapshots") {
		t.Fatalf("Create(root): %v, want ErrUnsupported naming remapped snapshots", err)
	}
	if st := b.Stats(); st.Alive != 0 || st.Creating != 0 {
		t.Errorf("a refused root sandbox left %+v", st)
	}
}
