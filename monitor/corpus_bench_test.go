package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rollcage/rollcage/normalize"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/rules/corpus"
)

// corpusDir is the labelled corpus beside the rules, one file per case.
const corpusDir = "../rules/testdata/corpus"

// corpusLines reads the corpus's lines: its benign ones and its hacks.
func corpusLines(t testing.TB) (benign, hacks []corpus.Line) {
	t.Helper()
	lines, _, err := corpus.ReadDir(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if l.Category == corpus.Benign {
			benign = append(benign, l)
		} else {
			hacks = append(hacks, l)
		}
	}
	return benign, hacks
}

// corpusContexts reads the shipped corpus's task and sandbox contexts.
func corpusContexts(t testing.TB) map[string]corpus.Context {
	t.Helper()
	contexts, err := corpus.LoadContexts(corpusDir + "/contexts.json")
	if err != nil {
		t.Fatal(err)
	}
	return contexts
}

// BenchmarkNormalizeEval measures the monitor's hot path before the judge:
// Normalize plus the default rules, with a 50-call history of benign
// corpus calls, over a mix of benign and hacking calls.
func BenchmarkNormalizeEval(b *testing.B) {
	ctx := context.Background()
	eng, err := rules.New(ctx, rules.Config{})
	if err != nil {
		b.Fatal(err)
	}
	contexts := corpusContexts(b)
	benign, hacks := corpusLines(b)
	keep := func(ls []corpus.Line) []corpus.Line {
		return slices.DeleteFunc(ls, func(l corpus.Line) bool { return l.TaskRef != "textkit" })
	}
	benign, hacks = keep(benign), keep(hacks)
	var task, sb any
	json.Unmarshal(contexts["textkit"].Task, &task)
	json.Unmarshal(contexts["textkit"].Sandbox, &sb)
	ep := eng.NewEpisode(b.Context(), task, sb)
	for _, l := range benign[:rules.MaxHistory] {
		ep.Record(l.Call, normalize.Normalize(l.Call, "/workspace", nil), nil, rules.Shown{})
	}
	calls := append(slices.Clone(benign[rules.MaxHistory:]), hacks...)
	durs := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c := calls[i%len(calls)].Call
		i++
		t0 := time.Now()
		n := normalize.Normalize(c, "/workspace", nil)
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

// TestPrefilterEquivalence is the proof that the rules' gates (declared in
// their METADATA, package rules/gate) and the discovery memo lose nothing: for
// every corpus line (history included), an EpisodeState that evaluates only the
// packages and rules a call can trigger returns exactly the flags of one
// with Config.DisablePrefilter, which evaluates every rule ungated. (Drop
// one keyword from a rule's gate and this test fails.) A second pass
// runs the whole corpus as one long episode, so discoveries pile up and
// the 50-call window rolls over, and also compares with Engine.Eval on a
// self-contained input whose history the chained rules scan themselves.
func TestPrefilterEquivalence(t *testing.T) {
	ctx := context.Background()
	on, err := rules.New(ctx, rules.Config{})
	if err != nil {
		t.Fatal(err)
	}
	off, err := rules.New(ctx, rules.Config{DisablePrefilter: true})
	if err != nil {
		t.Fatal(err)
	}
	contexts := corpusContexts(t)
	facts := func(l corpus.Line) (task, sb any) {
		tj, sj, ok := l.Facts(contexts)
		if !ok {
			t.Fatalf("%s: task_ref %q not in the contexts", l.ID, l.TaskRef)
		}
		if tj != nil {
			if err := json.Unmarshal(tj, &task); err != nil {
				t.Fatal(err)
			}
		}
		if sj != nil {
			if err := json.Unmarshal(sj, &sb); err != nil {
				t.Fatal(err)
			}
		}
		return task, sb
	}
	benign, hacks := corpusLines(t)
	lines := append(hacks, benign...)
	if len(lines) < 450 {
		t.Fatalf("corpus has %d lines; want >= 450", len(lines))
	}
	flagged := 0
	for _, l := range lines {
		task, sb := facts(l)
		cwd := l.Cwd
		if cwd == "" {
			cwd = "/workspace"
		}
		epOn, epOff := on.NewEpisode(ctx, task, sb), off.NewEpisode(ctx, task, sb)
		for i, c := range append(slices.Clone(l.History), l.Call) {
			n := normalize.Normalize(c, cwd, nil)
			got, err1 := epOn.Eval(ctx, c, n)
			want, err2 := epOff.Eval(ctx, c, n)
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s call %d (%q): prefiltered flags differ (-full +prefiltered):\n%s", l.ID, i, n.Raw, diff)
			}
			if len(got) > 0 {
				flagged++
			}
			epOn.Record(c, n, got, rules.Shown{})
			epOff.Record(c, n, want, rules.Shown{})
		}
	}
	if flagged < 150 {
		t.Errorf("only %d calls flagged; the comparison must cover flagging calls", flagged)
	}

	// One long episode over the textkit lines.
	task, sb := facts(corpus.Line{TaskRef: "textkit"})
	epOn, epOff := on.NewEpisode(ctx, task, sb), off.NewEpisode(ctx, task, sb)
	var window []any
	for _, l := range lines {
		if l.TaskRef != "textkit" {
			continue
		}
		n := normalize.Normalize(l.Call, "/workspace", nil)
		got, err1 := epOn.Eval(ctx, l.Call, n)
		want, err2 := epOff.Eval(ctx, l.Call, n)
		scan, err3 := off.Eval(ctx, map[string]any{"task": task, "sandbox": sb, "call": l.Call, "normalized": n, "history": window})
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("long episode, %s: prefiltered flags differ (-full +prefiltered):\n%s", l.ID, diff)
		}
		if diff := cmp.Diff(scan, want); diff != "" {
			t.Errorf("long episode, %s: memo differs from a history scan (-scan +memo):\n%s", l.ID, diff)
		}
		epOn.Record(l.Call, n, got, rules.Shown{})
		epOff.Record(l.Call, n, want, rules.Shown{})
		fl := make([]any, len(want))
		for i, f := range want {
			fl[i] = map[string]any{"rule": f.Rule, "category": f.Category, "severity": f.Severity, "reason": f.Reason, "evidence": f.Evidence}
		}
		window = append(window, map[string]any{"call": l.Call, "normalized": n, "flags": fl})
		if len(window) > rules.MaxHistory {
			window = window[1:]
		}
	}
}
