package monitor

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"

	"github.com/rollcage/rollcage/sandbox"
)

// fakeSandbox answers Exec from a table of command → result and keeps
// files in memory. It records every command it ran, so tests can prove a
// blocked call never reached it.
type fakeSandbox struct {
	mu    sync.Mutex
	ran   []string // guarded by mu
	files map[string]string
	exec  func(cmd string) sandbox.ExecResult
}

var _ sandbox.Sandbox = (*fakeSandbox)(nil)

func newFake(exec func(cmd string) sandbox.ExecResult) *fakeSandbox {
	if exec == nil {
		exec = func(string) sandbox.ExecResult { return sandbox.ExecResult{Shell: "bash", Cwd: "/workspace"} }
	}
	return &fakeSandbox{files: map[string]string{}, exec: exec}
}

func (f *fakeSandbox) ID() string { return "fake" }

func (f *fakeSandbox) Exec(_ context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	f.mu.Lock()
	f.ran = append(f.ran, req.Command)
	f.mu.Unlock()
	return f.exec(req.Command), nil
}

func (f *fakeSandbox) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ran...)
}

func (f *fakeSandbox) ReadFile(_ context.Context, path string, max int64) ([]byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.files[path]
	if !ok {
		return nil, false, fmt.Errorf("read %s: %w", path, sandbox.ErrNotFound)
	}
	return []byte(d), false, nil
}

func (f *fakeSandbox) WriteFile(_ context.Context, path string, data []byte, _ fs.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ran = append(f.ran, "write "+path)
	f.files[path] = string(data)
	return nil
}

func (f *fakeSandbox) CopyIn(context.Context, string, io.Reader) error { return nil }
func (f *fakeSandbox) CopyOut(context.Context, string) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader("")), nil
}
func (f *fakeSandbox) Snapshot(context.Context, string) (string, error) { return "", nil }
func (f *fakeSandbox) Close(context.Context) error                      { return nil }
func (f *fakeSandbox) Fork(context.Context, int) (sandbox.ForkResult, error) {
	return sandbox.ForkResult{}, fmt.Errorf("fake fork: %w", sandbox.ErrUnsupported)
}
