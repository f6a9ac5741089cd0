package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// Bounds of a fork's own steps.
const (
	forkCopyLimit = 4 // child layers copied at once
)

// Fork copies the container's writable layer into n children of the
// same image and spec. On overlay2 the layer is the UpperDir, copied on
// the host (reflinked where the file system can) so whiteouts (deletions)
// and opaque directories carry over as they are. A child is a warm
// container of the pool when one fits (adopt: its agent changes its root
// into an overlay of the image's layers and a copy of the parent's layer)
// or else a new container whose UpperDir gets the copy before it starts.
// The parent is paused only for the first copy, or for the last part of it
// (hostside.LayerCopy); the others are made from the first child's, each
// child starting as soon as its copy is done (the first last).
func (c *container) Fork(ctx context.Context, n int) (sandbox.ForkResult, error) {
	start := time.Now()
	b := c.b
	spec, sessions, err := b.core.CheckFork(c.Box, n)
	if err != nil {
		return sandbox.ForkResult{}, err
	}

	upper, err := c.upperDir(ctx)
	if err != nil {
		return sandbox.ForkResult{}, c.Wrap("fork", err)
	}
	// The sessions are dumped (the parent running) while the children are
	// made ready: the two wait on different things (the agent, the engine).
	dump := hostside.StartDump(ctx, start, c.Agent().Exec, sessions, c.backgroundProcesses)
	// Warm containers become children without a container start; the
	// pool refills once the fork is done.
	warm := b.takeWarmForFork(spec, n)
	defer b.core.Pool.Wake()
	kids, err := b.prepareChildren(ctx, spec, warm, n)
	var lc *hostside.LayerCopy
	if err == nil {
		// Pre-copied into the first child while the dump may still run.
		lc, err = hostside.Precopy(ctx, upper, kids[0].upper)
	}
	derr := dump.Wait() // the dump has ended before the parent is paused
	if err != nil {
		for _, k := range kids {
			k.discard(ctx)
		}
		return sandbox.ForkResult{}, c.Wrap("fork", err)
	}
	ok := false
	defer func() {
		if !ok {
			for _, k := range kids {
				k.discard(ctx)
			}
		}
	}()
	if derr != nil {
		return sandbox.ForkResult{}, c.Wrap("fork", derr)
	}
	tCreate := time.Since(start)
	scripts, notCarried, tDump := dump.Result()
	paused, err := lc.Frozen(ctx, c.freeze)
	if err != nil {
		return sandbox.ForkResult{}, c.Wrap("fork", err)
	}
	tPaused := time.Since(start)
	changed, _ := hostside.Usage(kids[0].upper)

	// The other children's layers are copied from the first child's, and
	// each starts as soon as its copy is done; the first starts once they
	// all are (they read its layer). From here each child's goroutine
	// owns it: on error it leaves neither the container nor its slot.
	ok = true
	copying := make(chan struct{}, forkCopyLimit)
	var copied sync.WaitGroup
	copied.Add(n - 1)
	var tCopy time.Duration
	children, err := hostside.MakeChildren(ctx, n, func(gctx context.Context, i int) (*container, error) {
		k := kids[i]
		if i == 0 {
			copied.Wait()
			tCopy = time.Since(start)
		} else {
			copying <- struct{}{}
			err := hostside.CopyLayer(gctx, kids[0].upper, k.upper)
			<-copying
			copied.Done()
			if err != nil {
				k.discard(ctx)
				return nil, err
			}
		}
		return b.finishChild(gctx, ctx, k, scripts)
	})
	if err != nil {
		return sandbox.ForkResult{}, c.Wrap("fork", err)
	}
	res := sandbox.ForkResult{Children: children, Paused: paused, ChangedBytes: changed, Sessions: sessions, NotCarried: notCarried}
	return c.Forked(res, start, len(warm), "dumped_at", tDump, "created_at", tCreate, "thawed_at", tPaused, "copied_at", tCopy), nil
}

