package docker

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

func testLogger(t testing.TB) *slog.Logger { return sandboxtest.VerboseLogger(t) }

func TestConformance(t *testing.T) {
	cli := testClient(t)
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend {
		return newTestBackend(t, Config{})
	}, sandboxtest.Options{Image: testImage(), RemoveImage: removeImage(cli), Fork: true, Labels: containerLabels(cli)})
}

func TestWarmPool(t *testing.T) {
	cli := testClient(t)
	img := testImage()
	b := newTestBackend(t, Config{Pool: map[string]int{img: 2}})
	warm := waitWarm(t, b, img, 2)

	sb, err := b.Create(t.Context(), sandbox.Spec{Image: img, EpisodeID: "warm-ep", Env: map[string]string{"EPISODE_MARK": "warm-ep"}, Workdir: "/tmp"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if !warm[sb.ID()] {
		t.Fatalf("Create did not hand out a warm container (got %s, warm %v)", sb.ID(), warm)
	}
	// Configured for the episode: env and workdir.
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: `echo "$EPISODE_MARK"; pwd`})
	if err != nil || res.Output != "warm-ep\n/tmp\n" {
		t.Errorf("warm sandbox not configured: %q, %v", res.Output, err)
	}
	info, err := cli.ContainerInspect(t.Context(), sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(info.Name, "/rollcage-warm-ep-") {
		t.Errorf("handed-out container named %q, want rollcage-warm-ep-*", info.Name)
	}

	// The pool refills in the background.
	refilled := waitWarm(t, b, img, 2)
	if refilled[sb.ID()] {
		t.Error("a handed-out container is back in the pool")
	}

	// A spec the pool cannot serve (extra labels) gets a cold container.
	cold, err := b.Create(t.Context(), sandbox.Spec{Image: img, EpisodeID: "cold-ep", Labels: map[string]string{"team": "rl"}})
	if err != nil {
		t.Fatalf("Create cold: %v", err)
	}
	if refilled[cold.ID()] {
		t.Error("a spec with labels got a warm container, losing its labels")
	}
	info, err = cli.ContainerInspect(t.Context(), cold.ID())
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Labels["team"] != "rl" || info.Config.Labels[host.LabelEpisode] != "cold-ep" {
		t.Errorf("labels %v lack the spec's and the episode's", info.Config.Labels)
	}

	// Close drains the pool and closes the sandboxes handed out.
	if err := b.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if left := ownContainers(t, b); len(left) != 0 {
		t.Errorf("containers left after Backend.Close: %v", left)
	}
	if _, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "true"}); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Exec on a sandbox of a closed backend: %v, want ErrClosed", err)
	}
	if _, err := b.Create(t.Context(), sandbox.Spec{Image: img}); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Create on a closed backend: %v, want ErrClosed", err)
	}
}

