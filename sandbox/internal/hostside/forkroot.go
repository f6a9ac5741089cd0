package hostside

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ForkRoot is where a warm container's new root is mounted in its mount
// namespace, under its old root, when it becomes a fork's child. Once the
// agent changed its root there, nothing in the sandbox can reach the old
// one: the sandbox user has no capability to change roots, and every
// process of the sandbox is a child of the agent.
const ForkRoot = "/.rollcage-fork-root"

// MountRoot mounts a fork child's file system at ForkRoot in the mount
// namespace of pid (a warm container's agent) and binds the container's
// own mounts (/proc with its masked paths, /dev, /sys, the run dir, the
// agent, /etc/hosts) below it: mount mounts the file system on the host at
// a directory under stateDir, which is cloned into a detached mount and
// unmounted there, and a thread that entered the namespace attaches the
// clone. That thread stays locked and ends with its goroutine, so no other
// goroutine runs in the namespace. prefix names the backend in errors.
func MountRoot(prefix string, pid int, stateDir string, mount func(dir string) error) error {
	if err := mountRoot(pid, stateDir, mount); err != nil {
		return fmt.Errorf("%s: fork: %w", prefix, err)
	}
	return nil
}

func mountRoot(pid int, stateDir string, mount func(dir string) error) error {
	tops, err := topMounts(pid)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(stateDir, "forkroot-")
	if err != nil {
		return err
	}
	if tmp, err = filepath.Abs(tmp); err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := mount(tmp); err != nil {
		return fmt.Errorf("mount the child's file system: %w", err)
	}
	tree, err := unix.OpenTree(unix.AT_FDCWD, tmp, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	uerr := unix.Unmount(tmp, unix.MNT_DETACH)
	if err != nil {
		return fmt.Errorf("clone the child's mount (needs Linux 5.2): %w", err)
	}
	defer unix.Close(tree)
	if uerr != nil {
		return fmt.Errorf("unmount %s: %w", tmp, uerr)
	}
	ns, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/mnt")
	if err != nil {
		return fmt.Errorf("the warm container's mount namespace: %w", err)
	}
	defer ns.Close()
	return OnLockedThread(func() error {
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("enter the mount namespace (rollcage must run as root): %w", err)
		}
		if err := unix.Mkdir(ForkRoot, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("mkdir %s: %w", ForkRoot, err)
		}
		if err := unix.MoveMount(tree, "", unix.AT_FDCWD, ForkRoot, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attach the child's root: %w", err)
		}
		for _, mp := range tops {
			if err := unix.Mount(mp, ForkRoot+mp, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return fmt.Errorf("bind %s into the child's root (did the parent remove it?): %w", mp, err)
			}
		}
		return nil
	})
}

// OnLockedThread runs f on a thread of its own whose file system context
// (root, working directory, umask) is unshared from the process's, so f
// may change directory or namespace; the thread is never unlocked and
// ends with f's goroutine.
func OnLockedThread(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			errc <- fmt.Errorf("unshare the thread's file system context: %w", err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// topMounts are the mount points right below the root of pid's mount
// table, in mount order (each bound with what is mounted under it).
func topMounts(pid int) ([]string, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("the warm container's mounts: %w", err)
	}
	defer f.Close()
	type entry struct{ id, parent, point string }
	var all []entry
	rootID := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 5 {
			continue
		}
		e := entry{fl[0], fl[1], unescapeMountinfo(fl[4])}
		if e.point == "/" {
			rootID = e.id // the last mount on / is the root
		}
		all = append(all, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("the warm container's mounts: %w", err)
	}
	var tops []string
	for _, e := range all {
		if e.parent == rootID && e.point != "/" && e.point != ForkRoot {
			tops = append(tops, e.point)
		}
	}
	if rootID == "" || len(tops) == 0 {
		return nil, fmt.Errorf("the warm container's mount table has no root or nothing under it")
	}
	return tops, nil
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				out.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		out.WriteByte(s[i])
	}
	return out.String()
}
