//go:build kube

package kube

import (
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
