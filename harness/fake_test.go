package harness

import (
	"context"
	"io/fs"
	"testing"

	"github.com/rollcage/rollcage/harness/harnesstest"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

// fakeTask is a task whose hidden tests live in fakeHidden.
var fakeTask, fakeHidden = harnesstest.FakeTask("/workspace/tests/hidden", "/workspace/tests/hidden/**"), harnesstest.FakeHidden

// testRunner returns a Runner over the backend, the default rules (no
// judge) and a store in a temporary directory.
func testRunner(t testing.TB, b sandbox.Backend, limits Limits) (*Runner, *trajectory.Store) {
	t.Helper()
	return newTestRunner(t, Config{Backend: b, Limits: limits})
}

// startFake starts an episode of fakeTask on b: startEpisode.
func startFake(ctx context.Context, t *testing.T, b sandbox.Backend) (*trajectory.Store, *Episode) {
	t.Helper()
	return startEpisode(ctx, t, b, fakeTask, fakeHidden)
}

// startEpisode starts an episode of tk on b with testRunner's runner (no
// limits) and returns the episode and the runner's store.
func startEpisode(ctx context.Context, t *testing.T, b sandbox.Backend, tk task.Task, hidden fs.FS) (*trajectory.Store, *Episode) {
	t.Helper()
	r, st := testRunner(t, b, Limits{})
	ep, err := r.Start(ctx, tk, hidden, EpisodeMeta{})
	if err != nil {
		t.Fatal(err)
	}
	return st, ep
}

// newTestRunner is testRunner for any Config: the default rules' monitor
// and a temporary store are filled in.
func newTestRunner(t testing.TB, cfg Config) (*Runner, *trajectory.Store) {
	t.Helper()
	st := harnesstest.Store(t)
	cfg.Monitor, cfg.Store = harnesstest.Monitor(t, monitor.Config{}), st
	r, err := NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r, st
}

// events reads an episode's log.
func events(t testing.TB, st *trajectory.Store, id string) []trajectory.Event {
	t.Helper()
	return harnesstest.Events(t, st, id)
}

func eventTypes(evs []trajectory.Event) []string { return harnesstest.Types(evs) }

// demoSuite is harnesstest.DemoSuite.
func demoSuite(t testing.TB) ([]task.Task, fs.FS, []task.Script) { return harnesstest.DemoSuite(t) }
