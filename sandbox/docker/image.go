package docker

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/image"
)

// ImageID is the id of the image the container runs, so that what is
// learnt about an image (the grader's import surface) can be cached by
// content rather than by a tag that a rebuild moves.
func (c *container) ImageID(ctx context.Context) (string, error) {
	if c.IsClosed() {
		return "", c.ErrClosed("image id")
	}
	info, err := c.b.cli.ContainerInspect(ctx, c.id)
	if err != nil {
		return "", c.Wrap("image id", c.b.engineErr("inspect", err))
	}
	return info.Image, nil
}

// RemoveImage removes an image this process made with Snapshot (grading a
// snapshot makes one per episode).
func (b *Backend) RemoveImage(ctx context.Context, ref string) error {
	if _, err := b.cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
		return fmt.Errorf("docker: remove image %s: %w", ref, b.engineErr("image remove", err))
	}
	return nil
}
