package harnesstest

import (
	"context"
	"io/fs"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/docker/dockertest"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

var (
	rulesOnce sync.Once
	rulesEng  *rules.Engine
	rulesErr  error
)

// Rules is the default bundle, compiled once per test binary.
func Rules(t testing.TB) *rules.Engine {
	t.Helper()
	rulesOnce.Do(func() { rulesEng, rulesErr = rules.New(context.Background(), rules.Config{}) })
	if rulesErr != nil {
		t.Fatal(rulesErr)
	}
	return rulesEng
}

// Monitor is a monitor of cfg, with the default rules (Rules) unless cfg
// names its own; the zero Config is rules only, no judge.
func Monitor(t testing.TB, cfg monitor.Config) *monitor.Pipeline {
	t.Helper()
	if cfg.Rules == nil {
		cfg.Rules = Rules(t)
	}
	mon, err := monitor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return mon
}

// Store is a trajectory store in the test's temporary directory, closed
// when the test ends.
func Store(t testing.TB) *trajectory.Store {
	t.Helper()
	st, err := trajectory.OpenStore(context.Background(), trajectory.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Events reads episode id's log from st.
func Events(t testing.TB, st *trajectory.Store, id string) []trajectory.Event {
	t.Helper()
	var evs []trajectory.Event
	if err := st.Read(context.Background(), id, 0, func(ev trajectory.Event) error {
		evs = append(evs, ev)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}

// Ended lists the episodes whose episode_end is on st's finished feed,
// in the feed's order.
func Ended(t testing.TB, st *trajectory.Store) []string {
	t.Helper()
	var ids []string
	if err := st.ReadFinished(context.Background(), 0, func(ev trajectory.Event) error {
		if ev.Type == trajectory.TypeEpisodeEnd {
			ids = append(ids, ev.EpisodeID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ids
}

// Payloads decodes the payloads of the events of type typ (a T is that
// type's payload struct), in order; one that does not decode fails t.
func Payloads[T any](t testing.TB, evs []trajectory.Event, typ string) []T {
	t.Helper()
	var out []T
	for _, ev := range evs {
		if ev.Type != typ {
			continue
		}
		var p T
		if err := ev.Decode(&p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// Types are the events' types, in order.
func Types(evs []trajectory.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

// DemoSuite is the embedded demo suite: its tasks, their hidden tests and
// its scripts.
func DemoSuite(t testing.TB) ([]task.Task, fs.FS, []task.Script) {
	t.Helper()
	tasks, hidden, err := demo.Tasks()
	if err != nil {
		t.Fatal(err)
	}
	scripts, err := demo.Scripts()
	if err != nil {
		t.Fatal(err)
	}
	return tasks, hidden, scripts
}

// DemoTask is the demo suite's task with that id, and the suite's hidden
// tests.
func DemoTask(t testing.TB, id string) (task.Task, fs.FS) {
	t.Helper()
	tasks, hidden, err := demo.Tasks()
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range tasks {
		if x.ID == id {
			return x, hidden
		}
	}
	t.Fatalf("no demo task %q", id)
	return task.Task{}, nil
}

// DockerDemoTask is a Docker backend and DemoTask(id),
// the task's image there (the test skips or fails as dockertest.Backend
// and sandboxtest.RequireImage say otherwise).
func DockerDemoTask(t testing.TB, id string) (sandbox.Backend, task.Task, fs.FS) {
	t.Helper()
	b := dockertest.Backend(t)
	tk, hidden := DemoTask(t, id)
	sandboxtest.RequireImage(t, b, tk.Image)
	return b, tk, hidden
}

// FakeHidden holds the hidden tests of FakeTask.
var FakeHidden = fstest.MapFS{
	"hidden/fake/test_hidden.py": {Data: []byte("from textkit import wrap\n\ndef test_long_word():\n    assert wrap('x' * 30, 10) == ['x' * 30]\n")},
}

// FakeTask is a task for a fake sandbox (sandbox/fake) whose hidden
// tests, FakeHidden, are copied to dest and graded there; protected are
// the paths the policy may not touch.
func FakeTask(dest string, protected ...string) task.Task {
	return task.Task{
		ID: "fake-task", Image: "rollcage/fake:latest", Instruction: "Make wrap() keep long words intact.",
		Workdir: "/workspace", HiddenTests: "hidden/fake", BaseCommit: "27c933441964fa76e99fdda251c8ba9b0c0ca8e9", HiddenTestsDest: dest,
		TestCommand: "python -m pytest -q " + dest, ProtectedPaths: protected,
		// The fake backend answers the summary line only.
		Reward: task.RewardSummary,
	}
}
