package containerd

import (
	"context"
	"fmt"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// TestDiskQuota: the containerd of the quota engine (make quota-engine),
// with its btrfs snapshotter, holds every disk bypass of issue 35 at the
// limit in the kernel, as Docker does there (sandboxtest.RunDiskQuota);
// fails under CI without the engine.
func TestDiskQuota(t *testing.T) {
	sandboxtest.RequireQuotaEngine(t) // and images imported from it
	b := newTestBackend(t, Config{Address: host.QuotaEngineContainerd, Snapshotter: "btrfs"})
	sandboxtest.RunDiskQuota(t, b, sandboxtest.DiskQuota{
		Image:    testImage(),
		Metadata: true,
		Charged: func(t *testing.T, sb sandbox.Sandbox) (int64, bool) {
			mounts, err := b.snapshotter().Mounts(b.ctx(t.Context()), sb.ID())
			if err != nil || len(mounts) == 0 {
				t.Fatalf("mounts of %s: %v %v", sb.ID(), mounts, err)
			}
			var id string
			for _, o := range mounts[0].Options {
				if v, ok := strings.CutPrefix(o, "subvolid="); ok {
					id = v
				}
			}
			dir, err := hostside.MountPointOf(mounts[0].Source, "btrfs")
			if err != nil || id == "" {
				t.Fatalf("the btrfs subvolume of %s (mounts %v): %v", sb.ID(), mounts, err)
			}
			return sandboxtest.BtrfsExclusive(t, dir, "0/"+id), true
		},
		Gone: func(ctx context.Context, sb sandbox.Sandbox) error {
			if _, err := b.cli.LoadContainer(b.ctx(ctx), sb.ID()); !cerrdefs.IsNotFound(err) {
				return fmt.Errorf("load container %s: %v, want not found", sb.ID(), err)
			}
			return nil
		},
	})
}
