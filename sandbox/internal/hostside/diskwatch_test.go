package hostside

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// TestDiskWatchTimers: the watchdog measures the layer every 500 ms (its
// walks cost nothing here): at the first measurement past the limit it
// stops the call in flight that grew it, or, with none in flight, kills
// the background writer. In a synctest bubble, the files real, so the
// stop is pinned to the tick.
func TestDiskWatchTimers(t *testing.T) {
	const (
		limit = 1 << 20
		tick  = 500 * time.Millisecond
	)
	tests := []struct {
		name     string
		inCall   bool          // the writer is a call in flight (else a background process)
		writeAt  time.Duration // when it writes 2 MiB
		wantStop time.Duration // when the call is stopped or the kill comes
	}{
		{"a call writes past the limit", true, 0, tick},
		{"a background writer between calls", false, 100 * time.Millisecond, tick},
		{"a background writer after a tick", false, 600 * time.Millisecond, 2 * tick},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				start := time.Now()
				var killedAt []time.Duration
				w := NewDiskWatch(dir, limit, slog.New(slog.DiscardHandler), func(context.Context) {
					killedAt = append(killedAt, time.Since(start))
				})
				defer w.Close()
				synctest.Wait() // the first measurement, at 0
				write := func() {
					time.Sleep(tc.writeAt - time.Since(start))
					if err := os.WriteFile(filepath.Join(dir, "fill"), bytes.Repeat([]byte("x"), 2*limit), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if !tc.inCall {
					write()
					time.Sleep(tc.wantStop + time.Millisecond - time.Since(start))
					synctest.Wait()
					w.Close()
					if len(killedAt) != 1 || killedAt[0] != tc.wantStop {
						t.Errorf("kills at %v, want one at %v", killedAt, tc.wantStop)
					}
					var pe *sandbox.PathError
					if err := w.RefuseWrite(filepath.Join(dir, "more"), 1); !errors.As(err, &pe) || pe.Kind != sandbox.KindNoSpace {
						t.Errorf("write while over the limit: %v, want a %s PathError", err, sandbox.KindNoSpace)
					}
					return
				}
				res, err := w.Exec(t.Context(), sandbox.ExecRequest{Command: "fill"}, func(ctx context.Context, _ sandbox.ExecRequest) (sandbox.ExecResult, error) {
					write()
					<-ctx.Done() // a writer that goes on until stopped
					return sandbox.ExecResult{ExitCode: -1}, ctx.Err()
				})
				if err != nil {
					t.Fatal(err)
				}
				took := time.Since(start)
				w.Close()
				if took != tc.wantStop || res.Stopped != sandbox.StopDisk || res.ExitCode != 137 || !strings.Contains(res.Output, "disk limit reached") {
					t.Errorf("call ended at %v with %+v; want stopped at %v for the disk limit, exit 137", took, res, tc.wantStop)
				}
				if len(killedAt) != 0 {
					t.Errorf("kills at %v, want none (the call was stopped)", killedAt)
				}
			})
		})
	}
}
