//go:build kube

package kube

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollcage/rollcage/sandbox"
)

// TestRemoveEpisode: an episode's pod is left alone while its owner's
// Lease is alive, and deleted by RemoveEpisode (and not by another
// episode's) once the Lease is gone; GC works as the Role-limited user.
func TestRemoveEpisode(t *testing.T) {
	cfg := testConfig(t)
	be := newTestBackend(t, cfg)
	ctx := t.Context()
	const episode = "remove/episode_1"
	sb, err := be.Create(ctx, sandbox.Spec{Image: testImage(), EpisodeID: episode})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	if n, err := be.RemoveEpisode(ctx, episode); err != nil || n != 0 {
		t.Fatalf("RemoveEpisode with the owner alive = %d, %v; want 0, nil", n, err)
	}
	// The owner dies: its Lease is gone.
	if err := be.Clientset().CoordinationV1().Leases(be.Namespace()).Delete(ctx, leasePrefix+be.Owner(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if n, err := be.RemoveEpisode(ctx, "remove/episode_2"); err != nil || n != 0 {
		t.Fatalf("RemoveEpisode of another episode = %d, %v; want 0, nil", n, err)
	}
	if n, err := be.RemoveEpisode(ctx, episode); err != nil || n != 1 {
		t.Fatalf("RemoveEpisode with the owner gone = %d, %v; want 1, nil", n, err)
	}
	_, err = be.Clientset().CoreV1().Pods(be.Namespace()).Get(ctx, sb.ID(), metav1.GetOptions{})
	if err == nil {
		// Deleted with no grace period: the object may linger while the
		// kubelet stops it, marked for deletion.
		p, _ := be.Clientset().CoreV1().Pods(be.Namespace()).Get(ctx, sb.ID(), metav1.GetOptions{})
		if p == nil || p.DeletionTimestamp == nil {
			t.Fatalf("pod %s still there and not being deleted", sb.ID())
		}
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := sb.Close(ctx); err != nil {
		t.Errorf("Close after the pod was removed: %v", err)
	}
	// GC may find leftovers of other dead processes; it must work.
	if _, err := GC(ctx, cfg); err != nil {
		t.Errorf("GC: %v", err)
	}
}
