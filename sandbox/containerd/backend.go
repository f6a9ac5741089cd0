package containerd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// teardownTimeout bounds what must finish when the caller's ctx has
// ended (a frozen parent's thaw, a removal).
const teardownTimeout = hostside.TeardownTimeout

// Sockets tried, in order, when neither Config.Address nor
// $CONTAINERD_ADDRESS names one.
var defaultAddresses = []string{"/run/containerd/containerd.sock", "/var/run/docker/containerd/containerd.sock"}

// runcShim is the shim every container runs under.
const runcShim = "io.containerd.runc.v2"

// Backend creates sandboxes as containerd containers. It is safe for
// concurrent use; Close drains the warm pool and closes every sandbox it
// created.
type Backend struct {
	cfg    Config // its own fields resolved; the shared ones are core.Cfg
	cli    *client.Client
	addr   string
	log    *slog.Logger
	core   *hostside.Core[*container] // admission, pool, live set, run dirs
	images imageCache
	// simpleOnce checks once, at the first btrfs limit, that the
	// filesystem has simple quotas (a warning when not).
	simpleOnce sync.Once
}

var _ sandbox.Backend = (*Backend)(nil)

// New connects to containerd, removes what dead rollcage processes left
// in its namespace and starts warming the pool.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	shared, err := cfg.Config.Resolve("containerd")
	if err != nil {
		return nil, err
	}
	cfg.Namespace = cmp.Or(cfg.Namespace, DefaultNamespace)
	cfg.Snapshotter = cmp.Or(cfg.Snapshotter, os.Getenv(SnapshotterEnv), DefaultSnapshotter)
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("containerd: the backend needs root (containerd's socket, the snapshot directories the disk watchdog and fork read, the sandbox's network namespace): run rollcage as root or use --backend docker: %w", sandbox.ErrUnavailable)
	}
	cli, addr, err := dial(ctx, cfg.Address, cfg.Namespace)
	if err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, cli: cli, addr: addr, log: shared.Logger}
	b.core, err = hostside.NewCore("containerd", shared, ops{b}, (*container).box, containerID)
	if err != nil {
		cli.Close()
		return nil, err
	}
	if cfg.Snapshotter == "btrfs" {
		// The filesystem is checked at the first create, which finds it.
		b.log.Info("disk limits: enforced by the kernel", "by", "btrfs quota group")
	} else {
		b.log.Warn("disk limits: the " + cfg.Snapshotter + " snapshotter does not enforce them, so a host-side watchdog stands in, which unlinked-but-open files, fallocate, paths past PATH_MAX and floods of empty files get past; for limits the kernel enforces run 'make quota-engine' and eval \"$(scripts/rollcage-engine.sh env)\"")
	}
	b.core.Run(ctx, b.Reap)
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
		cli, err := client.New(a, client.WithDefaultNamespace(ns), client.WithTimeout(hostside.PingTimeout))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a, err))
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, hostside.PingTimeout)
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
func (b *Backend) Stats() sandbox.Stats {
	return b.core.Stats()
}

// Create starts a sandbox for spec: a warm container when the pool has one
// that fits, else a new one once admission allows.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if spec.User == sandbox.UserRoot {
		return nil, fmt.Errorf("containerd: create %s: root sandboxes need remapped snapshots (a user namespace per container), which this backend does not set up: use --backend docker on an engine with --userns-remap: %w", spec.EpisodeID, sandbox.ErrUnsupported)
	}
	c, err := b.core.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// socketOwner is "uid:gid" of this process for the agent's socket, or ""
// as root.
func socketOwner() string {
	if uid := os.Geteuid(); uid != 0 {
		return strconv.Itoa(uid) + ":" + strconv.Itoa(os.Getegid())
	}
	return ""
}

// Close stops the pool and closes every sandbox of the backend, then the
// client. Idempotent.
func (b *Backend) Close(ctx context.Context) error {
	return b.core.Shutdown(ctx, b.cli.Close)
}
