package containerd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// forkBase is a committed snapshot holding a parent's writable layer on
// top of the parent's own parent: the children's snapshots are prepared
// from it.
type forkBase struct{ name string }

// forkBasePrefix starts the names of the committed fork layers.
const forkBasePrefix = "rollcage-forkbase-"

// Fork freezes the container, copies its writable layer (the overlay
// snapshot's upper directory, whiteouts and opaque directories as they
// are, reflinked where the file system can) into a new snapshot on the
// same parent, thaws it and commits that snapshot. The n children are
// prepared from the committed snapshot, so each costs an overlay mount and
// no copy; it is collected with the last of them. The shell sessions are
// replayed into each child.
func (c *container) Fork(ctx context.Context, n int) (sandbox.ForkResult, error) {
	start := time.Now()
	b := c.b
	if c.upper == "" {
		return sandbox.ForkResult{}, c.Wrap("fork", fmt.Errorf("the %s snapshotter shows no upper directory to copy: fork needs the overlayfs snapshotter: %w", b.cfg.Snapshotter, sandbox.ErrUnsupported))
	}
	spec, sessions, err := b.core.CheckFork(c.Box, n)
	if err != nil {
		return sandbox.ForkResult{}, err
	}
	// The sessions are dumped (the parent running) while the fork's layer
	// is prepared and pre-copied; the freeze waits for the dump.
	dump := hostside.StartDump(ctx, start, c.Agent().Exec, sessions, c.backgroundProcesses)
	defer dump.Wait() // no dump outlives the fork

	lctx, done, err := b.cli.WithLease(b.ctx(ctx))
	if err != nil {
		return sandbox.ForkResult{}, c.Wrap("fork", b.engineErr("lease", err))
	}
	defer done(context.WithoutCancel(lctx))
	// Warm containers become children without starting anything; the
	// pool refills once the fork is done.
	warm := b.core.TakeWarmForFork(spec, n)
	defer b.core.Pool.Wake()
	base, paused, changed, err := c.commitLayer(lctx, dump)
	if err != nil {
		for _, k := range warm {
			k.Close(ctx)
		}
		return sandbox.ForkResult{}, c.Wrap("fork", err)
	}
	tCommit := time.Since(start)
	scripts, notCarried, tDump := dump.Result()

	children, err := hostside.MakeChildren(lctx, n, func(gctx context.Context, i int) (*container, error) {
		var k *container
		if i < len(warm) {
			k = warm[i]
		}
		return b.forkChild(gctx, ctx, k, base, hostside.ChildSpec(spec, i), scripts)
	})
	if err != nil {
		return sandbox.ForkResult{}, c.Wrap("fork", err)
	}
	res := sandbox.ForkResult{Children: children, Paused: paused, ChangedBytes: changed, Sessions: sessions, NotCarried: notCarried}
	return c.Forked(res, start, len(warm), "dumped_at", tDump, "committed_at", tCommit), nil
}

// forkChild makes the fork child cs of base: from the warm container k
// when there is one (adopt) and that works, else from a new container.
// gctx bounds the work, ctx the clean-up of a child that failed.
func (b *Backend) forkChild(gctx, ctx context.Context, k *container, base *forkBase, cs sandbox.Spec, scripts map[string]string) (*container, error) {
	t0 := time.Now()
	if k != nil {
		err := b.adopt(gctx, k, base, cs, scripts)
		if err == nil {
			b.core.ForkedWarm.Add(1)
			k.Logger().Info("sandbox created by fork from a warm container", "ready_after", time.Since(t0))
			return k, nil
		}
		k.Close(ctx) // frees its slot
		if gctx.Err() != nil {
			return nil, err
		}
		b.log.Warn("fork: a warm container could not become a child; starting a new one", "episode_id", cs.EpisodeID, "err", err)
	}
	if err := b.core.Slots.AcquireAlive(gctx, cs.EpisodeID); err != nil {
		return nil, err
	}
	k, err := b.core.Start(gctx, cs, false, base.name)
	if err != nil {
		b.core.Slots.ReleaseAlive()
		return nil, err
	}
	if err := k.Restore(gctx, cs, scripts); err != nil {
		k.Close(ctx) // live now: Close frees the slot
		return nil, err
	}
	k.Logger().Info("sandbox created by fork", append(k.Phases.Attrs(), "restored_at", time.Since(k.Phases.Start))...)
	return k, nil
}

