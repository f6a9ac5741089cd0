package kube

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollcage/rollcage/agent"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// pod is one sandbox: a pod and, in the embedded Conn, the agent client
// that drives it over the attach stream (exec, files, streamed processes,
// the closed flag).
type pod struct {
	*hostside.Conn
	b     *Backend
	name  string
	image string
	// disk is the pod's ephemeral-storage limit (Limits.DiskBytes), for
	// the error of an eviction past it; set by start, then never changed.
	disk int64
	// tunnel carries the egress relay's connections to the host's proxy
	// (proxy mode only); set by start, then never changed.
	tunnel *agent.Tunnel

	mu  sync.Mutex
	log *slog.Logger // guarded by mu; rescoped to the episode at hand-out

	closeOnce sync.Once
	closeErr  error
}

var (
	_ sandbox.Sandbox       = (*pod)(nil)
	_ sandbox.Forker        = (*pod)(nil) // refuses: ErrUnsupported, saying which backend forks
	_ sandbox.Snapshotter   = (*pod)(nil) // refuses: ErrUnsupported
	_ sandbox.Streamer      = (*pod)(nil)
	_ sandbox.ProcessKiller = (*pod)(nil) // through hostside.Conn
	_ sandbox.DiskGuarder   = (*pod)(nil) // through hostside.Conn
)

func newPod(b *Backend, name, image string, log *slog.Logger) *pod {
	p := &pod{b: b, name: name, image: image, log: log}
	p.Conn = hostside.NewConn(func() string { return name })
	// Every pod has an ephemeral-storage limit (podFor): the kubelet
	// evicts a pod past it, after the writes have landed.
	p.SetDiskGuard(sandbox.DiskEviction)
	return p
}

func (p *pod) ID() string { return p.name }

// Eviction messages of the kubelet for a pod past its own limits (an
// ephemeral-storage limit of the pod or of a container, an emptyDir's
// sizeLimit), as opposed to the node's pressure.
var diskEvictions = []string{"ephemeral local storage", "local ephemeral storage", "Usage of EmptyDir volume"}

// gone says why the pod ended once its attach stream was lost, nil while
// it still runs. An eviction past the pod's ephemeral-storage limit is
// sandbox.ErrDiskLimit: the kubelet measures usage every few seconds and
// evicts after the fact, so the writes landed first.
func (p *pod) gone(ctx context.Context) error {
	k, err := p.b.cs.CoreV1().Pods(p.b.cfg.Namespace).Get(ctx, p.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("kube: pod %s was deleted", p.name)
	}
	if err != nil || k.Status.Phase == corev1.PodPending || k.Status.Phase == corev1.PodRunning {
		return nil // running, or cannot tell yet: asked again
	}
	msg := oneLine(k.Status.Message)
	if k.Status.Reason == "Evicted" {
		for _, m := range diskEvictions {
			if strings.Contains(msg, m) {
				return fmt.Errorf("kube: pod %s evicted by the kubelet for writing past its ephemeral-storage limit of %s (Kubernetes enforces it after the fact: the writes landed, then the sandbox was ended): %w; kubelet: %s",
					p.name, resource.NewQuantity(p.disk, resource.BinarySI), sandbox.ErrDiskLimit, msg)
			}
		}
		return fmt.Errorf("kube: pod %s evicted by the kubelet: %s", p.name, msg)
	}
	return fmt.Errorf("kube: pod %s %s (%s %s); last logs: %s", p.name, k.Status.Phase, k.Status.Reason, msg, p.b.lastLogs(p.name))
}

func (p *pod) logger() *slog.Logger {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log
}

func (p *pod) configure(ctx context.Context, spec sandbox.Spec) error {
	if err := p.Configure(ctx, spec); err != nil {
		return fmt.Errorf("kube: configure %s: %w", p.name, err)
	}
	return nil
}

// Snapshot: the Kubernetes API has no commit of a pod's filesystem.
func (p *pod) Snapshot(ctx context.Context, ref string) (string, error) {
	if p.IsClosed() {
		return "", p.ErrClosed("snapshot")
	}
	return "", fmt.Errorf("kube: snapshot %s: the Kubernetes API cannot commit a pod's filesystem to an image: use the docker or containerd backend: %w", p.name, sandbox.ErrUnsupported)
}

// Fork is not built for pods.
func (p *pod) Fork(ctx context.Context, n int) (sandbox.ForkResult, error) {
	if p.IsClosed() {
		return sandbox.ForkResult{}, p.ErrClosed("fork")
	}
	return sandbox.ForkResult{}, fmt.Errorf("kube: fork %s: pods cannot be forked (the API has no snapshot to start children from): use the docker backend: %w", p.name, sandbox.ErrUnsupported)
}

// Close shuts the agent down and deletes the pod. It runs once; later and
// concurrent calls return its result.
func (p *pod) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		p.MarkClosed()
		p.closeErr = p.teardown(ctx)
		p.b.slots.Forget(p)
		p.logger().Info("sandbox closed")
	})
	return p.closeErr
}

// teardown is Close without the bookkeeping: the agent shut down (it kills
// its process groups), then the pod deleted with no grace period.
func (p *pod) teardown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	if p.tunnel != nil {
		p.tunnel.Close()
	}
	p.Shutdown(ctx, shutdownTimeout)
	grace := int64(0)
	err := p.b.cs.CoreV1().Pods(p.b.cfg.Namespace).Delete(ctx, p.name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil && !apierrors.IsNotFound(err) {
		return apiErr("delete pod "+p.name, p.b.rest.Host, err)
	}
	return nil
}
