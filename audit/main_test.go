package audit

import (
	"os"
	"testing"

	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// TestMain removes the agent the Docker-backed tests built, if they did;
// run as TestAuditMemoryBounded's runner, it is that instead.
func TestMain(m *testing.M) {
	if report := os.Getenv(cgroupRunnerEnv); report != "" {
		os.Exit(cgroupRunner(report))
	}
	sandboxtest.Main(m)
}
