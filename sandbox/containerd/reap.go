package containerd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containerd/containerd/v2/client"
	cerrdefs "github.com/containerd/errdefs"

	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// managedFilter selects rollcage's containers.
const managedFilter = `labels."` + hostside.LabelManaged + `"==1`

// Reap removes what rollcage processes that are gone left in the
// namespace: every container labelled rollcage.managed=1 whose owner (pid
// and start time, on this boot, in this pid namespace) no longer runs,
// with its task, snapshot and run directory, and every run directory whose
// owner no longer runs. Another boot's or pid namespace's container is
// removed only once its task has stopped. It returns how many containers
// and directories it removed. New runs it once.
func (b *Backend) Reap(ctx context.Context) (int, error) {
	ctx = b.ctx(ctx)
	list, err := b.cli.Containers(ctx, managedFilter)
	if err != nil {
		return 0, b.engineErr("reap: list containers", err)
	}
	boot, ns := hostside.BootID(), hostside.PidNamespace()
	inUse := map[string]bool{}
	removed := 0
	var errs []error
	for _, ctr := range list {
		labels, err := ctr.Labels(ctx)
		if err != nil {
			continue // removed meanwhile
		}
		o, ok := hostside.OwnerFromLabels(labels)
		if !ok {
			continue
		}
		local := (o.PidNS == "" || o.PidNS == ns) && (o.Boot == "" || o.Boot == boot)
		if (local && o.Alive()) || (!local && taskRunning(ctx, ctr)) {
			inUse[labels[hostside.LabelRunDir]] = true
			continue
		}
		if err := b.remove(ctx, ctr); err != nil {
			errs = append(errs, fmt.Errorf("containerd: reap: %w", err))
			continue
		}
		removed++
		b.log.Info("reaped container", "id", ctr.ID(), "owner_pid", o.PID)
		if d := labels[hostside.LabelRunDir]; d != "" && filepath.Base(d) == d {
			if err := os.RemoveAll(filepath.Join(b.cfg.StateDir, d)); err != nil {
				errs = append(errs, fmt.Errorf("containerd: reap: %w", err))
			}
		}
	}
	n, err := hostside.ReapDirs(b.cfg.StateDir, inUse, b.log)
	removed += n
	if err != nil {
		errs = append(errs, fmt.Errorf("containerd: %w", err))
	}
	return removed, errors.Join(errs...)
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
func (b *Backend) remove(ctx context.Context, ctr client.Container) error {
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
	ctx = b.ctx(ctx)
	list, err := b.cli.Containers(ctx, managedFilter+`,labels."`+hostside.LabelEpisode+`"==`+quoteFilter(episodeID))
	if err != nil {
		return 0, b.engineErr("remove episode "+episodeID+": list containers", err)
	}
	boot, ns := hostside.BootID(), hostside.PidNamespace()
	removed := 0
	var errs []error
	for _, ctr := range list {
		labels, err := ctr.Labels(ctx)
		if err != nil {
			continue
		}
		if o, ok := hostside.OwnerFromLabels(labels); ok && (o.PidNS == "" || o.PidNS == ns) && (o.Boot == "" || o.Boot == boot) && o.Alive() {
			continue
		}
		if err := b.remove(ctx, ctr); err != nil {
			errs = append(errs, b.engineErr("remove episode "+episodeID, err))
			continue
		}
		removed++
		if d := labels[hostside.LabelRunDir]; d != "" && filepath.Base(d) == d {
			os.RemoveAll(filepath.Join(b.cfg.StateDir, d))
		}
	}
	return removed, errors.Join(errs...)
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
