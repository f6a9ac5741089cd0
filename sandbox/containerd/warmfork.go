package containerd

import (
	"context"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/mount"
	cerrdefs "github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// gcRefLabel is the container label that holds an adopted fork snapshot
// against containerd's garbage collector while the container exists.
func (b *Backend) gcRefLabel() string {
	return "containerd.io/gc.ref.snapshot." + b.cfg.Snapshotter + "/fork"
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
	labels[host.LabelPool] = ""
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
	if err := hostside.MountRoot("containerd", int(k.task.Pid()), b.core.Cfg.StateDir, func(dir string) error { return mount.All(mounts, dir) }); err != nil {
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
	return k.Adopt(ctx, hostside.ForkRoot, k.Name(), cs, scripts, b.log.With("episode_id", cs.EpisodeID, "container", k.id))
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
