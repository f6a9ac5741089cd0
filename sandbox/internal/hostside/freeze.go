package hostside

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"
)

// freezeAttempts bounds the tries of a freeze the runtime gave up on.
const freezeAttempts = 5

// Freeze calls pause (the engine's pause of a container) until it
// succeeds. On cgroup v1 runc gives up on a freeze when the cgroup does
// not settle in FROZEN within its own few tries (a task forking or
// exiting at that moment; seen under load as "unable to freeze") and
// leaves the container running, so that error is retried after a short
// wait; any other error is returned at once. It returns when the
// successful try began, so a pause time counts from there.
func Freeze(ctx context.Context, log *slog.Logger, pause func(context.Context) error) (time.Time, error) {
	for i := 1; ; i++ {
		t0 := time.Now()
		err := pause(ctx)
		if err == nil {
			return t0, nil
		}
		if i == freezeAttempts || !strings.Contains(err.Error(), "unable to freeze") {
			return time.Time{}, err
		}
		log.Warn("sandbox freeze did not settle, retrying", "attempt", i, "err", err)
		select {
		case <-ctx.Done():
			return time.Time{}, errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(i) * 20 * time.Millisecond):
		}
	}
}
