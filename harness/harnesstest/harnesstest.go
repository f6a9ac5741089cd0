package harnesstest

import (
	"context"
	"io/fs"
	"sync"
	"testing"

	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/rules"
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
