package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
)

// Tree says how a tree rollout branches: at the first turn boundary where
// the episode has made At tool calls or more, it becomes Branches leaves:
// the episode itself goes on as one and Branches-1 forks of it
// (Episode.Fork) as the others, each continued by the policy from a copy
// of its state at the branch.
type Tree struct {
	At       int `json:"branch_at"`
	Branches int `json:"branches"`
}

// Validate reports a tree that cannot branch.
func (t Tree) Validate() error {
	switch {
	case t.At < 0:
		return fmt.Errorf("harness: branch at step %d: give 0 (before the first call) or more", t.At)
	case t.Branches < 2 || t.Branches > sandbox.MaxFork+1:
		return fmt.Errorf("harness: %d branches: give 2 to %d (the episode and its forks)", t.Branches, sandbox.MaxFork+1)
	}
	return nil
}

// treeRun is a tree rollout in progress: its branch point and the
// children running.
type treeRun struct {
	tree Tree
	ctx  context.Context // the rollout's: children outlive the parent's policy

	mu   sync.Mutex // guards the fields below
	done bool       // branched (or tried to)
	outs []Outcome  // the children's
	errs []error
	wg   sync.WaitGroup
}

// Branch is for policies that can continue an episode from a copy of
// their own state: call it at every turn boundary (before asking the model
// for the next turn). In a tree rollout (Runner.RunTree) at its branch
// point, it forks the episode and, for each child, calls next at once
// (copy the state there: the parent goes on as soon as Branch returns)
// and runs the function next returns on the child to its end, finishing
// it like any episode. Anywhere else it does nothing. It reports whether
// the episode branched; a fork that failed is the rollout's error
// (RunTree returns it) and the episode goes on unbranched.
func (e *Episode) Branch(next func(child *Episode) func(ctx context.Context) (string, error)) bool {
	t := e.tree
	if t == nil {
		return false
	}
	e.mu.Lock()
	steps := e.steps
	e.mu.Unlock()
	t.mu.Lock()
	if t.done || steps < t.tree.At {
		t.mu.Unlock()
		return false
	}
	t.done = true
	t.mu.Unlock()
	kids, err := e.Fork(t.ctx, t.tree.Branches-1)
	if err != nil {
		e.log.Warn("tree rollout: fork failed; the episode goes on unbranched", "err", err)
		t.mu.Lock()
		t.errs = append(t.errs, err)
		t.mu.Unlock()
		return false
	}
	for _, k := range kids {
		run := next(k)
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			o, err := k.runToEnd(t.ctx, run)
			t.mu.Lock()
			defer t.mu.Unlock()
			t.outs = append(t.outs, o)
			if err != nil {
				t.errs = append(t.errs, err)
			}
		}()
	}
	return true
}

// RunTree runs a tree rollout of t: one episode as Run does, which
// branches as tree says (the policy must call Episode.Branch: OpenAI and
// Replay do). It returns the outcomes of every leaf, the episode's first
// and its forks' after it in id order; fewer than tree.Branches when the
// episode ended before the branch point or the fork failed (the error
// then says why). Like Run, only a failure to record or start is an
// error besides that.
func (r *Runner) RunTree(ctx context.Context, t task.Task, hidden fs.FS, meta EpisodeMeta, p Policy, tree Tree) ([]Outcome, error) {
	if err := tree.Validate(); err != nil {
		return nil, err
	}
	if meta.ID == "" {
		meta.ID = NewEpisodeID(t.ID, meta.Attempt)
	}
	ep, err := r.Start(ctx, t, hidden, meta)
	if err != nil {
		return []Outcome{startFailed(ctx, t, meta, err)}, nil
	}
	tr := &treeRun{tree: tree, ctx: ctx}
	ep.tree = tr
	o, err := ep.runToEnd(ctx, func(ctx context.Context) (string, error) { return p.Run(ctx, ep) })
	tr.wg.Wait()
	slices.SortFunc(tr.outs, func(a, b Outcome) int { return cmp.Compare(a.EpisodeID, b.EpisodeID) })
	return append([]Outcome{o}, tr.outs...), errors.Join(append([]error{err}, tr.errs...)...)
}
