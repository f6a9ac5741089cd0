package docker

import (
	"context"
	"syscall"

	"github.com/rollcage/rollcage/sandbox"
)

var _ sandbox.Streamer = (*container)(nil)

// Start runs a streamed command through the agent. The disk watchdog
// still stops it at the disk limit (it kills every process of the
// sandbox user), but its result says only that it was killed.
func (c *container) Start(ctx context.Context, req sandbox.StartRequest, out func(sandbox.Output)) (sandbox.Process, error) {
	if c.closed.Load() {
		return nil, c.errClosed("start")
	}
	p, err := c.agent.Start(ctx, req, out)
	if err != nil {
		return nil, c.wrap("start", err)
	}
	return &containerProc{c: c, p: p}, nil
}

// containerProc names the sandbox in its errors.
type containerProc struct {
	c *container
	p sandbox.Process
}

func (p *containerProc) PID() int { return p.p.PID() }

func (p *containerProc) Input(ctx context.Context, data []byte) error {
	return p.c.wrap("input", p.p.Input(ctx, data))
}

func (p *containerProc) CloseInput(ctx context.Context) error {
	return p.c.wrap("close input", p.p.CloseInput(ctx))
}

func (p *containerProc) Signal(ctx context.Context, sig syscall.Signal) error {
	return p.c.wrap("signal", p.p.Signal(ctx, sig))
}

func (p *containerProc) Wait(ctx context.Context) (sandbox.ExecResult, error) {
	res, err := p.p.Wait(ctx)
	return res, p.c.wrap("wait", err)
}
