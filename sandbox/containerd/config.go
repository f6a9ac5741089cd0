package containerd

import (
	"log/slog"
	"time"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// Defaults of Config and sandbox.Limits (Docker's backend has the same).
const (
	DefaultNamespace   = "rollcage"
	DefaultSnapshotter = "overlayfs"
	DefaultLease       = hostside.DefaultLease
	DefaultMaxCreating = hostside.DefaultMaxCreating
	DefaultMaxAlive    = hostside.DefaultMaxAlive
	DefaultMemoryBytes = hostside.DefaultMemoryBytes
	DefaultCPUs        = hostside.DefaultCPUs
	DefaultPids        = hostside.DefaultPids
	DefaultDiskBytes   = hostside.DefaultDiskBytes
)

// AddressEnv names the environment variable with containerd's socket.
const AddressEnv = "CONTAINERD_ADDRESS"

// Config configures a Backend. The zero value works on a host where a
// containerd answers at one of the usual sockets and the agent binary
// sits next to the executable or is named by $ROLLCAGE_AGENT_BIN.
type Config struct {
	// Address is containerd's socket. Empty: $CONTAINERD_ADDRESS, else
	// the first of /run/containerd/containerd.sock and
	// /var/run/docker/containerd/containerd.sock that answers.
	Address string
	// Namespace is containerd's namespace for rollcage's images,
	// containers and snapshots. Empty: "rollcage".
	Namespace string
	// Snapshotter must keep a writable layer the host can read (the disk
	// watchdog and Fork need its upper directory). Empty: overlayfs.
	Snapshotter string
	// ImportFromDocker, when true, imports an image missing from the
	// namespace (or rebuilt since) from the Docker engine named by
	// DOCKER_HOST. Nothing is ever pulled.
	ImportFromDocker bool
	// AgentBinary, StateDir, Lease, MaxCreating, MaxAlive, Pool,
	// DefaultLimits and Logger are as in Docker's backend.
	AgentBinary   string
	StateDir      string
	Lease         time.Duration
	MaxCreating   int
	MaxAlive      int
	Pool          map[string]int
	DefaultLimits sandbox.Limits
	Logger        *slog.Logger
}

// Validate reports a configuration that cannot work, in one line saying
// what to change.
func (c Config) Validate() error {
	return hostside.ValidateConfig("containerd config", c.Lease, c.MaxCreating, c.MaxAlive, c.Pool, c.DefaultLimits)
}

// shared is the part of c every container backend has.
func (c Config) shared() hostside.Config {
	return hostside.Config{AgentBinary: c.AgentBinary, StateDir: c.StateDir, Lease: c.Lease, MaxCreating: c.MaxCreating,
		MaxAlive: c.MaxAlive, Pool: c.Pool, DefaultLimits: c.DefaultLimits, Logger: c.Logger}
}
