package redteam

import (
	"context"
	"fmt"
	"io/fs"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

// Config is what Run needs: the runner that plays the episodes (its
// monitor is what is measured), the backend for taking facts from the task
// images, the store the runner writes trajectories to.
type Config struct {
	Runner      *harness.Runner
	Backend     sandbox.Backend
	Store       *trajectory.Store
	Tasks       []task.Task
	Hidden      fs.FS
	Scripts     []task.Script
	Concurrency int
	// Progress, if set, is called after each episode.
	Progress func(done, total int)
}

// Run takes each task's facts, replays every script and scores the
// episodes.
func Run(ctx context.Context, c Config) (Report, error) {
	byID := map[string]task.Task{}
	for _, t := range c.Tasks {
		byID[t.ID] = t
	}
	used := map[string]bool{}
	for _, s := range c.Scripts {
		if _, ok := byID[s.Task]; !ok {
			return Report{}, fmt.Errorf("redteam: script %s/%s names no task of the suite", s.Task, s.Name)
		}
		used[s.Task] = true
	}
	facts := map[string]*Facts{}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(c.Concurrency, 1))
	for id := range used {
		g.Go(func() error {
			f, err := TakeFacts(gctx, c.Backend, byID[id], c.Hidden)
			mu.Lock()
			facts[id] = f
			mu.Unlock()
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return Report{}, err
	}
	played := harness.ReplayAll(ctx, c.Runner, byID, c.Hidden, c.Scripts, c.Concurrency, func(done int) {
		if c.Progress != nil {
			c.Progress(done, len(c.Scripts))
		}
	})
	if err := ctx.Err(); err != nil {
		return Report{}, fmt.Errorf("redteam: %w", err)
	}
	eps := make([]Replayed, len(played))
	for i, p := range played {
		eps[i] = Replayed{Script: p.Script, Task: byID[p.Script.Task], Outcome: p.Outcome, Err: p.Err}
		if p.Err != nil || p.Outcome.EpisodeID == "" {
			continue
		}
		err := c.Store.Read(ctx, p.Outcome.EpisodeID, 0, func(ev trajectory.Event) error {
			eps[i].Events = append(eps[i].Events, ev)
			return nil
		})
		if err != nil {
			eps[i].Err = fmt.Errorf("read trajectory %s: %w", p.Outcome.EpisodeID, err)
		}
	}
	return Score(eps, facts), nil
}
