package docker

import (
	"testing"

	"github.com/docker/docker/api/types/system"
)

func TestStorageOptSupported(t *testing.T) {
	tests := []struct {
		driver, backing string
		want            bool
	}{
		{"overlay2", "extfs", false}, // this machine: the watchdog
		{"overlay2", "xfs", true},
		{"btrfs", "", true},
		{"zfs", "", true},
		{"devicemapper", "", true},
		{"vfs", "", false},
	}
	for _, tc := range tests {
		info := system.Info{Driver: tc.driver}
		if tc.backing != "" {
			info.DriverStatus = [][2]string{{"Backing Filesystem", tc.backing}}
		}
		if got := storageOptSupported(info); got != tc.want {
			t.Errorf("%s on %q: %v, want %v", tc.driver, tc.backing, got, tc.want)
		}
	}
}