// upperDir is the container's writable layer on the host, or an error
// wrapping ErrUnsupported saying what a fork needs.
func (c *container) upperDir(ctx context.Context) (string, error) {
	if c.forkUpper != "" {
		return c.forkUpper, nil
	}
	st, err := c.b.cli.ContainerInspect(ctx, c.id)
	if err != nil {
		return "", c.b.engineErr("inspect", err)
	}
	return layerDir(st)
}

func layerDir(st dcontainer.InspectResponse) (string, error) {
	upper := ""
	if st.GraphDriver.Data != nil {
		upper = st.GraphDriver.Data["UpperDir"]
	}
	if upper == "" {
		return "", fmt.Errorf("storage driver %q shows no writable layer (UpperDir): fork needs Docker's overlay2 driver: %w", st.GraphDriver.Name, sandbox.ErrUnsupported)
	}
	if _, err := os.Stat(upper); err != nil {
		return "", fmt.Errorf("the writable layer %s cannot be read from here: run rollcage as root on the Docker host to fork: %w (%v)", upper, sandbox.ErrUnsupported, err)
	}
	return upper, nil
}

// backgroundProcesses lists the sandbox user's processes other than the
// sessions' shells: what a fork does not carry. Best effort: nil when the
// engine cannot list them.
func (c *container) backgroundProcesses(ctx context.Context) []string {
	top, err := c.b.cli.ContainerTop(ctx, c.id, []string{"-o", "pid,uid,args"})
	if err != nil {
		c.Logger().Warn("fork: listing the parent's processes", "err", err)
		return nil
	}
	iu, ia := slices.Index(top.Titles, "UID"), slices.Index(top.Titles, "COMMAND")
	if iu < 0 || ia < 0 {
		return nil
	}
	// The engine lists host uids: shifted where it remaps users.
	uid, _ := strconv.Atoi(strings.Split(hostside.SandboxUser, ":")[0])
	if c.Spec().User == sandbox.UserRoot {
		uid = 0
	}
	if c.b.remap != nil {
		uid += c.b.remap.UID
	}
	var out []string
	for _, p := range top.Processes {
		if len(p) <= max(iu, ia) || p[iu] != strconv.Itoa(uid) {
			continue
		}
		if strings.HasSuffix(p[ia], "/dev/fd/3") || strings.HasSuffix(p[ia], "rollcage-agent nsinit") {
			continue // a session's shell, a root sandbox's zygote
		}
		out = append(out, p[ia])
	}
	return out
}

// freeze freezes the container through its cgroup (no runc process on
// either side of the copy, as Docker's pause and unpause each run one),
// or through Docker when the container's cgroup freezer cannot be found.
// It returns when the freeze began and the thaw, which runs even when ctx
// is done: a parent left frozen would hang its episode.
func (c *container) freeze(ctx context.Context) (time.Time, func() error, error) {
	if st, err := c.b.cli.ContainerInspect(ctx, c.id); err == nil && st.State != nil && st.State.Pid > 0 {
		t0 := time.Now()
		thaw, err := hostside.FreezeCgroup(ctx, st.State.Pid)
		if err == nil {
			return t0, thaw, nil
		}
		c.Logger().Warn("fork: freezing through the cgroup failed; pausing through Docker", "err", err)
	}
	t0, err := hostside.Freeze(ctx, c.Logger(), func(ctx context.Context) error { return c.b.cli.ContainerPause(ctx, c.id) })
	if err != nil {
		return t0, nil, c.b.engineErr("pause", err)
	}
	return t0, func() error {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
		defer cancel()
		if err := c.b.cli.ContainerUnpause(uctx, c.id); err != nil {
			return c.b.engineErr("unpause", err)
		}
		return nil
	}, nil
}

// child is a fork's child in the making: a new container, created and
// not started, whose UpperDir takes the parent's layer, or a warm one
// whose new root will be an overlay of its image's layers and upper, a
// directory beside its own layer that takes the parent's layer.
type child struct {
	c     *container
	spec  sandbox.Spec
	upper string

	// A warm container's.
	warm        bool
	pid         int    // its agent's, on the host
	layers      string // overlay2's directory, that lower's names are relative to
	lower, work string // the image's layers (overlay2's short names), the overlay's work dir
}

