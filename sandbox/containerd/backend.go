package containerd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"

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

// Sockets tried, in order, when neither Config.Address nor
// $CONTAINERD_ADDRESS names one.
var defaultAddresses = []string{"/run/containerd/containerd.sock", "/var/run/docker/containerd/containerd.sock"}

// runcShim is the shim every container runs under.
const runcShim = "io.containerd.runc.v2"

// Backend creates sandboxes as containerd containers. It is safe for
// concurrent use; Close drains the warm pool and closes every sandbox it
// created.
type Backend struct {
	cfg  Config
	cli  *client.Client
	addr string
	log  *slog.Logger
	self hostside.Owner

	pool   *hostside.Pool[*container]
	slots  *hostside.Slots[*container] // admission, MaxAlive, the live set
	images imageCache

	stopRefill context.CancelFunc
	refillDone chan struct{}
}

var _ sandbox.Backend = (*Backend)(nil)

// Stats is a point-in-time view of a Backend, for metrics.
type Stats struct {
	Creating int // containers being created and started now
	Alive    int // containers alive, warm ones included
	Warm     int // warm containers ready to hand out
}

// New connects to containerd, removes what dead rollcage processes left
// in its namespace and starts warming the pool.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("containerd: the backend needs root (containerd's socket, the snapshot directories the disk watchdog and fork read, the sandbox's network namespace): run rollcage as root or use --backend docker: %w", sandbox.ErrUnavailable)
	}
	cli, addr, err := dial(ctx, cfg.Address, cfg.Namespace)
	if err != nil {
		return nil, err
	}
	self, err := hostside.SelfOwner()
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("containerd: %w", err)
	}
	if err := os.MkdirAll(cfg.StateDir, 0o711); err != nil {
		cli.Close()
		return nil, fmt.Errorf("containerd: state dir %s: %w", cfg.StateDir, err)
	}
	b := &Backend{
		cfg:  cfg,
		cli:  cli,
		addr: addr,
		log:  cfg.Logger,
		self: self,
	}
	if n, err := b.Reap(ctx); err != nil {
		b.log.Warn("reap leftovers", "err", err)
	} else if n > 0 {
		b.log.Info("reaped leftovers of dead rollcage processes", "removed", n)
	}
	b.pool = hostside.NewPool(cfg.Pool, func(c *container) string { return c.image })
	b.slots = hostside.NewSlots("containerd", cfg.MaxCreating, cfg.MaxAlive, b.pool)
	refillCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	b.stopRefill = stop
	b.refillDone = make(chan struct{})
	go func() {
		defer close(b.refillDone)
		b.refill(refillCtx)
	}()
	return b, nil
}

// dial connects to the first containerd that answers among the addresses
// to try, and returns its client and address.
func dial(ctx context.Context, addr, ns string) (*client.Client, string, error) {
	addrs := defaultAddresses
	if addr == "" {
		addr = os.Getenv(AddressEnv)
	}
	if addr != "" {
		addrs = []string{addr}
	}
	var errs []error
	for _, a := range addrs {
		if _, err := os.Stat(a); err != nil {
			errs = append(errs, err)
			continue
		}
		cli, err := client.New(a, client.WithDefaultNamespace(ns), client.WithTimeout(pingTimeout))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a, err))
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, pingTimeout)
		_, err = cli.Version(pctx)
		cancel()
		if err != nil {
			cli.Close()
			errs = append(errs, fmt.Errorf("%s: %w", a, err))
			continue
		}
		return cli, a, nil
	}
	return nil, "", fmt.Errorf("containerd: no containerd answers (tried %v): run 'make containerd' or start containerd, or set %s: %w: %v", addrs, AddressEnv, sandbox.ErrUnavailable, errors.Join(errs...))
}

// ctx puts the backend's namespace on ctx.
func (b *Backend) ctx(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, b.cfg.Namespace)
}

// Address is the socket of the containerd the backend talks to.
func (b *Backend) Address() string { return b.addr }

// Stats reports the backend's counters.
func (b *Backend) Stats() Stats {
	creating, alive := b.slots.Counts()
	return Stats{Creating: creating, Alive: alive, Warm: b.pool.Size()}
}

