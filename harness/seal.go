package harness

import (
	"context"
	"fmt"
	"strings"

	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
)

// SealSpec is what the harness asks to seal for t: its image, repository
// and base, with the monitor's probe taking the facts first. Sealing ahead
// of a run with the same spec (rollcage seal) fills the same cache.
func SealSpec(t task.Task) sandbox.SealSpec {
	workdir := workdirOf(t)
	return sandbox.SealSpec{
		Image: t.Image, Workdir: workdir, Base: t.BaseCommit,
		Probe: monitor.ProbeScript, ProbeArgs: []string{workdir, t.BaseCommit, t.UpstreamFixRef},
		Remove: t.ImageHidden,
	}
}

// seal returns the sealed image for t and the facts taken before sealing,
// or "" when t runs unsealed (Config.Seal off, or the task's "seal":
// false). Sealing is wanted and impossible: an error, never a silent
// unsealed episode.
func (r *Runner) seal(ctx context.Context, t task.Task, workdir string) (monitor.Probe, string, error) {
	if !r.cfg.Seal || !t.Sealed() {
		if len(t.ImageHidden) > 0 {
			return monitor.Probe{}, "", fmt.Errorf("task %s: its image holds hidden tests (%s) that only its sealed image is without: run it sealed (drop --no-seal)", t.ID, strings.Join(t.ImageHidden, " "))
		}
		return monitor.Probe{}, "", nil
	}
	s, ok := r.cfg.Backend.(sandbox.Sealer)
	if !ok {
		return monitor.Probe{}, "", fmt.Errorf("seal %s: backend %T cannot seal images: run with --no-seal or set \"seal\": false on the task", t.Image, r.cfg.Backend)
	}
	sealed, err := s.Seal(ctx, SealSpec(t))
	if err != nil {
		return monitor.Probe{}, "", fmt.Errorf("seal %s: %w", t.Image, err)
	}
	probe, err := monitor.ParseProbe(sealed.Facts, workdir, t.BaseCommit)
	if err != nil {
		return monitor.Probe{}, "", fmt.Errorf("seal %s: facts: %w", t.Image, err)
	}
	if sealed.Took > 0 {
		r.log.Info("sealed task image", "task_id", t.ID, "image", t.Image, "sealed", sealed.Image, "took", sealed.Took, "log", sealed.Log)
	}
	return probe, sealed.Image, nil
}
