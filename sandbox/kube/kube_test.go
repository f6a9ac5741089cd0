//go:build kube

package kube

import (
	"errors"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

func TestConformance(t *testing.T) {
	cfg := testConfig(t)
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend {
		return newTestBackend(t, cfg)
	}, sandboxtest.Options{Image: testImage(), NoSnapshot: true})
}

// TestProxyMode: HTTP from the pod through the agent's relay, tunnelled
// over the attach stream to the host's proxy socket; still no direct route.
func TestProxyMode(t *testing.T) {
	sandboxtest.ProxyMode(t, newTestBackend(t, testConfig(t)), testImage())
}

// TestRootRefused: pods are not created with hostUsers: false, so a root
// sandbox is refused, saying why, before any pod exists.
func TestRootRefused(t *testing.T) {
	b := newTestBackend(t, testConfig(t))
	_, err := b.Create(t.Context(), sandbox.Spec{Image: testImage(), EpisodeID: "root", User: sandbox.UserRoot})
	if !errors.Is(err, sandbox.ErrUnsupported) || !strings.Contains(err.Error(), "hostUsers: false") {
		t.Fatalf("Create(root): %v, want ErrUnsupported naming hostUsers: false", err)
	}
}
