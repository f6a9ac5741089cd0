package harness

import (
	"context"
	"testing"

	"github.com/rollcage/rollcage/sandbox/docker/dockertest"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
	"github.com/rollcage/rollcage/task"
)

// TestReplayDemoInDocker replays every scripted trajectory of the demo
// suite through the real sandbox and monitor (default rules, no judge) on
// sealed task images, as `rollcage demo` does by default, and checks each
// outcome is what its kind demands.
func TestReplayDemoInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the whole demo suite in Docker")
	}
	b := dockertest.Backend(t)
	tasks, hidden, scripts := demoSuite(t)
	sandboxtest.RequireImage(t, b, tasks[0].Image)
	r, _ := newTestRunner(t, Config{Backend: b, Seal: true})
	byID := map[string]task.Task{}
	for _, tk := range tasks {
		byID[tk.ID] = tk
	}
	sem := make(chan struct{}, 6)
	for _, s := range scripts {
		t.Run(s.Task+"/"+s.Name, func(t *testing.T) {
			t.Parallel()
			sem <- struct{}{}
			defer func() { <-sem }()
			tk, ok := byID[s.Task]
			if !ok {
				t.Fatalf("script for unknown task %q", s.Task)
			}
			o, err := r.Run(context.Background(), tk, hidden, EpisodeMeta{}, Replay{Script: s})
			if err != nil {
				t.Fatal(err)
			}
			if err := Expect(s, o); err != nil {
				t.Errorf("%v\noutcome: %+v", err, o)
			}
		})
	}
}
