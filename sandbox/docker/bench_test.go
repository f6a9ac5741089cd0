package docker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"golang.org/x/sync/errgroup"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// latencies records per-op wall times and reports their median, which says
// more about a round trip than the mean b.N divides out.
type latencies []time.Duration

func (l *latencies) time(f func()) {
	t0 := time.Now()
	f()
	*l = append(*l, time.Since(t0))
}

func (l latencies) p(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func (l latencies) report(b *testing.B) {
	b.ReportMetric(float64(l.p(0.5).Microseconds()), "p50-µs")
	b.ReportMetric(float64(l.p(0.99).Microseconds()), "p99-µs")
}

// BenchmarkRoundTrip compares running `true` through the agent with
// running it through Docker's exec API (create, attach, inspect), the
// usual alternative, in one container.
func BenchmarkRoundTrip(b *testing.B) {
	cli := testClient(b)
	bk := newTestBackend(b, Config{})
	sb, err := bk.Create(b.Context(), sandbox.Spec{Image: testImage(), EpisodeID: "bench-rt"})
	if err != nil {
		b.Fatal(err)
	}
	var agentP50 time.Duration
	b.Run("agent", func(b *testing.B) {
		var lat latencies
		for b.Loop() {
			lat.time(func() {
				res, err := sb.Exec(b.Context(), sandbox.ExecRequest{Command: "true"})
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("exec: %v %+v", err, res)
				}
			})
		}
		lat.report(b)
		agentP50 = lat.p(0.5)
	})
	b.Run("docker-exec", func(b *testing.B) {
		var lat latencies
		for b.Loop() {
			lat.time(func() {
				if code, err := dockerExec(b.Context(), cli, sb.ID(), "true"); err != nil || code != 0 {
					b.Fatalf("docker exec: exit %d, %v", code, err)
				}
			})
		}
		lat.report(b)
		if agentP50 > 0 {
			ratio := float64(lat.p(0.5)) / float64(agentP50)
			b.ReportMetric(ratio, "x-agent-p50")
		}
	})
}

// dockerExec runs argv as the sandbox user the way `docker exec` does.
func dockerExec(ctx context.Context, cli client.APIClient, id string, argv ...string) (int, error) {
	ex, err := cli.ContainerExecCreate(ctx, id, dcontainer.ExecOptions{Cmd: argv, User: hostside.SandboxUser, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return 0, err
	}
	att, err := cli.ContainerExecAttach(ctx, ex.ID, dcontainer.ExecAttachOptions{})
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, att.Reader)
	att.Close()
	if err != nil {
		return 0, err
	}
	st, err := cli.ContainerExecInspect(ctx, ex.ID)
	return st.ExitCode, err
}

// BenchmarkStart measures an episode start up to its first command
// finished: from the warm pool, and cold (create, start, connect).
func BenchmarkStart(b *testing.B) {
	img := testImage()
	start := func(b *testing.B, bk *Backend, warm bool) {
		var lat latencies
		b.StopTimer()
		for i := 0; i < b.N; i++ {
			if warm {
				waitWarmB(b, bk, img)
			}
			b.StartTimer()
			var sb sandbox.Sandbox
			lat.time(func() {
				var err error
				sb, err = bk.Create(b.Context(), sandbox.Spec{Image: img, EpisodeID: "bench-start"})
				if err == nil {
					_, err = sb.Exec(b.Context(), sandbox.ExecRequest{Command: "true"})
				}
				if err != nil {
					b.Fatal(err)
				}
			})
			b.StopTimer()
			sb.Close(b.Context())
		}
		lat.report(b)
	}
	b.Run("warm", func(b *testing.B) {
		start(b, newTestBackend(b, Config{Pool: map[string]int{img: 2}}), true)
	})
	b.Run("cold", func(b *testing.B) {
		start(b, newTestBackend(b, Config{}), false)
	})
}

