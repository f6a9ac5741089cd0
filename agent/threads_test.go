package agent

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// waitCmd waits on the child's pidfd and leaves the reaping to cmd.Wait:
// the exit status must come through, and the wait must last as long as
// the child.
func TestWaitCmd(t *testing.T) {
	for _, tc := range []struct {
		script string
		code   int
		least  time.Duration
	}{
		{"exit 0", 0, 0},
		{"exit 3", 3, 0},
		{"sleep 0.3; exit 7", 7, 300 * time.Millisecond},
		{"kill -9 $$", -1, 0},
	} {
		cmd := exec.Command("sh", "-c", tc.script)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		err := waitCmd(cmd)
		if d := time.Since(t0); d < tc.least {
			t.Errorf("%q: waited %v, the child lives at least %v", tc.script, d, tc.least)
		}
		var ee *exec.ExitError
		switch {
		case tc.code == 0 && err != nil:
			t.Errorf("%q: %v, want success", tc.script, err)
		case tc.code != 0 && (!errors.As(err, &ee) || ee.ExitCode() != tc.code):
			t.Errorf("%q: %v, want exit code %d", tc.script, err, tc.code)
		}
	}
}

// waitExited itself must work here (pidfds exist on every kernel CI runs),
// or every child would hold a thread again through the fallback.
func TestWaitExitedUsesPidfd(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 0.1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waitExited(cmd.Process.Pid); err != nil {
		t.Fatalf("waitExited: %v", err)
	}
	if cmd.ProcessState != nil {
		t.Fatal("waitExited reaped the child; cmd.Wait must do that")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("Wait after waitExited: %v", err)
	}
}

// ReserveThreads holds n goroutines on n distinct threads at once, so the
// process has at least n+1 threads afterwards (the caller's too).
func TestReserveThreads(t *testing.T) {
	const n = 40
	before := threadCount(t)
	if before > n {
		t.Fatalf("%d threads before reserving: raise n above it, or the check proves nothing", before)
	}
	ReserveThreads(n)
	if after := threadCount(t); after < n+1 {
		t.Fatalf("threads %d → %d after reserving %d", before, after, n)
	}
}

func threadCount(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads: line in /proc/self/status")
	return 0
}
