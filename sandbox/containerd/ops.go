package containerd

import (
	"context"
	"maps"
	"time"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// ops are the containerd side of the backend's hostside.Core.
type ops struct{ b *Backend }

// Create creates (but does not start) a container for req, with its
// snapshot: of the image, or of the fork's committed layer req.From.
func (e ops) Create(ctx context.Context, req hostside.CreateRequest) (*container, error) {
	c := &container{Box: req.Box, b: e.b, id: req.Box.Name(), snap: req.Box.Name()}
	if err := c.create(e.b.ctx(ctx), req); err != nil {
		return nil, err
	}
	return c, nil
}

// Start starts the container's task, connects to its agent and starts
// the disk watchdog, unless the kernel holds the limit (btrfs).
func (e ops) Start(ctx context.Context, c *container, spec sandbox.Spec) error {
	if err := c.startTask(ctx); err != nil {
		return err
	}
	c.Phases.Started = time.Since(c.Phases.Start)
	if err := c.connect(ctx, spec.Lease); err != nil {
		return err
	}
	c.Phases.Connected = time.Since(c.Phases.Start)
	switch {
	case c.kernelLimit > 0:
		c.SetDiskGuard(sandbox.DiskKernel)
	case spec.Limits.DiskBytes > 0:
		c.WatchDisk(c.upper, spec.Limits.DiskBytes, c.Logger())
	}
	return nil
}

// HandOut relabels a warm container for the episode (containerd's labels
// can change): the container says whose it is now, for the reaper and
// RemoveEpisode. Its name, the container id, stays.
func (e ops) HandOut(ctx context.Context, c *container, spec sandbox.Spec) string {
	labels := maps.Clone(e.b.core.Labels(spec, c.RunDir, false))
	labels[host.LabelPool] = ""
	if _, err := c.ctr.SetLabels(e.b.ctx(ctx), labels); err != nil {
		c.Logger().Warn("label warm container", "container", c.id, "err", err)
	}
	return c.id
}

// Remove deletes the container's task, the container and its snapshot.
func (e ops) Remove(ctx context.Context, c *container) error {
	return c.remove(e.b.ctx(ctx))
}
