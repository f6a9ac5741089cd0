package host

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// Defaults of Config (MaxCreating's is the container backends'; the
// Kubernetes backend's is its own).
const (
	DefaultLease       = 60 * time.Second
	DefaultMaxCreating = 4
	DefaultMaxAlive    = 256
)

// Default sandbox limits, where neither a Spec nor Config.DefaultLimits
// sets one (every backend's).
const (
	DefaultMemoryBytes = 2 << 30
	DefaultCPUs        = 1.0
	DefaultPids        = 512
	DefaultDiskBytes   = 10 << 30
)

// DefaultLimits are the default sandbox limits as one value.
var DefaultLimits = sandbox.Limits{MemoryBytes: DefaultMemoryBytes, CPUs: DefaultCPUs, Pids: DefaultPids, DiskBytes: DefaultDiskBytes}

// AgentBinEnv names the environment variable that locates the static
// rollcage-agent binary when Config.AgentBinary is empty.
const AgentBinEnv = "ROLLCAGE_AGENT_BIN"

// Config is what every backend's configuration has. The zero value works
// on a host where the agent binary sits next to the executable or is
// named by $ROLLCAGE_AGENT_BIN.
type Config struct {
	// AgentBinary is the host path of the static rollcage-agent, bind-mounted
	// read-only into every container. Empty: $ROLLCAGE_AGENT_BIN, else
	// rollcage-agent next to os.Executable(). Container backends only.
	AgentBinary string
	// StateDir holds one host directory per sandbox (the agent's socket
	// lives there). Empty: DefaultStateDir(). Container backends only.
	StateDir string
	// Lease is how long an agent keeps its sandbox without hearing from
	// the host; the client pings every Lease/3. Zero: 60s.
	Lease time.Duration
	// MaxCreating bounds the sandboxes being created and started at once,
	// so a burst of episode starts queues instead of stampeding the engine.
	// Zero: the backend's default, 4 (8 on Kubernetes).
	MaxCreating int
	// MaxAlive bounds the sandboxes alive at once (warm ones included);
	// Create blocks, honouring its ctx, while at the bound. Zero: 256.
	MaxAlive int
	// Pool is the number of warm sandboxes kept per image. Missing or 0:
	// no pool for that image.
	Pool map[string]int
	// DefaultLimits fill the zero fields of a Spec's Limits. Zero fields
	// here take 2 GiB, 1 CPU, 512 pids, 10 GiB of disk.
	DefaultLimits sandbox.Limits
	// Logger receives lifecycle logs. Nil: discard.
	Logger *slog.Logger
}

// Check reports what in c cannot work, one line per fault saying what to
// change, each beginning "<backend> config: ". maxCreating is the
// backend's default MaxCreating, which a negative one is told to use.
// The backends' Validate methods are Check with their name.
func (c Config) Check(backend string, maxCreating int) error {
	prefix := backend + " config"
	var errs []error
	if c.Lease < 0 {
		errs = append(errs, fmt.Errorf("%s: Lease %v is negative: use 0 for the default (%v) or a positive duration", prefix, c.Lease, DefaultLease))
	} else if c.Lease > 0 && c.Lease < 3*time.Second {
		errs = append(errs, fmt.Errorf("%s: Lease %v is too short: use at least 3s (heartbeats go every Lease/3)", prefix, c.Lease))
	}
	if c.MaxCreating < 0 {
		errs = append(errs, fmt.Errorf("%s: MaxCreating %d is negative: use 0 for the default (%d)", prefix, c.MaxCreating, maxCreating))
	}
	if c.MaxAlive < 0 {
		errs = append(errs, fmt.Errorf("%s: MaxAlive %d is negative: use 0 for the default (%d)", prefix, c.MaxAlive, DefaultMaxAlive))
	}
	total := 0
	for img, n := range c.Pool {
		if img == "" {
			errs = append(errs, fmt.Errorf("%s: Pool has an empty image name: key the pool by image reference", prefix))
		}
		if n < 0 {
			errs = append(errs, fmt.Errorf("%s: Pool[%q] = %d is negative: use 0 to turn the pool off", prefix, img, n))
		}
		total += max(n, 0)
	}
	if alive := cmp.Or(c.MaxAlive, DefaultMaxAlive); total >= alive && total > 0 {
		errs = append(errs, fmt.Errorf("%s: warm pool of %d containers leaves no room under MaxAlive %d: lower Pool or raise MaxAlive", prefix, total, alive))
	}
	if err := CheckLimits(c.DefaultLimits); err != nil {
		errs = append(errs, fmt.Errorf("%s: DefaultLimits: %w", prefix, err))
	}
	return errors.Join(errs...)
}

// Fill returns c with its zero Lease, MaxCreating (to maxCreating, the
// backend's default), MaxAlive, DefaultLimits fields and Logger set to
// their defaults. AgentBinary and StateDir are left as they are.
func (c Config) Fill(maxCreating int) Config {
	c.Lease = cmp.Or(c.Lease, DefaultLease)
	c.MaxCreating = cmp.Or(c.MaxCreating, maxCreating)
	c.MaxAlive = cmp.Or(c.MaxAlive, DefaultMaxAlive)
	c.DefaultLimits = FillLimits(c.DefaultLimits, DefaultLimits)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Resolve is what a container backend's New does with c: Check, Fill with
// DefaultMaxCreating, the default StateDir and the agent binary found (see
// AgentBinary). It fails on a configuration that cannot work, and when no
// agent binary is found with an error that wraps sandbox.ErrUnavailable
// and says how to build one.
func (c Config) Resolve(backend string) (Config, error) {
	if err := c.Check(backend, DefaultMaxCreating); err != nil {
		return c, err
	}
	c = c.Fill(DefaultMaxCreating)
	c.StateDir = cmp.Or(c.StateDir, DefaultStateDir())
	abs, err := findAgent(c.AgentBinary)
	if err != nil {
		return c, fmt.Errorf("%s: %w", backend, err)
	}
	c.AgentBinary = abs
	return c, nil
}

// findAgent resolves Config.AgentBinary: path, else $ROLLCAGE_AGENT_BIN,
// else rollcage-agent next to os.Executable(), made absolute.
func findAgent(path string) (string, error) {
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

// DefaultStateDir is Config.StateDir when it is empty:
// /var/lib/rollcage/run as root, else $XDG_RUNTIME_DIR/rollcage, else
// os.TempDir()/rollcage-<uid>.
func DefaultStateDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/rollcage/run"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "rollcage")
	}
	return filepath.Join(os.TempDir(), "rollcage-"+strconv.Itoa(os.Getuid()))
}

// CheckLimits reports a limit of l that cannot work, saying what to
// change (a zero field is the default's and fine).
func CheckLimits(l sandbox.Limits) error {
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

// FillLimits returns l with its zero fields taken from def.
func FillLimits(l, def sandbox.Limits) sandbox.Limits {
	l.MemoryBytes = cmp.Or(l.MemoryBytes, def.MemoryBytes)
	l.CPUs = cmp.Or(l.CPUs, def.CPUs)
	l.Pids = cmp.Or(l.Pids, def.Pids)
	l.DiskBytes = cmp.Or(l.DiskBytes, def.DiskBytes)
	return l
}
