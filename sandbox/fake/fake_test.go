package fake_test

import (
	"testing"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// TestConformance runs the suite every backend passes. The fake runs no
// processes, so the cases that need them skip, each saying why; the
// image is a name only (the fake has no images).
func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend { return &fake.Backend{} }, sandboxtest.Options{
		Image:       "rollcage/base:latest",
		Fork:        true,
		NoSnapshot:  true,
		NoProcesses: true,
	})
}
