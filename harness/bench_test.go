package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rollcage/rollcage/sandbox/docker/dockertest"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/toolcall"
)

// BenchmarkReplayDemo32 runs 32 replayed demo episodes at once through
// Docker and the monitor (go test -bench ReplayDemo32 -benchtime 1x) and
// reports episodes per minute and the harness's own time per call (monitor
// included, sandbox execution excluded).
func BenchmarkReplayDemo32(b *testing.B) {
	be := dockertest.Backend(b)
	tasks, hidden, scripts := demoSuite(b)
	sandboxtest.RequireImage(b, be, tasks[0].Image)
	byID := map[string]task.Task{}
	for _, t := range tasks {
		byID[t.ID] = t
	}
	r, _ := testRunner(b, be, Limits{})
	const n = 32
	var episodes, calls int
	var overhead, wall time.Duration
	for b.Loop() {
		outs := make([]Outcome, n)
		t0 := time.Now()
		g := new(errgroup.Group)
		for i := range n {
			s := scripts[(i*7)%len(scripts)] // spread over tasks and kinds
			g.Go(func() error {
				o, err := r.Run(context.Background(), byID[s.Task], hidden, EpisodeMeta{}, Replay{Script: s})
				outs[i] = o
				if err == nil && o.FailureClass == FailureInfrastructure {
					err = fmt.Errorf("%s/%s: %s", s.Task, s.Name, o.Error)
				}
				return err
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		wall += time.Since(t0)
		for _, o := range outs {
			episodes++
			calls += o.Steps
			overhead += o.Overhead * time.Duration(o.Steps)
		}
	}
	b.ReportMetric(float64(episodes)/wall.Minutes(), "episodes/min")
	b.ReportMetric(float64(overhead.Microseconds())/float64(calls), "µs-overhead/call")
}

// BenchmarkCallOverhead is the harness's and the monitor's cost of one
// bash call with a sandbox that answers at once: normalize, rules, decide,
// three events recorded.
func BenchmarkCallOverhead(b *testing.B) {
	r, _ := testRunner(b, &fake.Backend{}, Limits{MaxSteps: 1 << 30})
	ep, err := r.Start(context.Background(), fakeTask, fakeHidden, EpisodeMeta{})
	if err != nil {
		b.Fatal(err)
	}
	defer ep.Close(context.Background())
	args := json.RawMessage(`{"command":"cd /workspace && python -m pytest -q tests/test_wrap.py | tail -5"}`)
	i := 0
	for b.Loop() {
		i++
		if _, err := ep.Call(context.Background(), toolcall.Call{Tool: toolcall.Bash, Args: args, RequestID: fmt.Sprint(i)}); err != nil {
			b.Fatal(err)
		}
	}
}
