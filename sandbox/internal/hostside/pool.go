package hostside

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Pool holds warm sandboxes per image (created, started and connected,
// waiting to be configured for an episode) for a backend's refiller.
type Pool[T any] struct {
	want  map[string]int // never changed after NewPool
	kick  chan struct{}  // wakes the refiller; buffered 1
	image func(T) string

	mu    sync.Mutex
	ready map[string][]T // guarded by mu; oldest first
}

// NewPool makes a pool that wants want[image] sandboxes of each image;
// image names the image of a sandbox.
func NewPool[T any](want map[string]int, image func(T) string) *Pool[T] {
	p := &Pool[T]{want: map[string]int{}, kick: make(chan struct{}, 1), ready: map[string][]T{}, image: image}
	for img, n := range want {
		if n > 0 {
			p.want[img] = n
		}
	}
	return p
}

// Wake wakes the refiller.
func (p *Pool[T]) Wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Size is the number of warm sandboxes.
func (p *Pool[T]) Size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, cs := range p.ready {
		n += len(cs)
	}
	return n
}

// Count is the number of warm sandboxes of image.
func (p *Pool[T]) Count(image string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready[image])
}

// Put adds a warm sandbox.
func (p *Pool[T]) Put(c T) {
	p.mu.Lock()
	img := p.image(c)
	p.ready[img] = append(p.ready[img], c)
	p.mu.Unlock()
}

// Take removes the oldest warm container of image; nil when there is none.
func (p *Pool[T]) Take(image string) (T, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cs := p.ready[image]
	if len(cs) == 0 {
		var none T
		return none, false
	}
	c := cs[0]
	p.ready[image] = cs[1:]
	return c, true
}

// Evict removes a warm container of the image with the most of them, so
// an episode can have its slot.
func (p *Pool[T]) Evict() (T, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	best := ""
	for img, cs := range p.ready {
		if len(cs) > 0 && (best == "" || len(cs) > len(p.ready[best])) {
			best = img
		}
	}
	if best == "" {
		var none T
		return none, false
	}
	cs := p.ready[best]
	c := cs[len(cs)-1]
	p.ready[best] = cs[:len(cs)-1]
	return c, true
}

// Drain empties the pool; the sandboxes stay in the backend's live set,
// which the backend closes.
func (p *Pool[T]) Drain() {
	p.mu.Lock()
	clear(p.ready)
	p.mu.Unlock()
}

// Want is how many warm sandboxes of each image the pool keeps.
func (p *Pool[T]) Want() map[string]int { return p.want }

// Kick is the channel Wake signals.
func (p *Pool[T]) Kick() <-chan struct{} { return p.kick }

// Ready is a copy of the warm sandboxes of image, oldest first.
func (p *Pool[T]) Ready(image string) []T {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]T(nil), p.ready[image]...)
}

// ErrNoSlot is what a Refill's warm function returns when the backend is
// at its bound of live sandboxes: the refiller waits for a Wake.
var ErrNoSlot = errors.New("no free slot for a warm sandbox")

// Refill keeps every image's pool at its size until ctx ends, starting
// warm sandboxes with warm. One goroutine, one creation at a time:
// warming must not crowd out the episodes' own creations.
func (p *Pool[T]) Refill(ctx context.Context, log *slog.Logger, warm func(ctx context.Context, image string) (T, error)) {
	if len(p.Want()) == 0 {
		return
	}
	images := slices.Sorted(maps.Keys(p.Want()))
	failed := map[string]*backoff.ExponentialBackOff{} // per image, from its first failure in a row
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		next := time.Duration(0)
		for _, img := range images {
			for ctx.Err() == nil && p.Count(img) < p.Want()[img] {
				c, err := warm(ctx, img)
				if errors.Is(err, ErrNoSlot) {
					break // at the bound: episodes first; a close wakes us
				}
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					if failed[img] == nil {
						failed[img] = &backoff.ExponentialBackOff{InitialInterval: time.Second, Multiplier: 2, MaxInterval: 30 * time.Second}
					}
					d := failed[img].NextBackOff()
					log.Warn("warm pool: create failed", "image", img, "retry_in", d, "err", err)
					if next == 0 || d < next {
						next = d
					}
					break
				}
				delete(failed, img)
				p.Put(c)
			}
		}
		if next == 0 {
			next = time.Minute // a safety net; kicks do the real work
		}
		retry.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-p.Kick():
		case <-retry.C:
		}
	}
}
