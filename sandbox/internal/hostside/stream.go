package hostside

import (
	"context"
	"syscall"

	"github.com/rollcage/rollcage/sandbox"
)

// Start runs a streamed command through the agent (sandbox.Streamer). The
// disk watchdog still stops it at the disk limit (it kills every process
// of the sandbox user), but its result says only that it was killed.
func (c *Conn) Start(ctx context.Context, req sandbox.StartRequest, out func(sandbox.Output)) (sandbox.Process, error) {
	if c.closed.Load() {
		return nil, c.ErrClosed("start")
	}
	p, err := c.agent.Start(ctx, req, out)
	if err != nil {
		return nil, c.Wrap("start", err)
	}
	return &connProc{c: c, p: p}, nil
}

// connProc names the sandbox in its errors.
type connProc struct {
	c *Conn
	p sandbox.Process
}

func (p *connProc) PID() int { return p.p.PID() }

func (p *connProc) Input(ctx context.Context, data []byte) error {
	return p.c.Wrap("input", p.p.Input(ctx, data))
}

func (p *connProc) CloseInput(ctx context.Context) error {
	return p.c.Wrap("close input", p.p.CloseInput(ctx))
}

func (p *connProc) Signal(ctx context.Context, sig syscall.Signal) error {
	return p.c.Wrap("signal", p.p.Signal(ctx, sig))
}

func (p *connProc) Wait(ctx context.Context) (sandbox.ExecResult, error) {
	res, err := p.p.Wait(ctx)
	return res, p.c.Wrap("wait", err)
}
