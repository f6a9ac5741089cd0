package hostside

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"

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