// discard removes a child that will not be handed out, and frees its slot.
func (k child) discard(ctx context.Context) {
	switch {
	case k.c == nil:
	case k.warm:
		k.c.Close(ctx) // live: Close frees the slot
	default:
		k.c.teardown(ctx)
		k.c.b.core.Slots.ReleaseAlive()
	}
}

// takeWarmForFork takes up to n warm containers for spec's children. A
// running Docker container's labels cannot change, so a spec with labels
// of its own gets none.
func (b *Backend) takeWarmForFork(spec sandbox.Spec, n int) []*container {
	if len(spec.Labels) > 0 {
		return nil
	}
	return b.core.TakeWarmForFork(spec, n)
}

// prepareChildren makes n children of spec ready for the parent's layer:
// the warm containers first, new stopped ones for the rest and for a warm
// one that cannot be used (one alive slot each). On error none is left.
func (b *Backend) prepareChildren(ctx context.Context, spec sandbox.Spec, warm []*container, n int) ([]child, error) {
	kids := make([]child, n)
	g, gctx := errgroup.WithContext(ctx)
	for i := range kids {
		kids[i].spec = hostside.ChildSpec(spec, i)
		var w *container
		if i < len(warm) {
			w = warm[i]
		}
		g.Go(func() error {
			k := &kids[i]
			if w != nil {
				err := b.prepareWarm(gctx, k, w)
				if err == nil {
					return nil
				}
				w.Close(ctx) // frees its slot
				if gctx.Err() != nil {
					return err
				}
				b.log.Warn("fork: a warm container could not become a child; creating a new one", "episode_id", k.spec.EpisodeID, "err", err)
			}
			return b.prepareStopped(gctx, k)
		})
	}
	if err := g.Wait(); err != nil {
		for _, k := range kids {
			k.discard(ctx)
		}
		return nil, err
	}
	return kids, nil
}

// prepareStopped creates k's container, stopped, with an alive slot.
func (b *Backend) prepareStopped(ctx context.Context, k *child) error {
	if err := b.core.Slots.AcquireAlive(ctx, k.spec.EpisodeID); err != nil {
		return err
	}
	release, err := b.core.Slots.Admit(ctx, k.spec.EpisodeID)
	if err != nil {
		b.core.Slots.ReleaseAlive()
		return err
	}
	defer release()
	c, err := b.core.CreateStopped(ctx, k.spec, false, "")
	if err != nil {
		b.core.Slots.ReleaseAlive()
		return err
	}
	k.c = c
	st, err := b.cli.ContainerInspect(ctx, c.id)
	if err != nil {
		return b.engineErr("inspect "+c.Name(), err)
	}
	k.upper, err = layerDir(st)
	return err
}

// prepareWarm makes the warm container w ready to be k: the directories of
// its new root's upper and work beside its own layer (removed with the
// container, as Docker removes the layer's directory), and what the
// overlay will be mounted from.
func (b *Backend) prepareWarm(ctx context.Context, k *child, w *container) error {
	st, err := b.cli.ContainerInspect(ctx, w.id)
	if err != nil {
		return b.engineErr("inspect "+w.Name(), err)
	}
	if st.State == nil || !st.State.Running || st.State.Pid <= 0 {
		return fmt.Errorf("docker: warm container %s is not running", w.Name())
	}
	own, err := layerDir(st)
	if err != nil {
		return err
	}
	layer := filepath.Dir(own)
	lower, err := os.ReadFile(filepath.Join(layer, "lower"))
	if err != nil {
		return fmt.Errorf("docker: fork: the image layers of %s (overlay2's lower file): %w", w.Name(), err)
	}
	dir := filepath.Join(layer, "rollcage-fork")
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o700}, {dir + "/upper", 0o755}, {dir + "/work", 0o700}} {
		if err := os.Mkdir(d.path, d.mode); err != nil {
			return fmt.Errorf("docker: fork: %w", err)
		}
	}
	k.c, k.warm, k.pid = w, true, st.State.Pid
	k.layers, k.lower = filepath.Dir(layer), strings.TrimSpace(string(lower))
	k.upper, k.work = dir+"/upper", dir+"/work"
	return nil
}

