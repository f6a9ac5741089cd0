package judge

import (
	"context"
	"sync"
)

// limiter bounds requests in flight globally and per episode. Waits
// honour ctx, which carries the Judge call's deadline.
type limiter struct {
	global     chan struct{}
	perEpisode int

	mu       sync.Mutex
	episodes map[string]*episodeSlots // guarded by mu; removed when unused
}

type episodeSlots struct {
	ch    chan struct{}
	users int // guarded by limiter.mu
}

func newLimiter(global, perEpisode int) *limiter {
	return &limiter{global: make(chan struct{}, global), perEpisode: perEpisode, episodes: map[string]*episodeSlots{}}
}

// acquire takes an episode slot, then a global one, so an episode at its
// own limit does not hold global slots others could use. The returned
// release must be called exactly once when err is nil.
func (l *limiter) acquire(ctx context.Context, episode string) (release func(), err error) {
	l.mu.Lock()
	es := l.episodes[episode]
	if es == nil {
		es = &episodeSlots{ch: make(chan struct{}, l.perEpisode)}
		l.episodes[episode] = es
	}
	es.users++
	l.mu.Unlock()
	done := func() {
		l.mu.Lock()
		es.users--
		if es.users == 0 {
			delete(l.episodes, episode)
		}
		l.mu.Unlock()
	}
	select {
	case es.ch <- struct{}{}:
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
	select {
	case l.global <- struct{}{}:
	case <-ctx.Done():
		<-es.ch
		done()
		return nil, ctx.Err()
	}
	return func() {
		<-l.global
		<-es.ch
		done()
	}, nil
}
