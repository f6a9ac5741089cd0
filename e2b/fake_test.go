package e2b_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// hostBackend hands out sandboxes that run commands in real bash on the
// host, in a temporary directory, and read and write host files: enough
// to drive the E2B wire end to end through the real gateway, harness and
// monitor without Docker. Only commands the tests send run. The
// Docker-backed test with the real SDK covers real sandboxes.
type hostBackend struct{ dir string }

var _ sandbox.Backend = (*hostBackend)(nil)

func (b *hostBackend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if strings.HasPrefix(spec.Image, missingImages) {
		// As the Docker backend answers an image it does not have.
		return nil, fmt.Errorf("host: create %s: image %s not found locally: %w", spec.EpisodeID, spec.Image, sandbox.ErrImageMissing)
	}
	return &hostSandbox{dir: b.dir, spec: spec}, nil
}

// missingImages prefixes the images hostBackend does not have.
const missingImages = "missing/"

type hostSandbox struct {
	dir  string
	spec sandbox.Spec

	mu     sync.Mutex
	closed bool // guarded by mu
}

var _ sandbox.Sandbox = (*hostSandbox)(nil)

func (s *hostSandbox) ID() string { return "host-" + s.spec.EpisodeID }

func (s *hostSandbox) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *hostSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if s.isClosed() {
		return sandbox.ExecResult{}, fmt.Errorf("host exec: %w", sandbox.ErrClosed)
	}
	if strings.HasPrefix(req.Session, "rollcage-") {
		// The probe, hashing and tool sessions: no repository here.
		return sandbox.ExecResult{Shell: "bash"}, nil
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, "bash", "-c", req.Command)
	cmd.Dir = s.dir
	cmd.Stdin = strings.NewReader(req.Stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	res := sandbox.ExecResult{Output: out.String(), Shell: "bash", TotalBytes: int64(out.Len())}
	if req.MaxOutput > 0 && len(res.Output) > req.MaxOutput { // as the agent caps it (head only here)
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
		return res, err
	}
	return res, nil
}

// host maps the task's workspace onto the host directory (the tests'
// own paths are host paths already).
func (s *hostSandbox) host(p string) string {
	if rest, ok := strings.CutPrefix(p, "/workspace/"); ok {
		return filepath.Join(s.dir, "workspace", rest)
	}
	return p
}

func (s *hostSandbox) ReadFile(ctx context.Context, p string, max int64) ([]byte, bool, error) {
	p = s.host(p)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, &sandbox.PathError{Op: "read", Path: p, Kind: sandbox.KindNotFound, Reason: "No such file or directory"}
	}
	if err != nil {
		return nil, false, &sandbox.PathError{Op: "read", Path: p, Kind: sandbox.KindIsDir, Reason: "Is a directory"}
	}
	if max > 0 && int64(len(data)) > max {
		return data[:max], true, nil
	}
	return data, false, nil
}

func (s *hostSandbox) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	p = s.host(p)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, mode)
}

func (s *hostSandbox) CopyIn(ctx context.Context, dir string, tar io.Reader) error { return nil }

func (s *hostSandbox) CopyOut(ctx context.Context, p string) (io.ReadCloser, error) {
	return nil, errors.New("host sandbox: no copy out")
}

func (s *hostSandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

var _ sandbox.Streamer = (*hostSandbox)(nil)

// Start runs the command in host bash with stdout and stderr on their
// own pipes, in its own process group.
func (s *hostSandbox) Start(ctx context.Context, req sandbox.StartRequest, out func(sandbox.Output)) (sandbox.Process, error) {
	if s.isClosed() {
		return nil, fmt.Errorf("host start: %w", sandbox.ErrClosed)
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	cmd := exec.Command("bash", "-c", req.Command)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &hostProc{done: make(chan struct{})}
	var omu sync.Mutex
	var all bytes.Buffer
	var total int64
	writer := func(stream string) io.Writer {
		return writerFunc(func(b []byte) (int, error) {
			omu.Lock()
			defer omu.Unlock()
			if all.Len() < max(req.MaxOutput, 64<<10) { // what is kept, as the agent caps it
				all.Write(b)
			}
			total += int64(len(b))
			out(sandbox.Output{Stream: stream, Data: append([]byte(nil), b...)})
			return len(b), nil
		})
	}
	cmd.Stdout, cmd.Stderr = writer(sandbox.Stdout), writer(sandbox.Stderr)
	cmd.WaitDelay = 50 * time.Millisecond // a background child may hold the pipes
	if req.Stdin {
		w, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		p.stdin = w
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
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
			p.err = err
		}
	}()
	return p, nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

type hostProc struct {
	pid     int
	stopped atomic.Bool
	mu      sync.Mutex
	stdin   io.WriteCloser // guarded by mu
	done    chan struct{}
	res     sandbox.ExecResult
	err     error
}

func (p *hostProc) PID() int { return p.pid }

func (p *hostProc) Input(_ context.Context, b []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdin == nil {
		return fmt.Errorf("host input: stdin not open: %w", sandbox.ErrRefused)
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
