package containerd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dockerclient "github.com/docker/docker/client"
	"golang.org/x/sync/errgroup"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/docker"
	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// The benchmarks here run Docker's backend and this one side by side in
// one run, alternating per iteration, so that the machine's load (shared,
// 2 cores) weighs on both alike: compare the ratios.

// engine is one backend under comparison, with the host pid of a
// sandbox's init (the agent) for the memory figures.
type engine struct {
	name string
	b    sandbox.Backend
	pid  func(ctx context.Context, sb sandbox.Sandbox) (int, error)
}

func benchEngines(b *testing.B, pool int) []engine {
	b.Helper()
	sandboxtest.RequireDocker(b)
	img := testImage()
	var poolCfg map[string]int
	if pool > 0 {
		poolCfg = map[string]int{img: pool}
	}
	cb := newTestBackend(b, Config{Config: host.Config{Pool: poolCfg}})
	db, err := docker.New(b.Context(), docker.Config{StateDir: b.TempDir(), Pool: poolCfg, Logger: sandboxtest.VerboseLogger(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close(context.Background()) })
	cli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.Close() })
	return []engine{
		{name: "docker", b: db, pid: func(ctx context.Context, sb sandbox.Sandbox) (int, error) {
			st, err := cli.ContainerInspect(ctx, sb.ID())
			if err != nil {
				return 0, err
			}
			return st.State.Pid, nil
		}},
		{name: "containerd", b: cb, pid: func(_ context.Context, sb sandbox.Sandbox) (int, error) {
			return int(sb.(*container).task.Pid()), nil
		}},
	}
}

type latencies []time.Duration

func (l latencies) p50() time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[len(s)/2]
}

// report gives each engine's p50 and containerd's speed-up over Docker.
func report(b *testing.B, unit string, lat map[string]latencies) {
	for name, l := range lat {
		b.ReportMetric(float64(l.p50().Microseconds())/1000, name+"-p50-"+unit)
	}
	if c := lat["containerd"].p50(); c > 0 {
		b.ReportMetric(float64(lat["docker"].p50())/float64(c), "docker/containerd")
	}
}

// startOnce is an episode start up to its first command finished.
func startOnce(b *testing.B, e engine, id string) (sandbox.Sandbox, time.Duration) {
	t0 := time.Now()
	sb, err := e.b.Create(b.Context(), sandbox.Spec{Image: testImage(), EpisodeID: id})
	if err == nil {
		_, err = sb.Exec(b.Context(), sandbox.ExecRequest{Command: "true"})
	}
	if err != nil {
		b.Fatalf("%s: %v", e.name, err)
	}
	return sb, time.Since(t0)
}

// BenchmarkColdStart: create, start, connect and run `true`, no pool.
func BenchmarkColdStart(b *testing.B) {
	engines := benchEngines(b, 0)
	lat := map[string]latencies{}
	for b.Loop() {
		for _, e := range engines {
			sb, d := startOnce(b, e, "bench-cold")
			lat[e.name] = append(lat[e.name], d)
			sb.Close(b.Context())
		}
	}
	report(b, "ms", lat)
}

// BenchmarkWarmStart: from a pool of 2 per backend, refilled between
// iterations (not timed).
func BenchmarkWarmStart(b *testing.B) {
	engines := benchEngines(b, 2)
	lat := map[string]latencies{}
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		for _, e := range engines {
			waitWarm(b, e)
			b.StartTimer()
			sb, d := startOnce(b, e, "bench-warm")
			b.StopTimer()
			lat[e.name] = append(lat[e.name], d)
			sb.Close(b.Context())
		}
	}
	report(b, "ms", lat)
}

func waitWarm(b *testing.B, e engine) { waitWarmBench(b, e, 2) }

// waitWarmBench waits until e's pool holds n warm sandboxes.
func waitWarmBench(b *testing.B, e engine, n int) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		warm := 0
		switch bk := e.b.(type) {
		case *Backend:
			warm = bk.Stats().Warm
		case *docker.Backend:
			warm = bk.Stats().Warm
		}
		if warm >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: pool never warmed", e.name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkRoundTrip: `true` through the agent of one sandbox per backend.
func BenchmarkRoundTrip(b *testing.B) {
	engines := benchEngines(b, 0)
	sbs := make([]sandbox.Sandbox, len(engines))
	for i, e := range engines {
		sbs[i], _ = startOnce(b, e, "bench-rt")
		b.Cleanup(func() { sbs[i].Close(context.Background()) })
	}
	lat := map[string]latencies{}
	for b.Loop() {
		for i, e := range engines {
			t0 := time.Now()
			if _, err := sbs[i].Exec(b.Context(), sandbox.ExecRequest{Command: "true"}); err != nil {
				b.Fatal(err)
			}
			lat[e.name] = append(lat[e.name], time.Since(t0))
		}
	}
	report(b, "ms", lat)
}