// waitWarm waits until image's pool holds n containers and returns their
// ids.
func waitWarm(t *testing.T, b *Backend, img string, n int) map[string]bool {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for b.core.Pool.Count(img) < n {
		if time.Now().After(deadline) {
			t.Fatalf("pool of %s did not reach %d containers (stats %+v)", img, n, b.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
	ids := map[string]bool{}
	for _, c := range b.core.Pool.Ready(img) {
		ids[c.id] = true
	}
	return ids
}

// ownContainers lists the containers whose run dir is in b's state dir.
func ownContainers(t *testing.T, b *Backend) []string {
	t.Helper()
	cli := testClient(t)
	list, err := cli.ContainerList(context.Background(), dcontainer.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", host.LabelOwnerPID+"="+itoa(os.Getpid())))})
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(b.cfg.StateDir)
	mine := map[string]bool{}
	for _, e := range entries {
		mine[e.Name()] = true
	}
	var names []string
	for _, c := range list {
		if mine[c.Labels[host.LabelRunDir]] {
			names = append(names, c.Names...)
		}
	}
	// Run dirs without containers count as leaks too.
	for d := range mine {
		names = append(names, "dir:"+d)
	}
	return names
}

func TestAdmission(t *testing.T) {
	b := newTestBackend(t, Config{MaxCreating: 1})
	var now, peak, started atomic.Int32
	b.core.Slots.OnCreating = func(delta int) {
		n := now.Add(int32(delta))
		if delta > 0 {
			started.Add(1)
		}
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := b.Create(t.Context(), sandbox.Spec{Image: testImage(), EpisodeID: "admit-" + itoa(i)})
			if err == nil {
				_, err = sb.Exec(t.Context(), sandbox.ExecRequest{Command: "true"})
				sb.Close(t.Context())
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("create %d: %v", i, err)
		}
	}
	if started.Load() != 3 || peak.Load() != 1 {
		t.Errorf("creations: %d started, peak %d in progress; want 3 and 1", started.Load(), peak.Load())
	}
}

func TestMaxAlive(t *testing.T) {
	b := newTestBackend(t, Config{MaxAlive: 1})
	first, err := b.Create(t.Context(), sandbox.Spec{Image: testImage(), EpisodeID: "alive-1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if _, err := b.Create(ctx, sandbox.Spec{Image: testImage(), EpisodeID: "alive-2"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Create at MaxAlive: %v, want it to block until the ctx ends", err)
	}
	// A Create waiting at the limit proceeds once a sandbox closes.
	done := make(chan error, 1)
	go func() {
		sb, err := b.Create(t.Context(), sandbox.Spec{Image: testImage(), EpisodeID: "alive-3"})
		if err == nil {
			sb.Close(t.Context())
		}
		done <- err
	}()
	if err := first.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("Create after a slot freed: %v", err)
	}
	if s := b.Stats(); s.Alive != 0 || s.Creating != 0 {
		t.Errorf("stats after all closed: %+v", s)
	}
}

// TestReaper kills -9 a process that holds two sandboxes and checks that
// the next New removes its containers and run dirs.
func TestReaper(t *testing.T) {
	cli := testClient(t)
	stateDir := t.TempDir()
	v := sandboxtest.StartVictim(t, stateDir)
	ids := v.IDs
	if len(ids) != 3 {
		t.Fatalf("child reported %d sandboxes, want 3 (two created, one forked)", len(ids))
	}
	if entries, _ := os.ReadDir(stateDir); len(entries) != 3 {
		t.Fatalf("%d run dirs before the kill, want 3", len(entries))
	}
	v.Kill(t)
	for _, id := range ids {
		if _, err := cli.ContainerInspect(t.Context(), id); err != nil {
			t.Fatalf("container %s gone before the reaper ran: %v", id, err)
		}
	}

	newTestBackend(t, Config{StateDir: stateDir}) // reaps at start

	// A removal the engine already had in progress (the dying agent's own
	// teardown) counts as reaped; give it a few seconds to finish.
	for _, id := range ids {
		var err error
		for range 50 {
			if _, err = cli.ContainerInspect(t.Context(), id); cerrdefs.IsNotFound(err) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !cerrdefs.IsNotFound(err) {
			t.Errorf("container %s survived the reaper: %v", id[:12], err)
		}
	}
	if entries, _ := os.ReadDir(stateDir); len(entries) != 0 {
		t.Errorf("run dirs survived the reaper: %v", entries)
	}
	if n, err := GC(t.Context(), Config{StateDir: stateDir}); n != 0 || err != nil {
		t.Errorf("GC after the reap: %d removed, %v; want 0, nil", n, err)
	}
}

func TestSnapshotNotManaged(t *testing.T) {
	cli := testClient(t)
	b := newTestBackend(t, Config{})
	sb, err := b.Create(t.Context(), sandbox.Spec{Image: testImage(), EpisodeID: "snap-labels"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(t.Context())
	ref := "rollcage-test/snap-labels:" + randomToken()
	if _, err := sandbox.Snapshot(t.Context(), sb, ref); err != nil {
		t.Fatal(err)
	}
	defer removeImage(cli)(context.Background(), ref)
	img, err := cli.ImageInspect(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if got := img.Config.Labels[host.LabelManaged]; got == "1" {
		t.Errorf("snapshot image carries %s=1: containers run from it by hand would be reaped", host.LabelManaged)
	}
}

func TestImageMissing(t *testing.T) {
	b := newTestBackend(t, Config{})
	_, err := b.Create(t.Context(), sandbox.Spec{Image: "rollcage/no-such-image:never", EpisodeID: "missing"})
	if !errors.Is(err, sandbox.ErrImageMissing) {
		t.Fatalf("Create with a missing image: %v, want ErrImageMissing", err)
	}
	if !strings.Contains(err.Error(), "make images") || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q should be one line naming 'make images'", err)
	}
	if s := b.Stats(); s.Alive != 0 {
		t.Errorf("a failed create kept its slot: %+v", s)
	}
	if entries, _ := os.ReadDir(b.cfg.StateDir); len(entries) != 0 {
		t.Errorf("a failed create left run dirs: %v", entries)
	}
}

func TestEngineUnreachable(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	_, err := New(t.Context(), Config{StateDir: t.TempDir()})
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("New without an engine: %v, want ErrUnavailable", err)
	}
	for _, want := range []string{"no Docker engine reachable", "DOCKER_HOST=unix:///nonexistent/docker.sock", "make docker"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestContainerDied(t *testing.T) {
	cli := testClient(t)
	b := newTestBackend(t, Config{})
	sb, err := b.Create(t.Context(), sandbox.Spec{Image: testImage(), EpisodeID: "dies"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerKill(t.Context(), sb.ID(), "KILL"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true"}); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Exec on a killed container: %v, want ErrClosed", err)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Errorf("Close of a killed container: %v", err)
	}
	if _, err := cli.ContainerInspect(t.Context(), sb.ID()); !cerrdefs.IsNotFound(err) {
		t.Errorf("killed container not removed by Close: %v", err)
	}
}

func TestContainerSecurity(t *testing.T) {
	cli := testClient(t)
	b := newTestBackend(t, Config{})
	sb, err := b.Create(t.Context(), sandbox.Spec{Image: testImage(), EpisodeID: "sec", Limits: sandbox.Limits{MemoryBytes: 256 << 20, CPUs: 0.5, Pids: 100}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cli.ContainerInspect(t.Context(), sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	hc := info.HostConfig
	// The pids limit is the policy's 100 plus the agent's own room.
	if hc.Memory != 256<<20 || hc.NanoCPUs != 5e8 || hc.PidsLimit == nil || *hc.PidsLimit != 100+hostside.AgentPids {
		t.Errorf("limits: memory %d nanocpus %d pids %v", hc.Memory, hc.NanoCPUs, hc.PidsLimit)
	}
	if string(hc.NetworkMode) != "none" || hc.Privileged {
		t.Errorf("network %q privileged %v", hc.NetworkMode, hc.Privileged)
	}
	l := info.Config.Labels
	if l[host.LabelManaged] != "1" || l[host.LabelEpisode] != "sec" || l[host.LabelOwnerPID] != itoa(os.Getpid()) || l[host.LabelOwnerStart] == "" {
		t.Errorf("labels %v", l)
	}
	if !strings.HasPrefix(info.Name, "/rollcage-sec-") {
		t.Errorf("name %q", info.Name)
	}
	// The memory limit holds inside: a 512 MiB allocation is killed.
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: `python3 -c "b = bytearray(512 << 20); print('alloc' + 'ated')"`, Timeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || strings.Contains(res.Output, "allocated") {
		t.Errorf("512 MiB allocated under a 256 MiB limit: exit %d %q", res.ExitCode, res.Output)
	}
}

func TestResolveSpec(t *testing.T) {
	b := &Backend{core: &hostside.Core[*container]{Cfg: host.Config{Lease: host.DefaultLease, DefaultLimits: sandbox.Limits{MemoryBytes: host.DefaultMemoryBytes, CPUs: 1, Pids: 512}}}}
	sock := t.TempDir() + "/proxy.sock"
	os.WriteFile(sock, nil, 0o600)
	tests := []struct {
		name    string
		spec    sandbox.Spec
		wantErr string
	}{
		{"ok", sandbox.Spec{Image: "x"}, ""},
		{"no image", sandbox.Spec{}, "Spec.Image"},
		{"bad network", sandbox.Spec{Image: "x", Network: "host"}, "unknown network"},
		{"proxy without socket", sandbox.Spec{Image: "x", Network: sandbox.NetworkProxy}, "ProxySocket"},
		{"proxy socket missing", sandbox.Spec{Image: "x", Network: sandbox.NetworkProxy, ProxySocket: "/nonexistent.sock"}, "start the egress proxy"},
		{"socket without proxy", sandbox.Spec{Image: "x", ProxySocket: sock}, "NetworkProxy"},
		{"proxy", sandbox.Spec{Image: "x", Network: sandbox.NetworkProxy, ProxySocket: sock}, ""},
		{"short lease", sandbox.Spec{Image: "x", Lease: time.Second}, "at least 3s"},
		{"negative pids", sandbox.Spec{Image: "x", Limits: sandbox.Limits{Pids: -1}}, "Pids"},
	}
	for _, tc := range tests {
		got, err := b.resolveSpec(tc.spec)
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			if got.Workdir != "/workspace" || got.Lease != host.DefaultLease || got.Limits.Pids != 512 {
				t.Errorf("%s: defaults not filled: %+v", tc.name, got)
			}
			if got.Network == sandbox.NetworkProxy && got.Env["HTTPS_PROXY"] != "http://127.0.0.1:3128" {
				t.Errorf("%s: proxy env missing: %v", tc.name, got.Env)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.wantErr)
		}
	}
	if b.core.Poolable(sandbox.Spec{Network: sandbox.NetworkNone, Lease: host.DefaultLease, Limits: b.core.Cfg.DefaultLimits}) != true {
		t.Error("a default spec is not poolable")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
