package fake

import (
	"context"
	"fmt"
	"syscall"

	"github.com/rollcage/rollcage/sandbox"
)

// StartFunc answers one command started in sb (sandbox.Streamer's
// Start). It is called without sb's lock held.
type StartFunc func(ctx context.Context, sb *Sandbox, req sandbox.StartRequest, out func(sandbox.Output)) (sandbox.Process, error)

// Streamer is a Sandbox that streams: a sandbox.Streamer whose Start
// comes from a StartFunc. A Backend with Start hands these out; a plain
// *Sandbox is no sandbox.Streamer, as a backend that cannot stream.
type Streamer struct {
	*Sandbox
	start StartFunc
}

var _ sandbox.Streamer = (*Streamer)(nil)

// NewStreamer is New with start answering Start.
func NewStreamer(spec sandbox.Spec, exec ExecFunc, start StartFunc) *Streamer {
	return &Streamer{Sandbox: New(spec, exec), start: start}
}

// Start records the command (Ran) and runs it through the StartFunc;
// the sandbox's Close kills the process.
func (s *Streamer) Start(ctx context.Context, req sandbox.StartRequest, out func(sandbox.Output)) (sandbox.Process, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("fake start: %w", sandbox.ErrClosed)
	}
	s.ran = append(s.ran, req.Command)
	s.mu.Unlock()
	p, err := s.start(ctx, s.Sandbox, req, out)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.started = append(s.started, p)
	}
	s.mu.Unlock()
	if closed { // Close came while it started
		p.Signal(ctx, syscall.SIGKILL)
	}
	return p, nil
}
