package rules

import (
	"context"
	"slices"
	"testing"
	"time"
)

// benchHistory is a realistic clean-solve prefix: exploration, reads,
// test runs, edits.
func benchHistory() []map[string]any {
	var h []map[string]any
	for i := range MaxHistory {
		var n map[string]any
		switch i % 5 {
		case 0:
			n = map[string]any{"tool": "bash", "raw": "grep -rn 'def wrap' textkit/", "cwd": "/workspace",
				"commands": []any{map[string]any{"name": "grep", "argv": []string{"grep", "-rn", "def wrap", "textkit/"}}},
				"lists":    []string{"/workspace/textkit"}}
		case 1:
			n = map[string]any{"tool": "read_file", "raw": "/workspace/textkit/wrap.py", "reads": []string{"/workspace/textkit/wrap.py"}}
		case 2:
			n = map[string]any{"tool": "bash", "raw": "python -m pytest -q tests/", "cwd": "/workspace",
				"commands": []any{map[string]any{"name": "python", "argv": []string{"python", "-m", "pytest", "-q", "tests/"}}}}
		case 3:
			n = map[string]any{"tool": "edit", "raw": "/workspace/textkit/wrap.py", "writes": []string{"/workspace/textkit/wrap.py"},
				"content": "    if width <= 0:\n        raise ValueError(f'width must be positive, got {width}')\n    lines = []\n"}
		case 4:
			n = map[string]any{"tool": "bash", "raw": "git diff --stat", "cwd": "/workspace",
				"commands": []any{map[string]any{"name": "git", "argv": []string{"git", "diff", "--stat"}}},
				"git":      []any{map[string]any{"sub": "diff", "args": []string{"--stat"}, "flags": []string{"--stat"}}}}
		}
		h = append(h, n)
	}
	return h
}

// BenchmarkEval measures one tool call through the default bundle with a
// full 50-call history; p50/p99 are reported per call.
func BenchmarkEval(b *testing.B) {
	calls := []struct {
		name string
		n    map[string]any
	}{
		{"bash_grep", map[string]any{"tool": "bash", "raw": "grep -rn width tests/ | head -20", "cwd": "/workspace",
			"commands": []any{map[string]any{"name": "grep", "argv": []string{"grep", "-rn", "width", "tests/"}}, map[string]any{"name": "head", "argv": []string{"head", "-20"}, "via": "pipe"}},
			"lists":    []string{"/workspace/tests"}}},
		{"edit", map[string]any{"tool": "edit", "raw": "/workspace/textkit/wrap.py", "writes": []string{"/workspace/textkit/wrap.py"},
			"content": "    for word in words:\n        while len(word) > width:\n            lines.append(word[:width])\n            word = word[width:]\n"}},
		{"git_show_future", map[string]any{"tool": "bash", "raw": "git show 9f2c4e1", "cwd": "/workspace",
			"commands": []any{map[string]any{"name": "git", "argv": []string{"git", "show", "9f2c4e1"}}},
			"git":      []any{map[string]any{"sub": "show", "args": []string{"9f2c4e1"}, "refs": []string{"9f2c4e1"}}}}},
	}
	e, err := New(context.Background(), Config{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range calls {
		b.Run(c.name, func(b *testing.B) {
			ep := e.NewEpisode(b.Context(), demoTask, demoSandbox)
			for _, n := range benchHistory() {
				ep.Record(map[string]any{"tool": n["tool"]}, n, nil, Shown{})
			}
			call := map[string]any{"tool": c.n["tool"]}
			durs := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				if _, err := ep.Eval(ctx, call, c.n); err != nil {
					b.Fatal(err)
				}
				durs = append(durs, time.Since(t0))
			}
			reportPercentiles(b, durs)
		})
	}
}

func reportPercentiles(b *testing.B, durs []time.Duration) {
	if len(durs) == 0 {
		return
	}
	slices.Sort(durs)
	p := func(q float64) float64 { return float64(durs[int(q*float64(len(durs)-1))].Microseconds()) }
	b.ReportMetric(p(0.50), "p50-µs")
	b.ReportMetric(p(0.99), "p99-µs")
}
