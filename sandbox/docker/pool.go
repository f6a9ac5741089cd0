package docker

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/rollcage/rollcage/sandbox"
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

// refill keeps every image's pool at its size until ctx ends. One
// goroutine, one creation at a time: warming must not crowd out the
// episodes' own creations under MaxCreating.
func (b *Backend) refill(ctx context.Context) {
	if len(b.pool.Want()) == 0 {
		return
	}
	images := slices.Sorted(maps.Keys(b.pool.Want()))
	backoff := map[string]time.Duration{}
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		next := time.Duration(0)
		for _, img := range images {
			for ctx.Err() == nil && b.pool.Count(img) < b.pool.Want()[img] {
				if !b.alive.TryAcquire(1) {
					break // at MaxAlive: episodes first; a close wakes us
				}
				b.nAlive.Add(1)
				c, err := b.start(ctx, sandbox.Spec{
					Image: img, Workdir: defaultWorkdir, Network: sandbox.NetworkNone,
					Limits: b.cfg.DefaultLimits, Lease: b.cfg.Lease,
				}, true)
				if err != nil {
					b.releaseAlive()
					if ctx.Err() != nil {
						return
					}
					d := min(max(2*backoff[img], time.Second), 30*time.Second)
					backoff[img] = d
					b.log.Warn("warm pool: create failed", "image", img, "retry_in", d, "err", err)
					if next == 0 || d < next {
						next = d
					}
					break
				}
				backoff[img] = 0
				b.pool.Put(c)
			}
		}
		if next == 0 {
			next = time.Minute // a safety net; kicks do the real work
		}
		retry.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-b.pool.Kick():
		case <-retry.C:
		}
	}
}
