package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollcage/rollcage/agent"
	"github.com/rollcage/rollcage/sandbox"
)

// pod is one sandbox: a pod and the agent client that drives it over the
// attach stream.
type pod struct {
	b     *Backend
	name  string
	image string
	agent *agent.Client // set by start, then never changed

	mu  sync.Mutex
	log *slog.Logger // guarded by mu; rescoped to the episode at hand-out

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

var (
	_ sandbox.Sandbox  = (*pod)(nil)
	_ sandbox.Streamer = (*pod)(nil)
)

func (p *pod) ID() string { return p.name }

func (p *pod) logger() *slog.Logger {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log
}

func (p *pod) configure(ctx context.Context, spec sandbox.Spec) error {
	err := p.agent.Configure(ctx, agent.Config{Workdir: spec.Workdir, Env: spec.Env, Canaries: spec.Canaries, Watch: spec.Watch})
	if err != nil {
		return fmt.Errorf("kube: configure %s: %w", p.name, err)
	}
	return nil
}

func (p *pod) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("sandbox %s: %s: %w", p.name, op, err)
}

func (p *pod) errClosed(op string) error {
	return fmt.Errorf("sandbox %s: %s: %w", p.name, op, sandbox.ErrClosed)
}

func (p *pod) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if p.closed.Load() {
		return sandbox.ExecResult{}, p.errClosed("exec")
	}
	res, err := p.agent.Exec(ctx, req)
	return res, p.wrap("exec", err)
}

func (p *pod) ReadFile(ctx context.Context, path string, max int64) ([]byte, bool, error) {
	if p.closed.Load() {
		return nil, false, p.errClosed("read file")
	}
	data, cut, err := p.agent.ReadFile(ctx, path, max)
	return data, cut, p.wrap("read file "+path, err)
}

func (p *pod) WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error {
	if p.closed.Load() {
		return p.errClosed("write file")
	}
	return p.wrap("write file "+path, p.agent.WriteFile(ctx, path, data, mode))
}

func (p *pod) CopyIn(ctx context.Context, dir string, tar io.Reader) error {
	if p.closed.Load() {
		return p.errClosed("copy in")
	}
	return p.wrap("copy in "+dir, p.agent.CopyIn(ctx, dir, tar))
}

func (p *pod) CopyOut(ctx context.Context, path string) (io.ReadCloser, error) {
	if p.closed.Load() {
		return nil, p.errClosed("copy out")
	}
	rc, err := p.agent.CopyOut(ctx, path)
	return rc, p.wrap("copy out "+path, err)
}

// Snapshot: the Kubernetes API has no commit of a pod's filesystem.
func (p *pod) Snapshot(ctx context.Context, ref string) (string, error) {
	if p.closed.Load() {
		return "", p.errClosed("snapshot")
	}
	return "", fmt.Errorf("kube: snapshot %s: the Kubernetes API cannot commit a pod's filesystem to an image: use the docker or containerd backend: %w", p.name, sandbox.ErrUnsupported)
}

// Fork is not built for pods.
func (p *pod) Fork(ctx context.Context, n int) (sandbox.ForkResult, error) {
	if p.closed.Load() {
		return sandbox.ForkResult{}, p.errClosed("fork")
	}
	return sandbox.ForkResult{}, fmt.Errorf("kube: fork %s: pods cannot be forked (the API has no snapshot to start children from): use the docker backend: %w", p.name, sandbox.ErrUnsupported)
}

// Start runs a streamed command through the agent.
func (p *pod) Start(ctx context.Context, req sandbox.StartRequest, out func(sandbox.Output)) (sandbox.Process, error) {
	if p.closed.Load() {
		return nil, p.errClosed("start")
	}
	proc, err := p.agent.Start(ctx, req, out)
	if err != nil {
		return nil, p.wrap("start", err)
	}
	return &podProc{p: p, proc: proc}, nil
}

type podProc struct {
	p    *pod
	proc sandbox.Process
}

func (q *podProc) PID() int { return q.proc.PID() }
func (q *podProc) Input(ctx context.Context, data []byte) error {
	return q.p.wrap("input", q.proc.Input(ctx, data))
}
func (q *podProc) CloseInput(ctx context.Context) error {
	return q.p.wrap("close input", q.proc.CloseInput(ctx))
}
func (q *podProc) Signal(ctx context.Context, sig syscall.Signal) error {
	return q.p.wrap("signal", q.proc.Signal(ctx, sig))
}
func (q *podProc) Wait(ctx context.Context) (sandbox.ExecResult, error) {
	res, err := q.proc.Wait(ctx)
	return res, q.p.wrap("wait", err)
}

// Close shuts the agent down and deletes the pod. It runs once; later and
// concurrent calls return its result.
func (p *pod) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		p.closeErr = p.teardown(ctx)
		p.b.forget(p)
		p.logger().Info("sandbox closed")
	})
	return p.closeErr
}

// teardown is Close without the bookkeeping.
func (p *pod) teardown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	if p.agent != nil {
		sctx, scancel := context.WithTimeout(ctx, shutdownTimeout)
		_ = p.agent.Shutdown(sctx)
		scancel()
		p.agent.Close()
	}
	grace := int64(0)
	err := p.b.cs.CoreV1().Pods(p.b.cfg.Namespace).Delete(ctx, p.name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil && !apierrors.IsNotFound(err) {
		return errors.Join(apiErr("delete pod "+p.name, p.b.rest.Host, err))
	}
	return nil
}
