package harness

import (
	"context"
	"io/fs"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/docker"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

// BenchmarkGrade compares, side by side in one run, grading a solved
// textwrap demo episode by diff in a fresh sandbox from a warm pool
// (kill, diff, fresh sandbox, apply, hidden tests) with the in-place
// grading this replaced (hidden tests copied into the episode's own
// sandbox and run there). The two alternate; the pool is full before each
// grading. Run with -benchtime 20x; it reports p50 and p90 of each and the
// p50 of the extra cost.
func BenchmarkGrade(b *testing.B) {
	tk, hidden, be, r, waitWarm := gradeBench(b)
	ctx := context.Background()

	// solved starts an episode sandbox (with the canaries an episode has)
	// and applies the fix.
	solved := func() sandbox.Sandbox {
		sb, err := be.Create(ctx, sandbox.Spec{Image: tk.Image, EpisodeID: "bench-grade", Canaries: DefaultCanaries("bench")})
		if err != nil {
			b.Fatal(err)
		}
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "cd /workspace && " + textwrapFix})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("fix: %v %+v", err, res)
		}
		return sb
	}
	inPlace := func() time.Duration {
		sb := solved()
		defer sb.Close(ctx)
		waitWarm()
		t0 := time.Now()
		res, err := task.Grade(ctx, sb, tk, hidden)
		d := time.Since(t0)
		// The episode sandbox holds the decoy named like the demo's hidden
		// test, which the copy replaces: in place, the demo still passes.
		if err != nil || res.Reward != 1 {
			b.Fatalf("in-place grade: %v %+v", err, res)
		}
		return d
	}
	var phases []trajectory.GradePhases
	fresh := func() time.Duration {
		sb := solved()
		defer sb.Close(ctx)
		e := &Episode{r: r, id: "bench-grade", task: tk, hidden: hidden, sb: sb, base: tk.BaseCommit, image: tk.Image,
			canaries: DefaultCanaries("bench"), known: tk.Instruction, log: slog.New(slog.DiscardHandler)}
		waitWarm()
		t0 := time.Now()
		g, err := e.gradeEpisode(ctx)
		d := time.Since(t0)
		e.closing.Wait()
		if err != nil || !g.Resolved {
			b.Fatalf("fresh grade: %v %+v", err, g)
		}
		phases = append(phases, g.Phases)
		return d
	}
	fresh() // the import surface is asked once per image; not what is measured
	var a, f []time.Duration
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			a, f = append(a, inPlace()), append(f, fresh())
		} else {
			f, a = append(f, fresh()), append(a, inPlace())
		}
		i++
	}
	slices.Sort(a)
	slices.Sort(f)
	q := func(ds []time.Duration, p float64) float64 {
		return float64(ds[int(p*float64(len(ds)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(q(a, 0.5), "inplace-p50-ms")
	b.ReportMetric(q(a, 0.9), "inplace-p90-ms")
	b.ReportMetric(q(f, 0.5), "fresh-p50-ms")
	b.ReportMetric(q(f, 0.9), "fresh-p90-ms")
	b.ReportMetric(q(f, 0.5)-q(a, 0.5), "extra-p50-ms")
	phases = phases[1:]
	for _, m := range []struct {
		name string
		get  func(trajectory.GradePhases) int64
	}{
		{"kill", func(p trajectory.GradePhases) int64 { return p.KillMS }},
		{"diff", func(p trajectory.GradePhases) int64 { return p.DiffMS }},
		{"sandbox", func(p trajectory.GradePhases) int64 { return p.SandboxMS }},
		{"apply", func(p trajectory.GradePhases) int64 { return p.ApplyMS }},
		{"tests", func(p trajectory.GradePhases) int64 { return p.TestsMS }},
	} {
		var v []int64
		for _, p := range phases {
			v = append(v, m.get(p))
		}
		slices.Sort(v)
		b.ReportMetric(float64(v[len(v)/2]), m.name+"-p50-ms")
	}
}

// BenchmarkGradeWatched compares, side by side in one run, grading a
// solved textwrap episode in a fresh sandbox by test id (the grading kit,
// renamed tests, known-answer probes, the integrity watch) with grading
// by pytest's summary line, which it replaced. The two alternate; facts
// are derived once before the loop (once per image, not per grading). It
// reports the p50 of the whole grade and of the test phase of each, and
// their ratios (goal: at most 1.30 each).
func BenchmarkGradeWatched(b *testing.B) {
	tk, hidden, be, r, waitWarm := gradeBench(b)
	ctx := context.Background()
	grade := func(rule string) (whole, tests time.Duration) {
		t := tk
		t.Reward = rule
		sb, err := be.Create(ctx, sandbox.Spec{Image: t.Image, EpisodeID: "bench-watch", Canaries: DefaultCanaries("bench")})
		if err != nil {
			b.Fatal(err)
		}
		defer sb.Close(ctx)
		if res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "cd /workspace && " + textwrapFix}); err != nil || res.ExitCode != 0 {
			b.Fatalf("fix: %v %+v", err, res)
		}
		e := &Episode{r: r, id: "bench-watch", task: t, hidden: hidden, sb: sb, base: t.BaseCommit, image: t.Image,
			canaries: DefaultCanaries("bench"), known: t.Instruction, log: slog.New(slog.DiscardHandler)}
		waitWarm()
		t0 := time.Now()
		g, err := e.gradeEpisode(ctx)
		whole = time.Since(t0)
		e.closing.Wait()
		if err != nil || !g.Resolved || len(g.Findings) > 0 {
			b.Fatalf("%s grade: %v %+v", rule, err, g)
		}
		return whole, time.Duration(g.Phases.TestsMS) * time.Millisecond
	}
	grade(task.RewardTests) // facts and the import surface: once per image
	grade(task.RewardSummary)
	var sw, st, ww, wt []time.Duration
	i := 0
	for b.Loop() {
		for j := range 2 {
			if (i+j)%2 == 0 {
				w, t := grade(task.RewardSummary)
				sw, st = append(sw, w), append(st, t)
			} else {
				w, t := grade(task.RewardTests)
				ww, wt = append(ww, w), append(wt, t)
			}
		}
		i++
	}
	p50 := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Microseconds()) / 1000
	}
	b.ReportMetric(p50(sw), "summary-grade-p50-ms")
	b.ReportMetric(p50(st), "summary-tests-p50-ms")
	b.ReportMetric(p50(ww), "watched-grade-p50-ms")
	b.ReportMetric(p50(wt), "watched-tests-p50-ms")
	b.ReportMetric(p50(ww)/p50(sw), "grade-ratio")
	b.ReportMetric(p50(wt)/p50(st), "tests-ratio")
}

// gradeBench is the grading benchmarks' setup: the textwrap demo task, a
// Docker backend with a warm pool of its image, a runner on it, and a
// wait until the pool is full again.
func gradeBench(b *testing.B) (task.Task, fs.FS, *docker.Backend, *Runner, func()) {
	sandboxtest.RequireDocker(b)
	if _, err := sandboxtest.EnsureAgent(); err != nil {
		b.Fatal(err)
	}
	tasks, hidden, err := demo.Tasks()
	if err != nil {
		b.Fatal(err)
	}
	tk := tasks[slices.IndexFunc(tasks, func(t task.Task) bool { return t.ID == "textwrap" })]
	const warm = 4
	be, err := docker.New(context.Background(), docker.Config{StateDir: b.TempDir(), Pool: map[string]int{tk.Image: warm}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		be.Close(ctx)
	})
	sandboxtest.RequireImage(b, be, tk.Image)
	r, _ := testRunner(b, be, Limits{})
	waitWarm := func() {
		for deadline := time.Now().Add(2 * time.Minute); be.Stats().Warm < warm; {
			if time.Now().After(deadline) {
				b.Fatalf("warm pool stuck at %d of %d", be.Stats().Warm, warm)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return tk, hidden, be, r, waitWarm
}
