package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

const mib = 1 << 20

// DiskQuota configures RunDiskQuota for one backend.
type DiskQuota struct {
	Image string
	// User is the sandboxes' Spec.User ("" the default user).
	User string
	// Charged is what the kernel charges sb's writable layer, in bytes;
	// ok false when the backend's filesystem does not say.
	Charged func(t *testing.T, sb sandbox.Sandbox) (n int64, ok bool)
	// Metadata: the limit charges file metadata (btrfs quota groups, not
	// xfs's block quota), so a flood of empty files stops at it too.
	Metadata bool
	// Gone reports nil once sb's container is removed (after Close).
	Gone func(ctx context.Context, sb sandbox.Sandbox) error
}

var landedRE = regexp.MustCompile(`(?m)^landed (\d+)$`)

// RunDiskQuota: on a backend whose disk limit the kernel holds, every way
// past the watchdog that issue 35 found is stopped at the limit, within
// 1 MiB either way: the writer gets ENOSPC or EDQUOT, the host is charged
// no more than the limit, the sandbox works on once files are deleted,
// and Close removes its container whatever the policy left in it.
func RunDiskQuota(t *testing.T, b sandbox.Backend, o DiskQuota) {
	// 30 nested directories of 200 characters: past PATH_MAX (4096)
	// from / long before the bottom.
	const chain = `n=$(printf 'd%.0s' $(seq 200)); cd /tmp && for i in $(seq 30); do mkdir $n && cd $n || exit 1; done; echo "path $(pwd | wc -c)"`
	tests := []struct {
		name  string
		limit int64
		// cmd tries to write past limit; "landed N", when printed, is
		// what its writes got inside the sandbox, wanted within 1 MiB.
		cmd      string
		landed   bool
		metadata bool // made of file metadata: needs o.Metadata
		path     bool // prints "path N", N past PATH_MAX
	}{
		{name: "plain write", limit: 64 * mib, landed: true,
			cmd: `head -c 200M /dev/zero >/tmp/big; stat -c 'landed %s' /tmp/big`},
		{name: "unlinked but open", limit: 64 * mib, landed: true,
			// fd 3 stays open in the session: the bytes stay charged.
			cmd: `exec 3>/tmp/gone && rm /tmp/gone && head -c 200M /dev/zero >&3; stat -L -c 'landed %s' /proc/self/fd/3`},
		{name: "fallocate", limit: 64 * mib, landed: true,
			cmd: `fallocate -l 1G /tmp/f1; fallocate -l 65M /tmp/f2; fallocate -l 63M /tmp/f3 && stat -c 'landed %s' /tmp/f3`},
		{name: "PATH_MAX chain", limit: 64 * mib, landed: true, path: true,
			cmd: chain + ` && head -c 200M /dev/zero >big; stat -c 'landed %s' big`},
		{name: "100000 empty files", limit: 16 * mib, metadata: true,
			cmd: `mkdir /tmp/m && cd /tmp/m && python3 -c '
import os
n = 0
try:
    for i in range(100000):
        os.close(os.open("f%d" % i, os.O_CREAT | os.O_WRONLY, 0o644))
        n += 1
except OSError as e:
    print(e)
print("files", n)'`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.metadata && !o.Metadata {
				t.Skip("this backend's limit charges blocks, not file metadata: no inode limit")
			}
			sb := Create(t, b, sandbox.Spec{Image: o.Image, EpisodeID: "quota", User: o.User, Limits: sandbox.Limits{DiskBytes: tc.limit}})
			if g, _ := sb.(sandbox.DiskGuarder); g == nil || g.DiskGuard() != sandbox.DiskKernel {
				t.Fatalf("DiskGuard: want %q", sandbox.DiskKernel)
			}
			res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: tc.cmd, Timeout: 3 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("output: %s", res.Output)
			if !strings.Contains(res.Output, "Disk quota exceeded") && !strings.Contains(res.Output, "No space left on device") {
				t.Errorf("output %q: want EDQUOT or ENOSPC", res.Output)
			}
			if res.Stopped != "" {
				t.Errorf("stopped %q: the kernel, not the watchdog, should stop it", res.Stopped)
			}
			near := func(what string, n int64) {
				t.Helper()
				d := n - tc.limit
				if d > mib || d < -mib {
					t.Errorf("%s: %d bytes, %+d from the %d-byte limit: want within 1 MiB", what, n, d, tc.limit)
				}
				t.Logf("%s: %d bytes, %+d from the limit", what, n, d)
			}
			if tc.landed {
				m := landedRE.FindStringSubmatch(res.Output)
				if m == nil {
					t.Fatalf("output %q: no landed line", res.Output)
				}
				n, _ := strconv.ParseInt(m[1], 10, 64)
				near("written in the sandbox", n)
			}
			if tc.path {
				var n int
				i := strings.Index(res.Output, "path ")
				if i < 0 {
					t.Fatalf("output %q: no path line", res.Output)
				}
				if _, err := fmt.Sscanf(res.Output[i:], "path %d", &n); err != nil || n <= 4096 {
					t.Errorf("output %q: want a working directory longer than PATH_MAX", res.Output)
				}
			}
			if tc.metadata {
				var files int
				i := strings.Index(res.Output, "files ")
				if i < 0 {
					t.Fatalf("output %q: no files line", res.Output)
				}
				if _, err := fmt.Sscanf(res.Output[i:], "files %d", &files); err != nil || files >= 100000 {
					t.Errorf("output %q: the limit did not stop the flood", res.Output)
				}
			}
			if n, ok := o.Charged(t, sb); ok {
				near("charged on the host", n)
			} else {
				t.Log("the host's charge is not readable on this backend")
			}
			// Deleting frees it: the sandbox works on.
			res, err = sb.Exec(t.Context(), sandbox.ExecRequest{Command: `exec 3>&-; find /tmp -type f -delete; rm -rf /tmp/m; echo fine >/tmp/small && cat /tmp/small`})
			if err != nil || res.Output != "fine\n" {
				t.Errorf("after deleting: %q, %v", res.Output, err)
			}
			// Closing removes the container, whatever the policy left.
			if err := sb.Close(t.Context()); err != nil {
				t.Errorf("Close: %v", err)
			}
			if err := o.Gone(t.Context(), sb); err != nil {
				t.Errorf("after Close: %v", err)
			}
		})
	}
	t.Run("write_file", func(t *testing.T) {
		sb := Create(t, b, sandbox.Spec{Image: o.Image, EpisodeID: "quota-write", User: o.User, Limits: sandbox.Limits{DiskBytes: 16 * mib}})
		err := sb.WriteFile(t.Context(), "/tmp/big", make([]byte, 32*mib), 0o644)
		var pe *sandbox.PathError
		if !errors.As(err, &pe) || pe.Kind != sandbox.KindNoSpace {
			t.Fatalf("WriteFile of 32 MiB under a 16 MiB limit: %v, want a no_space PathError", err)
		}
	})
}

// BtrfsExclusive is the exclusive bytes of quota group qgroup ("0/ID";
// "" for the subvolume dir itself) on the btrfs filesystem of dir, the
// transaction committed first. It needs root and btrfs-progs (make
// quota-engine installs them).
func BtrfsExclusive(t *testing.T, dir, qgroup string) int64 {
	t.Helper()
	if out, err := exec.Command("btrfs", "filesystem", "sync", dir).CombinedOutput(); err != nil {
		t.Fatalf("btrfs filesystem sync: %v: %s (btrfs-progs: make quota-engine)", err, out)
	}
	args := []string{"qgroup", "show", "--raw", dir}
	if qgroup == "" {
		args = []string{"qgroup", "show", "--raw", "-f", dir}
	}
	out, err := exec.Command("btrfs", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("btrfs qgroup show: %v: %s", err, out)
	}
	// Qgroupid Referenced Exclusive Path
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && strings.HasPrefix(f[0], "0/") && (qgroup == "" || f[0] == qgroup) {
			n, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				t.Fatalf("btrfs qgroup show: %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("btrfs qgroup show: no row for %q in %q", qgroup, out)
	return 0
}
