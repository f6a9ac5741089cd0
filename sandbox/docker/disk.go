package docker

import (
	"strings"

	"github.com/docker/docker/api/types/system"
)

// storageOptSupported reports whether the engine's storage driver enforces
// `--storage-opt size=` (overlay2 only on xfs with project quotas, which
// docker info shows as the backing filesystem; devicemapper, btrfs, zfs
// always). A create that fails with it anyway falls back to the watchdog.
func storageOptSupported(info system.Info) bool {
	switch info.Driver {
	case "devicemapper", "btrfs", "zfs", "windowsfilter":
		return true
	case "overlay2":
		for _, kv := range info.DriverStatus {
			if kv[0] == "Backing Filesystem" && kv[1] == "xfs" {
				return true
			}
		}
	}
	return false
}

// isStorageOptError: the engine refused the size option (xfs without
// pquota, an older driver).
func isStorageOptError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "storage-opt") || strings.Contains(s, "storage opt") || strings.Contains(s, "pquota")
}
