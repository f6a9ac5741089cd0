package docker

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// pool holds warm containers per image: created, started and connected,
// waiting to be configured for an episode.
type pool struct {
	want map[string]int // never changed after newPool
	kick chan struct{}  // wakes the refiller; buffered 1

	mu    sync.Mutex
	ready map[string][]*container // guarded by mu; oldest first
}

func newPool(want map[string]int) *pool {
	p := &pool{want: map[string]int{}, kick: make(chan struct{}, 1), ready: map[string][]*container{}}
	for img, n := range want {
		if n > 0 {
			p.want[img] = n
		}
	}
	return p
}

func (p *pool) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *pool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, cs := range p.ready {
		n += len(cs)
	}
	return n
}

func (p *pool) count(image string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready[image])
}

func (p *pool) put(c *container) {
	p.mu.Lock()
	p.ready[c.image] = append(p.ready[c.image], c)
	p.mu.Unlock()
}

// take removes the oldest warm container of image; nil when there is none.
func (p *pool) take(image string) *container {
	p.mu.Lock()
	defer p.mu.Unlock()
	cs := p.ready[image]
	if len(cs) == 0 {
		return nil
	}
	c := cs[0]
	p.ready[image] = cs[1:]
	return c
}

// evict removes a warm container of the image with the most of them, so
// an episode can have its slot.
func (p *pool) evict() *container {
	p.mu.Lock()
	defer p.mu.Unlock()
	best := ""
	for img, cs := range p.ready {
		if len(cs) > 0 && (best == "" || len(cs) > len(p.ready[best])) {
			best = img
		}
	}
	if best == "" {
		return nil
	}
	cs := p.ready[best]
	c := cs[len(cs)-1]
	p.ready[best] = cs[:len(cs)-1]
	return c
}

// drain empties the pool; the containers stay in the backend's live set,
// which Backend.Close closes.
func (p *pool) drain() {
	p.mu.Lock()
	clear(p.ready)
	p.mu.Unlock()
}

// takeWarm hands out a warm container for spec, configured and renamed for
// the episode; nil when none fits or the ones there turn out dead.
func (b *Backend) takeWarm(ctx context.Context, spec sandbox.Spec, log *slog.Logger) *container {
	for {
		c := b.pool.take(spec.Image)
		if c == nil {
			return nil
		}
		b.pool.wake()
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
	if len(b.pool.want) == 0 {
		return
	}
	images := slices.Sorted(maps.Keys(b.pool.want))
	backoff := map[string]time.Duration{}
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		next := time.Duration(0)
		for _, img := range images {
			for ctx.Err() == nil && b.pool.count(img) < b.pool.want[img] {
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
				b.pool.put(c)
			}
		}
		if next == 0 {
			next = time.Minute // a safety net; kicks do the real work
		}
		retry.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-b.pool.kick:
		case <-retry.C:
		}
	}
}
