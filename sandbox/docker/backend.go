package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"golang.org/x/sync/singleflight"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// Timeouts of operations the caller's ctx does not bound.
const (
	pingTimeout     = 5 * time.Second
	connectTimeout  = 5 * time.Second
	teardownTimeout = 30 * time.Second
	shutdownTimeout = 2 * time.Second
)

// Backend creates sandboxes as Docker containers. It is safe for concurrent
// use; Close drains the warm pool and closes every sandbox it created.
type Backend struct {
	cfg  Config
	cli  *client.Client
	log  *slog.Logger
	self hostside.Owner

	pool  *hostside.Pool[*container]
	slots *hostside.Slots[*container] // admission, MaxAlive, the live set

	stopRefill context.CancelFunc
	refillDone chan struct{}

	sealing singleflight.Group // one seal per key at a time
	sealed  sync.Map           // key → sandbox.Sealed already read

	// storageOpt: the engine enforces --storage-opt size= (decided once
	// from docker info, dropped at the first create that refuses it); when
	// false, each container's disk limit is a host-side watchdog.
	storageOpt atomic.Bool
}

var _ sandbox.Backend = (*Backend)(nil)

// Stats is a point-in-time view of a Backend, for metrics.
type Stats struct {
	Creating int // containers being created and started now
	Alive    int // containers alive, warm ones included
	Warm     int // warm containers ready to hand out
}

// New connects to the Docker engine of the environment (DOCKER_HOST and
// friends), removes what dead rollcage processes left behind and starts
// warming the pool.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cli, err := newClient(ctx)
	if err != nil {
		return nil, err
	}
	self, err := hostside.SelfOwner()
	if err != nil {
		cli.Close()
		return nil, err
	}
	if err := os.MkdirAll(cfg.StateDir, 0o711); err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker: state dir %s: %w", cfg.StateDir, err)
	}
	b := &Backend{
		cfg:  cfg,
		cli:  cli,
		log:  cfg.Logger,
		self: self,
	}
	if info, err := cli.Info(ctx); err == nil {
		b.storageOpt.Store(storageOptSupported(info))
	}
	if n, err := Reap(ctx, cli, cfg.StateDir, b.log); err != nil {
		b.log.Warn("reap leftovers", "err", err)
	} else if n > 0 {
		b.log.Info("reaped leftovers of dead rollcage processes", "removed", n)
	}
	if os.Geteuid() == 1000 {
		// The run dirs are 0700 and owned by us; a sandbox user with our
		// uid would own them too and could drive its own agent.
		b.log.Warn("rollcage runs as uid 1000, the sandbox user's uid: sandboxed commands could reach the agent socket; run as another user")
	}
	b.pool = hostside.NewPool(cfg.Pool, func(c *container) string { return c.image })
	b.slots = hostside.NewSlots("docker", cfg.MaxCreating, cfg.MaxAlive, b.pool)
	refillCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	b.stopRefill = stop
	b.refillDone = make(chan struct{})
	go func() {
		defer close(b.refillDone)
		b.refill(refillCtx)
	}()
	return b, nil
}

// newClient connects to the engine named by the environment and checks
// that it answers.
func newClient(ctx context.Context) (*client.Client, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker: no Docker engine reachable (DOCKER_HOST=%s): fix DOCKER_HOST, run 'make docker' or start dockerd: %w: %v", os.Getenv("DOCKER_HOST"), sandbox.ErrUnavailable, err)
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
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
	if client.IsErrConnectionFailed(err) {
		return fmt.Errorf("docker: %s: %w", op, unavailable(b.cli, err))
	}
	return fmt.Errorf("docker: %s: %w", op, err)
}

// Stats reports the backend's counters.
func (b *Backend) Stats() Stats {
	creating, alive := b.slots.Counts()
	return Stats{
		Creating: creating,
		Alive:    alive,
		Warm:     b.pool.Size(),
	}
}

// Reap removes the containers and host directories of rollcage processes
// that are gone (see the package Reap). New runs it once.
func (b *Backend) Reap(ctx context.Context) (int, error) {
	return Reap(ctx, b.cli, b.cfg.StateDir, b.log)
}

// Create starts a sandbox for spec: a warm container when the pool has one
// that fits, else a new one once admission allows.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := b.slots.CheckOpen("create"); err != nil {
		return nil, err
	}
	spec, err := b.resolveSpec(spec)
	if err != nil {
		return nil, err
	}
	log := b.log.With("episode_id", spec.EpisodeID)
	if b.poolable(spec) {
		if c := b.takeWarm(ctx, spec, log); c != nil {
			return c, nil
		}
	}
	if err := b.slots.AcquireAlive(ctx, spec.EpisodeID); err != nil {
		return nil, err
	}
	c, err := b.start(ctx, spec, false)
	if err != nil {
		b.slots.ReleaseAlive()
		return nil, err
	}
	if err := c.configure(ctx, spec); err != nil {
		c.Close(ctx)
		return nil, err
	}
	log.Info("sandbox created", "container", c.name, "id", c.shortID())
	return c, nil
}

