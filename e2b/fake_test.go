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
	return &hostSandbox{dir: b.dir, spec: spec}, nil
}

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

func (s *hostSandbox) ReadFile(ctx context.Context, p string, max int64) ([]byte, bool, error) {
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
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, mode)
}

func (s *hostSandbox) CopyIn(ctx context.Context, dir string, tar io.Reader) error { return nil }

func (s *hostSandbox) CopyOut(ctx context.Context, p string) (io.ReadCloser, error) {
	return nil, errors.New("host sandbox: no copy out")
}

func (s *hostSandbox) Fork(ctx context.Context, n int) (sandbox.ForkResult, error) {
	return sandbox.ForkResult{}, fmt.Errorf("host sandbox fork: %w", sandbox.ErrUnsupported)
}

func (s *hostSandbox) Snapshot(ctx context.Context, ref string) (string, error) {
	return "", errors.New("host sandbox: no snapshots")
}

func (s *hostSandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}
