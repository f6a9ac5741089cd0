package audit

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkAudit replays the test corpus (every format, hacks and clean
// episodes) with rules only and reports tool calls per second.
func BenchmarkAudit(b *testing.B) {
	eps, _ := Read("testdata/corpus")
	var batch []Episode
	for i := 0; i < 40; i++ {
		for _, e := range eps {
			e.ID = fmt.Sprintf("%s-%d", e.ID, i)
			batch = append(batch, e)
		}
	}
	calls := 0
	for _, e := range batch {
		calls += len(e.Steps)
	}
	a := corpusAuditor(b, nil)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := a.Audit(ctx, batch, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(calls*b.N)/b.Elapsed().Seconds(), "calls/s")
}