// resolveSpec validates spec and fills its defaults.
func (b *Backend) resolveSpec(spec sandbox.Spec) (sandbox.Spec, error) {
	spec, err := hostside.ResolveSpec(spec, b.cfg.DefaultLimits, b.cfg.Lease)
	if err != nil {
		return spec, fmt.Errorf("docker: create: %w", err)
	}
	return spec, nil
}

// poolable: a warm container was created with the backend's defaults, and
// labels cannot be added to a running container, so only a spec that asks
// for nothing else can take one.
func (b *Backend) poolable(spec sandbox.Spec) bool {
	return spec.Network == sandbox.NetworkNone && len(spec.Labels) == 0 &&
		spec.Lease == b.cfg.Lease && spec.Limits == b.cfg.DefaultLimits
}

// start creates, starts and connects a container for spec, inside the
// admission bound. The caller holds an alive slot.
func (b *Backend) start(ctx context.Context, spec sandbox.Spec, warm bool) (*container, error) {
	release, err := b.slots.Admit(ctx, spec.EpisodeID)
	if err != nil {
		return nil, err
	}
	defer release()
	c, p, err := b.createContainer(ctx, spec, warm)
	if err != nil {
		return nil, err
	}
	if err := b.launch(ctx, c, spec, p); err != nil {
		return nil, err
	}
	return c, nil
}

// createContainer creates (but does not start) a container for spec and
// its run dir.
func (b *Backend) createContainer(ctx context.Context, spec sandbox.Spec, warm bool) (*container, createParams, error) {
	token := randomToken()
	runDir := filepath.Join(b.cfg.StateDir, b.self.DirName(token))
	if err := os.Mkdir(runDir, 0o700); err != nil {
		return nil, createParams{}, fmt.Errorf("docker: create %s: run dir: %w", spec.EpisodeID, err)
	}
	labels := make(map[string]string, len(spec.Labels)+8)
	maps.Copy(labels, spec.Labels) // ours win: the reaper depends on them
	maps.Copy(labels, b.self.Labels())
	labels[LabelRunDir] = filepath.Base(runDir)
	name := containerName(spec.EpisodeID, token)
	if warm {
		labels[LabelPool] = "1"
		labels[LabelEpisode] = ""
		name = "rollcage-pool-" + token
	} else {
		labels[LabelEpisode] = spec.EpisodeID
	}
	p := createParams{
		Name:        name,
		Image:       spec.Image,
		Labels:      labels,
		RunDir:      runDir,
		AgentBinary: b.cfg.AgentBinary,
		ProxySocket: spec.ProxySocket,
		Limits:      spec.Limits,
		Lease:       spec.Lease,
	}
	if uid := os.Geteuid(); uid != 0 {
		p.SocketOwner = strconv.Itoa(uid) + ":" + strconv.Itoa(os.Getegid())
	}
	if b.storageOpt.Load() {
		p.StorageSize = spec.Limits.DiskBytes
	}
	cfg, host := containerConfig(p)
	c := &container{
		b:      b,
		name:   name,
		image:  spec.Image,
		runDir: runDir,
		log:    b.log.With("episode_id", spec.EpisodeID, "container", name),
	}
	c.Conn = hostside.NewConn(c.nameNow)
	resp, err := b.cli.ContainerCreate(ctx, cfg, host, nil, nil, name)
	if err != nil && p.StorageSize > 0 && isStorageOptError(err) {
		b.log.Info("the engine refuses --storage-opt size; disk limits fall back to the watchdog", "err", err)
		b.storageOpt.Store(false)
		p.StorageSize = 0
		cfg, host = containerConfig(p)
		resp, err = b.cli.ContainerCreate(ctx, cfg, host, nil, nil, name)
	}
	if err != nil {
		os.RemoveAll(runDir)
		if cerrdefs.IsNotFound(err) {
			return nil, p, fmt.Errorf("docker: create %s: image %s not found locally: run 'make images': %w", spec.EpisodeID, spec.Image, sandbox.ErrImageMissing)
		}
		return nil, p, b.engineErr("create "+spec.EpisodeID, err)
	}
	c.id = resp.ID
	return c, p, nil
}

// launch starts a created container, connects to its agent and adds it to
// the live set. On error c is torn down.
func (b *Backend) launch(ctx context.Context, c *container, spec sandbox.Spec, p createParams) error {
	if err := b.cli.ContainerStart(ctx, c.id, dcontainer.StartOptions{}); err != nil {
		c.teardown(ctx)
		return b.engineErr("start "+c.nameNow(), err)
	}
	if err := c.connect(ctx, spec.Lease); err != nil {
		c.teardown(ctx)
		return err
	}
	if p.StorageSize == 0 && spec.Limits.DiskBytes > 0 {
		if err := c.watchDisk(ctx, spec.Limits.DiskBytes); err != nil {
			c.teardown(ctx)
			return err
		}
	}
	if err := b.slots.Add(c, spec.EpisodeID); err != nil {
		c.teardown(ctx)
		return err
	}
	return nil
}

// Close stops the pool and closes every sandbox of the backend, then the
// engine client. Idempotent.
func (b *Backend) Close(ctx context.Context) error {
	if !b.slots.MarkClosed() {
		return nil
	}
	b.stopRefill()
	<-b.refillDone
	return errors.Join(b.slots.CloseAll(ctx), b.cli.Close())
}
