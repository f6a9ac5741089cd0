//go:build kube

package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollcage/rollcage/sandbox"
)

// TestDiskEviction: Kubernetes holds Limits.DiskBytes only after the
// fact. A pod with a 64 MiB ephemeral-storage limit writes 256 MiB and the
// writes land (no ENOSPC); the kubelet then evicts the pod, and the next
// call fails with sandbox.ErrDiskLimit naming the limit, not a generic
// loss of the sandbox.
func TestDiskEviction(t *testing.T) {
	const (
		limit = 64 << 20
		write = 256 << 20
		// The kubelet's eviction manager runs every 10 s (fixed in the
		// kubelet) on writable-layer usage containerd's CRI plugin
		// refreshes every stats_collect_period (10 s by default).
		within = 60 * time.Second
	)
	be := newTestBackend(t, testConfig(t))
	ctx := t.Context()
	sb, err := be.Create(ctx, sandbox.Spec{Image: testImage(), EpisodeID: "evict/disk",
		Limits: sandbox.Limits{MemoryBytes: 512 << 20, CPUs: 1, Pids: 512, DiskBytes: limit}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	if g := sb.(sandbox.DiskGuarder).DiskGuard(); g != sandbox.DiskEviction {
		t.Fatalf("DiskGuard = %q, want %q", g, sandbox.DiskEviction)
	}

	res, err := sb.Exec(ctx, sandbox.ExecRequest{
		Command: "dd if=/dev/zero of=/tmp/fill bs=1M count=256 conv=fsync 2>&1 && stat -c %s /tmp/fill",
		Timeout: time.Minute,
	})
	if err != nil {
		t.Fatalf("write past the limit: %v", err)
	}
	wrote := time.Now()
	if res.ExitCode != 0 || !strings.HasSuffix(strings.TrimSpace(res.Output), "268435456") {
		t.Fatalf("256 MiB write under a 64 MiB ephemeral-storage limit: exit %d, %q; want it to land (the kubelet does not refuse writes)", res.ExitCode, res.Output)
	}

	var callErr error
	for time.Since(wrote) < within {
		if _, callErr = sb.Exec(ctx, sandbox.ExecRequest{Command: "true", Timeout: 10 * time.Second}); callErr != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	took := time.Since(wrote)
	if callErr == nil {
		t.Fatalf("pod still answers %v after writing %d MiB past its %d MiB limit", within, (write-limit)>>20, limit>>20)
	}
	if !errors.Is(callErr, sandbox.ErrDiskLimit) {
		t.Fatalf("call after the eviction: %v; want sandbox.ErrDiskLimit", callErr)
	}
	if msg := callErr.Error(); !strings.Contains(msg, "ephemeral-storage limit of 64Mi") {
		t.Errorf("error %q does not name the ephemeral-storage limit of 64Mi", msg)
	}
	k, err := be.Clientset().CoreV1().Pods(be.Namespace()).Get(ctx, sb.ID(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if k.Status.Phase != corev1.PodFailed || k.Status.Reason != "Evicted" {
		t.Errorf("pod %s: phase %s, reason %q; want Failed, Evicted", sb.ID(), k.Status.Phase, k.Status.Reason)
	}
	t.Logf("wrote %d MiB (%d MiB past the %d MiB limit); evicted %.1f s after the write: %v",
		write>>20, (write-limit)>>20, limit>>20, took.Seconds(), callErr)
	if err := sb.Close(ctx); err != nil {
		t.Errorf("Close of the evicted pod: %v", err)
	}
}
