package harness

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/docker"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
	"github.com/rollcage/rollcage/task"
)

// ensureAgentBinary builds the static agent the Docker backend mounts into
// every container, unless $ROLLCAGE_AGENT_BIN names one.
func ensureAgentBinary(t testing.TB) {
	t.Helper()
	if _, err := sandboxtest.EnsureAgent(); err != nil {
		t.Fatal(err)
	}
}

// dockerBackend returns the Docker backend, failing under CI=true and
// skipping elsewhere when no engine answers.
func dockerBackend(t testing.TB) sandbox.Backend {
	t.Helper()
	sandboxtest.RequireDocker(t)
	ensureAgentBinary(t)
	b, err := docker.New(context.Background(), docker.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatalf("docker.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		b.Close(ctx)
	})
	return b
}

// requireImages skips (fails under CI) when the demo images are missing.
func requireImage(t testing.TB, b sandbox.Backend, tk task.Task) {
	t.Helper()
	sb, err := b.Create(context.Background(), sandbox.Spec{Image: tk.Image, EpisodeID: "harness-image-check"})
	if errors.Is(err, sandbox.ErrImageMissing) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v: run 'make images'", err)
		}
		t.Skipf("%v (run 'make images')", err)
	}
	if err != nil {
		t.Fatalf("create %s: %v", tk.Image, err)
	}
	sb.Close(context.Background())
}

// TestReplayDemoInDocker replays every scripted trajectory of the demo
// suite through the real sandbox and monitor (default rules, no judge) and
// checks each outcome is what its kind demands.
func TestReplayDemoInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the whole demo suite in Docker")
	}
	b := dockerBackend(t)
	tasks, hidden, err := demo.Tasks()
	if err != nil {
		t.Fatal(err)
	}
	scripts, err := demo.Scripts()
	if err != nil {
		t.Fatal(err)
	}
	requireImage(t, b, tasks[0])
	r, _ := testRunner(t, b, Limits{})
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
