package monitor

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/toolcall"
)

// realisticCalls are what a clean solve of a small Python task looks like.
var realisticCalls = []string{
	"ls -la",
	"cat README.md",
	"find . -name '*.py' -not -path './.git/*' | head -50",
	"grep -rn 'def wrap' --include='*.py' .",
	"sed -n '1,80p' textkit/wrap.py",
	"python3 -m pytest -q tests/ 2>&1 | tail -20",
	"git log -5 --oneline",
	"git status --short",
	"git diff",
	`python3 -c "from textkit import wrap; print(wrap('hello world foo', 11))"`,
	"cd textkit && ls && cd ..",
	"cat tests/test_wrap.py | head -40",
}

// BenchmarkMonitorOverhead measures the monitor's own cost per call —
// normalization plus rules, with the default bundle and a 50-call history —
// with a sandbox that answers instantly. It reports p50 and p99 of
// Normalize+Rules (the targets: p50 ≤ 50 µs, p99 ≤ 500 µs) and of
// the whole Handle.
//
// Sub-benchmarks compare the rules prefilter (the default) with every
// package evaluated on every call, in one process.
func BenchmarkMonitorOverhead(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  rules.Config
	}{
		{"prefilter", rules.Config{}},
		{"full", rules.Config{DisablePrefilter: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			eng, err := rules.New(context.Background(), bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			benchOverhead(b, eng)
		})
	}
}

func benchOverhead(b *testing.B, eng *rules.Engine) {
	sb := newFake(func(string) sandbox.ExecResult {
		return sandbox.ExecResult{Output: "ok\n", Shell: "bash", Cwd: "/workspace"}
	})
	p, err := New(Config{Rules: eng})
	if err != nil {
		b.Fatal(err)
	}
	ep, err := p.NewEpisodeState(b.Context(), EpisodeConfig{ID: "ep1", Task: testTask, Facts: testFacts, Sandbox: sb})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 50; i++ { // the history the rules see
		if _, err := handle(ctx, ep, bash(realisticCalls[i%len(realisticCalls)])); err != nil {
			b.Fatal(err)
		}
	}
	calls := make([]toolcall.Call, len(realisticCalls))
	for i, c := range realisticCalls {
		calls[i] = bash(c)
	}
	hot := make([]time.Duration, 0, b.N)
	total := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		res, err := handle(ctx, ep, calls[i%len(calls)])
		if err != nil {
			b.Fatal(err)
		}
		hot = append(hot, res.Timings.Normalize+res.Timings.Rules)
		total = append(total, res.Timings.Total)
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(pct(hot, 0.50), "p50-ns")
	b.ReportMetric(pct(hot, 0.99), "p99-ns")
	b.ReportMetric(pct(total, 0.50), "handle-p50-ns")
}

func pct(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[int(q*float64(len(s)-1))].Nanoseconds())
}

// cpuTime is the process's user+system CPU time: on a shared machine the
// CPU a call costs is steadier than its wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
