package harness

import (
	"context"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/trajectory"
)

// TestBatchGroups: a batch's attempts of one task share a group id, other
// tasks' differ, and the finished feed carries it.
func TestBatchGroups(t *testing.T) {
	r, st := testRunner(t, &fake.Backend{}, Limits{})
	var pol countingPolicies
	if _, err := r.RunBatch(context.Background(), fakeTasks(2), fakeHidden, pol.policyFor(echoScript),
		BatchOptions{Concurrency: 2, Attempts: 3, OutDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	groups := map[string]map[string]int{} // task -> group -> episodes
	if err := st.ReadFinished(context.Background(), 0, func(ev trajectory.Event) error {
		if ev.Type != trajectory.TypeEpisodeEnd {
			return nil
		}
		var end trajectory.EpisodeEnd
		if err := ev.Decode(&end); err != nil {
			return err
		}
		task, _, _ := strings.Cut(ev.EpisodeID, ".a")
		if groups[task] == nil {
			groups[task] = map[string]int{}
		}
		groups[task][end.GroupID]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for task, gs := range groups {
		if len(gs) != 1 {
			t.Errorf("task %s: groups %v, want one of 3 episodes", task, gs)
		}
		for g, n := range gs {
			if g == "" || n != 3 || seen[g] {
				t.Errorf("task %s: group %q of %d episodes (seen before: %v)", task, g, n, seen[g])
			}
			seen[g] = true
		}
	}
	if len(groups) != 2 {
		t.Errorf("episode ends of %d tasks on the feed, want 2", len(groups))
	}
}
