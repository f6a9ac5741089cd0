package harness

import (
	"errors"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/harness/harnesstest"
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

// TestAbandonStoredEmpty: a log its episode never wrote to (killed while
// starting) is removed, not given an episode_end alone; a started one is
// ended.
func TestAbandonStoredEmpty(t *testing.T) {
	ctx := t.Context()
	st, err := trajectory.OpenStore(ctx, trajectory.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tests := []struct {
		id     string
		events []string // the log's event types before the crash
		ended  bool
		gone   bool
	}{
		{"ep-empty", nil, false, true},
		{"ep-started", []string{trajectory.TypeEpisodeStart}, true, false},
	}
	for _, tc := range tests {
		l, err := st.Log(tc.id)
		if err != nil {
			t.Fatal(err)
		}
		for i, typ := range tc.events {
			ev, err := trajectory.NewEvent(tc.id, 0, i, typ, trajectory.EpisodeStart{TaskID: "t"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Append(ev); err != nil {
				t.Fatal(err)
			}
		}
		l.Close() // the crash: nothing more is written
		ended, err := AbandonStored(ctx, st, tc.id, "gateway restart")
		if err != nil || ended != tc.ended {
			t.Errorf("%s: AbandonStored = %v, %v; want %v", tc.id, ended, err, tc.ended)
		}
		if _, err := st.Info(tc.id); errors.Is(err, trajectory.ErrNotFound) != tc.gone {
			t.Errorf("%s: Info after AbandonStored: %v; want the log gone: %v", tc.id, err, tc.gone)
		}
	}
	if feed := harnesstest.Ended(t, st); strings.Join(feed, ",") != "ep-started" {
		t.Errorf("finished feed ends %v; want ep-started only", feed)
	}
}
