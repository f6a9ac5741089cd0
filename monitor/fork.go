package monitor

import (
	"context"
	"fmt"
	"log/slog"
	"maps"

	"github.com/rollcage/rollcage/sandbox"
)

// ForkConfig names a forked episode's child and what it runs in.
type ForkConfig struct {
	ID      string
	Sandbox sandbox.Sandbox
	// HashVisible takes the visible tests' hashes in the child's sandbox
	// (see EpisodeConfig.HashVisible).
	HashVisible func(ctx context.Context) (map[string]string, error)
	Logger      *slog.Logger
}

// Fork returns the monitor's state for a child of this episode: the
// history (the rules' and the judge's view of it) and discoveries, the
// sessions' directories, what the policy wrote and created
// (its own lines, its scripts, provenance), all copied, so a child that
// goes on to use what the parent discovered is judged with the parent's
// context. From then on the two are independent. Call it with no call in
// flight.
func (e *EpisodeState) Fork(cfg ForkConfig) (*EpisodeState, error) {
	if cfg.Sandbox == nil {
		return nil, fmt.Errorf("monitor: fork %s into %s: no sandbox", e.id, cfg.ID)
	}
	log := cfg.Logger
	if log == nil {
		log = e.p.log
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c := &EpisodeState{
		p: e.p, id: cfg.ID, task: e.task, facts: e.facts, sb: cfg.Sandbox,
		rules:         e.rules.Clone(),
		leaks:         e.leaks, // built once from the secrets, never changed
		log:           log.With("episode_id", cfg.ID),
		written:       maps.Clone(e.written),
		fileLines:     maps.Clone(e.fileLines),
		created:       maps.Clone(e.created),
		touched:       maps.Clone(e.touched),
		files:         e.files.Clone(),
		visible:       e.visible,
		visibleHashes: e.visibleHashes,
		hashVisible:   cfg.HashVisible,
		cwd:           maps.Clone(e.cwd),
	}
	return c, nil
}
