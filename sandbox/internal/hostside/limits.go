package hostside

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// AgentBinEnv names the environment variable that locates the static
// rollcage-agent binary when a backend's configuration names none.
const AgentBinEnv = "ROLLCAGE_AGENT_BIN"

// FindAgent resolves the agent binary a backend mounts into its
// sandboxes: path, else $ROLLCAGE_AGENT_BIN, else rollcage-agent next to
// os.Executable(). The error wraps sandbox.ErrUnavailable and says how to
// build it.
func FindAgent(path string) (string, error) {
	if path == "" {
		path = os.Getenv(AgentBinEnv)
	}
	if path == "" {
		if exe, err := os.Executable(); err == nil {
			path = filepath.Join(filepath.Dir(exe), "rollcage-agent")
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("agent binary %q: %w", path, err)
	}
	if st, err := os.Stat(abs); err != nil || !st.Mode().IsRegular() {
		return "", fmt.Errorf("agent binary %s not found: run 'make build' or set %s: %w", abs, AgentBinEnv, sandbox.ErrUnavailable)
	}
	return abs, nil
}

// AgentPids is the room the backends add to a sandbox's pids limit for the
// agent itself: its reaper and server with their runtime threads, the
// spare threads it reserves at start and the threads it reads and writes
// files on (about 50 at the default limit). The policy cannot keep the
// agent from serving by filling the limit, because the agent needs no new
// thread while it serves (see package agent, threads.go); the room only
// keeps the policy's share what Limits.Pids says.
const AgentPids = 64

// ValidateLimits reports a limit that cannot work, saying what to change.
func ValidateLimits(l sandbox.Limits) error {
	switch {
	case l.MemoryBytes < 0:
		return fmt.Errorf("MemoryBytes %d is negative: use 0 for the default", l.MemoryBytes)
	case l.MemoryBytes > 0 && l.MemoryBytes < 6<<20:
		return fmt.Errorf("MemoryBytes %d is below the 6 MiB minimum: raise it", l.MemoryBytes)
	case l.CPUs < 0:
		return fmt.Errorf("CPUs %v is negative: use 0 for the default", l.CPUs)
	case l.Pids < 0:
		return fmt.Errorf("Limits.Pids %d is negative: use 0 for the default", l.Pids)
	case l.Pids > 0 && l.Pids < 8:
		return fmt.Errorf("Limits.Pids %d leaves no room for the agent and a shell: use at least 8", l.Pids)
	case l.DiskBytes < 0:
		return fmt.Errorf("DiskBytes %d is negative: use 0 for the default (10 GiB)", l.DiskBytes)
	case l.DiskBytes > 0 && l.DiskBytes < 16<<20:
		return fmt.Errorf("DiskBytes %d is below 16 MiB, too little for a shell to work in: raise it", l.DiskBytes)
	}
	return nil
}

// ResolveLimits fills l's zero fields from def.
func ResolveLimits(l, def sandbox.Limits) sandbox.Limits {
	l.MemoryBytes = cmp.Or(l.MemoryBytes, def.MemoryBytes)
	l.CPUs = cmp.Or(l.CPUs, def.CPUs)
	l.Pids = cmp.Or(l.Pids, def.Pids)
	l.DiskBytes = cmp.Or(l.DiskBytes, def.DiskBytes)
	return l
}

// Defaults of a container backend's configuration.
const (
	DefaultLease       = 60 * time.Second
	DefaultMaxCreating = 4
	DefaultMaxAlive    = 256
)

// Default sandbox limits, where neither a Spec nor a backend's
// configuration sets one (every backend's).
const (
	DefaultMemoryBytes = 2 << 30
	DefaultCPUs        = 1.0
	DefaultPids        = 512
	DefaultDiskBytes   = 10 << 30
)

// ValidateConfig reports a backend configuration that cannot work, in one
// line per fault saying what to change; prefix names the backend.
func ValidateConfig(prefix string, lease time.Duration, maxCreating, maxAlive int, pool map[string]int, limits sandbox.Limits) error {
	var errs []error
	if lease < 0 {
		errs = append(errs, fmt.Errorf("%s: Lease %v is negative: use 0 for the default (%v) or a positive duration", prefix, lease, DefaultLease))
	} else if lease > 0 && lease < 3*time.Second {
		errs = append(errs, fmt.Errorf("%s: Lease %v is too short: use at least 3s (heartbeats go every Lease/3)", prefix, lease))
	}
	if maxCreating < 0 {
		errs = append(errs, fmt.Errorf("%s: MaxCreating %d is negative: use 0 for the default (%d)", prefix, maxCreating, DefaultMaxCreating))
	}
	if maxAlive < 0 {
		errs = append(errs, fmt.Errorf("%s: MaxAlive %d is negative: use 0 for the default (%d)", prefix, maxAlive, DefaultMaxAlive))
	}
	total := 0
	for img, n := range pool {
		if img == "" {
			errs = append(errs, fmt.Errorf("%s: Pool has an empty image name: key the pool by image reference", prefix))
		}
		if n < 0 {
			errs = append(errs, fmt.Errorf("%s: Pool[%q] = %d is negative: use 0 to turn the pool off", prefix, img, n))
		}
		total += max(n, 0)
	}
	if alive := cmp.Or(maxAlive, DefaultMaxAlive); total >= alive && total > 0 {
		errs = append(errs, fmt.Errorf("%s: warm pool of %d containers leaves no room under MaxAlive %d: lower Pool or raise MaxAlive", prefix, total, alive))
	}
	if err := ValidateLimits(limits); err != nil {
		errs = append(errs, fmt.Errorf("%s: DefaultLimits: %w", prefix, err))
	}
	return errors.Join(errs...)
}

// Config is the part of a container backend's configuration every
// backend has; docker.Config documents each field. Resolve fills it.
type Config struct {
	AgentBinary   string
	StateDir      string
	Lease         time.Duration
	MaxCreating   int
	MaxAlive      int
	Pool          map[string]int
	DefaultLimits sandbox.Limits
	Logger        *slog.Logger
}

// DefaultLimits are the default sandbox limits as one value: 2 GiB, 1
// CPU, 512 pids, 10 GiB of disk.
var DefaultLimits = sandbox.Limits{MemoryBytes: DefaultMemoryBytes, CPUs: DefaultCPUs, Pids: DefaultPids, DiskBytes: DefaultDiskBytes}

// Resolve validates c and fills every zero field; prefix names the
// backend in errors. It fails on a configuration that cannot work and when
// the agent binary cannot be found.
func (c Config) Resolve(prefix string) (Config, error) {
	if err := ValidateConfig(prefix+" config", c.Lease, c.MaxCreating, c.MaxAlive, c.Pool, c.DefaultLimits); err != nil {
		return c, err
	}
	c.Lease = cmp.Or(c.Lease, DefaultLease)
	c.MaxCreating = cmp.Or(c.MaxCreating, DefaultMaxCreating)
	c.MaxAlive = cmp.Or(c.MaxAlive, DefaultMaxAlive)
	c.DefaultLimits = ResolveLimits(c.DefaultLimits, DefaultLimits)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir()
	}
	abs, err := FindAgent(c.AgentBinary)
	if err != nil {
		return c, fmt.Errorf("%s: %w", prefix, err)
	}
	c.AgentBinary = abs
	return c, nil
}