// BenchmarkIdleMemory keeps 8 idle sandboxes per backend (each has run
// one command) and reports what one costs the host: its cgroup's memory
// without inactive page cache plus its shim's proportional set size.
// Each iteration is one measurement of all of them.
func BenchmarkIdleMemory(b *testing.B) {
	const n = 8
	engines := benchEngines(b, 0)
	sbs := map[string][]sandbox.Sandbox{}
	for _, e := range engines {
		for i := range n {
			sb, _ := startOnce(b, e, fmt.Sprintf("bench-idle-%d", i))
			b.Cleanup(func() { sb.Close(context.Background()) })
			sbs[e.name] = append(sbs[e.name], sb)
		}
	}
	time.Sleep(2 * time.Second) // let the runtimes settle
	per := map[string]float64{}
	for b.Loop() {
		for _, e := range engines {
			var total int64
			for _, sb := range sbs[e.name] {
				pid, err := e.pid(b.Context(), sb)
				if err != nil {
					b.Fatal(err)
				}
				m, err := sandboxMemory(pid)
				if err != nil {
					b.Fatalf("%s: %v", e.name, err)
				}
				total += m
			}
			per[e.name] = float64(total) / n / (1 << 20)
		}
	}
	for name, v := range per {
		b.ReportMetric(v, name+"-MiB/sandbox")
	}
}

