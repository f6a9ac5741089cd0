package docker

import (
	"testing"

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
