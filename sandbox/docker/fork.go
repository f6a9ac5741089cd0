package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"golang.org/x/sync/errgroup"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// Bounds of a fork's own steps.
const (
	forkCopyLimit = 4 // child layers copied at once
)

// Fork copies the container's writable layer into n new containers of the
// same image and spec. On overlay2 the layer is the UpperDir, copied on
// the host (reflinked where the file system can) into each child's
// UpperDir before the child starts, so whiteouts (deletions) and opaque
// directories carry over as they are. The parent is paused only for the
// first copy; the others are made from the first child's layer, each
// child starting as soon as its copy is done (the first last).
func (c *container) Fork(ctx context.Context, n int) (sandbox.ForkResult, error) {
	start := time.Now()
	if c.IsClosed() {
		return sandbox.ForkResult{}, c.ErrClosed("fork")
	}
	if n < 1 || n > sandbox.MaxFork {
		return sandbox.ForkResult{}, fmt.Errorf("sandbox %s: fork: n = %d: ask for 1 to %d children", c.Name(), n, sandbox.MaxFork)
	}
	if err := c.b.core.Slots.CheckOpen("fork"); err != nil {
		return sandbox.ForkResult{}, err
	}
	spec := c.Spec()
	sessions := c.Sessions()

	upper, err := c.upperDir(ctx)
	if err != nil {
		return sandbox.ForkResult{}, c.Wrap("fork", err)
	}
	// The sessions are dumped (the parent running) while the children are
	// created: the two wait on different things (the agent, the engine).
	var (
		scripts    map[string]string
		notCarried []string
		tDump      time.Duration
	)
	dumped := make(chan error, 1)
	go func() {
		var err error
		scripts, err = hostside.DumpSessions(ctx, c.Agent().Exec, sessions)
		if err == nil {
			notCarried = c.backgroundProcesses(ctx)
		}
		tDump = time.Since(start)
		dumped <- err
	}()
	kids, err := c.b.createChildren(ctx, spec, n)
	derr := <-dumped // the dump has ended before the parent is paused
	if err != nil {
		return sandbox.ForkResult{}, c.Wrap("fork", err)
	}
	ok := false
	defer func() {
		if !ok {
			for _, k := range kids {
				k.c.teardown(ctx)
				c.b.core.Slots.ReleaseAlive()
			}
		}
	}()

	if derr != nil {
		return sandbox.ForkResult{}, c.Wrap("fork", derr)
	}
	tCreate := time.Since(start)
	paused, err := c.copyPaused(ctx, upper, kids[0].upper)
	if err != nil {
		return sandbox.ForkResult{}, c.Wrap("fork", err)
	}
	changed, _ := hostside.Usage(kids[0].upper)

	// The other children's layers are copied from the first child's, and
	// each starts as soon as its copy is done; the first starts once they
	// all are (they read its layer). From here each child's goroutine
	// owns it: on error it leaves neither the container nor its slot.
	ok = true
	children := make([]sandbox.Sandbox, n)
	copying := make(chan struct{}, forkCopyLimit)
	var copied sync.WaitGroup
	copied.Add(n - 1)
	var tCopy time.Duration
	g, gctx := errgroup.WithContext(ctx)
	for i, k := range kids {
		g.Go(func() error {
			if i == 0 {
				copied.Wait()
				tCopy = time.Since(start)
			} else {
				copying <- struct{}{}
				err := hostside.CopyLayer(gctx, kids[0].upper, k.upper)
				<-copying
				copied.Done()
				if err != nil {
					k.c.teardown(ctx)
					c.b.core.Slots.ReleaseAlive()
					return err
				}
			}
			if err := c.b.startChild(gctx, k, scripts); err != nil {
				return err
			}
			children[i] = k.c
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		for _, ch := range children {
			if ch != nil {
				ch.Close(ctx)
			}
		}
		return sandbox.ForkResult{}, c.Wrap("fork", err)
	}
	res := sandbox.ForkResult{
		Children:     children,
		Paused:       paused,
		Duration:     time.Since(start),
		ChangedBytes: changed,
		Sessions:     sessions,
		NotCarried:   notCarried,
	}
	c.Logger().Info("sandbox forked", "children", n, "paused", paused, "changed_bytes", changed, "duration", res.Duration,
		"dumped_at", tDump, "created_at", tCreate, "copied_at", tCopy)
	return res, nil
}

// upperDir is the container's writable layer on the host, or an error
// wrapping ErrUnsupported saying what a fork needs.
func (c *container) upperDir(ctx context.Context) (string, error) {
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
	var out []string
	for _, p := range top.Processes {
		if len(p) <= max(iu, ia) || p[iu] != strings.Split(hostside.SandboxUser, ":")[0] {
			continue
		}
		if strings.HasSuffix(p[ia], "/dev/fd/3") {
			continue // a session's shell
		}
		out = append(out, p[ia])
	}
	return out
}

// copyPaused freezes the parent, copies its layer to dst and thaws it,
// returning how long it was frozen.
func (c *container) copyPaused(ctx context.Context, src, dst string) (time.Duration, error) {
	// Frozen through the cgroup (no runc process on either side of the
	// copy, as Docker's pause and unpause each run one), or through
	// Docker when the container's cgroup freezer cannot be found.
	if st, err := c.b.cli.ContainerInspect(ctx, c.id); err == nil && st.State != nil && st.State.Pid > 0 {
		t0 := time.Now()
		thaw, err := hostside.FreezeCgroup(ctx, st.State.Pid)
		if err == nil {
			cerr := hostside.CopyLayer(ctx, src, dst)
			terr := thaw()
			return time.Since(t0), errors.Join(cerr, terr)
		}
		c.Logger().Warn("fork: freezing through the cgroup failed; pausing through Docker", "err", err)
	}
	t0, err := hostside.Freeze(ctx, c.Logger(), func(ctx context.Context) error { return c.b.cli.ContainerPause(ctx, c.id) })
	if err != nil {
		return 0, c.b.engineErr("pause", err)
	}
	cerr := hostside.CopyLayer(ctx, src, dst)
	// Thaw even when ctx is done: a parent left frozen would hang its episode.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	uerr := c.b.cli.ContainerUnpause(uctx, c.id)
	paused := time.Since(t0)
	if uerr != nil {
		return paused, errors.Join(cerr, c.b.engineErr("unpause", uerr))
	}
	return paused, cerr
}

// child is a fork's container, created but not started.
type child struct {
	c     *container
	spec  sandbox.Spec
	upper string
}

// createChildren creates n stopped containers for spec (one alive slot
// each). On error none is left.
func (b *Backend) createChildren(ctx context.Context, spec sandbox.Spec, n int) ([]child, error) {
	kids := make([]child, n)
	g, gctx := errgroup.WithContext(ctx)
	for i := range kids {
		cs := spec
		cs.EpisodeID = spec.EpisodeID + ".fork" + strconv.Itoa(i+1)
		g.Go(func() error {
			if err := b.core.Slots.AcquireAlive(gctx, cs.EpisodeID); err != nil {
				return err
			}
			release, err := b.core.Slots.Admit(gctx, cs.EpisodeID)
			if err != nil {
				b.core.Slots.ReleaseAlive()
				return err
			}
			defer release()
			k, err := b.core.CreateStopped(gctx, cs, false, "")
			if err != nil {
				b.core.Slots.ReleaseAlive()
				return err
			}
			st, err := b.cli.ContainerInspect(gctx, k.id)
			if err == nil {
				kids[i].upper, err = layerDir(st)
			} else {
				err = b.engineErr("inspect "+k.Name(), err)
			}
			kids[i].c, kids[i].spec = k, cs
			return err
		})
	}
	if err := g.Wait(); err != nil {
		for _, k := range kids {
			if k.c != nil {
				k.c.teardown(ctx)
				b.core.Slots.ReleaseAlive()
			}
		}
		return nil, err
	}
	return kids, nil
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
