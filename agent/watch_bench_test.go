package agent

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// BenchmarkWatch is the cost of the effect watch per call: one call that
// creates N files in a fresh directory and removes them (2N+2 effects),
// with the watch off and on, side by side. Compare the ratio within one
// run.
func BenchmarkWatch(b *testing.B) {
	for _, n := range []int{0, 10, 100, 1000} {
		for _, on := range []bool{false, true} {
			name := fmt.Sprintf("files=%d/watch=%s", n, map[bool]string{false: "off", true: "on"}[on])
			b.Run(name, func(b *testing.B) { benchWatch(b, n, on) })
		}
	}
}

func benchWatch(b *testing.B, n int, on bool) {
	ws := b.TempDir()
	if err := os.MkdirAll(ws+"/src/pkg", 0o755); err != nil {
		b.Fatal(err)
	}
	c := benchClient(b, ServerConfig{Workdir: ws, ShellMode: ModePersistent})
	ctx := b.Context()
	if on {
		if err := c.Configure(ctx, Config{Workdir: ws, Watch: &sandbox.Watch{Roots: []string{ws}, Skip: []string{".git"}, MaxEffects: 4096}}); err != nil {
			b.Fatal(err)
		}
	}
	cmd := "true"
	if n > 0 {
		cmd = fmt.Sprintf("mkdir -p d && for i in $(seq %d); do : > d/f$i; done && rm -r d", n)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		res, err := c.Exec(ctx, sandbox.ExecRequest{Command: cmd})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %+v %v", res, err)
		}
		if on && n > 0 && len(res.Effects) != 2*n+2 {
			b.Fatalf("%d effects, want %d", len(res.Effects), 2*n+2)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportLatency(b, "", lat)
}
