package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/rollcage/rollcage/sandbox/host"
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
	found, err := list(ctx, cli, filters.NewArgs(filters.Arg("label", host.LabelManaged+"=1")))
	if err != nil {
		return 0, fmt.Errorf("docker: reap: list containers: %w", err)
	}
	return leftovers(cli, stateDir, log, found).Reap(ctx)
}

// list lists the containers filter selects, as the reaper judges them.
func list(ctx context.Context, cli client.APIClient, filter filters.Args) ([]hostside.Found, error) {
	cs, err := cli.ContainerList(ctx, dcontainer.ListOptions{All: true, Filters: filter})
	if err != nil {
		return nil, err
	}
	found := make([]hostside.Found, len(cs))
	for i, c := range cs {
		found[i] = hostside.Found{ID: c.ID, Labels: c.Labels, State: func() hostside.State {
			switch c.State {
			case "running":
				return hostside.StateRunning
			case "exited", "dead":
				return hostside.StateStopped
			}
			return hostside.StateOther
		}}
	}
	return found, nil
}

func leftovers(cli client.APIClient, stateDir string, log *slog.Logger, found []hostside.Found) hostside.Leftovers {
	return hostside.Leftovers{Prefix: "docker", StateDir: stateDir, Log: log, Found: found,
		Remove: func(ctx context.Context, f hostside.Found) error { return removeContainer(ctx, cli, f.ID) }}
}

// GC connects to the engine like New (without needing the agent binary)
// and runs Reap on cfg.StateDir: the body of `rollcage gc`.
func GC(ctx context.Context, cfg Config) (removed int, err error) {
	if cfg.StateDir == "" {
		cfg.StateDir = host.DefaultStateDir()
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
	found, err := list(ctx, b.cli, filters.NewArgs(filters.Arg("label", host.LabelManaged+"=1"),
		filters.Arg("label", host.LabelEpisode+"="+episodeID)))
	if err != nil {
		return 0, b.engineErr("remove episode "+episodeID+": list containers", err)
	}
	l := leftovers(b.cli, b.cfg.StateDir, b.log, found)
	l.Remove = func(ctx context.Context, f hostside.Found) error {
		return mapErr(b.cli, removeContainer(ctx, b.cli, f.ID))
	}
	return l.RemoveEpisode(ctx, episodeID)
}
