package docker

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// TestDiskLimit: writing past a small limit (64 MiB) stops the call with a
// message saying the limit, the usage and what to do; writes are refused
// while over it; after deleting, the sandbox is usable again. On this
// engine (overlay2 on ext4) that is the watchdog; where the engine takes
// --storage-opt size the write fails with ENOSPC instead, also an error
// the policy sees.
func TestDiskLimit(t *testing.T) {
	b := newTestBackend(t, Config{})
	const limit = 64 << 20
	sb := sandboxtest.Create(t, b, sandbox.Spec{Image: testImage(), EpisodeID: "disk-limit", Limits: sandbox.Limits{DiskBytes: limit}})
	defer sb.Close(t.Context())
	ctx := t.Context()
	exec := func(cmd string) sandbox.ExecResult {
		t.Helper()
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: cmd, Timeout: 2 * time.Minute})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return res
	}
	// 1 MiB every 20 ms, up to 400 MiB: the watchdog must stop it near 64.
	res := exec(`for i in $(seq 400); do head -c 1048576 /dev/zero >> /tmp/big || exit 1; sleep 0.02; done; echo done`)
	if b.diskMode() != diskWatchdog {
		if res.ExitCode == 0 || !strings.Contains(res.Output, "No space left on device") {
			t.Fatalf("with --storage-opt: exit %d output %q, want ENOSPC", res.ExitCode, res.Output)
		}
	} else {
		for _, want := range []string{"disk limit reached", "of its 64 MiB limit", "delete files"} {
			if !strings.Contains(res.Output, want) {
				t.Errorf("output %q lacks %q", res.Output, want)
			}
		}
		if res.Stopped != sandbox.StopDisk || res.ExitCode == 0 || strings.Contains(res.Output, "done") {
			t.Errorf("stopped %q exit %d, want the call stopped at the limit", res.Stopped, res.ExitCode)
		}
		// While over the limit, writes are refused with the same message.
		err := sb.WriteFile(ctx, "/tmp/more", []byte("x"), 0o644)
		var pe *sandbox.PathError
		if !errors.As(err, &pe) || pe.Kind != sandbox.KindNoSpace || !strings.Contains(pe.Reason, "delete files") {
			t.Errorf("write over the limit: %v, want a no_space PathError", err)
		}
		// A command that does not delete is told again.
		if res := exec("true"); !strings.Contains(res.Output, "disk limit reached") {
			t.Errorf("call over the limit: output %q, want the limit message", res.Output)
		}
	}
	size, _, _ := strings.Cut(exec("stat -c %s /tmp/big").Output, "\n")
	if n, err := strconv.ParseInt(size, 10, 64); err != nil || n > 200<<20 {
		t.Errorf("/tmp/big is %q bytes: the writer ran far past the limit", size)
	}
	// Deleting brings the sandbox back.
	if res := exec("rm -f /tmp/big; echo ok"); res.Output != "ok\n" {
		t.Errorf("rm: output %q, want only ok (no limit message once below it)", res.Output)
	}
	if err := sb.WriteFile(ctx, "/tmp/small", []byte("fine"), 0o644); err != nil {
		t.Errorf("write after deleting: %v", err)
	}
	if res := exec("cat /tmp/small"); res.Output != "fine" {
		t.Errorf("after deleting: %q", res.Output)
	}
}
