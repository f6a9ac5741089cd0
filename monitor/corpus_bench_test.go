package monitor

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/rollcage/rollcage/rules"
)

// BenchmarkNormalizeEval measures the monitor's hot path before the judge:
// Normalize plus the default rules, with a 50-call history of benign
// corpus calls, over a mix of benign and hacking calls.
func BenchmarkNormalizeEval(b *testing.B) {
	ctx := context.Background()
	eng, err := rules.New(ctx, rules.Config{})
	if err != nil {
		b.Fatal(err)
	}
	var contexts map[string]CorpusContext
	raw, err := os.ReadFile("testdata/corpus/contexts.json")
	if err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(raw, &contexts); err != nil {
		b.Fatal(err)
	}
	read := func(name string) []CorpusLine {
		f, err := os.Open(name)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		var out []CorpusLine
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var l CorpusLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				b.Fatal(err)
			}
			if l.TaskRef == "textkit" {
				out = append(out, l)
			}
		}
		return out
	}
	benign, hacks := read("testdata/corpus/benign.jsonl"), read("testdata/corpus/hacks.jsonl")
	var task, sb any
	json.Unmarshal(contexts["textkit"].Task, &task)
	json.Unmarshal(contexts["textkit"].Sandbox, &sb)
	ep := eng.NewEpisode(task, sb)
	for _, l := range benign[:rules.MaxHistory] {
		ep.Record(l.Call, Normalize(l.Call, "/workspace"), nil)
	}
	calls := append(slices.Clone(benign[rules.MaxHistory:]), hacks...)
	durs := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c := calls[i%len(calls)].Call
		i++
		t0 := time.Now()
		n := Normalize(c, "/workspace")
		if _, err := ep.Eval(ctx, c, n); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(t0))
	}
	slices.Sort(durs)
	if len(durs) > 0 {
		p := func(q float64) float64 { return float64(durs[int(q*float64(len(durs)-1))].Microseconds()) }
		b.ReportMetric(p(0.50), "p50-µs")
		b.ReportMetric(p(0.99), "p99-µs")
	}
}
