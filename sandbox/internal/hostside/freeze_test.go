package hostside

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
)

func TestFreeze(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	unsettled := errors.New("OCI runtime pause failed: unable to freeze: unknown")
	other := errors.New("container is not running")
	tests := []struct {
		name      string
		fails     []error // what the first calls return; nil after
		wantErr   error
		wantCalls int
	}{
		{"first try", nil, nil, 1},
		{"unsettled twice", []error{unsettled, unsettled}, nil, 3},
		{"other error at once", []error{other}, other, 1},
		{"unsettled every time", []error{unsettled, unsettled, unsettled, unsettled, unsettled, unsettled}, unsettled, freezeAttempts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
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
			if (err == nil) == t0.IsZero() {
				t.Fatalf("start time %v with err %v", t0, err)
			}
		})
	}
}
