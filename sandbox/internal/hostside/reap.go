package hostside

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/rollcage/rollcage/sandbox/host"
)

// State is what an engine can say of a listed container's process.
type State int

// States of a listed container.
const (
	StateOther   State = iota // created, paused, restarting: neither
	StateRunning              // running
	StateStopped              // stopped for good (exited, dead, no task)
)

// Found is a container of ours an engine listed, for Reap and
// RemoveEpisode.
type Found struct {
	ID     string // for logs and errors
	Labels map[string]string
	// State is asked only of a container whose owner ran in another pid
	// namespace or on another boot, whose pid means nothing here.
	State func() State
}

// Leftovers are the containers an engine lists for a backend named
// Prefix with its run directories in StateDir, and how it removes one.
type Leftovers struct {
	Prefix   string
	StateDir string
	Log      *slog.Logger // nil: discard
	Found    []Found
	Remove   func(ctx context.Context, f Found) error
}

// local reports whether o's pid can be judged here: this pid namespace
// and boot (an owner from before those were labelled counts as local).
func local(o Owner, boot, ns string) bool {
	return (o.PidNS == "" || o.PidNS == ns) && (o.Boot == "" || o.Boot == boot)
}

// Reap removes the containers whose owner (pid and start time, on this
// boot, in this pid namespace) no longer runs, with their run
// directories, then every run directory in StateDir whose owner no longer
// runs. A container of another pid namespace's rollcage is removed only
// once it has stopped, one of another boot only when it does not run
// (after a reboot it does not). It returns how many containers and
// directories it removed.
func (l Leftovers) Reap(ctx context.Context) (int, error) {
	log := l.logger()
	boot, ns := BootID(), PidNamespace()
	inUse := map[string]bool{} // run dirs of containers left alone
	removed := 0
	var errs []error
	for _, f := range l.Found {
		o, ok := OwnerFromLabels(f.Labels)
		if !ok {
			continue // not one of ours after all
		}
		var keep bool
		switch {
		case local(o, boot, ns):
			keep = o.Alive()
		case o.PidNS != "" && o.PidNS != ns:
			// one just created and not yet started is still being set up
			keep = f.State() != StateStopped
		default:
			keep = f.State() == StateRunning // cannot judge a running one
		}
		if keep {
			inUse[f.Labels[host.LabelRunDir]] = true
			continue
		}
		if err := l.remove(ctx, f, "reap", &errs); err != nil {
			continue
		}
		removed++
		log.Info("reaped container", "id", f.ID, "owner_pid", o.PID)
	}
	n, err := ReapDirs(l.StateDir, inUse, log)
	removed += n
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", l.Prefix, err))
	}
	return removed, errors.Join(errs...)
}

// RemoveEpisode removes the listed containers of episode whose owner no
// longer runs (a live owner, this process or another rollcage still
// running the episode, keeps its containers), with their run directories.
// It returns how many it removed.
func (l Leftovers) RemoveEpisode(ctx context.Context, episode string) (int, error) {
	log := l.logger()
	boot, ns := BootID(), PidNamespace()
	removed := 0
	var errs []error
	for _, f := range l.Found {
		if o, ok := OwnerFromLabels(f.Labels); ok && local(o, boot, ns) && o.Alive() {
			continue
		}
		if err := l.remove(ctx, f, "remove episode "+episode, &errs); err != nil {
			continue
		}
		removed++
		log.Info("removed container of an abandoned episode", "episode_id", episode, "id", f.ID)
	}
	return removed, errors.Join(errs...)
}

// remove removes f and its run directory, adding what failed to errs; it
// returns the container's removal error.
func (l Leftovers) remove(ctx context.Context, f Found, op string, errs *[]error) error {
	if err := l.Remove(ctx, f); err != nil {
		*errs = append(*errs, fmt.Errorf("%s: %s: remove %s: %w", l.Prefix, op, f.ID, err))
		return err
	}
	if d := f.Labels[host.LabelRunDir]; d != "" && l.StateDir != "" && filepath.Base(d) == d {
		if err := os.RemoveAll(filepath.Join(l.StateDir, d)); err != nil {
			*errs = append(*errs, fmt.Errorf("%s: %s: %w", l.Prefix, op, err))
		}
	}
	return nil
}

func (l Leftovers) logger() *slog.Logger {
	if l.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l.Log
}
