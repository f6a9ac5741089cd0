package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// diskMode is what holds the backend's containers to their disk limit.
type diskMode int32

const (
	// diskWatchdog: the host-side walk of the container's UpperDir
	// (hostside.DiskWatch), which unlinked-but-open files, fallocate,
	// paths past PATH_MAX and floods of empty files get past.
	diskWatchdog diskMode = iota
	// diskStorageOpt: the engine's --storage-opt size= (overlay2 on xfs
	// with project quotas, devicemapper, zfs), enforced by the kernel.
	diskStorageOpt
	// diskQgroup: the btrfs driver; rollcage sets the exclusive-bytes
	// limit of the container's subvolume's quota group (the engine's own
	// size option there counts the image's shared bytes too), enforced
	// by the kernel.
	diskQgroup
)

func (m diskMode) String() string {
	switch m {
	case diskStorageOpt:
		return "storage-opt"
	case diskQgroup:
		return "btrfs quota group"
	}
	return "watchdog"
}

// watchdogWarning is logged once by New on an engine that leaves the disk
// limit to the watchdog.
const watchdogWarning = "disk limits: this engine does not enforce them, so a host-side watchdog stands in, which unlinked-but-open files, fallocate, paths past PATH_MAX and floods of empty files get past; for limits the kernel enforces run 'make quota-engine' and DOCKER_HOST=" + host.QuotaEngineHost

// diskModeOf decides from docker info how the engine's containers are held
// to their disk limit.
func diskModeOf(info system.Info) diskMode {
	switch {
	case info.Driver == "btrfs":
		return diskQgroup
	case storageOptSupported(info):
		return diskStorageOpt
	}
	return diskWatchdog
}

// storageOptSupported reports whether the engine's storage driver enforces
// `--storage-opt size=` on the writable layer alone (overlay2 only on xfs
// with project quotas, which docker info shows as the backing filesystem;
// devicemapper, zfs always). A create that fails with it anyway falls back
// to the watchdog. btrfs is not here: its size counts the image too (see
// diskQgroup).
func storageOptSupported(info system.Info) bool {
	switch info.Driver {
	case "devicemapper", "zfs", "windowsfilter":
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

// subvolume is the host path of container id's writable subvolume under
// the btrfs driver of the engine whose data root is root.
func subvolume(root, id string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "image", "btrfs", "layerdb", "mounts", id, "mount-id"))
	if err != nil {
		return "", fmt.Errorf("the container's btrfs layer: %w: run rollcage as root on the engine's host", err)
	}
	mount := strings.TrimSpace(string(b))
	if mount == "" || strings.ContainsAny(mount, "/.") {
		return "", fmt.Errorf("the container's btrfs layer: mount id %q in the engine's layer database is not a layer id", mount)
	}
	return filepath.Join(root, "btrfs", "subvolumes", mount), nil
}

// isLongPathRemoval: the engine's btrfs driver could not walk a layer to
// remove it, a path in it being past PATH_MAX.
func isLongPathRemoval(err error) bool {
	s := err.Error()
	return strings.Contains(s, "btrfs") && strings.Contains(s, "file name too long")
}

// emptyLayer removes everything in container id's btrfs layer; the layer
// itself stays for the engine to remove.
func emptyLayer(ctx context.Context, cli client.APIClient, id string) error {
	info, err := cli.Info(ctx)
	if err != nil {
		return err
	}
	dir, err := subvolume(info.DockerRootDir, id)
	if err != nil {
		return err
	}
	return hostside.EmptyDir(dir)
}
