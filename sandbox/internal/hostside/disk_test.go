package hostside

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestUsage: allocated blocks are counted, a hard-linked file once, a
// sparse file by what it allocates.
func TestUsage(t *testing.T) {
	d := t.TempDir()
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i)
	}
	if err := os.WriteFile(filepath.Join(d, "a"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Link(filepath.Join(d, "a"), filepath.Join(d, "a2"))
	f, _ := os.Create(filepath.Join(d, "sparse"))
	f.Truncate(1 << 30)
	f.Close()
	u, err := Usage(d)
	if err != nil {
		t.Fatal(err)
	}
	if u < 1<<20 || u > 1<<20+256<<10 {
		t.Errorf("usage %d, want about 1 MiB (one copy of a, nothing for the sparse file)", u)
	}
}

// BenchmarkUsage is the watchdog's cost per check over a repository-sized
// writable layer: 5,000 files of 4 KiB in 100 directories.
func BenchmarkUsage(b *testing.B) {
	d := b.TempDir()
	buf := make([]byte, 4096)
	for i := range 100 {
		sub := filepath.Join(d, "dir", string(rune('a'+i%26)), filepath.Base(filepath.Join("x", string(rune('0'+i/26)))))
		os.MkdirAll(sub, 0o755)
		for j := range 50 {
			os.WriteFile(filepath.Join(sub, "f"+string(rune('a'+j%26))+string(rune('a'+j/26))), buf, 0o644)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Usage(d); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBtrfsQgroupLimitABI: the ioctl number and argument layout match
// linux/btrfs.h (BTRFS_IOC_QGROUP_LIMIT is 0x8030942b on every arch with
// the generic ioctl encoding).
func TestBtrfsQgroupLimitABI(t *testing.T) {
	if n := unsafe.Sizeof(btrfsQgroupLimit{}); n != 48 {
		t.Errorf("sizeof(struct btrfs_ioctl_qgroup_limit_args) = %d, want 48", n)
	}
	if btrfsIocQgroupLimit != 0x8030942b {
		t.Errorf("BTRFS_IOC_QGROUP_LIMIT = %#x, want 0x8030942b", btrfsIocQgroupLimit)
	}
}

func TestMountPointOf(t *testing.T) {
	if _, err := MountPointOf("/dev/no-such-device", "btrfs"); err == nil {
		t.Errorf("MountPointOf of a device mounted nowhere: no error")
	}
	for _, tc := range []struct{ in, want string }{
		{`/var/lib/x`, `/var/lib/x`},
		{`/mnt/a\040b`, `/mnt/a b`},
	} {
		if got := unescapeMountinfo(tc.in); got != tc.want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestBtrfsSimpleQuotas: on the quota engine's filesystem (make
// quota-engine) simple quotas are on; elsewhere the check says no or
// fails, never yes.
func TestBtrfsSimpleQuotas(t *testing.T) {
	if ok, err := BtrfsSimpleQuotas(t.TempDir()); ok {
		t.Errorf("a temporary directory: simple quotas %v, %v; want false", ok, err)
	}
	const root = "/var/lib/rollcage-engine/data"
	if _, err := os.Stat(root); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no quota engine here (%v): make quota-engine", err)
		}
		t.Skipf("no quota engine here (%v): make quota-engine", err)
	}
	ok, err := BtrfsSimpleQuotas(root)
	if err != nil {
		var st unix.Statfs_t
		if unix.Statfs(root, &st) == nil && st.Type != unix.BTRFS_SUPER_MAGIC {
			t.Skip("the quota engine is on xfs")
		}
		t.Fatal(err)
	}
	if !ok {
		t.Errorf("%s: simple quotas off: scripts/rollcage-engine.sh up turns them on", root)
	}
}
