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