// commitLayer copies the container's writable layer into a new snapshot
// on its parent and commits it: pre-copied with the container running,
// then, once the sessions' dump ended (its error is returned), finished
// frozen for as short as it can be
// (hostside.LayerCopy). ctx carries a lease that keeps the committed
// snapshot until the children hold it.
func (c *container) commitLayer(ctx context.Context, dump *hostside.ForkDump) (base *forkBase, paused time.Duration, changed int64, err error) {
	b := c.b
	sn := b.snapshotter()
	info, err := sn.Stat(ctx, c.snap)
	if err != nil {
		return nil, 0, 0, b.engineErr("stat the snapshot", err)
	}
	token := hostside.RandomToken()
	active := "rollcage-forking-" + token
	if _, err := sn.Prepare(ctx, active, info.Parent); err != nil {
		return nil, 0, 0, b.engineErr("prepare the fork's layer", err)
	}
	committed := false
	defer func() {
		if !committed {
			sn.Remove(context.WithoutCancel(ctx), active)
		}
	}()
	dst, err := b.upperDir(ctx, active)
	if err != nil {
		return nil, 0, 0, err
	}
	lc, err := hostside.Precopy(ctx, c.upper, dst)
	if err != nil {
		return nil, 0, 0, err
	}
	if err := dump.Wait(); err != nil {
		return nil, 0, 0, err
	}
	paused, err = lc.Frozen(ctx, c.freeze)
	if err != nil {
		return nil, paused, 0, err
	}
	changed, _ = hostside.Usage(dst)
	name := forkBasePrefix + token
	if err := sn.Commit(ctx, name, active); err != nil {
		return nil, paused, 0, b.engineErr("commit the fork's layer", err)
	}
	committed = true
	return &forkBase{name: name}, paused, changed, nil
}

// freeze freezes the task for a copy of its layer, through its cgroup
// (hostside.FreezeCgroup: no runc process on either side of the copy),
// or through containerd when the cgroup's freezer cannot be found. It
// returns when the freeze began and the thaw, which runs even when ctx
// is done: a parent left frozen would hang its episode.
func (c *container) freeze(ctx context.Context) (time.Time, func() error, error) {
	t0 := time.Now()
	thaw, err := hostside.FreezeCgroup(ctx, int(c.task.Pid()))
	if err == nil {
		return t0, thaw, nil
	}
	c.Logger().Warn("fork: freezing through the cgroup failed; pausing through containerd", "err", err)
	t0, err = hostside.Freeze(ctx, c.Logger(), c.task.Pause)
	if err != nil {
		return t0, nil, c.b.engineErr("pause", err)
	}
	return t0, func() error {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
		defer cancel()
		if err := c.task.Resume(rctx); err != nil {
			return c.b.engineErr("resume", err)
		}
		return nil
	}, nil
}

// backgroundProcesses lists the sandbox user's processes other than the
// sessions' shells: what a fork does not carry. Best effort: nil when the
// task's processes cannot be listed.
func (c *container) backgroundProcesses(ctx context.Context) []string {
	procs, err := c.task.Pids(c.b.ctx(ctx))
	if err != nil {
		c.Logger().Warn("fork: listing the parent's processes", "err", err)
		return nil
	}
	uid := strings.Split(hostside.SandboxUser, ":")[0]
	var out []string
	for _, p := range procs {
		dir := "/proc/" + strconv.Itoa(int(p.Pid))
		if procUID(dir) != uid {
			continue
		}
		raw, err := os.ReadFile(dir + "/cmdline")
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.TrimSpace(string(bytes.ReplaceAll(raw, []byte{0}, []byte{' '})))
		if strings.HasSuffix(args, "/dev/fd/3") {
			continue // a session's shell
		}
		out = append(out, args)
	}
	return out
}

// procUID is the real uid of the process whose /proc directory is dir.
func procUID(dir string) string {
	raw, err := os.ReadFile(dir + "/status")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0]
			}
		}
	}
	return ""
}
