package containerd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/mount"
	cerrdefs "github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// forkRoot is where a warm container's new root is mounted in its mount
// namespace, under its old root. Once the agent changed its root there,
// nothing in the sandbox can reach the old one: the sandbox user has no
// capability to change roots, and every process of the sandbox is a child
// of the agent.
const forkRoot = "/.rollcage-fork-root"

// gcRefLabel is the container label that holds an adopted fork snapshot
// against containerd's garbage collector while the container exists.
func (b *Backend) gcRefLabel() string {
	return "containerd.io/gc.ref.snapshot." + b.cfg.Snapshotter + "/fork"
}

// warmFits reports whether a warm container can become a fork child of
// spec: the limits are set on its cgroup and the labels rewritten, but the
// lease is the agent's argument and proxy mode a mount of its own.
func (b *Backend) warmFits(spec sandbox.Spec) bool {
	return spec.Network == sandbox.NetworkNone && spec.ProxySocket == "" && spec.Lease == b.core.Cfg.Lease
}

// takeWarmForFork takes up to n warm containers of image from the pool.
// The pool is not woken: the fork refills it when it is done, so that
// starting new warm containers does not compete with the children.
func (b *Backend) takeWarmForFork(spec sandbox.Spec, n int) []*container {
	if !b.warmFits(spec) {
		return nil
	}
	var out []*container
	for len(out) < n {
		c, ok := b.core.Pool.Take(spec.Image)
		if !ok {
			break
		}
		out = append(out, c)
	}
	return out
}

// adopt makes the warm container k the fork child cs of base: a snapshot
// of base (the parent's layer) is prepared for it, mounted into k's mount
// namespace with k's own mounts (/proc, /dev, /sys, the run dir, the agent,
// /etc/hosts) bound inside it, k's cgroup gets cs's limits and its labels
// cs's, and the agent changes its root to the new snapshot and restores
// the sessions. No container starts: that is the time a fork saves. ctx
// carries the fork's lease, which holds the snapshot until the container's
// label does.
func (b *Backend) adopt(ctx context.Context, k *container, base *forkBase, cs sandbox.Spec, scripts map[string]string) error {
	sn := b.snapshotter()
	key := k.id + "-fork"
	mounts, err := sn.Prepare(ctx, key, base.name)
	if err != nil {
		return b.engineErr("prepare the fork's snapshot", err)
	}
	labels := b.core.Labels(cs, k.RunDir, false)
	labels[hostside.LabelPool] = ""
	labels[b.gcRefLabel()] = key
	if _, err := k.ctr.SetLabels(ctx, labels); err != nil {
		sn.Remove(context.WithoutCancel(ctx), key)
		return b.engineErr("label the warm container", err)
	}
	upper, err := b.upperDir(ctx, key)
	if err != nil {
		return err
	}
	// k is no one else's yet: the fork hands it out when this returns.
	k.snap, k.upper = key, upper
	if err := b.mountRoot(int(k.task.Pid()), mounts); err != nil {
		return err
	}
	if cs.Limits != b.core.Cfg.DefaultLimits {
		if err := k.task.Update(ctx, client.WithResources(resources(cs.Limits))); err != nil {
			return b.engineErr("set the child's limits", err)
		}
	}
	if cs.Limits.DiskBytes > 0 {
		k.WatchDisk(k.upper, cs.Limits.DiskBytes, k.Logger())
	}
	return k.Adopt(ctx, forkRoot, cs, scripts, b.log.With("episode_id", cs.EpisodeID, "container", k.id))
}

// resources are a sandbox's limits as the cgroup's, as specOpts sets them.
func resources(l sandbox.Limits) *specs.LinuxResources {
	mem, quota, period, pids := l.MemoryBytes, int64(l.CPUs*cfsPeriod), uint64(cfsPeriod), l.Pids+hostside.AgentPids
	return &specs.LinuxResources{
		Memory: &specs.LinuxMemory{Limit: &mem, Swap: &mem},
		CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period},
		Pids:   &specs.LinuxPids{Limit: &pids},
	}
}

// mountRoot mounts the snapshot mounts at forkRoot in the mount namespace
// of pid (a warm container's agent) and binds the container's own mounts
// below it: the overlay is mounted on the host, cloned into a detached
// mount and unmounted there, and a thread that entered the namespace
// attaches the clone. That thread stays locked and ends with its
// goroutine, so no other goroutine runs in the namespace.
func (b *Backend) mountRoot(pid int, mounts []mount.Mount) error {
	tops, err := topMounts(pid)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(b.core.Cfg.StateDir, "forkroot-")
	if err != nil {
		return fmt.Errorf("containerd: fork: %w", err)
	}
	defer os.Remove(tmp)
	if err := mount.All(mounts, tmp); err != nil {
		return fmt.Errorf("containerd: fork: mount the child's snapshot: %w", err)
	}
	tree, err := unix.OpenTree(unix.AT_FDCWD, tmp, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	uerr := unix.Unmount(tmp, unix.MNT_DETACH)
	if err != nil {
		return fmt.Errorf("containerd: fork: clone the child's mount (needs Linux 5.2): %w", err)
	}
	defer unix.Close(tree)
	if uerr != nil {
		return fmt.Errorf("containerd: fork: unmount %s: %w", tmp, uerr)
	}
	ns, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/mnt")
	if err != nil {
		return fmt.Errorf("containerd: fork: the warm container's mount namespace: %w", err)
	}
	defer ns.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_FS); err != nil {
				return fmt.Errorf("unshare the thread's file system context: %w", err)
			}
			if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNS); err != nil {
				return fmt.Errorf("enter the mount namespace (rollcage must run as root): %w", err)
			}
			if err := unix.Mkdir(forkRoot, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("mkdir %s: %w", forkRoot, err)
			}
			if err := unix.MoveMount(tree, "", unix.AT_FDCWD, forkRoot, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
				return fmt.Errorf("attach the child's root: %w", err)
			}
			for _, mp := range tops {
				if err := unix.Mount(mp, forkRoot+mp, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
					return fmt.Errorf("bind %s into the child's root (did the parent remove it?): %w", mp, err)
				}
			}
			return nil
		}()
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("containerd: fork: %w", err)
	}
	return nil
}

// topMounts are the mount points right below the root of pid's mount
// table, in mount order (each bound with what is mounted under it).
func topMounts(pid int) ([]string, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("containerd: fork: the warm container's mounts: %w", err)
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
		return nil, fmt.Errorf("containerd: fork: the warm container's mounts: %w", err)
	}
	var tops []string
	for _, e := range all {
		if e.parent == rootID && e.point != "/" && e.point != forkRoot {
			tops = append(tops, e.point)
		}
	}
	if rootID == "" || len(tops) == 0 {
		return nil, fmt.Errorf("containerd: fork: the warm container's mount table has no root or nothing under it")
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

// removeForkSnapshot removes an adopted child's snapshot once its
// container is gone.
func (c *container) removeForkSnapshot(ctx context.Context) error {
	if c.snap == "" || c.snap == c.id {
		return nil
	}
	if err := c.b.snapshotter().Remove(ctx, c.snap); err != nil && !cerrdefs.IsNotFound(err) {
		return c.b.engineErr("remove the fork snapshot "+c.snap, err)
	}
	return nil
}
