package hostside

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"
)

// TestFreeze: an unsettled freeze is retried after i·20 ms (the i-th
// retry), other errors are not, and the time returned is when the
// successful try began. In a synctest bubble, so the waits are exact.
func TestFreeze(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	unsettled := errors.New("OCI runtime pause failed: unable to freeze: unknown")
	other := errors.New("container is not running")
	ms := time.Millisecond
	tests := []struct {
		name      string
		fails     []error // what the first calls return; nil after
		wantErr   error
		wantCalls int
		wantTook  time.Duration // until Freeze returned: the waits
	}{
		{"first try", nil, nil, 1, 0},
		{"unsettled twice", []error{unsettled, unsettled}, nil, 3, 20*ms + 40*ms},
		{"other error at once", []error{other}, other, 1, 0},
		{"unsettled every time", []error{unsettled, unsettled, unsettled, unsettled, unsettled, unsettled}, unsettled, freezeAttempts, (20 + 40 + 60 + 80) * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				calls := 0
				start := time.Now()
				t0, err := Freeze(context.Background(), log, func(context.Context) error {
					calls++
					if calls <= len(tt.fails) {
						return tt.fails[calls-1]
					}
					return nil
				})
				if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if calls != tt.wantCalls {
					t.Fatalf("pause called %d times, want %d", calls, tt.wantCalls)
				}
				if took := time.Since(start); took != tt.wantTook {
					t.Errorf("Freeze took %v, want %v", took, tt.wantTook)
				}
				switch {
				case err != nil && !t0.IsZero():
					t.Errorf("start time %v with err %v, want none", t0, err)
				case err == nil && !t0.Equal(start.Add(tt.wantTook)):
					t.Errorf("start time %v after the call, want %v (when the successful try began)", t0.Sub(start), tt.wantTook)
				}
			})
		})
	}
}
