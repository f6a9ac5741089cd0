package docker

import (
	"context"
	"log/slog"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// takeWarm hands out a warm container for spec, configured and renamed for
// the episode; nil when none fits or the ones there turn out dead.
func (b *Backend) takeWarm(ctx context.Context, spec sandbox.Spec, log *slog.Logger) *container {
	for {
		c, ok := b.pool.Take(spec.Image)
		if !ok {
			return nil
		}
		b.pool.Wake()
		if err := c.configure(ctx, spec); err != nil {
			log.Warn("warm container unusable, discarding", "container", c.nameNow(), "err", err)
			c.Close(ctx)
			if ctx.Err() != nil {
				return nil
			}
			continue
		}
		newName := containerName(spec.EpisodeID, randomToken())
		if err := b.cli.ContainerRename(ctx, c.id, newName); err != nil {
			// The name is for humans; the episode runs regardless.
			log.Warn("rename warm container", "container", c.nameNow(), "err", err)
			newName = c.nameNow()
		}
		c.mu.Lock()
		c.name = newName
		c.log = b.log.With("episode_id", spec.EpisodeID, "container", newName)
		c.mu.Unlock()
		c.logger().Info("sandbox handed out from warm pool", "id", c.shortID())
		return c
	}
}

// refill keeps every image's pool at its size until ctx ends.
func (b *Backend) refill(ctx context.Context) { b.pool.Refill(ctx, b.log, b.warmOne) }

// warmOne starts a warm container of img, if a slot under MaxAlive is
// free (episodes first; a close wakes the refiller).
func (b *Backend) warmOne(ctx context.Context, img string) (*container, error) {
	if !b.slots.TryAlive() {
		return nil, hostside.ErrNoSlot
	}
	c, err := b.start(ctx, sandbox.Spec{
		Image: img, Workdir: defaultWorkdir, Network: sandbox.NetworkNone,
		Limits: b.cfg.DefaultLimits, Lease: b.cfg.Lease,
	}, true)
	if err != nil {
		b.slots.ReleaseAlive()
		return nil, err
	}
	return c, nil
}
