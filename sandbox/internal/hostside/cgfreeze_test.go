package hostside

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestFreezeCgroup freezes a real cgroup holding a process that appends
// to a file every few milliseconds: frozen, the file stops growing;
// thawed, it grows again.
func TestFreezeCgroup(t *testing.T) {
	dir := filepath.Join(cgroupRoot, "rollcage-test-freeze-"+RandomToken())
	if _, err := os.Stat(filepath.Join(cgroupRoot, "freezer")); err == nil {
		dir = filepath.Join(cgroupRoot, "freezer", filepath.Base(dir))
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		msg := "cannot make a cgroup (run the tests as root on a cgroup v1 freezer or v2 host): " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() { os.Remove(dir) })
	out := filepath.Join(t.TempDir(), "ticks")
	cmd := exec.Command("sh", "-c", `while :; do echo x >> "$0"; sleep 0.005; done`, out)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		st, err := os.Stat(out)
		if err != nil {
			return 0
		}
		return st.Size()
	}
	grows := func() bool {
		before := size()
		time.Sleep(300 * time.Millisecond)
		return size() > before
	}
	if !grows() {
		t.Fatal("the process does not run before the freeze")
	}
	thaw, err := FreezeCgroup(t.Context(), cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	frozen := !grows()
	if err := thaw(); err != nil {
		t.Fatal(err)
	}
	if !frozen {
		t.Error("the file grew while the cgroup was frozen")
	}
	if !grows() {
		t.Error("the process does not run after the thaw")
	}
}

func TestFreezeCgroupNoProcess(t *testing.T) {
	if _, err := FreezeCgroup(t.Context(), 1<<30); err == nil {
		t.Error("FreezeCgroup of a process that does not exist succeeded")
	}
}
