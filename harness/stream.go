package harness

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/toolcall"
)

// streamStop bounds how long Finish and Close wait for the streamed calls
// they killed to be recorded.
const streamStop = 10 * time.Second

// Running is a streamed call of an episode (see Start).
type Running struct {
	e    *Episode
	mon  *monitor.StreamedCall
	done chan struct{}
	res  decision.CallResult // set before done is closed
	err  error
}

// Decision is the call's decision, made before it started.
func (r *Running) Decision() decision.Decision { return r.mon.Decision() }

// Step is the call's step in the episode.
func (r *Running) Step() int { return r.mon.Step() }

// Process is the running command, for input and signals; nil when
// nothing runs (a blocked call, bad arguments).
func (r *Running) Process() sandbox.Process { return r.mon.Process() }

// Input writes data to the command's stdin once the monitor's rules had
// it (under the episode's call lock): it could be commands to a shell
// the call started. Input with a certain flag is not written: the error
// wraps decision.ErrInputRefused and says why, and the call is labelled
// with the flag when it ends. After Finish or Close began it returns an
// error wrapping ErrFinished.
func (r *Running) Input(ctx context.Context, data []byte) error {
	e := r.e
	e.mu.Lock()
	stopped := e.stopped
	e.mu.Unlock()
	if stopped {
		return fmt.Errorf("harness: episode %s step %d: input: %w", e.id, r.Step(), ErrFinished)
	}
	e.callMu.Lock()
	err := r.mon.CheckInput(ctx, data)
	e.callMu.Unlock()
	if err != nil {
		return err
	}
	return r.mon.Process().Input(ctx, data)
}

// Wait returns the call's result once it ended and was recorded.
func (r *Running) Wait(ctx context.Context) (decision.CallResult, error) {
	select {
	case <-r.done:
		return r.res, r.err
	case <-ctx.Done():
		return decision.CallResult{}, ctx.Err()
	}
}

// Done is closed once the call ended and was recorded.
func (r *Running) Done() <-chan struct{} { return r.done }

// Withheld reports, once the command exited, that its stream held back
// output the monitor withholds (monitor.StreamedCall.Withheld): for a
// read_file, the file from its first protected line on.
func (r *Running) Withheld() bool { return r.mon.Withheld() }

// Start is Call for a bash command or a read_file whose output streams
// as it comes (monitor.EpisodeState.Start, whose stdin and out these
// are): its step
// is numbered, its tool_call recorded and the monitor decides before it
// starts, and it returns while the command runs, so that other calls run
// beside it. When it ends, the monitor's check stage and the record of
// its decision and output run under the call lock, as a Call's do,
// whoever waits. Finish and Close kill the streamed calls still running
// (before any grading) and record them. The errors are Call's, plus one
// wrapping sandbox.ErrUnsupported for a sandbox that does not stream.
func (e *Episode) Start(ctx context.Context, call toolcall.Call, stdin bool, out func(sandbox.Output)) (*Running, error) {
	e.callMu.Lock()
	defer e.callMu.Unlock()
	t0 := time.Now()
	seg, step, callJSON, err := e.beginStep(&call, "start", t0, func() error {
		if _, ok := e.sb.(sandbox.Streamer); !ok {
			return fmt.Errorf("harness: episode %s: start: %w", e.id, sandbox.ErrUnsupported)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	p := toolcall.Prepare(call)
	p.Step = step
	cctx, cancel := context.WithTimeout(ctx, e.r.cfg.Limits.CallTimeout)
	mr, err := e.mon.Start(cctx, p, stdin, out)
	cancel()
	if err != nil {
		// The monitor's error names the episode and the step already (as
		// in Call): wrapping it again would say them twice.
		if ctx.Err() == nil {
			e.noteInfra(err)
		}
		return nil, err
	}
	r := &Running{e: e, mon: mr, done: make(chan struct{})}
	e.mu.Lock()
	if e.running == nil {
		e.running = map[*Running]bool{}
	}
	e.running[r] = true
	e.mu.Unlock()
	go func() {
		defer close(r.done)
		<-mr.Exited()
		e.callMu.Lock()
		defer e.callMu.Unlock()
		res, err := mr.Check(context.WithoutCancel(ctx))
		e.mu.Lock()
		delete(e.running, r)
		e.mu.Unlock()
		if err != nil {
			r.err = err // the monitor's, naming the episode and step
			e.noteInfra(r.err)
			return
		}
		r.res, r.err = res, e.record(seg, step, res, callJSON, t0)
	}()
	return r, nil
}

// stopStreams kills the streamed calls still running and waits (a
// while) for them to be recorded. Called once stopped is set, so no new
// one starts.
func (e *Episode) stopStreams(ctx context.Context) {
	e.mu.Lock()
	running := make([]*Running, 0, len(e.running))
	for r := range e.running {
		running = append(running, r)
	}
	e.mu.Unlock()
	if len(running) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, streamStop)
	defer cancel()
	for _, r := range running {
		if p := r.Process(); p != nil {
			if err := p.Signal(ctx, syscall.SIGKILL); err != nil && !errors.Is(err, sandbox.ErrClosed) {
				e.log.Warn("killing a streamed call", "step", r.Step(), "err", err)
			}
		}
	}
	for _, r := range running {
		select {
		case <-r.done:
		case <-ctx.Done():
			e.log.Warn("a killed streamed call was not recorded in time", "step", r.Step())
			return
		}
	}
}
