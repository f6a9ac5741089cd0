package fake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// defaultTimeout is the contract's timeout of a command that names none.
const defaultTimeout = 60 * time.Second

// hostDir is the directory Bash and BashStart run in: sb's Dir.
func hostDir(sb *Sandbox, op string) (string, error) {
	dir := sb.HostDir()
	if dir == "" {
		return "", fmt.Errorf("fake %s: the sandbox keeps its files in memory: run real bash only on a Backend with Dir", op)
	}
	return dir, nil
}

// Bash is an ExecFunc that runs the command in a fresh bash on the host,
// in the sandbox's host directory (Backend.Dir), as the test's own user:
// enough to drive the layers above the sandbox end to end without an
// engine. Absolute paths in the command are the host's; no session
// state persists between commands. A timeout, or a cancelled ctx, kills
// the command's process group: it exits 124 (StopTimeout), or -1;
// MaxOutput keeps the head of the output.
func Bash(ctx context.Context, sb *Sandbox, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	dir, err := hostDir(sb, "exec")
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, "bash", "-c", req.Command)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Stdin = strings.NewReader(req.Stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	res := sandbox.ExecResult{Output: out.String(), Shell: "bash", TotalBytes: int64(out.Len())}
	if req.MaxOutput > 0 && len(res.Output) > req.MaxOutput {
		res.Output, res.Truncated = res.Output[:req.MaxOutput], true
	}
	var ee *exec.ExitError
	switch {
	case errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		res.ExitCode, res.Stopped = 124, sandbox.StopTimeout
	case ctx.Err() != nil:
		res.ExitCode, res.Stopped = -1, "cancelled"
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
	case err != nil:
		return res, fmt.Errorf("fake exec: %w", err)
	}
	return res, nil
}

// BashStart is a StartFunc that starts the command in a fresh bash on
// the host, in the sandbox's host directory (Backend.Dir), as the test's
// own user, in a process group of its own, with stdout and stderr on
// pipes of their own.
func BashStart(ctx context.Context, sb *Sandbox, req sandbox.StartRequest, out func(sandbox.Output)) (sandbox.Process, error) {
	dir, err := hostDir(sb, "start")
	if err != nil {
		return nil, err
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	keep := req.MaxOutput
	if keep <= 0 {
		keep = 64 << 10
	}
	cmd := exec.Command("bash", "-c", req.Command)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &hostProc{done: make(chan struct{})}
	var omu sync.Mutex
	var all bytes.Buffer
	var total int64
	writer := func(stream string) io.Writer {
		return writerFunc(func(b []byte) (int, error) {
			omu.Lock()
			defer omu.Unlock()
			if all.Len() < keep {
				all.Write(b[:min(len(b), keep-all.Len())])
			}
			total += int64(len(b))
			out(sandbox.Output{Stream: stream, Data: bytes.Clone(b)})
			return len(b), nil
		})
	}
	cmd.Stdout, cmd.Stderr = writer(sandbox.Stdout), writer(sandbox.Stderr)
	cmd.WaitDelay = 50 * time.Millisecond // a background child may hold the pipes
	if req.Stdin {
		w, err := cmd.StdinPipe()
		if err != nil {
			return nil, fmt.Errorf("fake start: %w", err)
		}
		p.stdin = w
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("fake start: %w", err)
	}
	p.pid = cmd.Process.Pid
	go func() {
		defer close(p.done)
		t := time.AfterFunc(timeout, func() {
			p.stopped.Store(true)
			syscall.Kill(-p.pid, syscall.SIGKILL)
		})
		err := cmd.Wait()
		t.Stop()
		omu.Lock()
		p.res = sandbox.ExecResult{Output: all.String(), Shell: "bash", TotalBytes: total, Truncated: total > int64(all.Len()),
			Duration: time.Since(t0)}
		omu.Unlock()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.res.ExitCode = 128 + int(ws.Signal())
		} else {
			p.res.ExitCode = cmd.ProcessState.ExitCode()
		}
		if p.stopped.Load() {
			p.res.Stopped = sandbox.StopTimeout
		}
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
			p.err = fmt.Errorf("fake wait: %w", err)
		}
	}()
	return p, nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// hostProc is a process BashStart started.
type hostProc struct {
	pid     int
	stopped atomic.Bool
	done    chan struct{}
	res     sandbox.ExecResult // set before done closes
	err     error              // set before done closes

	mu    sync.Mutex
	stdin io.WriteCloser // guarded by mu
}

func (p *hostProc) PID() int { return p.pid }

func (p *hostProc) Input(_ context.Context, b []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdin == nil {
		return fmt.Errorf("fake input: stdin not open: %w", sandbox.ErrRefused)
	}
	_, err := p.stdin.Write(b)
	return err
}

func (p *hostProc) CloseInput(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
	return nil
}

// Signal sends sig to the process group; a process that ended is no
// error.
func (p *hostProc) Signal(_ context.Context, sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	syscall.Kill(-p.pid, sig)
	return nil
}

func (p *hostProc) Wait(ctx context.Context) (sandbox.ExecResult, error) {
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		return sandbox.ExecResult{}, ctx.Err()
	}
}