func waitWarmB(b *testing.B, bk *Backend, img string) {
	deadline := time.Now().Add(time.Minute)
	for bk.core.Pool.Count(img) == 0 {
		if time.Now().After(deadline) {
			b.Fatalf("pool never warmed: %+v", bk.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkAlive64 keeps 64 idle sandboxes alive and measures what they
// cost the host (per sandbox: container memory, shim and daemon growth)
// and the round trip of `true` under that load.
func BenchmarkAlive64(b *testing.B) {
	const n = 64
	cli := testClient(b)
	before := engineMemory()
	bk := newTestBackend(b, Config{MaxCreating: 4})
	sbs := make([]sandbox.Sandbox, n)
	var g errgroup.Group
	for i := range sbs {
		g.Go(func() error {
			sb, err := bk.Create(b.Context(), sandbox.Spec{Image: testImage(), EpisodeID: fmt.Sprintf("alive-%d", i)})
			sbs[i] = sb
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	// Every agent has run one command, like an episode that has started.
	for _, sb := range sbs {
		if _, err := sb.Exec(b.Context(), sandbox.ExecRequest{Command: "true"}); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second) // let the runtime settle before measuring idle cost
	var usage, rss int64
	var mu sync.Mutex
	g = errgroup.Group{}
	g.SetLimit(8)
	for _, sb := range sbs {
		g.Go(func() error {
			u, r, err := containerMemory(b.Context(), cli, sb.ID())
			mu.Lock()
			usage += u
			rss += r
			mu.Unlock()
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	after := engineMemory()

	var lat latencies
	i := 0
	for b.Loop() {
		sb := sbs[i%n]
		i++
		lat.time(func() {
			if _, err := sb.Exec(b.Context(), sandbox.ExecRequest{Command: "true"}); err != nil {
				b.Fatal(err)
			}
		})
	}
	lat.report(b)
	const mib = 1 << 20
	b.ReportMetric(float64(usage)/n/mib, "cgroup-MiB/sandbox")
	b.ReportMetric(float64(rss)/n/mib, "rss-MiB/sandbox")
	b.ReportMetric(float64(after.shim-before.shim)/n/mib, "shim-MiB/sandbox")
	b.ReportMetric(float64(after.daemons-before.daemons)/n/mib, "daemons-MiB/sandbox")
}

// containerMemory is the container's cgroup memory use without page cache,
// and its resident anonymous memory, from the engine's one-shot stats.
func containerMemory(ctx context.Context, cli client.APIClient, id string) (usage, rss int64, err error) {
	st, err := cli.ContainerStatsOneShot(ctx, id)
	if err != nil {
		return 0, 0, err
	}
	defer st.Body.Close()
	var s dcontainer.StatsResponse
	if err := json.NewDecoder(st.Body).Decode(&s); err != nil {
		return 0, 0, err
	}
	m := s.MemoryStats
	cache := m.Stats["total_inactive_file"]    // cgroup v1
	if v, ok := m.Stats["inactive_file"]; ok { // cgroup v2
		cache = v
	}
	rss = int64(m.Stats["total_rss"] + m.Stats["anon"])
	return int64(m.Usage - cache), rss, nil
}

type engineMem struct{ shim, daemons int64 }

// engineMemory sums the proportional set size of the containerd shims and
// of dockerd and containerd, from /proc (shared pages split fairly).
func engineMemory() engineMem {
	var m engineMem
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(d + "/comm")
		if err != nil {
			continue
		}
		name := strings.TrimSpace(string(comm))
		switch {
		case strings.HasPrefix(name, "containerd-shim"):
			m.shim += pss(d)
		case name == "dockerd" || name == "containerd":
			m.daemons += pss(d)
		}
	}
	return m
}

func pss(procDir string) int64 {
	b, err := os.ReadFile(procDir + "/smaps_rollup")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "Pss:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkFork measures Fork of n children from a parent with mb MiB
// written in its workspace (every child ready and its first command run),
// the parent's pause, and side by side the cold creation of n fresh
// sandboxes (what a tree rollout without fork starts from) and the same
// plus replaying a 20-call prefix that writes the same data in each.
// ROLLCAGE_BENCH_FORK_MB adds a size (e.g. 100).
func BenchmarkFork(b *testing.B) {
	sizes := []int{1, 10}
	if v, err := strconv.Atoi(os.Getenv("ROLLCAGE_BENCH_FORK_MB")); err == nil && v > 0 {
		sizes = append(sizes, v)
	}
	img := testImage()
	bk := newTestBackend(b, Config{MaxCreating: 8})
	ctx := b.Context()
	ready := func(sb sandbox.Sandbox) error {
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "test -d /workspace"})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("first command: exit %d: %s", res.ExitCode, res.Output)
		}
		return err
	}
	closeAll := func(sbs []sandbox.Sandbox) {
		var g errgroup.Group
		for _, sb := range sbs {
			g.Go(func() error { return sb.Close(ctx) })
		}
		g.Wait()
	}
	for _, mb := range sizes {
		parent, err := bk.Create(ctx, sandbox.Spec{Image: img, EpisodeID: fmt.Sprintf("bench-fork-%dmb", mb)})
		if err != nil {
			b.Fatal(err)
		}
		// mb files of 1 MiB each, in a few directories, plus a cwd and an
		// exported variable to restore.
		cmd := fmt.Sprintf(`mkdir -p /workspace/d && for i in $(seq 1 %d); do head -c 1048576 /dev/urandom > /workspace/d/f$i; done && cd /workspace/d && export BENCH=1`, mb)
		if res, err := parent.Exec(ctx, sandbox.ExecRequest{Command: cmd, Timeout: 5 * time.Minute}); err != nil || res.ExitCode != 0 {
			b.Fatalf("fill the parent: %v %+v", err, res)
		}
		for _, n := range []int{1, 4, 8} {
			b.Run(fmt.Sprintf("changed=%dMB/n=%d/fork", mb, n), func(b *testing.B) {
				var lat, paused latencies
				b.StopTimer()
				for i := 0; i < b.N; i++ {
					b.StartTimer()
					var res sandbox.ForkResult
					lat.time(func() {
						res, err = sandbox.Fork(ctx, parent, n)
						if err != nil {
							b.Fatal(err)
						}
						var g errgroup.Group
						for _, c := range res.Children {
							g.Go(func() error { return ready(c) })
						}
						if err := g.Wait(); err != nil {
							b.Fatal(err)
						}
					})
					b.StopTimer()
					paused = append(paused, res.Paused)
					closeAll(res.Children)
				}
				b.ReportMetric(float64(lat.p(0.5).Milliseconds()), "p50-ms")
				b.ReportMetric(float64(lat.p(0.99).Milliseconds()), "p99-ms")
				b.ReportMetric(float64(paused.p(0.5).Milliseconds()), "paused-p50-ms")
				b.ReportMetric(float64(paused.p(0.99).Milliseconds()), "paused-p99-ms")
			})
			for _, replay := range []int{0, 20} {
				freshN(b, bk, mb, n, replay, ready, closeAll)
			}
		}
		parent.Close(ctx)
	}
}

// freshN is BenchmarkFork's baseline: n sandboxes created at once, each
// then replaying a prefix of steps calls that write mb MiB between them.
func freshN(b *testing.B, bk *Backend, mb, n, steps int, ready func(sandbox.Sandbox) error, closeAll func([]sandbox.Sandbox)) {
	ctx := b.Context()
	img := testImage()
	name := "fresh"
	if steps > 0 {
		name = fmt.Sprintf("replay%d", steps)
	}
	prefix := func(sb sandbox.Sandbox) error {
		for k := range steps {
			cmd := fmt.Sprintf("mkdir -p /workspace/d && cd /workspace/d && export BENCH=1 && head -c %d /dev/urandom > p%d", mb<<20/steps, k)
			res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: cmd})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("prefix step %d: exit %d: %s", k, res.ExitCode, res.Output)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	b.Run(fmt.Sprintf("changed=%dMB/n=%d/%s", mb, n, name), func(b *testing.B) {
		var lat latencies
		b.StopTimer()
		for i := 0; i < b.N; i++ {
			sbs := make([]sandbox.Sandbox, n)
			b.StartTimer()
			lat.time(func() {
				var g errgroup.Group
				for k := range sbs {
					g.Go(func() error {
						sb, err := bk.Create(ctx, sandbox.Spec{Image: img, EpisodeID: "bench-fresh"})
						if err != nil {
							return err
						}
						sbs[k] = sb
						if err := ready(sb); err != nil {
							return err
						}
						return prefix(sb)
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
			})
			b.StopTimer()
			closeAll(sbs)
		}
		b.ReportMetric(float64(lat.p(0.5).Milliseconds()), "p50-ms")
		b.ReportMetric(float64(lat.p(0.99).Milliseconds()), "p99-ms")
	})
}

// BenchmarkForkDump: a fork's session dump as it is (builtins only, the
// variables filtered on the host) against the one it replaced (a
// pipeline through grep in the sandbox), alternating in one sandbox whose
// session has a few variables, a function and options set.
func BenchmarkForkDump(b *testing.B) {
	const before = `{ builtin declare -px | grep -Ev '^declare -[^ ]*r|^declare -[^ ]* (PWD|OLDPWD|SHLVL|_)(=|$)'; builtin declare -f; builtin shopt -p; builtin set +o; } 2>/dev/null`
	bk := newTestBackend(b, Config{})
	sb, err := bk.Create(b.Context(), sandbox.Spec{Image: testImage(), EpisodeID: "bench-dump"})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close(context.Background())
	c := sb.(*container)
	if res, err := sb.Exec(b.Context(), sandbox.ExecRequest{Command: `cd /tmp && export A=1 B="two words" && f() { echo f; } && shopt -s extglob`}); err != nil || res.ExitCode != 0 {
		b.Fatalf("set-up: %v %+v", err, res)
	}
	var now, old latencies
	for b.Loop() {
		now.time(func() {
			if _, err := hostside.DumpSessions(b.Context(), c.Agent().Exec, []string{"default"}); err != nil {
				b.Fatal(err)
			}
		})
		old.time(func() {
			if res, err := sb.Exec(b.Context(), sandbox.ExecRequest{Command: before}); err != nil || res.ExitCode != 0 {
				b.Fatalf("old dump: %v %+v", err, res)
			}
		})
	}
	b.ReportMetric(float64(now.p(0.5).Microseconds()), "builtins-p50-µs")
	b.ReportMetric(float64(old.p(0.5).Microseconds()), "grep-p50-µs")
}

// BenchmarkDiskQuota sets the kernel's disk limit (the quota engine of
// make quota-engine: btrfs, a quota group per sandbox) beside the
// watchdog's (the engine of DOCKER_HOST as given: overlay2 on ext4),
// alternating in one run: a cold start to the first command, the round
// trip of `true` (20 per start), and a call that writes 8 MiB and removes
// it. Both under the default 10 GiB limit.
func BenchmarkDiskQuota(b *testing.B) {
	watch := newTestBackend(b, Config{})
	if m := watch.diskMode(); m != diskWatchdog {
		b.Fatalf("the engine of DOCKER_HOST holds disk limits by %s: run this with the default engine's DOCKER_HOST", m)
	}
	sandboxtest.RequireQuotaEngine(b)
	quota := newTestBackend(b, Config{})
	if m := quota.diskMode(); m == diskWatchdog {
		b.Fatalf("the quota engine leaves disk limits to the watchdog: run scripts/rollcage-engine.sh status")
	}
	type lats struct{ start, rt, write latencies }
	all := map[string]*lats{"watchdog": {}, "kernel": {}}
	run := func(name string, bk *Backend) {
		l := all[name]
		var sb sandbox.Sandbox
		exec := func(cmd string) {
			res, err := sb.Exec(b.Context(), sandbox.ExecRequest{Command: cmd})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("%s: %s: %v %+v", name, cmd, err, res)
			}
		}
		l.start.time(func() {
			var err error
			if sb, err = bk.Create(b.Context(), sandbox.Spec{Image: testImage(), EpisodeID: "bench-quota"}); err != nil {
				b.Fatal(err)
			}
			exec("true")
		})
		defer sb.Close(b.Context())
		for range 20 {
			l.rt.time(func() { exec("true") })
		}
		l.write.time(func() { exec("head -c 8M /dev/zero >/tmp/w && rm /tmp/w") })
	}
	for b.Loop() {
		run("watchdog", watch)
		run("kernel", quota)
	}
	for _, name := range []string{"watchdog", "kernel"} {
		l := all[name]
		b.ReportMetric(float64(l.start.p(0.5).Milliseconds()), name+"-start-p50-ms")
		b.ReportMetric(float64(l.rt.p(0.5).Microseconds()), name+"-rt-p50-µs")
		b.ReportMetric(float64(l.rt.p(0.99).Microseconds()), name+"-rt-p99-µs")
		b.ReportMetric(float64(l.write.p(0.5).Milliseconds()), name+"-write8M-p50-ms")
	}
}
