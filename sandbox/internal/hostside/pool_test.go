package hostside

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRefillTimers: the refiller retries a failed warm creation after a
// doubling backoff from 1 s, capped at 30 s; at the backend's bound
// (ErrNoSlot) it waits for a Wake, or a minute at most. In a synctest
// bubble: the creations are timed on its clock, exactly.
func TestRefillTimers(t *testing.T) {
	errCreate := errors.New("engine busy")
	s := time.Second
	tests := []struct {
		name    string
		results []error       // the warm function's, in order; then success
		wakeAt  time.Duration // when the test calls Wake; 0: never
		want    []time.Duration
	}{
		{"failures back off", []error{errCreate, errCreate, errCreate, errCreate}, 0,
			[]time.Duration{0, 1 * s, 3 * s, 7 * s, 15 * s}},
		{"the backoff stops at 30 s", []error{errCreate, errCreate, errCreate, errCreate, errCreate, errCreate, errCreate}, 0,
			[]time.Duration{0, 1 * s, 3 * s, 7 * s, 15 * s, 31 * s, 61 * s, 91 * s}},
		{"no slot waits for a wake", []error{ErrNoSlot}, 10 * s, []time.Duration{0, 10 * s}},
		{"no slot and no wake waits a minute", []error{ErrNoSlot}, 0, []time.Duration{0, time.Minute}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := NewPool(map[string]int{"img": 1}, func(c string) string { return c })
				start := time.Now()
				var calls []time.Duration
				warm := func(ctx context.Context, image string) (string, error) {
					calls = append(calls, time.Since(start))
					if n := len(calls); n <= len(tc.results) {
						return "", tc.results[n-1]
					}
					return image, nil
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() {
					defer close(done)
					p.Refill(ctx, slog.New(slog.DiscardHandler), warm)
				}()
				if tc.wakeAt > 0 {
					time.Sleep(tc.wakeAt)
					p.Wake()
				}
				time.Sleep(5 * time.Minute)
				synctest.Wait()
				cancel()
				<-done
				if diff := cmp.Diff(tc.want, calls); diff != "" {
					t.Errorf("warm creations at (-want +got):\n%s", diff)
				}
				if n := p.Count("img"); n != 1 {
					t.Errorf("%d warm sandboxes, want 1", n)
				}
			})
		})
	}
}
