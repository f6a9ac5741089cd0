package docker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// container is one sandbox: a Docker container and the agent client that
// drives it.
type container struct {
	// Box drives the agent (exec and files, behind the disk watchdog when
	// the engine does not enforce the limit) and holds the sandbox's name,
	// logger and spec.
	*hostside.Box
	b  *Backend
	id string
	// kernelLimit is the disk limit the kernel holds it to (its
	// --storage-opt size= or its subvolume's quota group); 0: the watchdog.
	kernelLimit int64
	// forkUpper is the upper directory of the root a warm container's
	// agent changed to when it became a fork's child (its files are there,
	// not in the container's layer); "" otherwise. Set before it is
	// handed out, then never changed.
	forkUpper string
}

var (
	_ sandbox.Sandbox       = (*container)(nil)
	_ sandbox.Forker        = (*container)(nil)
	_ sandbox.Snapshotter   = (*container)(nil)
	_ sandbox.Streamer      = (*container)(nil) // through hostside.Conn
	_ sandbox.ProcessKiller = (*container)(nil) // through hostside.Conn
	_ sandbox.DiskGuarder   = (*container)(nil) // through hostside.Conn
)

func (c *container) box() *hostside.Box { return c.Box }

func (c *container) ID() string { return c.id }

func (c *container) shortID() string {
	if len(c.id) > 12 {
		return c.id[:12]
	}
	return c.id
}

// connect dials the agent's socket, retrying while the agent starts, and
// fails with the container's last log lines when it never listens.
func (c *container) connect(ctx context.Context, lease time.Duration) error {
	sock := filepath.Join(c.RunDir, hostside.AgentSockName)
	return c.Dial(ctx, "docker", sock, hostside.ConnectTimeout, lease, c.Logger(), func(ctx context.Context) error {
		st, err := c.b.cli.ContainerInspect(ctx, c.id)
		if err == nil && st.State != nil && !st.State.Running {
			return fmt.Errorf("container exited (code %d); last logs: %s", st.State.ExitCode, c.lastLogs(ctx))
		}
		if ctx.Err() != nil {
			return fmt.Errorf("last logs: %s", c.lastLogs(ctx))
		}
		return nil
	})
}

// lastLogs returns the container's last log lines on one line, for error
// messages.
func (c *container) lastLogs(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	rc, err := c.b.cli.ContainerLogs(ctx, c.id, dcontainer.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "400"})
	if err != nil {
		return "(logs unavailable: " + err.Error() + ")"
	}
	defer rc.Close()
	var buf bytes.Buffer
	if _, err := stdcopy.StdCopy(&buf, &buf, io.LimitReader(rc, 64<<10)); err != nil && buf.Len() == 0 {
		return "(logs unreadable: " + err.Error() + ")"
	}
	return hostside.LogSummary(buf.String())
}

// watchDisk starts the disk watchdog over the container's writable layer.
func (c *container) watchDisk(ctx context.Context, limit int64) error {
	st, err := c.b.cli.ContainerInspect(ctx, c.id)
	if err != nil {
		return c.b.engineErr("inspect "+c.Name(), err)
	}
	upper := ""
	if st.GraphDriver.Data != nil {
		upper = st.GraphDriver.Data["UpperDir"]
	}
	if upper == "" {
		c.Logger().Warn("no disk limit: the storage driver neither takes --storage-opt size nor shows an UpperDir to watch", "driver", st.GraphDriver.Name)
		c.SetDiskGuard(sandbox.DiskNone)
		return nil
	}
	if _, err := hostside.Usage(upper); err != nil {
		c.Logger().Warn("no disk limit: the writable layer cannot be read from here (run rollcage as root)", "dir", upper, "err", err)
		c.SetDiskGuard(sandbox.DiskNone)
		return nil
	}
	c.WatchDisk(upper, limit, c.Logger())
	return nil
}

// Snapshot commits the container's filesystem (bind mounts excluded, so
// neither the agent nor its socket end up in the image) to ref.
func (c *container) Snapshot(ctx context.Context, ref string) (string, error) {
	if c.IsClosed() {
		return "", c.ErrClosed("snapshot")
	}
	if c.forkUpper != "" {
		return c.snapshotAdopted(ctx, ref)
	}
	id, err := c.b.commit(ctx, c.id, ref, "rollcage snapshot of "+c.Name(), true)
	if cerrdefs.IsNotFound(err) {
		return "", c.ErrClosed("snapshot")
	}
	if err != nil {
		return "", c.Wrap("snapshot", err)
	}
	return id, nil
}

// snapshotAdopted is Snapshot of a warm fork child, whose files are in
// the root its agent changed to, not in its container's layer: they are
// copied, the child frozen, into the layer of a stopped container of the
// same image, which is committed and removed.
func (c *container) snapshotAdopted(ctx context.Context, ref string) (string, error) {
	spec := c.Spec()
	spec.EpisodeID += ".snapshot"
	tmp, err := c.b.core.CreateStopped(ctx, spec, false, "")
	if err != nil {
		return "", c.Wrap("snapshot", err)
	}
	defer tmp.teardown(ctx)
	st, err := c.b.cli.ContainerInspect(ctx, tmp.id)
	if err != nil {
		return "", c.Wrap("snapshot", c.b.engineErr("inspect "+tmp.Name(), err))
	}
	dst, err := layerDir(st)
	if err != nil {
		return "", c.Wrap("snapshot", err)
	}
	if _, err := hostside.CopyFrozen(ctx, c.forkUpper, dst, c.freeze); err != nil {
		return "", c.Wrap("snapshot", err)
	}
	id, err := c.b.commit(ctx, tmp.id, ref, "rollcage snapshot of "+c.Name(), false)
	if err != nil {
		return "", c.Wrap("snapshot", err)
	}
	return id, nil
}

// commit commits container id to the image ref, paused or not.
func (b *Backend) commit(ctx context.Context, id, ref, comment string, pause bool) (string, error) {
	resp, err := b.cli.ContainerCommit(ctx, id, dcontainer.CommitOptions{
		Reference: ref,
		Comment:   comment,
		Pause:     pause,
		// The image inherits the container's labels; without this, a
		// container someone runs from it by hand would look like a
		// leftover of ours to the reaper.
		Changes: []string{"LABEL " + host.LabelManaged + "=snapshot"},
	})
	if err != nil {
		return "", b.engineErr("commit", err)
	}
	return resp.ID, nil
}

// Close shuts the agent down, removes the container and its host
// directory. It runs once; later and concurrent calls return its result.
func (c *container) Close(ctx context.Context) error { return c.b.core.Close(ctx, c) }

// teardown is Close without the bookkeeping, for containers that never
// became sandboxes.
func (c *container) teardown(ctx context.Context) error { return c.b.core.Teardown(ctx, c) }

// isRemovalInProgress: a concurrent remove (the reaper, Backend.Close)
// got there first; Docker answers 409 Conflict.
func isRemovalInProgress(err error) bool { return cerrdefs.IsConflict(err) }
