package docker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"golang.org/x/sync/singleflight"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// teardownTimeout bounds what must finish when the caller's ctx has
// ended (a frozen parent's thaw, a removal).
const teardownTimeout = hostside.TeardownTimeout

// Backend creates sandboxes as Docker containers. It is safe for concurrent
// use; Close drains the warm pool and closes every sandbox it created.
type Backend struct {
	cfg  host.Config // resolved
	cli  *client.Client
	log  *slog.Logger
	core *hostside.Core[*container] // admission, pool, live set, run dirs

	sealing singleflight.Group // one seal per key at a time
	sealed  sync.Map           // key → sandbox.Sealed already read

	// disk is the diskMode that holds containers to their disk limit
	// (decided once from docker info; storage-opt drops to the watchdog at
	// the first create that refuses it).
	disk atomic.Int32
	// rootDir is the engine's data root (docker info), where the btrfs
	// driver's subvolumes are.
	rootDir string

	// remap is the host uid and gid of container root when the engine
	// remaps users (dockerd --userns-remap); nil when it does not or
	// docker info could not say. Set once in New.
	remap *remapBase
}

var (
	_ sandbox.Backend = (*Backend)(nil)
	_ sandbox.Sealer  = (*Backend)(nil)
)

// New connects to the Docker engine of the environment (DOCKER_HOST and
// friends), removes what dead rollcage processes left behind and starts
// warming the pool.
func New(ctx context.Context, c Config) (*Backend, error) {
	cfg, err := host.Config(c).Resolve("docker")
	if err != nil {
		return nil, err
	}
	cli, err := newClient(ctx)
	if err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, cli: cli, log: cfg.Logger}
	b.core, err = hostside.NewCore("docker", cfg, ops{b}, (*container).box, hostside.ContainerName)
	if err != nil {
		cli.Close()
		return nil, err
	}
	if info, err := cli.Info(ctx); err == nil {
		b.rootDir = info.DockerRootDir
		b.disk.Store(int32(diskModeOf(info)))
		b.remap = userRemap(info)
	}
	switch b.diskMode() {
	case diskWatchdog:
		b.log.Warn(watchdogWarning)
	case diskQgroup:
		if ok, err := hostside.BtrfsSimpleQuotas(b.rootDir); !ok {
			b.log.Warn(hostside.SimpleQuotaWarning, "root", b.rootDir, "err", err)
			break
		}
		fallthrough
	default:
		b.log.Info("disk limits: enforced by the kernel", "by", b.diskMode().String())
	}
	b.core.Run(ctx, b.Reap)
	return b, nil
}

// diskMode is what holds new containers to their disk limit.
func (b *Backend) diskMode() diskMode { return diskMode(b.disk.Load()) }

// newClient connects to the engine named by the environment and checks
// that it answers.
func newClient(ctx context.Context) (*client.Client, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker: no Docker engine reachable (DOCKER_HOST=%s): fix DOCKER_HOST, run 'make docker' or start dockerd: %w: %v", os.Getenv("DOCKER_HOST"), sandbox.ErrUnavailable, err)
	}
	pctx, cancel := context.WithTimeout(ctx, hostside.PingTimeout)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		cli.Close()
		return nil, unavailable(cli, err)
	}
	return cli, nil
}

func unavailable(cli *client.Client, err error) error {
	return fmt.Errorf("docker: no Docker engine reachable (DOCKER_HOST=%s): run 'make docker' or start dockerd: %w: %v", cli.DaemonHost(), sandbox.ErrUnavailable, err)
}

// engineErr maps an engine error to the sandbox sentinels.
func (b *Backend) engineErr(op string, err error) error {
	return fmt.Errorf("docker: %s: %w", op, mapErr(b.cli, err))
}

// mapErr is err, or the sentence saying the engine is gone when it is.
func mapErr(cli *client.Client, err error) error {
	if client.IsErrConnectionFailed(err) {
		return unavailable(cli, err)
	}
	return err
}

// Stats reports the backend's counters.
func (b *Backend) Stats() sandbox.Stats {
	return b.core.Stats()
}

// Reap removes the containers and host directories of rollcage processes
// that are gone (see the package Reap). New runs it once.
func (b *Backend) Reap(ctx context.Context) (int, error) {
	return Reap(ctx, b.cli, b.cfg.StateDir, b.log)
}

// Create starts a sandbox for spec: a warm container when the pool has one
// that fits, else a new one once admission allows.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	c, err := b.core.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// resolveSpec validates spec and fills its defaults.
func (b *Backend) resolveSpec(spec sandbox.Spec) (sandbox.Spec, error) {
	return b.core.ResolveSpec(spec)
}

// ops are the Docker side of the backend's hostside.Core.
type ops struct{ b *Backend }

