package hostside

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/rollcage/rollcage/sandbox"
)

// Slots is a backend's admission control and live set: at most
// maxCreating sandboxes being created and started at once, so a burst of
// starts queues instead of stampeding the engine; at most maxAlive alive
// (warm ones included, which give their slot up to an episode); and the
// live sandboxes that closing the backend closes.
type Slots[T Sandbox] struct {
	prefix                string // the backend, in errors
	maxCreating, maxAlive int
	creating, alive       *semaphore.Weighted
	pool                  *Pool[T]
	nCreating, nAlive     atomic.Int64

	// OnCreating, when set (tests), is called with +1 when a creation
	// starts and -1 when it ends, inside the admission bound.
	OnCreating func(delta int)

	mu     sync.Mutex
	closed bool           // guarded by mu
	live   map[T]struct{} // guarded by mu; handed out or warm
}

// NewSlots makes the bounds of a backend named prefix whose warm
// sandboxes are in pool.
func NewSlots[T Sandbox](prefix string, maxCreating, maxAlive int, pool *Pool[T]) *Slots[T] {
	return &Slots[T]{prefix: prefix, maxCreating: maxCreating, maxAlive: maxAlive,
		creating: semaphore.NewWeighted(int64(maxCreating)), alive: semaphore.NewWeighted(int64(maxAlive)),
		pool: pool, live: map[T]struct{}{}}
}

// Counts are the sandboxes being created and alive now.
func (s *Slots[T]) Counts() (creating, alive int) {
	return int(s.nCreating.Load()), int(s.nAlive.Load())
}

// TryAlive takes a slot under maxAlive if one is free (the refiller's way:
// episodes first).
func (s *Slots[T]) TryAlive() bool {
	if !s.alive.TryAcquire(1) {
		return false
	}
	s.nAlive.Add(1)
	return true
}

// AcquireAlive takes a slot under maxAlive for episode. When none is free,
// a warm sandbox (of any image) gives its slot up.
func (s *Slots[T]) AcquireAlive(ctx context.Context, episode string) error {
	for {
		if s.TryAlive() {
			return nil
		}
		c, ok := s.pool.Evict()
		if !ok {
			break
		}
		c.Close(ctx) // releases its slot
	}
	if err := s.alive.Acquire(ctx, 1); err != nil {
		return fmt.Errorf("%s: create %s: waiting for a free slot (MaxAlive %d): %w", s.prefix, episode, s.maxAlive, err)
	}
	s.nAlive.Add(1)
	return nil
}

// ReleaseAlive gives a slot back.
func (s *Slots[T]) ReleaseAlive() {
	s.nAlive.Add(-1)
	s.alive.Release(1)
}

// Admit waits for a creation slot under maxCreating; release frees it.
func (s *Slots[T]) Admit(ctx context.Context, episode string) (release func(), err error) {
	if err := s.creating.Acquire(ctx, 1); err != nil {
		return nil, fmt.Errorf("%s: create %s: waiting for admission (MaxCreating %d): %w", s.prefix, episode, s.maxCreating, err)
	}
	s.nCreating.Add(1)
	if s.OnCreating != nil {
		s.OnCreating(1)
	}
	return func() {
		if s.OnCreating != nil {
			s.OnCreating(-1)
		}
		s.nCreating.Add(-1)
		s.creating.Release(1)
	}, nil
}

// CheckOpen fails op once the backend is closing.
func (s *Slots[T]) CheckOpen(op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("%s: %s: backend closed: %w", s.prefix, op, sandbox.ErrClosed)
	}
	return nil
}

// Add puts a started sandbox in the live set; it fails (and the caller
// tears c down) when the backend is closing.
func (s *Slots[T]) Add(c T, episode string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("%s: create %s: backend closed: %w", s.prefix, episode, sandbox.ErrClosed)
	}
	s.live[c] = struct{}{}
	return nil
}

// Forget drops c from the live set and frees its slot; a sandbox's Close
// calls it once.
func (s *Slots[T]) Forget(c T) {
	s.mu.Lock()
	_, ok := s.live[c]
	delete(s.live, c)
	s.mu.Unlock()
	if ok {
		s.ReleaseAlive()
		s.pool.Wake() // a slot freed up for warming
	}
}

// MarkClosed refuses new sandboxes from now on; false when it was already
// closed.
func (s *Slots[T]) MarkClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.closed = true
	return true
}

// CloseAll drains the pool and closes every live sandbox, eight at a time.
func (s *Slots[T]) CloseAll(ctx context.Context) error {
	s.pool.Drain()
	s.mu.Lock()
	all := make([]T, 0, len(s.live))
	for c := range s.live {
		all = append(all, c)
	}
	s.mu.Unlock()
	var g errgroup.Group
	g.SetLimit(8)
	var errs []error
	var mu sync.Mutex
	for _, c := range all {
		g.Go(func() error {
			if err := c.Close(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			return nil
		})
	}
	g.Wait()
	return errors.Join(errs...)
}
