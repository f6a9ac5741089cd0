package kube

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rollcage/rollcage/sandbox"
)

// pool holds warm pods per image: running, their agent connected, waiting
// to be configured for an episode.
type pool struct {
	want map[string]int // never changed after newPool
	kick chan struct{}

	mu    sync.Mutex
	ready map[string][]*pod // guarded by mu; oldest first
}

func newPool(want map[string]int) *pool {
	p := &pool{want: map[string]int{}, kick: make(chan struct{}, 1), ready: map[string][]*pod{}}
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
	for _, ps := range p.ready {
		n += len(ps)
	}
	return n
}

func (p *pool) count(image string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready[image])
}

func (p *pool) put(q *pod) {
	p.mu.Lock()
	p.ready[q.image] = append(p.ready[q.image], q)
	p.mu.Unlock()
}

func (p *pool) take(image string) *pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.ready[image]
	if len(ps) == 0 {
		return nil
	}
	p.ready[image] = ps[1:]
	return ps[0]
}

// evict removes a warm pod of the image with the most of them.
func (p *pool) evict() *pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	best := ""
	for img, ps := range p.ready {
		if len(ps) > 0 && (best == "" || len(ps) > len(p.ready[best])) {
			best = img
		}
	}
	if best == "" {
		return nil
	}
	ps := p.ready[best]
	p.ready[best] = ps[:len(ps)-1]
	return ps[len(ps)-1]
}

func (p *pool) drain() {
	p.mu.Lock()
	clear(p.ready)
	p.mu.Unlock()
}

// takeWarm hands out a warm pod for spec: configured, and relabelled with
// the episode and the spec's labels; nil when none fits or the ones there
// turn out dead.
func (b *Backend) takeWarm(ctx context.Context, spec sandbox.Spec, log *slog.Logger) *pod {
	for {
		p := b.pool.take(spec.Image)
		if p == nil {
			return nil
		}
		b.pool.wake()
		if err := p.configure(ctx, spec); err != nil {
			log.Warn("warm pod unusable, discarding", "pod", p.name, "err", err)
			p.Close(ctx)
			if ctx.Err() != nil {
				return nil
			}
			continue
		}
		if err := b.relabel(ctx, p, spec); err != nil {
			// The labels are for people and selectors; the owner label,
			// which the reaper reads, is there already.
			log.Warn("relabel warm pod", "pod", p.name, "err", err)
		}
		p.mu.Lock()
		p.log = b.log.With("episode_id", spec.EpisodeID, "pod", p.name)
		p.mu.Unlock()
		p.logger().Info("sandbox handed out from warm pool")
		return p
	}
}

// relabel moves a warm pod to spec's episode: a merge patch of labels and
// the episode annotation.
func (b *Backend) relabel(ctx context.Context, p *pod, spec sandbox.Spec) error {
	labels := map[string]any{LabelPool: nil, LabelEpisode: labelValue(spec.EpisodeID)}
	for k, v := range spec.Labels {
		if k != LabelManaged && k != LabelOwner {
			labels[k] = labelValue(v)
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":      labels,
		"annotations": map[string]string{AnnotationEpisode: spec.EpisodeID},
	}})
	if err != nil {
		return err
	}
	_, err = b.cs.CoreV1().Pods(b.cfg.Namespace).Patch(ctx, p.name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// refill keeps every image's pool at its size until ctx ends, one
// creation at a time.
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
					break
				}
				b.nAlive.Add(1)
				p, err := b.start(ctx, sandbox.Spec{
					Image: img, Workdir: "/workspace", Network: sandbox.NetworkNone,
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
				b.pool.put(p)
			}
		}
		if next == 0 {
			next = time.Minute
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
