package kube

import (
	"context"
	"encoding/json"
	"log/slog"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rollcage/rollcage/sandbox"
)

// takeWarm hands out a warm pod for spec: configured, and relabelled with
// the episode and the spec's labels; nil when none fits or the ones there
// turn out dead.
func (b *Backend) takeWarm(ctx context.Context, spec sandbox.Spec, log *slog.Logger) *pod {
	for {
		p, ok := b.pool.Take(spec.Image)
		if !ok {
			return nil
		}
		b.pool.Wake()
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
