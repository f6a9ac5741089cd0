package hostside

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// btrfsQgroupLimit is struct btrfs_ioctl_qgroup_limit_args (linux/btrfs.h).
type btrfsQgroupLimit struct {
	QgroupID uint64 // 0: the subvolume of the file descriptor
	Flags    uint64
	MaxRfer  uint64
	MaxExcl  uint64
	RsvRfer  uint64
	RsvExcl  uint64
}

const (
	// BTRFS_IOC_QGROUP_LIMIT: _IOR(0x94, 43, struct btrfs_ioctl_qgroup_limit_args).
	btrfsIocQgroupLimit     = 2<<30 | uint(unsafe.Sizeof(btrfsQgroupLimit{}))<<16 | 0x94<<8 | 43
	btrfsQgroupLimitMaxExcl = 1 << 1
)

// LimitQgroup sets the exclusive-bytes limit of a btrfs subvolume's quota
// group: what is written in it (data, preallocation, files unlinked but
// open, every file's metadata) may take at most limit bytes, and the
// kernel answers EDQUOT past it. dir is on the filesystem: the subvolume
// itself when subvol is 0, else any directory there, subvol naming the
// subvolume by id.
func LimitQgroup(dir string, subvol uint64, limit int64) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("btrfs quota group of %s: %w: run rollcage as root on the engine's host", dir, err)
	}
	defer unix.Close(fd)
	args := btrfsQgroupLimit{QgroupID: subvol, Flags: btrfsQgroupLimitMaxExcl, MaxExcl: uint64(limit)}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(btrfsIocQgroupLimit), uintptr(unsafe.Pointer(&args))); errno != 0 {
		if errors.Is(errno, unix.ENOTCONN) || errors.Is(errno, unix.ENOENT) {
			return fmt.Errorf("btrfs quota group of %s (subvolume %d): %w: quotas are off on that filesystem: run 'btrfs quota enable' on it (scripts/rollcage-engine.sh does)", dir, subvol, errno)
		}
		return fmt.Errorf("btrfs quota group of %s (subvolume %d): %w", dir, subvol, errno)
	}
	return nil
}

// BTRFS_IOC_FS_INFO: _IOR(0x94, 31, struct btrfs_ioctl_fs_info_args),
// 1024 bytes, the filesystem's id at offset 16.
const btrfsIocFsInfo = 2<<30 | 1024<<16 | 0x94<<8 | 31

// BtrfsSimpleQuotas reports whether the btrfs filesystem of dir has simple
// quotas on. Full quota groups are not enough: deleting a subvolume can
// mark them inconsistent, and the kernel then enforces no limit until a
// rescan; simple quotas never go inconsistent.
func BtrfsSimpleQuotas(dir string) (bool, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	var args [1024]byte
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(btrfsIocFsInfo), uintptr(unsafe.Pointer(&args[0]))); errno != 0 {
		return false, fmt.Errorf("btrfs filesystem info of %s: %w", dir, errno)
	}
	id := args[16:32]
	uuid := fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:16])
	b, err := os.ReadFile("/sys/fs/btrfs/" + uuid + "/features/simple_quota")
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(b)) == "1", nil
}

// SimpleQuotaWarning is what a backend logs on a btrfs filesystem whose
// quota groups are not simple quotas.
const SimpleQuotaWarning = "disk limits: btrfs quota groups without simple quotas go inconsistent when subvolumes are deleted, and the kernel then enforces no limit until a rescan: run scripts/rollcage-engine.sh up, which turns simple quotas on (Linux 6.7 or later)"

// MountPointOf is where the filesystem of block device source (a mount's
// Source, as /dev/loop0) of type fstype is mounted on the host: the first
// such mount in /proc/self/mountinfo.
func MountPointOf(source, fstype string) (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent maj:min root mountpoint options... - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) >= 5 && len(b) >= 2 && b[0] == fstype && b[1] == source && a[3] == "/" {
			return unescapeMountinfo(a[4]), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("no %s filesystem of %s mounted from its root here (/proc/self/mountinfo): run rollcage on the engine's host", fstype, source)
}
