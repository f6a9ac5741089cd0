package docker

import (
	"log/slog"
	"time"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// Defaults of Config and sandbox.Limits.
const (
	DefaultLease       = hostside.DefaultLease
	DefaultMaxCreating = hostside.DefaultMaxCreating
	DefaultMaxAlive    = hostside.DefaultMaxAlive
	DefaultMemoryBytes = hostside.DefaultMemoryBytes
	DefaultCPUs        = hostside.DefaultCPUs
	DefaultPids        = hostside.DefaultPids
)

// AgentBinEnv names the environment variable that locates the static
// rollcage-agent binary when Config.AgentBinary is empty.
const AgentBinEnv = hostside.AgentBinEnv

// Config configures a Backend. The zero value works on a host where the
// agent binary sits next to the executable or is named by $ROLLCAGE_AGENT_BIN.
//
// Its fields are hostside.Config's, in the same order, so that one
// converts into the other: a field added here goes there too.
type Config struct {
	// AgentBinary is the host path of the static rollcage-agent, bind-mounted
	// read-only into every container. Empty: $ROLLCAGE_AGENT_BIN, else
	// rollcage-agent next to os.Executable().
	AgentBinary string
	// StateDir holds one host directory per sandbox (the agent's socket
	// lives there). Empty: /var/lib/rollcage/run when running as root, else
	// $XDG_RUNTIME_DIR/rollcage, else os.TempDir()/rollcage-<uid>.
	StateDir string
	// Lease is how long an agent keeps its sandbox without hearing from
	// the host; the client pings every Lease/3. Zero: 60s.
	Lease time.Duration
	// MaxCreating bounds the containers being created and started at once,
	// so a burst of episode starts queues instead of stampeding dockerd.
	// Zero: 4.
	MaxCreating int
	// MaxAlive bounds the containers alive at once (warm ones included);
	// Create blocks, honouring its ctx, while at the bound. Zero: 256.
	MaxAlive int
	// Pool is the number of warm containers kept per image. Missing or 0:
	// no pool for that image.
	Pool map[string]int
	// DefaultLimits fill the zero fields of a Spec's Limits. Zero fields
	// here take 2 GiB, 1 CPU, 512 pids.
	DefaultLimits sandbox.Limits
	// Logger receives lifecycle logs. Nil: discard.
	Logger *slog.Logger
}

// Validate reports a configuration that cannot work, in one line saying
// what to change.
func (c Config) Validate() error {
	return hostside.ValidateConfig("docker config", c.Lease, c.MaxCreating, c.MaxAlive, c.Pool, c.DefaultLimits)
}

// resolve validates c and returns it with every zero field resolved.
func (c Config) resolve() (Config, error) {
	r, err := hostside.Config(c).Resolve("docker")
	return Config(r), err
}
