package sandboxtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rollcage/rollcage/sandbox/host"
)

var (
	agentOnce    sync.Once
	agentErr     error
	agentCleanup = func() {}
)

// EnsureAgent makes $ROLLCAGE_AGENT_BIN name a freshly built static agent
// when it names none: `go test` of a single package works without the
// Makefile. It builds once per test binary; the returned cleanup (for
// TestMain, after m.Run) removes what it built, and is a no-op otherwise.
func EnsureAgent() (cleanup func(), err error) {
	agentOnce.Do(func() {
		if os.Getenv(host.AgentBinEnv) != "" {
			return
		}
		mod, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			agentErr = fmt.Errorf("find the module root: %w", err)
			return
		}
		dir, err := os.MkdirTemp("", "rollcage-agent-*")
		if err != nil {
			agentErr = err
			return
		}
		bin := filepath.Join(dir, "rollcage-agent")
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/rollcage-agent")
		cmd.Dir = filepath.Dir(strings.TrimSpace(string(mod)))
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			agentErr = fmt.Errorf("build rollcage-agent for the tests (or set %s): %v\n%s", host.AgentBinEnv, err, out)
			return
		}
		os.Setenv(host.AgentBinEnv, bin)
		agentCleanup = func() { os.RemoveAll(dir) }
	})
	return agentCleanup, agentErr
}

// Main is TestMain for packages whose tests start Docker sandboxes: it runs
// the tests, then removes the agent EnsureAgent built for them, if it built
// one (the build itself waits for the first test that needs it).
func Main(m *testing.M) {
	code := m.Run()
	agentCleanup()
	os.Exit(code)
}
