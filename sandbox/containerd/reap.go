package containerd

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/containerd/containerd/v2/client"
	cerrdefs "github.com/containerd/errdefs"

	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// managedFilter selects rollcage's containers.
const managedFilter = `labels."` + host.LabelManaged + `"==1`

// Reap removes what rollcage processes that are gone left in the
// namespace: every container labelled rollcage.managed=1 whose owner (pid
// and start time, on this boot, in this pid namespace) no longer runs,
// with its task, snapshot and run directory, and every run directory whose
// owner no longer runs. Another boot's or pid namespace's container is
// removed only once its task has stopped. It returns how many containers
// and directories it removed. New runs it once.
func (b *Backend) Reap(ctx context.Context) (int, error) {
	l, err := b.list(ctx, managedFilter)
	if err != nil {
		return 0, b.engineErr("reap: list containers", err)
	}
	return l.Reap(b.ctx(ctx))
}

// list lists the containers filter selects, as the reaper judges them.
func (b *Backend) list(ctx context.Context, filter string) (hostside.Leftovers, error) {
	ctx = b.ctx(ctx)
	ctrs, err := b.cli.Containers(ctx, filter)
	if err != nil {
		return hostside.Leftovers{}, err
	}
	l := hostside.Leftovers{Prefix: "containerd", StateDir: b.core.Cfg.StateDir, Log: b.log}
	byID := make(map[string]client.Container, len(ctrs))
	for _, ctr := range ctrs {
		labels, err := ctr.Labels(ctx)
		if err != nil {
			continue // removed meanwhile
		}
		byID[ctr.ID()] = ctr
		l.Found = append(l.Found, hostside.Found{ID: ctr.ID(), Labels: labels, State: func() hostside.State {
			if taskRunning(ctx, ctr) {
				return hostside.StateRunning
			}
			return hostside.StateStopped
		}})
	}
	l.Remove = func(ctx context.Context, f hostside.Found) error { return b.mapErr(remove(ctx, byID[f.ID])) }
	return l, nil
}

// taskRunning: the container has a task that has not stopped (created,
// running, paused).
func taskRunning(ctx context.Context, ctr client.Container) bool {
	t, err := ctr.Task(ctx, nil)
	if err != nil {
		return false
	}
	st, err := t.Status(ctx)
	return err == nil && st.Status != client.Stopped
}

// remove kills and deletes a container's task, then the container and its
// snapshot.
func remove(ctx context.Context, ctr client.Container) error {
	if t, err := ctr.Task(ctx, nil); err == nil {
		if _, err := t.Delete(ctx, client.WithProcessKill); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("delete task of %s: %w", ctr.ID(), err)
		}
	}
	if err := ctr.Delete(ctx, client.WithSnapshotCleanup); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("delete %s: %w", ctr.ID(), err)
	}
	return nil
}

// RemoveEpisode removes the containers (and their host directories) of
// one episode whose owner no longer runs: what a gateway that restarted
// calls for each episode it ended as abandoned. It returns how many it
// removed.
func (b *Backend) RemoveEpisode(ctx context.Context, episodeID string) (int, error) {
	if episodeID == "" {
		return 0, errors.New("containerd: remove episode: empty episode id")
	}
	l, err := b.list(ctx, managedFilter+`,labels."`+host.LabelEpisode+`"==`+quoteFilter(episodeID))
	if err != nil {
		return 0, b.engineErr("remove episode "+episodeID+": list containers", err)
	}
	return l.RemoveEpisode(b.ctx(ctx), episodeID)
}

// quoteFilter quotes a value for containerd's filter syntax.
func quoteFilter(s string) string {
	out := []byte{'"'}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(append(out, '"'))
}

// GC connects like New (without needing the agent binary or starting a
// pool) and reaps: the body of `rollcage gc --backend containerd`.
func GC(ctx context.Context, cfg Config) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("containerd: gc: %w", err)
	}
	cfg.AgentBinary = exe // any regular file: GC starts no sandbox
	cfg.Pool = nil
	b, err := New(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer b.Close(context.WithoutCancel(ctx))
	return b.Reap(ctx)
}
