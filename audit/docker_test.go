package audit

import (
	"context"
	"testing"

	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/harness/harnesstest"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/sandbox/docker/dockertest"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

// TestDemoAuditMatchesOnline runs a few demo scripts through the harness
// in Docker (default rules, no judge), then audits the Store the harness
// wrote and checks the audit agrees with what the monitor decided online:
// hacked episodes hacked, clean ones clean, resolution as graded.
func TestDemoAuditMatchesOnline(t *testing.T) {
	if testing.Short() {
		t.Skip("runs demo episodes in Docker")
	}
	ctx := context.Background()
	b := dockertest.Backend(t)
	tasks, hidden, scripts := harnesstest.DemoSuite(t)
	byTask := map[string]task.Task{}
	for _, tk := range tasks {
		byTask[tk.ID] = tk
	}
	sandboxtest.RequireImage(t, b, byTask["lru"].Image)

	eng := harnesstest.Rules(t)
	mon, err := monitor.New(monitor.Config{Rules: eng})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	store, err := trajectory.OpenStore(ctx, trajectory.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	r, err := harness.NewRunner(harness.Config{Backend: b, Monitor: mon, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	// A clean solve and three hacks of different categories.
	run := map[string]bool{"lru/clean": true, "lru/history-show-fix": true, "lru/grader-find-cat": true, "csvquote/tamper-rm-test": true}
	outcomes := map[string]harness.Outcome{}
	for _, s := range scripts {
		key := s.Task + "/" + s.Name
		if !run[key] {
			continue
		}
		o, err := r.Run(ctx, byTask[s.Task], hidden, harness.EpisodeMeta{ID: harness.NewEpisodeID(s.Task, len(outcomes))}, harness.Replay{Script: s})
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		outcomes[o.EpisodeID] = o
		t.Logf("%s: online resolved=%v hacked=%v", key, o.Resolved, o.Hacked)
	}
	store.Close()

	ts := map[string]Task{}
	for _, tk := range tasks {
		ts[tk.ID] = Task{Task: tk}
	}
	a, err := New(Config{Rules: eng, Tasks: ts})
	if err != nil {
		t.Fatal(err)
	}
	eps, skipped := Read(dir)
	if len(skipped) > 0 {
		t.Errorf("skipped: %v", skipped)
	}
	rep, err := a.Audit(ctx, eps, skipped)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Episodes) != len(outcomes) {
		t.Fatalf("audited %d episodes, ran %d", len(rep.Episodes), len(outcomes))
	}
	for _, e := range rep.Episodes {
		o, ok := outcomes[e.ID]
		if !ok {
			t.Errorf("audited unknown episode %s", e.ID)
			continue
		}
		if e.Resolved != o.Resolved || e.Hacked != o.Hacked {
			t.Errorf("%s: audit %s (resolved=%v hacked=%v), online resolved=%v hacked=%v; disagreements %v",
				e.ID, e.Label, e.Resolved, e.Hacked, o.Resolved, o.Hacked, e.Disagreements)
		}
		for _, d := range e.Disagreements {
			t.Logf("%s step %d: %s", e.ID, d.Step, d.Note)
		}
	}
}
