package containerd

import (
	"context"
	"log/slog"
	"maps"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// takeWarm hands out a warm container for spec, configured and labelled
// for the episode; nil when none fits or the ones there turn out dead.
func (b *Backend) takeWarm(ctx context.Context, spec sandbox.Spec, log *slog.Logger) *container {
	for {
		c, ok := b.pool.Take(spec.Image)
		if !ok {
			return nil
		}
		b.pool.Wake()
		if err := c.configure(ctx, spec); err != nil {
			log.Warn("warm container unusable, discarding", "container", c.id, "err", err)
			c.Close(ctx)
			if ctx.Err() != nil {
				return nil
			}
			continue
		}
		// containerd's labels can change: the container says whose it is
		// now, for the reaper and RemoveEpisode.
		labels := maps.Clone(b.labels(spec, c.runDir, false))
		labels[hostside.LabelPool] = ""
		if _, err := c.ctr.SetLabels(b.ctx(ctx), labels); err != nil {
			log.Warn("label warm container", "container", c.id, "err", err)
		}
		c.mu.Lock()
		c.log = b.log.With("episode_id", spec.EpisodeID, "container", c.id)
		c.mu.Unlock()
		c.logger().Info("sandbox handed out from warm pool")
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
		Image: img, Workdir: hostside.DefaultWorkdir, Network: sandbox.NetworkNone,
		Limits: b.cfg.DefaultLimits, Lease: b.cfg.Lease,
	}, true, nil)
	if err != nil {
		b.slots.ReleaseAlive()
		return nil, err
	}
	return c, nil
}
