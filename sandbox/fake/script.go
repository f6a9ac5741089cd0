package fake

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// Step is one piece of a Script's output: Data on Stream (Stdout when
// empty), After the step before it (or the start).
type Step struct {
	After  time.Duration
	Stream string
	Data   string
}

// Script is a StartFunc whose process writes steps on the clock and then
// exits 0; a SIGKILL ends it at once (exit 137). It runs no command, so
// under testing/synctest it runs on the bubble's clock: what tests of
// streaming timers (keepalives, partial lines) start.
func Script(steps ...Step) StartFunc {
	return func(_ context.Context, _ *Sandbox, _ sandbox.StartRequest, out func(sandbox.Output)) (sandbox.Process, error) {
		p := &scriptProc{done: make(chan struct{}), kill: make(chan struct{})}
		go func() {
			defer close(p.done)
			var all strings.Builder
			t0 := time.Now()
			code := 0
		steps:
			for _, s := range steps {
				select {
				case <-time.After(s.After):
				case <-p.kill:
					code = 128 + int(syscall.SIGKILL)
					break steps
				}
				all.WriteString(s.Data)
				out(sandbox.Output{Stream: cmp.Or(s.Stream, sandbox.Stdout), Data: []byte(s.Data)})
			}
			p.res = sandbox.ExecResult{Output: all.String(), ExitCode: code, Shell: "bash", TotalBytes: int64(all.Len()), Duration: time.Since(t0)}
		}()
		return p, nil
	}
}

type scriptProc struct {
	done, kill chan struct{}
	once       sync.Once
	res        sandbox.ExecResult // set before done closes
}

func (p *scriptProc) PID() int { return 2 }

func (p *scriptProc) Input(context.Context, []byte) error {
	return fmt.Errorf("fake script: no input: %w", sandbox.ErrRefused)
}

func (p *scriptProc) CloseInput(context.Context) error { return nil }

func (p *scriptProc) Signal(_ context.Context, sig syscall.Signal) error {
	if sig == syscall.SIGKILL {
		p.once.Do(func() { close(p.kill) })
	}
	return nil
}

func (p *scriptProc) Wait(ctx context.Context) (sandbox.ExecResult, error) {
	select {
	case <-p.done:
		return p.res, nil
	case <-ctx.Done():
		return sandbox.ExecResult{}, ctx.Err()
	}
}
