package agent

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestKillAllRefusedOutsideSandbox: an agent that is not under its own
// reaper at PID 1 (here: a test on the host) refuses kill_all, and
// kills nothing.
func TestKillAllRefusedOutsideSandbox(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	res := run(t, c, "", "setsid sleep 60 >/dev/null 2>&1 < /dev/null & echo $!")
	pid, err := strconv.Atoi(strings.TrimSpace(res.Output))
	if err != nil {
		t.Fatalf("sleep's pid: %q", res.Output)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	kr, err := c.KillAll(t.Context())
	if err == nil || !strings.Contains(err.Error(), "kill_all refused: agent is not under its own reaper at PID 1") {
		t.Fatalf("KillAll on the host = %+v, %v; want it refused", kr, err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("the refused KillAll killed pid %d: %v", pid, err)
	}
}

// TestLiveProcesses: the process list skips PID 1 and the caller, and
// reads a live process's state and owner.
func TestLiveProcesses(t *testing.T) {
	self := os.Getpid()
	ps, err := liveProcesses(self)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.PID == 1 || p.PID == self || p.State == "Z" {
			t.Errorf("listed %+v", p)
		}
	}
	// The caller as someone else sees it.
	p, ok := readProc(self)
	if !ok || p.UID != os.Getuid() || p.Comm == "" || !strings.Contains("RSD", p.State) {
		t.Errorf("readProc(self) = %+v, %v; want a running process of uid %d", p, ok, os.Getuid())
	}
	if _, ok := readProc(1 << 30); ok {
		t.Error("readProc of a pid that does not exist succeeded")
	}
}
