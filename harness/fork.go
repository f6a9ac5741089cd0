package harness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/trajectory"
)

// ErrStreaming: the episode has streamed calls running, so it cannot fork
// now.
var ErrStreaming = errors.New("streamed calls are still running")

// Fork makes n episodes that go on from where this one stands: each in its
// own sandbox forked from this one's (sandbox.Sandbox.Fork: the files and
// the shell sessions' state, not running processes), with the monitor's
// state copied (the rules' history and discoveries, the judge's view of
// the steps, what the policy wrote and created), so a child that goes on
// to use what the parent discovered is judged with the parent's context.
//
// A child's log starts with an episode_start whose Fork names the parent
// and the branch step, then a copy of the parent's events so far: its
// trajectory is the whole conversation, the shared prefix marked for
// export (trajectory.ExportOptions.Prefix). Its counters (steps, turns,
// tokens, flags, hacks) go on from the parent's, and so do its wall-time
// deadline and start: a branch is the same attempt continued. Each child
// is graded, finished and exported on its own; the parent goes on too and
// is finished as any episode. Children's ids are the parent's with
// ".b<step>-<random>-<k>" appended (k from 1).
//
// Fork waits for a call in flight and takes none meanwhile; it refuses
// while streamed calls (Start) are running. Model turns
// recorded while it copies the log may be in a child or not. An episode in
// network proxy mode cannot fork (its egress proxy is its own); the error
// wraps sandbox.ErrUnsupported, as it does for a backend without fork.
func (e *Episode) Fork(ctx context.Context, n int) ([]*Episode, error) {
	if n < 1 || n > sandbox.MaxFork {
		return nil, fmt.Errorf("harness: episode %s: fork: n = %d: ask for 1 to %d children", e.id, n, sandbox.MaxFork)
	}
	e.callMu.Lock()
	defer e.callMu.Unlock()
	e.mu.Lock()
	stopped, infra := e.stopped, e.infraErr
	step, streaming := e.steps, len(e.running)
	e.mu.Unlock()
	switch {
	case stopped:
		return nil, fmt.Errorf("harness: episode %s: fork: %w", e.id, ErrFinished)
	case streaming > 0:
		return nil, fmt.Errorf("harness: episode %s: fork: %d %w (their output would be in no child): wait for them to end, or stop them, before forking", e.id, streaming, ErrStreaming)
	case infra != nil:
		return nil, fmt.Errorf("harness: episode %s: fork: the episode had an infrastructure fault (%v): finish it instead", e.id, infra)
	case e.egress != nil:
		return nil, fmt.Errorf("harness: episode %s: fork: an episode in network proxy mode cannot fork (each child would need its own egress proxy): run it with network none: %w", e.id, sandbox.ErrUnsupported)
	}
	tag := fmt.Sprintf(".b%d-%s-", step, randomHex(2))
	if err := trajectory.ValidID(e.id + tag + fmt.Sprint(n)); err != nil {
		return nil, fmt.Errorf("harness: episode %s: fork: the children's ids would be too long: fork a shallower episode: %w", e.id, err)
	}

	var prefix []trajectory.Event
	turns := 0
	err := e.r.cfg.Store.Read(ctx, e.id, 1, func(ev trajectory.Event) error {
		switch ev.Type {
		case trajectory.TypeEpisodeStart, trajectory.TypeGrade, trajectory.TypeEpisodeEnd:
			return nil
		case trajectory.TypeModelTurn:
			turns++
		}
		prefix = append(prefix, ev)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("harness: episode %s: fork: read the log: %w", e.id, err)
	}
	origin := trajectory.ForkOrigin{ParentEpisodeID: e.id, BranchStep: step, PrefixEvents: len(prefix), PrefixTurns: turns}

	t0 := time.Now()
	res, err := sandbox.Fork(ctx, e.sb, n)
	if err != nil {
		return nil, fmt.Errorf("harness: episode %s: fork: %w", e.id, err)
	}
	kids := make([]*Episode, 0, n)
	var errs []error
	for i, sb := range res.Children {
		id := fmt.Sprintf("%s%s%d", e.id, tag, i+1)
		if len(errs) > 0 {
			// An earlier child failed: none is handed out.
			if cerr := sb.Close(context.WithoutCancel(ctx)); cerr != nil {
				e.log.Warn("fork: closing a child's sandbox", "child", id, "err", cerr)
			}
			continue
		}
		k, err := e.child(ctx, id, sb, origin, prefix)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		kids = append(kids, k)
	}
	if len(errs) > 0 {
		for _, k := range kids {
			k.abort(ctx, errors.New("a sibling could not be forked"))
		}
		return nil, fmt.Errorf("harness: episode %s: fork: %w", e.id, errors.Join(errs...))
	}
	ids := make([]string, len(kids))
	for i, k := range kids {
		ids[i] = k.id
	}
	e.log.Info("episode forked", "children", ids, "branch_step", step, "paused", res.Paused,
		"changed_bytes", res.ChangedBytes, "not_carried", res.NotCarried, "duration", time.Since(t0).Round(time.Millisecond))
	return kids, nil
}

// child makes the episode of one forked sandbox: the parent's state
// copied, its log started with the prefix. On error the child is recorded
// as a failed start and its sandbox closed.
func (e *Episode) child(ctx context.Context, id string, sb sandbox.Sandbox, origin trajectory.ForkOrigin, prefix []trajectory.Event) (*Episode, error) {
	meta := e.meta
	meta.ID, meta.Labels = id, maps.Clone(e.meta.Labels)
	tlog, err := e.r.cfg.Store.Log(id)
	if err != nil {
		if cerr := sb.Close(context.WithoutCancel(ctx)); cerr != nil {
			e.log.Warn("fork: closing a child's sandbox", "child", id, "err", cerr)
		}
		return nil, fmt.Errorf("child %s: %w", id, err)
	}
	e.mu.Lock()
	k := &Episode{
		r: e.r, id: id, task: e.task, hidden: e.hidden, meta: meta, sb: sb, tlog: tlog,
		log:   e.r.log.With("episode_id", id, "task_id", e.task.ID, "parent_episode_id", e.id),
		start: e.start, deadline: e.deadline, before: e.before, sealedImage: e.sealedImage,
		base: e.base, image: e.image, known: e.known, canaries: e.canaries, taskContext: e.taskContext,
		startContext: e.startContext, fork: &origin, routes: e.routes, network: e.network,
		segment: e.segment, steps: e.steps, turns: origin.PrefixTurns, tokens: e.tokens,
		flagged: e.flagged, unconf: e.unconf, blocked: e.blocked, rewrite: e.rewrite, judged: e.judged,
		hackCats: slices.Clone(e.hackCats), hacked: e.hacked, overhead: e.overhead, judgeErr: e.judgeErr,
	}
	e.mu.Unlock()
	mon, err := e.mon.Fork(monitor.ForkConfig{
		ID: id, Sandbox: sb, Logger: k.log,
		HashVisible: func(ctx context.Context) (map[string]string, error) { return hashVisible(ctx, sb, e.task) },
	})
	if err == nil {
		k.mon = mon
		err = k.emitStart()
	}
	for _, ev := range prefix {
		if err != nil {
			break
		}
		ev.EpisodeID, ev.Offset = id, 0
		_, err = tlog.Append(ev)
	}
	if err != nil {
		err = fmt.Errorf("child %s: %w", id, err)
		k.abort(ctx, err)
		return nil, err
	}
	return k, nil
}

// Parent is the episode this one was forked from and the parent's step it
// branched at; "" for an episode that was not forked.
func (e *Episode) Parent() (id string, step int) {
	if e.fork == nil {
		return "", 0
	}
	return e.fork.ParentEpisodeID, e.fork.BranchStep
}