// Create starts a sandbox for spec: a warm container when the pool has one
// that fits, else a new one once admission allows.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := b.slots.CheckOpen("create"); err != nil {
		return nil, err
	}
	if spec.Image == "" {
		return nil, errors.New("containerd: create: spec has no image: set Spec.Image (e.g. rollcage/base:latest)")
	}
	spec, err := hostside.ResolveSpec(spec, b.cfg.DefaultLimits, b.cfg.Lease)
	if err != nil {
		return nil, fmt.Errorf("containerd: create: %w", err)
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
	c, err := b.start(ctx, spec, false, nil)
	if err != nil {
		b.slots.ReleaseAlive()
		return nil, err
	}
	if err := c.configure(ctx, spec); err != nil {
		c.Close(ctx)
		return nil, err
	}
	log.Info("sandbox created", append(c.phases.attrs(), "container", c.id)...)
	return c, nil
}

// poolable: a warm container was created with the backend's defaults, and
// a running container's labels are not the episode's, so only a spec that
// asks for nothing else can take one.
func (b *Backend) poolable(spec sandbox.Spec) bool {
	return spec.Network == sandbox.NetworkNone && len(spec.Labels) == 0 &&
		spec.Lease == b.cfg.Lease && spec.Limits == b.cfg.DefaultLimits
}

// start creates, starts and connects a container for spec, inside the
// admission bound; its root file system is a new snapshot of the image,
// or of from when a fork gives one. The caller holds an alive slot.
func (b *Backend) start(ctx context.Context, spec sandbox.Spec, warm bool, from *forkBase) (*container, error) {
	t0 := time.Now()
	release, err := b.slots.Admit(ctx, spec.EpisodeID)
	if err != nil {
		return nil, err
	}
	defer release()
	admitted := time.Since(t0)
	c, err := b.createContainer(ctx, spec, warm, from)
	if err != nil {
		return nil, err
	}
	c.phases = phases{start: t0, admitted: admitted, created: time.Since(t0)}
	if err := b.launch(ctx, c, spec); err != nil {
		return nil, err
	}
	return c, nil
}

// labels are the container's labels: the spec's, then ours (the reaper
// depends on them, so they win).
func (b *Backend) labels(spec sandbox.Spec, runDir string, warm bool) map[string]string {
	labels := make(map[string]string, len(spec.Labels)+8)
	maps.Copy(labels, spec.Labels)
	maps.Copy(labels, b.self.Labels())
	labels[hostside.LabelRunDir] = filepath.Base(runDir)
	if warm {
		labels[hostside.LabelPool] = "1"
		labels[hostside.LabelEpisode] = ""
	} else {
		labels[hostside.LabelEpisode] = spec.EpisodeID
	}
	return labels
}

// socketOwner is "uid:gid" of this process for the agent's socket, or ""
// as root.
func socketOwner() string {
	if uid := os.Geteuid(); uid != 0 {
		return strconv.Itoa(uid) + ":" + strconv.Itoa(os.Getegid())
	}
	return ""
}

// launch starts a created container's task, brings its loopback up,
// connects to its agent, starts the disk watchdog and adds it to the live
// set. On error c is torn down.
func (b *Backend) launch(ctx context.Context, c *container, spec sandbox.Spec) error {
	if err := c.startTask(ctx); err != nil {
		c.teardown(ctx)
		return err
	}
	c.phases.started = time.Since(c.phases.start)
	if err := c.connect(ctx, spec.Lease); err != nil {
		c.teardown(ctx)
		return err
	}
	c.phases.connected = time.Since(c.phases.start)
	if spec.Limits.DiskBytes > 0 {
		c.watchDisk(spec.Limits.DiskBytes)
	}
	if err := b.slots.Add(c, spec.EpisodeID); err != nil {
		c.teardown(ctx)
		return err
	}
	return nil
}

// Close stops the pool and closes every sandbox of the backend, then the
// client. Idempotent.
func (b *Backend) Close(ctx context.Context) error {
	if !b.slots.MarkClosed() {
		return nil
	}
	b.stopRefill()
	<-b.refillDone
	return errors.Join(b.slots.CloseAll(ctx), b.cli.Close())
}
