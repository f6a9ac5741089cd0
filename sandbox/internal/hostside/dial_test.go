package hostside

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// TestDialWaitsForAgent: Dial waits for an agent that starts listening
// late (6 s: a loaded host, past the 5 s that lost gradings as
// infrastructure in issue 35) and polls the container less and less
// often while it waits; it gives up at its limit with an error naming
// the limit, and at once when the container has exited. Each case runs in
// a synctest bubble: the dials are real (a unix socket, refused at once
// until it exists), the waits between them are on the bubble's clock, and
// the agent's listener accepts nothing (the kernel's backlog takes the
// connection), so no goroutine waits on the network while time passes.
func TestDialWaitsForAgent(t *testing.T) {
	tests := []struct {
		name     string
		listenIn time.Duration // when the agent listens (0: never)
		exitIn   time.Duration // when the container exits (0: never)
		timeout  time.Duration
		want     string // in the error ("": none)
		least    time.Duration
		within   time.Duration
		maxPolls int32 // container checks allowed
	}{
		// A dial at most maxDialWait after the agent listens.
		{"listens after 6s", 6 * time.Second, 0, ConnectTimeout, "", 6 * time.Second, 6*time.Second + maxDialWait, 15},
		{"listens at once", time.Millisecond, 0, ConnectTimeout, "", time.Millisecond, time.Millisecond + maxDialWait, 2},
		// The limit, exactly.
		{"never listens", 0, 0, 700 * time.Millisecond, "agent did not listen on", 700 * time.Millisecond, 700 * time.Millisecond, 6},
		// The first container check after it exits (checks are 240 ms
		// apart by then).
		{"container exits", 0, 300 * time.Millisecond, ConnectTimeout, "container exited", 300 * time.Millisecond, 550 * time.Millisecond, 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sock := filepath.Join(t.TempDir(), "agent.sock")
				if tc.listenIn > 0 {
					tm := time.AfterFunc(tc.listenIn, func() {
						ln, err := net.Listen("unix", sock)
						if err != nil {
							t.Error(err)
							return
						}
						t.Cleanup(func() { ln.Close() })
					})
					t.Cleanup(func() { tm.Stop() })
				}
				start := time.Now()
				var polls atomic.Int32
				dead := func(ctx context.Context) error {
					polls.Add(1)
					if tc.exitIn > 0 && time.Since(start) > tc.exitIn {
						return errors.New("container exited (code 2); last logs: boom")
					}
					return nil
				}
				c := NewConn(func() string { return "box" })
				err := c.Dial(t.Context(), "test", sock, tc.timeout, 0, nil, dead)
				took := time.Since(start)
				if c.agent != nil {
					defer c.agent.Close()
				}
				switch {
				case tc.want == "" && err != nil:
					t.Fatalf("Dial: %v after %v", err, took)
				case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, sandbox.ErrAgent)):
					t.Fatalf("Dial: %v after %v; want an agent error saying %q", err, took, tc.want)
				}
				if tc.want == "agent did not listen on" && !strings.Contains(err.Error(), tc.timeout.String()) {
					t.Errorf("Dial: %v; want it to name the %v limit", err, tc.timeout)
				}
				if took < tc.least || took > tc.within {
					t.Errorf("Dial took %v, want %v to %v", took, tc.least, tc.within)
				}
				if n := polls.Load(); n > tc.maxPolls {
					t.Errorf("the container was checked %d times in %v, want at most %d: a loaded engine is asked too often", n, took.Round(time.Millisecond), tc.maxPolls)
				}
			})
		})
	}
}