// finishChild makes k a sandbox once its layer is copied: adopted when
// warm, else started. gctx bounds the work, ctx the clean-up of a child
// that failed. On error k is gone and its slot free.
func (b *Backend) finishChild(gctx, ctx context.Context, k child, scripts map[string]string) (*container, error) {
	t0 := time.Now()
	if !k.warm {
		if err := b.startChild(gctx, k, scripts); err != nil {
			return nil, err
		}
		return k.c, nil
	}
	if err := b.adopt(gctx, k, scripts); err != nil {
		k.c.Close(ctx)
		return nil, err
	}
	b.core.ForkedWarm.Add(1)
	k.c.Logger().Info("sandbox created by fork from a warm container", "ready_after", time.Since(t0))
	return k.c, nil
}

// adopt makes the warm container k.c the fork child k: an overlay of its
// image's layers (its own init layer first, as Docker mounts them) under
// k.upper is mounted at hostside.ForkRoot in its mount namespace with the
// container's own mounts bound inside it (hostside.MountRoot), its cgroup
// gets the child's limits, the disk watchdog watches the new upper, and
// the agent changes its root there and restores the sessions. The
// confinement is the container's: the same namespaces, cgroup, seccomp
// profile, capabilities and no-new-privileges. The container keeps the
// pool's labels, as a warm one handed out does (Docker cannot relabel a
// running container); it is renamed for the episode.
func (b *Backend) adopt(ctx context.Context, k child, scripts map[string]string) error {
	opts := "lowerdir=" + k.lower + ",upperdir=" + k.upper + ",workdir=" + k.work + ",index=off"
	err := hostside.MountRoot("docker", k.pid, b.cfg.StateDir, func(dir string) error {
		// overlay2's short names keep the options under a page, as Docker
		// mounts them: relative to its directory.
		return hostside.OnLockedThread(func() error {
			if err := unix.Chdir(k.layers); err != nil {
				return err
			}
			return unix.Mount("overlay", dir, "overlay", 0, opts)
		})
	})
	if err != nil {
		return err
	}
	if l := k.spec.Limits; l != b.core.Cfg.DefaultLimits {
		pids := l.Pids + hostside.AgentPids
		if _, err := b.cli.ContainerUpdate(ctx, k.c.id, dcontainer.UpdateConfig{Resources: dcontainer.Resources{
			Memory: l.MemoryBytes, MemorySwap: l.MemoryBytes, NanoCPUs: int64(l.CPUs * 1e9), PidsLimit: &pids,
		}}); err != nil {
			return b.engineErr("set the child's limits", err)
		}
	}
	if k.spec.Limits.DiskBytes > 0 {
		k.c.WatchDisk(k.upper, k.spec.Limits.DiskBytes, k.c.Logger()) // no --storage-opt quota covers the new upper
	}
	// k.c is no one else's yet: the fork hands it out when this returns.
	k.c.forkUpper = k.upper
	name := ops{b}.HandOut(ctx, k.c, k.spec)
	return k.c.Adopt(ctx, hostside.ForkRoot, name, k.spec, scripts, b.log.With("episode_id", k.spec.EpisodeID, "container", name))
}

// startChild starts a child, configures it with the parent's spec and
// replays the parent's sessions into it.
func (b *Backend) startChild(ctx context.Context, k child, scripts map[string]string) error {
	release, err := b.core.Slots.Admit(ctx, k.spec.EpisodeID)
	if err != nil {
		k.c.teardown(ctx)
		b.core.Slots.ReleaseAlive()
		return err
	}
	err = b.core.Launch(ctx, k.c, k.spec) // tears k.c down on error
	release()
	if err != nil {
		b.core.Slots.ReleaseAlive()
		return err
	}
	if err := k.c.Restore(ctx, k.spec, scripts); err != nil {
		k.c.Close(ctx) // live now: Close frees the slot
		return err
	}
	k.c.Logger().Info("sandbox created by fork", "id", k.c.shortID())
	return nil
}