// Create creates (but does not start) a container for req.
func (e ops) Create(ctx context.Context, req hostside.CreateRequest) (*container, error) {
	b, spec := e.b, req.Spec
	name := req.Box.Name()
	p := createParams{
		Name:        name,
		Image:       spec.Image,
		Labels:      req.Labels,
		RunDir:      req.Box.RunDir,
		AgentBinary: b.cfg.AgentBinary,
		ProxySocket: spec.ProxySocket,
		Limits:      spec.Limits,
		Lease:       spec.Lease,
	}
	if uid := os.Geteuid(); uid != 0 {
		p.SocketOwner = strconv.Itoa(uid) + ":" + strconv.Itoa(os.Getegid())
	}
	if spec.User == sandbox.UserRoot {
		if b.remap == nil {
			return nil, fmt.Errorf("docker: create %s: a root sandbox needs an engine that remaps users (dockerd --userns-remap), else its root is the host's: point DOCKER_HOST at one (scripts/rollcage-engine.sh up --userns-remap): %w", spec.EpisodeID, sandbox.ErrUnsupported)
		}
		p.Root = true
	}
	if err := b.remap.own(req.Box.RunDir, spec, p.Root); err != nil {
		return nil, fmt.Errorf("docker: create %s: %w", spec.EpisodeID, err)
	}
	mode := b.diskMode()
	if mode == diskStorageOpt {
		p.StorageSize = spec.Limits.DiskBytes
	}
	cfg, host := containerConfig(p)
	resp, err := b.cli.ContainerCreate(ctx, cfg, host, nil, nil, name)
	if err != nil && p.StorageSize > 0 && isStorageOptError(err) {
		b.log.Warn("the engine refuses --storage-opt size; "+watchdogWarning, "err", err)
		b.disk.CompareAndSwap(int32(diskStorageOpt), int32(diskWatchdog))
		mode, p.StorageSize = diskWatchdog, 0
		cfg, host = containerConfig(p)
		resp, err = b.cli.ContainerCreate(ctx, cfg, host, nil, nil, name)
	}
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("docker: create %s: image %s not found locally: run 'make images': %w", spec.EpisodeID, spec.Image, sandbox.ErrImageMissing)
		}
		return nil, b.engineErr("create "+spec.EpisodeID, err)
	}
	c := &container{Box: req.Box, b: b, id: resp.ID, kernelLimit: p.StorageSize}
	if mode == diskQgroup && spec.Limits.DiskBytes > 0 {
		err := b.limitQgroup(resp.ID, spec.Limits.DiskBytes)
		if err != nil {
			if rerr := removeContainer(context.WithoutCancel(ctx), b.cli, resp.ID); rerr != nil {
				c.Logger().Warn("removing the container whose disk limit failed", "err", rerr)
			}
			return nil, fmt.Errorf("docker: create %s: disk limit: %w", spec.EpisodeID, err)
		}
		c.kernelLimit = spec.Limits.DiskBytes
	}
	return c, nil
}

// Start starts a created container, connects to its agent and, where the
// engine does not enforce the disk limit, starts the watchdog.
func (e ops) Start(ctx context.Context, c *container, spec sandbox.Spec) error {
	if err := e.b.cli.ContainerStart(ctx, c.id, dcontainer.StartOptions{}); err != nil {
		return e.b.engineErr("start "+c.Name(), err)
	}
	c.Phases.Started = time.Since(c.Phases.Start)
	if err := c.connect(ctx, spec.Lease); err != nil {
		return err
	}
	c.Phases.Connected = time.Since(c.Phases.Start)
	if c.kernelLimit == 0 && spec.Limits.DiskBytes > 0 {
		return c.watchDisk(ctx, spec.Limits.DiskBytes)
	}
	if c.kernelLimit > 0 {
		c.SetDiskGuard(sandbox.DiskKernel)
	}
	return nil
}

// limitQgroup holds container id to limit bytes by its btrfs subvolume's
// quota group.
func (b *Backend) limitQgroup(id string, limit int64) error {
	dir, err := subvolume(b.rootDir, id)
	if err != nil {
		return err
	}
	return hostside.LimitQgroup(dir, 0, limit)
}

// HandOut renames a warm container for the episode (labels cannot be
// added to a running container, so it keeps the pool's).
func (e ops) HandOut(ctx context.Context, c *container, spec sandbox.Spec) string {
	name := containerName(spec.EpisodeID, randomToken())
	if err := e.b.cli.ContainerRename(ctx, c.id, name); err != nil {
		// The name is for humans; the episode runs regardless.
		c.Logger().Warn("rename warm container", "container", c.Name(), "err", err)
		return c.Name()
	}
	return name
}

// Remove removes the container, forced, with its anonymous volumes.
func (e ops) Remove(ctx context.Context, c *container) error {
	if c.id == "" {
		return nil
	}
	if err := removeContainer(ctx, e.b.cli, c.id); err != nil {
		return e.b.engineErr("remove "+c.Name(), err)
	}
	return nil
}

// removeContainer removes a container, forced, with its anonymous
// volumes; one already gone or being removed is no error. A container
// whose btrfs layer holds a path past PATH_MAX (a policy can make one),
// which the engine's btrfs driver fails to walk, has that layer emptied
// here and is removed again.
func removeContainer(ctx context.Context, cli client.APIClient, id string) error {
	err := cli.ContainerRemove(ctx, id, dcontainer.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && isLongPathRemoval(err) {
		if eerr := emptyLayer(ctx, cli, id); eerr != nil {
			return fmt.Errorf("%w (emptying its layer: %v)", err, eerr)
		}
		err = cli.ContainerRemove(ctx, id, dcontainer.RemoveOptions{Force: true, RemoveVolumes: true})
	}
	if err != nil && !cerrdefs.IsNotFound(err) && !isRemovalInProgress(err) {
		return err
	}
	return nil
}

// Close stops the pool and closes every sandbox of the backend, then the
// engine client. Idempotent.
func (b *Backend) Close(ctx context.Context) error {
	return b.core.Shutdown(ctx, b.cli.Close)
}
