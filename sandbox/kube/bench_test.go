//go:build kube

package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// BenchmarkCreate is one pod sandbox started and closed: cold (a new pod
// per op) and warm (handed out of a pool of 2 that refills between ops).
func BenchmarkCreate(b *testing.B) {
	for _, warm := range []bool{false, true} {
		b.Run(map[bool]string{false: "cold", true: "warm"}[warm], func(b *testing.B) {
			cfg := testConfig(b)
			if warm {
				cfg.Pool = map[string]int{testImage(): 2}
			}
			be := newTestBackend(b, cfg)
			if warm {
				for be.Stats().Warm < 2 {
					time.Sleep(50 * time.Millisecond)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				if warm {
					b.StopTimer()
					for be.Stats().Warm < 1 {
						time.Sleep(20 * time.Millisecond)
					}
					b.StartTimer()
				}
				sb, err := be.Create(context.Background(), sandbox.Spec{Image: testImage(), EpisodeID: fmt.Sprintf("bench-%d", i)})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				sb.Close(context.Background())
				b.StartTimer()
			}
		})
	}
}

// BenchmarkRoundTrip is one Exec of `true` over the attach stream.
func BenchmarkRoundTrip(b *testing.B) {
	be := newTestBackend(b, testConfig(b))
	sb, err := be.Create(context.Background(), sandbox.Spec{Image: testImage(), EpisodeID: "bench-rt"})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close(context.Background())
	b.ResetTimer()
	for range b.N {
		if res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v, exit %d", err, res.ExitCode)
		}
	}
}
