package audit

import (
	"context"
	"fmt"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/harness/harnesstest"
	"github.com/rollcage/rollcage/internal/realcorpus"
	"github.com/rollcage/rollcage/toolcall"
)

// BenchmarkAudit measures rules-only audit throughput in tool calls per
// second on three workloads, under the GC setting `rollcage audit` runs
// with (BatchGCPercent):
//
//   - corpus: testdata/corpus, the three formats' hacked and clean
//     episodes, 40 copies. Hack-dense: 3 of 5 episodes hacked, half the
//     calls flagged.
//   - demo-suite: the 72 scripted demo episodes (56 hacked, every category
//     of the rules), 10 copies, in OpenAI message format with the demo's
//     task file.
//   - honest: the demo's 16 honest episodes (a solve and a no-op per task),
//     40 copies: what most of a training run looks like.
//
// Copies are distinct episodes (their own ids); nothing is cached across
// episodes but the per-task facts, as in any audit of many rollouts of the
// same tasks.
func BenchmarkAudit(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(BatchGCPercent))
	corpus, _ := Read("testdata/corpus")
	if len(corpus) < 4 {
		b.Fatalf("corpus has %d episodes; want >= 4", len(corpus))
	}
	suite, tasks := demoEpisodes(b, func(string) bool { return true })
	honest, _ := demoEpisodes(b, func(kind string) bool { return kind == "clean" || kind == "noop" })
	for _, w := range []struct {
		name   string
		eps    []Trace
		copies int
		tasks  map[string]Task
	}{
		{"corpus", corpus, 40, nil},
		{"demo-suite", suite, 10, tasks},
		{"honest", honest, 40, tasks},
	} {
		b.Run(w.name, func(b *testing.B) {
			batch := copies(w.eps, w.copies)
			calls := 0
			for _, e := range batch {
				calls += len(e.Steps)
			}
			a := corpusAuditor(b, nil)
			if w.tasks != nil {
				a.cfg.Tasks = w.tasks
			}
			ctx := context.Background()
			// one pass first: OPA prepares a query per set of rule packages
			// on first use; the benchmark is the steady state after
			if _, err := a.Audit(ctx, w.eps, nil); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := a.Audit(ctx, batch, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(calls*b.N)/b.Elapsed().Seconds(), "calls/s")
			b.ReportMetric(float64(calls)/float64(len(batch)), "calls/episode")
		})
	}
}

// copies returns n copies of eps, each with its own episode ids.
func copies(eps []Trace, n int) []Trace {
	out := make([]Trace, 0, n*len(eps))
	for i := range n {
		for _, e := range eps {
			e.ID = fmt.Sprintf("%s-%d", e.ID, i)
			out = append(out, e)
		}
	}
	return out
}

// demoEpisodes turns the demo's scripted trajectories whose kind keep
// accepts into OpenAI-format episodes, with the demo tasks as task context.
func demoEpisodes(tb testing.TB, keep func(kind string) bool) ([]Trace, map[string]Task) {
	tb.Helper()
	ts, _, err := demo.Tasks()
	if err != nil {
		tb.Fatal(err)
	}
	tasks := map[string]Task{}
	for _, t := range ts {
		tasks[t.ID] = Task{Task: t}
	}
	scripts, err := demo.Scripts()
	if err != nil {
		tb.Fatal(err)
	}
	var eps []Trace
	for _, s := range scripts {
		if !keep(s.Kind) {
			continue
		}
		e := Trace{ID: s.Task + "/" + s.Name, Source: "demo", Format: FormatOpenAI, TaskID: s.Task}
		for _, st := range s.Steps {
			e.Steps = append(e.Steps, Step{Call: toolcall.Call{Tool: st.Tool, Args: st.Args}})
		}
		eps = append(eps, e)
	}
	if len(eps) == 0 {
		tb.Fatal("no demo scripts of the kinds asked for")
	}
	return eps, tasks
}

// BenchmarkAuditReal measures the audit on the real third-party corpus
// (../shared/corpus/real: 141 long trajectories, ~6,000 calls, 56 MB):
// reading alone, replay alone (episodes read once), and both as
// `rollcage audit` does them. Each reports calls/s (wall, on every CPU:
// reading and replay fan out over GOMAXPROCS) and calls/cpu-s (user+sys
// of the process, which a shared machine does not inflate). It skips
// outside CI when the corpus is absent.
func BenchmarkAuditReal(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(BatchGCPercent))
	dir := realcorpus.Need(b)
	eps, _ := Read(dir)
	calls := 0
	for _, e := range eps {
		calls += len(e.Steps)
	}
	a, err := New(Config{Rules: harnesstest.Rules(b)})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := a.Audit(ctx, eps, nil); err != nil {
		b.Fatal(err)
	}
	for _, w := range []struct {
		name       string
		read, play bool
	}{{"read", true, false}, {"replay", false, true}, {"read+replay", true, true}} {
		b.Run(w.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			for b.Loop() {
				eps := eps
				if w.read {
					eps, _ = Read(dir)
				}
				if w.play {
					if _, err := a.Audit(ctx, eps, nil); err != nil {
						b.Fatal(err)
					}
				}
			}
			cpu := cpuTime(b) - cpu0
			b.ReportMetric(float64(calls*b.N)/b.Elapsed().Seconds(), "calls/s")
			b.ReportMetric(float64(calls*b.N)/cpu.Seconds(), "calls/cpu-s")
		})
	}
}

// cpuTime is the process's user+system CPU time.
func cpuTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
