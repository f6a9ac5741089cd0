package hostside

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/sandbox/host"
)

// TestLeftovers: which listed containers Reap and RemoveEpisode remove,
// by their owner's labels and, where the owner's pid means nothing here,
// by what the engine says of the container; with the run dirs that go
// with them and those a kept container still holds.
func TestLeftovers(t *testing.T) {
	self, err := SelfOwner()
	if err != nil {
		t.Fatal(err)
	}
	dead := self
	dead.Start++ // our pid, another start time: a process that is gone
	otherNS := self
	otherNS.PidNS = "pid:[1]"
	otherNS.Start++
	otherBoot := self
	otherBoot.Boot = "another-boot"
	otherBoot.Start++
	legacy := dead
	legacy.Boot, legacy.PidNS = "", "" // labelled before boot and pid namespace were

	type row struct {
		id    string
		owner *Owner // nil: no owner labels
		state State
	}
	rows := []row{
		{"live", &self, StateStopped},
		{"dead", &dead, StateRunning},
		{"legacy-dead", &legacy, StateRunning},
		{"ns-running", &otherNS, StateRunning},
		{"ns-created", &otherNS, StateOther},
		{"ns-stopped", &otherNS, StateStopped},
		{"boot-running", &otherBoot, StateRunning},
		{"boot-paused", &otherBoot, StateOther},
		{"boot-stopped", &otherBoot, StateStopped},
		{"unowned", nil, StateStopped},
	}
	setup := func(t *testing.T) (Leftovers, *[]string) {
		dir := t.TempDir()
		l := Leftovers{Prefix: "test", StateDir: dir}
		for _, r := range rows {
			labels := map[string]string{host.LabelManaged: "1", host.LabelRunDir: r.id + "-dir"}
			if r.owner != nil {
				for k, v := range r.owner.Labels() {
					labels[k] = v
				}
			}
			if err := os.Mkdir(filepath.Join(dir, r.id+"-dir"), 0o700); err != nil {
				t.Fatal(err)
			}
			l.Found = append(l.Found, Found{ID: r.id, Labels: labels, State: func() State { return r.state }})
		}
		// run dirs without a container: the reaper judges them by name
		for _, o := range []Owner{self, dead} {
			if err := os.Mkdir(filepath.Join(dir, o.DirName("orphan")), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		var removed []string
		l.Remove = func(_ context.Context, f Found) error {
			removed = append(removed, f.ID)
			return nil
		}
		return l, &removed
	}
	dirs := func(t *testing.T, dir string) []string {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}

	t.Run("Reap", func(t *testing.T) {
		l, removed := setup(t)
		n, err := l.Reap(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		wantRemoved := []string{"dead", "legacy-dead", "ns-stopped", "boot-paused", "boot-stopped"}
		if diff := cmp.Diff(wantRemoved, *removed); diff != "" {
			t.Errorf("removed containers (-want +got):\n%s", diff)
		}
		if n != len(wantRemoved)+1 { // and the dead owner's orphan dir
			t.Errorf("Reap counted %d, want %d", n, len(wantRemoved)+1)
		}
		wantDirs := []string{self.DirName("orphan"), "boot-running-dir", "live-dir", "ns-created-dir", "ns-running-dir", "unowned-dir"}
		slices.Sort(wantDirs)
		if diff := cmp.Diff(wantDirs, dirs(t, l.StateDir)); diff != "" {
			t.Errorf("run dirs left (-want +got):\n%s", diff)
		}
	})

	t.Run("RemoveEpisode", func(t *testing.T) {
		l, removed := setup(t)
		n, err := l.RemoveEpisode(t.Context(), "ep")
		if err != nil {
			t.Fatal(err)
		}
		// every container but a live local owner's: the episode is over
		want := []string{"dead", "legacy-dead", "ns-running", "ns-created", "ns-stopped", "boot-running", "boot-paused", "boot-stopped", "unowned"}
		if diff := cmp.Diff(want, *removed); diff != "" || n != len(want) {
			t.Errorf("removed %d (-want +got):\n%s", n, diff)
		}
		if got := dirs(t, l.StateDir); !slices.Contains(got, "live-dir") || slices.Contains(got, "dead-dir") {
			t.Errorf("run dirs left %v: want live-dir kept, dead-dir gone", got)
		}
	})

	t.Run("RemoveFails", func(t *testing.T) {
		l, _ := setup(t)
		boom := errors.New("engine says no")
		l.Remove = func(context.Context, Found) error { return boom }
		n, err := l.Reap(t.Context())
		if !errors.Is(err, boom) {
			t.Fatalf("Reap: %v, want the engine's error", err)
		}
		if n != 1 { // only the orphan dir
			t.Errorf("Reap counted %d with every removal failing, want 1", n)
		}
		if got := dirs(t, l.StateDir); !slices.Contains(got, "dead-dir") {
			t.Errorf("run dir of a container that could not be removed is gone: %v", got)
		}
	})
}
