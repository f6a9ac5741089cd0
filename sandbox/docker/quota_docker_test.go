package docker

import (
	"context"
	"fmt"
	"os"
	"testing"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// TestDiskQuota: on the quota engine (make quota-engine) every disk
// bypass of issue 35 is stopped by the kernel at the limit
// (sandboxtest.RunDiskQuota); the test fails under CI without the engine.
func TestDiskQuota(t *testing.T) {
	sandboxtest.RequireQuotaEngine(t)
	runDiskQuota(t, "")
}

// runDiskQuota runs sandboxtest.RunDiskQuota on the engine of
// DOCKER_HOST for sandboxes of the given Spec.User.
func runDiskQuota(t *testing.T, user string) {
	b := newTestBackend(t, Config{})
	mode := b.diskMode()
	if mode == diskWatchdog {
		t.Fatalf("the engine of DOCKER_HOST=%s leaves disk limits to the watchdog: run scripts/rollcage-engine.sh status", os.Getenv("DOCKER_HOST"))
	}
	sandboxtest.RunDiskQuota(t, b, sandboxtest.DiskQuota{
		Image:    testImage(),
		User:     user,
		Metadata: mode == diskQgroup,
		Charged: func(t *testing.T, sb sandbox.Sandbox) (int64, bool) {
			if mode != diskQgroup {
				return 0, false
			}
			dir, err := subvolume(b.rootDir, sb.ID())
			if err != nil {
				t.Fatal(err)
			}
			return sandboxtest.BtrfsExclusive(t, dir, ""), true
		},
		Gone: func(ctx context.Context, sb sandbox.Sandbox) error {
			if _, err := b.cli.ContainerInspect(ctx, sb.ID()); !cerrdefs.IsNotFound(err) {
				return fmt.Errorf("inspect %s: %v, want not found", sb.ID(), err)
			}
			return nil
		},
	})
}
