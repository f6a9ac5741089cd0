package judge

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestLimiterWaits: a call past a limit waits until a slot is released
// or its context's deadline, whichever comes first, and a call that gives
// up keeps no slot. In a synctest bubble: the waits are read exactly.
func TestLimiterWaits(t *testing.T) {
	const deadline = time.Second
	tests := []struct {
		name      string
		holder    string        // the episode holding the only slot it may have
		releaseIn time.Duration // when the holder releases; 0: never
		wantErr   error
		wantWait  time.Duration
	}{
		{name: "episode at its limit, released", holder: "ep", releaseIn: 300 * time.Millisecond, wantWait: 300 * time.Millisecond},
		{name: "episode at its limit until the deadline", holder: "ep", wantErr: context.DeadlineExceeded, wantWait: deadline},
		{name: "global limit held by another episode, released", holder: "other", releaseIn: 300 * time.Millisecond, wantWait: 300 * time.Millisecond},
		{name: "global limit until the deadline", holder: "other", wantErr: context.DeadlineExceeded, wantWait: deadline},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newLimiter(1, 1)
				release, err := l.acquire(t.Context(), tc.holder)
				if err != nil {
					t.Fatal(err)
				}
				if tc.releaseIn > 0 {
					time.AfterFunc(tc.releaseIn, release)
				}
				ctx, cancel := context.WithTimeout(t.Context(), deadline)
				defer cancel()
				start := time.Now()
				rel, err := l.acquire(ctx, "ep")
				if waited := time.Since(start); waited != tc.wantWait {
					t.Errorf("acquire waited %v, want %v", waited, tc.wantWait)
				}
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("acquire: %v, want %v", err, tc.wantErr)
				}
				if err == nil {
					rel()
				} else {
					release()
				}
				synctest.Wait()
				if n := len(l.episodes); n != 0 {
					t.Errorf("limiter holds %d episodes after every call ended", n)
				}
				if n := len(l.global); n != 0 {
					t.Errorf("limiter holds %d global slots after every call ended", n)
				}
			})
		})
	}
}
