package harness

import (
	"context"
	"fmt"
	"io/fs"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/rollcage/rollcage/task"
)

// Replayed is one script's replayed episode: its outcome, or the error
// that kept it from running.
type Replayed struct {
	Script  task.Script
	Outcome Outcome
	Err     error
}

// ReplayAll runs each script as one episode of its task (tasks by id),
// conc at a time, and returns the results in the scripts' order. progress,
// if not nil, is called after each episode with the number done. Only a
// cancelled ctx stops it early; other errors are per result.
func ReplayAll(ctx context.Context, r *Runner, tasks map[string]task.Task, hidden fs.FS, scripts []task.Script, conc int, progress func(done int)) []Replayed {
	out := make([]Replayed, len(scripts))
	var mu sync.Mutex
	done := 0
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(conc, 1))
	for i, s := range scripts {
		g.Go(func() error {
			out[i].Script = s
			t, ok := tasks[s.Task]
			if !ok {
				out[i].Err = fmt.Errorf("script %s/%s names no task of the suite", s.Task, s.Name)
			} else {
				out[i].Outcome, out[i].Err = r.Run(gctx, t, hidden, EpisodeMeta{Model: "replay", Labels: map[string]string{"script": s.Name}}, Replay{Script: s})
			}
			if progress != nil {
				mu.Lock()
				done++
				progress(done)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	return out
}
