package docker

import (
	"testing"
	"unsafe"

	"github.com/docker/docker/api/types/system"
)

func TestDiskModeOf(t *testing.T) {
	tests := []struct {
		driver, backing string
		want            diskMode
	}{
		{"overlay2", "extfs", diskWatchdog}, // the default engine here
		{"overlay2", "xfs", diskStorageOpt},
		{"btrfs", "", diskQgroup}, // the quota engine here
		{"zfs", "", diskStorageOpt},
		{"devicemapper", "", diskStorageOpt},
		{"vfs", "", diskWatchdog},
	}
	for _, tc := range tests {
		info := system.Info{Driver: tc.driver}
		if tc.backing != "" {
			info.DriverStatus = [][2]string{{"Backing Filesystem", tc.backing}}
		}
		if got := diskModeOf(info); got != tc.want {
			t.Errorf("%s on %q: %v, want %v", tc.driver, tc.backing, got, tc.want)
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
