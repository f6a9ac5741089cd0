package containerd

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// TestReaper kills -9 a process that holds a sandbox and its fork's child;
// the next backend on the same state dir removes both containers (tasks,
// snapshots) and the run dirs, and a GC after it finds nothing.
func TestReaper(t *testing.T) {
	probe := newTestBackend(t, Config{}) // skips or fails like the others
	stateDir := t.TempDir()
	v := sandboxtest.StartVictim(t, stateDir)
	ids := v.IDs
	if len(ids) != 2 {
		t.Fatalf("child reported %d sandboxes, want 2 (one created, one forked)", len(ids))
	}
	v.Kill(t)
	ctx := probe.ctx(t.Context())
	for _, id := range ids {
		if _, err := probe.cli.LoadContainer(ctx, id); err != nil {
			t.Fatalf("container %s gone before the reaper ran: %v", id, err)
		}
	}
	newTestBackend(t, Config{Config: host.Config{StateDir: stateDir}}) // reaps at start
	for _, id := range ids {
		if _, err := probe.cli.LoadContainer(ctx, id); !cerrdefs.IsNotFound(err) {
			t.Errorf("container %s survived the reaper: %v", id, err)
		}
		if _, err := probe.snapshotter().Stat(ctx, id); !cerrdefs.IsNotFound(err) {
			t.Errorf("snapshot %s survived the reaper: %v", id, err)
		}
	}
	if entries, _ := os.ReadDir(stateDir); len(entries) != 0 {
		t.Errorf("run dirs survived the reaper: %v", entries)
	}
	if n, err := GC(t.Context(), Config{Config: host.Config{StateDir: stateDir}}); n != 0 || err != nil {
		t.Errorf("GC after the reap: %d removed, %v; want 0, nil", n, err)
	}
}

// TestWarmPool: a warm container is handed out (fast path), relabelled for
// its episode, and the pool refills; a spec the pool cannot serve gets a
// cold one.
func TestWarmPool(t *testing.T) {
	img := testImage()
	b := newTestBackend(t, Config{Config: host.Config{Pool: map[string]int{img: 1}}})
	waitWarm := func() *container {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			if ready := b.core.Pool.Ready(img); len(ready) == 1 {
				return ready[0]
			}
			if time.Now().After(deadline) {
				t.Fatalf("pool never warmed: %+v", b.Stats())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	warm := waitWarm()
	sb, err := b.Create(t.Context(), sandbox.Spec{Image: img, EpisodeID: "warm-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	if sb.(*container) != warm {
		t.Fatalf("Create made %s, want the warm %s", sb.ID(), warm.id)
	}
	labels, err := warm.ctr.Labels(b.ctx(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	if labels[host.LabelEpisode] != "warm-1" || labels[host.LabelPool] != "" {
		t.Errorf("handed-out labels %v: want episode warm-1 and no pool mark", labels)
	}
	if res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "id -u"}); err != nil || strings.TrimSpace(res.Output) != "1000" {
		t.Fatalf("exec in the warm sandbox: %v %q", err, res.Output)
	}
	if again := waitWarm(); again == warm {
		t.Fatal("the pool did not refill")
	}
	cold, err := b.Create(t.Context(), sandbox.Spec{Image: img, EpisodeID: "cold", Labels: map[string]string{"team": "rl"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close(context.Background())
	if ready := b.core.Pool.Ready(img); len(ready) != 1 || ready[0] == cold.(*container) {
		t.Errorf("a labelled spec took the warm container")
	}
}

// TestAdmission: with MaxCreating 1, eight concurrent creations run one
// at a time, and all eight succeed.
func TestAdmission(t *testing.T) {
	b := newTestBackend(t, Config{Config: host.Config{MaxCreating: 1}})
	var mu sync.Mutex
	now, peak := 0, 0
	b.core.Slots.OnCreating = func(d int) {
		mu.Lock()
		now += d
		peak = max(peak, now)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			sb, err := b.Create(t.Context(), sandbox.Spec{Image: testImage(), EpisodeID: "admission"})
			if err == nil {
				err = sb.Close(t.Context())
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if peak != 1 {
		t.Errorf("%d creations at once under MaxCreating 1", peak)
	}
}

// TestProxyMode: HTTP through 127.0.0.1:3128 on the loopback the host
// brought up, relayed to the host's socket; no direct route.
func TestProxyMode(t *testing.T) {
	sandboxtest.ProxyMode(t, newTestBackend(t, Config{}), testImage())
}
