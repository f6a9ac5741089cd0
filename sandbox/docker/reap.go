package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	cerrdefs "github.com/containerd/errdefs"
	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// Reap removes what rollcage processes that are gone left behind: every
// container labelled rollcage.managed=1 whose owner (pid and start time,
// on this boot) no longer runs, and every run directory in stateDir whose
// owner no longer runs. Containers of live owners, this process included,
// are left alone, so any number of rollcage processes can share an engine.
// It returns how many containers and directories it removed.
//
// A container whose owner ran on another boot (or another host sharing the
// engine) cannot be judged by pid; it is removed only once it has stopped,
// which after a reboot it has.
func Reap(ctx context.Context, cli client.APIClient, stateDir string, log *slog.Logger) (removed int, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	boot := hostside.BootID()
	list, err := cli.ContainerList(ctx, dcontainer.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", LabelManaged+"=1")),
	})
	if err != nil {
		return 0, fmt.Errorf("docker: reap: list containers: %w", err)
	}
	var errs []error
	ns := hostside.PidNamespace()
	inUse := map[string]bool{} // run dirs of containers left alone
	for _, c := range list {
		o, ok := hostside.OwnerFromLabels(c.Labels)
		switch {
		case !ok:
			continue // not one of ours after all
		case o.PidNS != "" && o.PidNS != ns:
			// another pid namespace's rollcage: its pid means nothing here,
			// so only a container that has stopped is judged gone (one just
			// created and not yet started is still being set up)
			if c.State != "exited" && c.State != "dead" {
				inUse[c.Labels[LabelRunDir]] = true
				continue
			}
		case o.Boot == boot || o.Boot == "":
			if o.Alive() {
				inUse[c.Labels[LabelRunDir]] = true
				continue
			}
		case c.State == "running":
			inUse[c.Labels[LabelRunDir]] = true
			continue // another host's or boot's; cannot judge a running one
		}
		err := cli.ContainerRemove(ctx, c.ID, dcontainer.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) && !isRemovalInProgress(err) {
			errs = append(errs, fmt.Errorf("docker: reap: remove %s: %w", c.ID[:12], err))
			continue
		}
		removed++
		log.Info("reaped container", "id", c.ID[:12], "names", c.Names, "owner_pid", o.PID)
		if d := c.Labels[LabelRunDir]; d != "" && stateDir != "" && filepath.Base(d) == d {
			if err := os.RemoveAll(filepath.Join(stateDir, d)); err != nil {
				errs = append(errs, fmt.Errorf("docker: reap: %w", err))
			}
		}
	}
	n, err := hostside.ReapDirs(stateDir, inUse, log)
	removed += n
	if err != nil {
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// GC connects to the engine like New (without needing the agent binary)
// and runs Reap on cfg.StateDir: the body of `rollcage gc`.
func GC(ctx context.Context, cfg Config) (removed int, err error) {
	if cfg.StateDir == "" {
		cfg.StateDir = hostside.DefaultStateDir()
	}
	cli, err := newClient(ctx)
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	return Reap(ctx, cli, cfg.StateDir, cfg.Logger)
}

// RemoveEpisode removes the containers (and their host directories) of
// one episode, found by its label, whose owner no longer runs: what a
// gateway that restarted calls for each episode it ended as abandoned.
// Containers of a live owner (this process, or another rollcage still
// running the episode) are left alone. It returns how many it removed.
func (b *Backend) RemoveEpisode(ctx context.Context, episodeID string) (int, error) {
	if episodeID == "" {
		return 0, errors.New("docker: remove episode: empty episode id")
	}
	list, err := b.cli.ContainerList(ctx, dcontainer.ListOptions{
		All: true,
		Filters: filters.NewArgs(filters.Arg("label", LabelManaged+"=1"),
			filters.Arg("label", LabelEpisode+"="+episodeID)),
	})
	if err != nil {
		return 0, b.engineErr("remove episode "+episodeID+": list containers", err)
	}
	ns, boot := hostside.PidNamespace(), hostside.BootID()
	removed := 0
	var errs []error
	for _, c := range list {
		if o, ok := hostside.OwnerFromLabels(c.Labels); ok && (o.PidNS == "" || o.PidNS == ns) && (o.Boot == "" || o.Boot == boot) && o.Alive() {
			continue
		}
		err := b.cli.ContainerRemove(ctx, c.ID, dcontainer.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) && !isRemovalInProgress(err) {
			errs = append(errs, b.engineErr("remove episode "+episodeID+": remove "+c.ID[:12], err))
			continue
		}
		removed++
		b.log.Info("removed container of an abandoned episode", "episode_id", episodeID, "id", c.ID[:12])
		if d := c.Labels[LabelRunDir]; d != "" && b.cfg.StateDir != "" && filepath.Base(d) == d {
			if err := os.RemoveAll(filepath.Join(b.cfg.StateDir, d)); err != nil {
				errs = append(errs, fmt.Errorf("docker: remove episode %s: %w", episodeID, err))
			}
		}
	}
	return removed, errors.Join(errs...)
}
