package agent

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// testModeEnv selects the shell mode of newTestServer's servers. The suite
// runs in persistent mode; TestPerCallModeSuite runs it again, in a child
// process, in per-call mode, so every test covers both.
const testModeEnv = "ROLLCAGE_TEST_SHELL_MODE"

func testShellMode() string {
	if m := os.Getenv(testModeEnv); m != "" {
		return m
	}
	return ModePersistent
}

func TestPerCallModeSuite(t *testing.T) {
	if os.Getenv(testModeEnv) != "" {
		t.Skip("already the per-call run")
	}
	if testing.Short() {
		t.Skip("short: the per-call run is skipped")
	}
	args := []string{"-test.timeout=5m", "-test.skip=^Benchmark"}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
	cmd.Env = append(os.Environ(), testModeEnv+"="+ModePerCall)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("suite in per-call mode: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "PASS") {
		t.Fatalf("suite in per-call mode did not pass:\n%s", out)
	}
	t.Logf("suite in per-call mode:\n%s", out)
}