// sandboxMemory is the memory cgroup's usage of the process pid, less
// its inactive file cache, plus the PSS of its parent (the shim).
func sandboxMemory(pid int) (int64, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return 0, err
	}
	var dir string
	for line := range strings.SplitSeq(string(raw), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && (f[1] == "memory" || (f[0] == "0" && f[1] == "")) {
			if f[1] == "memory" {
				dir = filepath.Join("/sys/fs/cgroup/memory", f[2])
				break
			}
			dir = filepath.Join("/sys/fs/cgroup", f[2])
		}
	}
	usage, inactive := readInt(filepath.Join(dir, "memory.usage_in_bytes")), int64(0)
	if usage < 0 {
		usage = readInt(filepath.Join(dir, "memory.current"))
	}
	if usage < 0 {
		return 0, fmt.Errorf("no memory cgroup figures under %s", dir)
	}
	if st, err := os.ReadFile(filepath.Join(dir, "memory.stat")); err == nil {
		for line := range strings.SplitSeq(string(st), "\n") {
			if v, ok := strings.CutPrefix(line, "total_inactive_file "); ok {
				inactive, _ = strconv.ParseInt(v, 10, 64)
			} else if v, ok := strings.CutPrefix(line, "inactive_file "); ok && inactive == 0 {
				inactive, _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return usage - inactive + shimPSS(pid), nil
}

func readInt(path string) int64 {
	raw, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// shimPSS is the proportional set size of pid's parent, in bytes.
func shimPSS(pid int) int64 {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(st)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	raw, err := os.ReadFile("/proc/" + f[1] + "/smaps_rollup")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkFork: a parent that wrote mb MiB (1 MiB files, a cwd and an
// exported variable to restore) forks n children, per backend, against
// starting n fresh sandboxes and n fresh ones that replay a 20-call
// prefix writing the same bytes; every sandbox is timed until it ran its
// first command. The backends and the three ways alternate per
// iteration. "docker-warm" and "containerd-warm" are the backends with a
// warm pool as large as the largest n, full before each timed operation
// and refilled after it (not timed, so that the refill weighs on no other
// row): their forks adopt warm containers, their fresh sandboxes are
// handed out from the pool.
// ROLLCAGE_BENCH_FORK_MB (comma-separated, default 1,10,100) and
// ROLLCAGE_BENCH_FORK_N (default 1,4,8) choose the rows.
func BenchmarkFork(b *testing.B) {
	sizes, ns := benchInts(b, "ROLLCAGE_BENCH_FORK_MB", "1,10,100"), benchInts(b, "ROLLCAGE_BENCH_FORK_N", "1,4,8")
	engines := benchEngines(b, 0)
	maxN := slices.Max(ns)
	pool := map[string]int{testImage(): maxN}
	dwarm, err := docker.New(b.Context(), docker.Config{StateDir: b.TempDir(), Pool: pool, Logger: sandboxtest.VerboseLogger(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dwarm.Close(context.Background()) })
	engines = append(engines,
		engine{name: "docker-warm", b: dwarm},
		engine{name: "containerd-warm", b: newTestBackend(b, Config{Config: host.Config{Pool: pool}})})
	settle := func(e engine) {
		if strings.HasSuffix(e.name, "-warm") {
			waitWarmBench(b, e, maxN)
		}
	}
	ctx := b.Context()
	for _, mb := range sizes {
		parents := make([]sandbox.Sandbox, len(engines))
		for i, e := range engines {
			settle(e)
			parents[i], _ = startOnce(b, e, fmt.Sprintf("bench-fork-%dmb", mb))
			cmd := fmt.Sprintf(`mkdir -p /workspace/d && for i in $(seq 1 %d); do head -c 1048576 /dev/urandom > /workspace/d/f$i; done && cd /workspace/d && export BENCH=1`, mb)
			if res, err := parents[i].Exec(ctx, sandbox.ExecRequest{Command: cmd, Timeout: 5 * time.Minute}); err != nil || res.ExitCode != 0 {
				b.Fatalf("%s: fill the parent: %v %+v", e.name, err, res)
			}
		}
		for _, n := range ns {
			b.Run(fmt.Sprintf("changed=%dMB/n=%d", mb, n), func(b *testing.B) {
				lat, pause := map[string]latencies{}, map[string]latencies{}
				for b.Loop() {
					for i, e := range engines {
						settle(e)
						res, d := forkReady(b, parents[i], n)
						lat[e.name+"-fork"] = append(lat[e.name+"-fork"], d)
						pause[e.name] = append(pause[e.name], res.Paused)
						for _, steps := range []int{0, 20} {
							kind := "-fresh"
							if steps > 0 {
								kind = "-replay20"
							}
							settle(e)
							lat[e.name+kind] = append(lat[e.name+kind], freshReady(b, e, mb, n, steps))
						}
						settle(e)
					}
				}
				for name, l := range lat {
					b.ReportMetric(ms(l.p50()), name+"-p50-ms")
					b.ReportMetric(ms(l.worst()), name+"-p99-ms")
				}
				for name, l := range pause {
					b.ReportMetric(ms(l.p50()), name+"-pause-p50-ms")
					b.ReportMetric(ms(l.worst()), name+"-pause-p99-ms")
				}
				for _, e := range engines {
					if f := lat[e.name+"-fork"].p50(); f > 0 {
						b.ReportMetric(float64(lat[e.name+"-replay20"].p50())/float64(f), e.name+"-replay/fork")
					}
				}
			})
		}
		for _, p := range parents {
			p.Close(ctx)
		}
	}
}

// benchInts reads a comma-separated list of counts from the environment.
func benchInts(b *testing.B, env, def string) []int {
	v := os.Getenv(env)
	if v == "" {
		v = def
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 {
			b.Fatalf("%s=%q: give positive counts separated by commas, e.g. %s", env, v, def)
		}
		out = append(out, k)
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// worst is the p99 of so few samples.
func (l latencies) worst() time.Duration {
	if len(l) == 0 {
		return 0
	}
	return slices.Max(l)
}

// ready runs a sandbox's first command.
func ready(ctx context.Context, sb sandbox.Sandbox) error {
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "test -d /workspace/d"})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("first command: exit %d: %s", res.ExitCode, res.Output)
	}
	return err
}

func closeAll(ctx context.Context, sbs []sandbox.Sandbox) {
	var g errgroup.Group
	for _, sb := range sbs {
		if sb != nil {
			g.Go(func() error { return sb.Close(ctx) })
		}
	}
	g.Wait()
}

// forkReady forks n children and runs a first command in each; it
// returns the fork's result and the time until every child ran it. The
// children are closed before it returns.
func forkReady(b *testing.B, parent sandbox.Sandbox, n int) (sandbox.ForkResult, time.Duration) {
	ctx := b.Context()
	t0 := time.Now()
	res, err := sandbox.Fork(ctx, parent, n)
	if err != nil {
		b.Fatal(err)
	}
	var g errgroup.Group
	for _, c := range res.Children {
		g.Go(func() error { return ready(ctx, c) })
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	d := time.Since(t0)
	closeAll(ctx, res.Children)
	return res, d
}

// freshReady starts n sandboxes at once, each then replaying a prefix of
// steps calls that write mb MiB between them, and returns the time until
// all have.
func freshReady(b *testing.B, e engine, mb, n, steps int) time.Duration {
	ctx := b.Context()
	sbs := make([]sandbox.Sandbox, n)
	t0 := time.Now()
	var g errgroup.Group
	for k := range sbs {
		g.Go(func() error {
			sb, err := e.b.Create(ctx, sandbox.Spec{Image: testImage(), EpisodeID: "bench-fresh"})
			if err != nil {
				return err
			}
			sbs[k] = sb
			for s := range steps {
				cmd := fmt.Sprintf("mkdir -p /workspace/d && cd /workspace/d && export BENCH=1 && head -c %d /dev/urandom > p%d", mb<<20/steps, s)
				res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: cmd})
				if err == nil && res.ExitCode != 0 {
					err = fmt.Errorf("prefix step %d: exit %d: %s", s, res.ExitCode, res.Output)
				}
				if err != nil {
					return err
				}
			}
			if steps > 0 {
				return ready(ctx, sb)
			}
			res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "mkdir -p /workspace/d"})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("first command: exit %d: %s", res.ExitCode, res.Output)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatalf("%s: %v", e.name, err)
	}
	d := time.Since(t0)
	closeAll(ctx, sbs)
	return d
}
