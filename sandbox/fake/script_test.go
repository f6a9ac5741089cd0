package fake_test

import (
	"context"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/fake"
)

// TestScript: a Script's process writes each step at its time on the
// bubble's clock and exits 0, or 137 at once on a SIGKILL.
func TestScript(t *testing.T) {
	type piece struct {
		At           time.Duration
		Stream, Data string
	}
	steps := []fake.Step{{After: time.Second, Data: "a"}, {After: 2 * time.Second, Stream: sandbox.Stderr, Data: "b\n"}}
	tests := []struct {
		name     string
		killAt   time.Duration // 0: never
		want     []piece
		wantCode int
		wantOut  string
		wantTook time.Duration
	}{
		{"runs to its end", 0, []piece{{time.Second, sandbox.Stdout, "a"}, {3 * time.Second, sandbox.Stderr, "b\n"}}, 0, "ab\n", 3 * time.Second},
		{"killed between steps", 2 * time.Second, []piece{{time.Second, sandbox.Stdout, "a"}}, 137, "a", 2 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sb := fake.NewStreamer(sandbox.Spec{}, nil, fake.Script(steps...))
				start := time.Now()
				var got []piece
				p, err := sb.Start(t.Context(), sandbox.StartRequest{Command: "script"}, func(o sandbox.Output) {
					got = append(got, piece{time.Since(start), o.Stream, string(o.Data)})
				})
				if err != nil {
					t.Fatal(err)
				}
				if tc.killAt > 0 {
					time.Sleep(tc.killAt)
					p.Signal(context.Background(), syscall.SIGKILL)
				}
				res, err := p.Wait(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("output (-want +got):\n%s", diff)
				}
				if res.ExitCode != tc.wantCode || res.Output != tc.wantOut || res.Duration != tc.wantTook {
					t.Errorf("result exit %d, output %q, after %v; want %d, %q, %v", res.ExitCode, res.Output, res.Duration, tc.wantCode, tc.wantOut, tc.wantTook)
				}
			})
		})
	}
}
