package harness

import (
	"context"
	"errors"
	"fmt"

	"github.com/rollcage/rollcage/trajectory"
)

// AbandonStored ends an episode known only from its log: one whose owner
// is gone (a gateway that crashed or was killed) and left it without an
// episode_end. It appends the episode_end Close would have written
// (reason abandoned, failure class infrastructure, no reward), with the
// counts read from the log, so the episode reaches the finished feed and
// the export like any other. why says what happened ("gateway restart").
// A log that has ended already is left alone: it returns false. A log
// with no event (its episode was killed while starting, before its
// episode_start) is removed, not given an episode_end alone: it returns
// false too.
func AbandonStored(ctx context.Context, st *trajectory.Store, id, why string) (bool, error) {
	// The store's and the log's errors name the episode; the ones
	// wrapped here without it say so once.
	info, err := st.Info(id)
	if err != nil {
		return false, fmt.Errorf("harness: abandon: %w", err)
	}
	if info.Finished {
		return false, nil
	}
	if info.Events == 0 {
		if _, err := st.DiscardEmpty(id); err != nil {
			return false, fmt.Errorf("harness: abandon: %w", err)
		}
		return false, nil
	}
	var (
		counts  trajectory.Counts
		hacked  bool
		unconf  int
		seg     int
		step    int
		started bool
		group   string
		taskID  string
	)
	err = st.Read(ctx, id, 0, func(ev trajectory.Event) error {
		seg, step = max(seg, ev.Segment), max(step, ev.Step)
		switch ev.Type {
		case trajectory.TypeEpisodeStart:
			started = true
			var es trajectory.EpisodeStart
			if err := ev.Decode(&es); err != nil {
				return err
			}
			group, taskID = es.GroupID, es.TaskID
		case trajectory.TypeModelTurn:
			counts.Turns++
		case trajectory.TypeToolCall:
			counts.ToolCalls++
		case trajectory.TypeDecision:
			var d trajectory.Decision
			if err := ev.Decode(&d); err != nil {
				return err
			}
			if d.Hack || d.Blocked {
				hacked = true
			}
			if d.Blocked {
				counts.Blocked++
			}
			if len(d.Flags) > 0 && string(d.Flags) != "null" && string(d.Flags) != "[]" {
				counts.Flagged++
			}
			if d.Unconfirmed {
				unconf++
			}
			if d.Action == trajectory.ActionRewrite {
				counts.Rewritten++
			}
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("harness: abandon %s: read log: %w", id, err)
	}
	if !started {
		// Not an episode's log (or one torn before its first event):
		// still ended, so nothing waits on it forever.
		seg, step = 0, 0
	}
	counts.Segments = seg + 1
	counts.Unconfirmed = unconf
	end := trajectory.EpisodeEnd{
		Hacked: hacked, Label: trajectory.EpisodeLabel(hacked, unconf),
		FailureClass: FailureInfrastructure, Reason: ReasonAbandoned + ": " + why, Counts: counts,
		TaskID: taskID, GroupID: group,
	}
	ev, err := trajectory.NewEvent(id, seg, step, trajectory.TypeEpisodeEnd, end)
	if err != nil {
		return false, fmt.Errorf("harness: abandon %s: %w", id, err)
	}
	l, err := st.Log(id)
	if err != nil {
		return false, fmt.Errorf("harness: abandon: %w", err)
	}
	_, aerr := l.Append(ev)
	cerr := l.Close()
	if errors.Is(aerr, trajectory.ErrFinished) {
		return false, nil // ended meanwhile by its owner
	}
	if err := errors.Join(aerr, cerr); err != nil {
		return false, fmt.Errorf("harness: abandon: %w", err)
	}
	return true, nil
}
