package containerd

import "github.com/rollcage/rollcage/sandbox/host"

// Defaults of Config's own fields (host's are host.Default*).
const (
	DefaultNamespace   = "rollcage"
	DefaultSnapshotter = "overlayfs"
)

// AddressEnv names the environment variable with containerd's socket.
const AddressEnv = "CONTAINERD_ADDRESS"

// SnapshotterEnv names the environment variable with the snapshotter, as
// for ctr.
const SnapshotterEnv = "CONTAINERD_SNAPSHOTTER"

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
	// watchdog and Fork need its upper directory), or be "btrfs" on a
	// btrfs filesystem with quotas on, whose quota group per snapshot holds
	// the disk limit in the kernel (Fork is then ErrUnsupported).
	// Empty: $CONTAINERD_SNAPSHOTTER, else overlayfs.
	Snapshotter string
	// ImportFromDocker, when true, imports an image missing from the
	// namespace (or rebuilt since) from the Docker engine named by
	// DOCKER_HOST. Nothing is ever pulled.
	ImportFromDocker bool
	// Config is what every backend has (the agent binary, the state
	// directory, leases, admission, the warm pool, default limits, the
	// logger), as in Docker's backend.
	host.Config
}

// Validate reports a configuration that cannot work, in one line saying
// what to change.
func (c Config) Validate() error {
	return c.Config.Check("containerd", host.DefaultMaxCreating)
}
