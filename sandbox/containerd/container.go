package containerd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	cerrdefs "github.com/containerd/errdefs"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// agentLog is the file in the run dir that the shim writes the agent's
// standard output and error to.
const agentLog = "agent.log"

// container is one sandbox: a containerd container, its task and the
// agent client that drives it.
type container struct {
	*hostside.Box
	b     *Backend
	id    string // containerd's container id, also its snapshot key and name
	ctr   client.Container
	snap  string // the key of the snapshot of its root: id, or a fork's adopted one
	upper string // that snapshot's writable directory on the host; "" on btrfs
	// kernelLimit is the disk limit its btrfs subvolume's quota group
	// holds it to; 0: the watchdog on upper.
	kernelLimit int64

	task     client.Task              // set by startTask, then never changed
	exited   <-chan client.ExitStatus // the task's exit, set with task
	stopWait context.CancelFunc
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

// idSeparators are runs that containerd's identifiers do not allow.
var idSeparators = regexp.MustCompile(`[._-]{2,}`)

// containerID is a container name containerd accepts: one separator
// between alphanumeric runs.
func containerID(episode, token string) string {
	return idSeparators.ReplaceAllString(hostside.ContainerName(episode, token), "-")
}

// create creates the container of req, with its snapshot, under a
// containerd lease so that neither the image nor the snapshot is collected
// before the container holds them.
func (c *container) create(ctx context.Context, req hostside.CreateRequest) error {
	b, spec := c.b, req.Spec
	img, err := b.image(ctx, spec.Image)
	if err != nil {
		return fmt.Errorf("containerd: create %s: %w", spec.EpisodeID, err)
	}
	lctx, done, err := b.cli.WithLease(ctx)
	if err != nil {
		return b.engineErr("create "+spec.EpisodeID+": lease", err)
	}
	defer done(context.WithoutCancel(ctx))
	snap := client.WithNewSnapshot(c.id, img)
	if req.From != "" {
		if _, err := b.snapshotter().Prepare(lctx, c.id, req.From); err != nil {
			return b.engineErr("create "+spec.EpisodeID+": prepare the fork's snapshot", err)
		}
		snap = client.WithSnapshot(c.id)
	}
	hostname := c.id[:min(len(c.id), 63)]
	hosts := filepath.Join(c.RunDir, "hosts")
	if err := os.WriteFile(hosts, []byte(hostsFile(hostname)), 0o644); err != nil {
		return fmt.Errorf("containerd: create %s: %w", spec.EpisodeID, err)
	}
	p := specParams{
		RunDir:      c.RunDir,
		HostsFile:   hosts,
		AgentBinary: b.core.Cfg.AgentBinary,
		ProxySocket: spec.ProxySocket,
		Limits:      spec.Limits,
		Lease:       spec.Lease,
		SocketOwner: socketOwner(),
		Hostname:    hostname,
	}
	ctr, err := b.cli.NewContainer(lctx, c.id,
		client.WithImage(img),
		client.WithSnapshotter(b.cfg.Snapshotter),
		snap,
		client.WithRuntime(runcShim, nil),
		client.WithNewSpec(specOpts(img, p)...),
		client.WithContainerLabels(req.Labels),
	)
	if err != nil {
		if req.From != "" {
			b.snapshotter().Remove(context.WithoutCancel(lctx), c.id)
		}
		return b.engineErr("create "+spec.EpisodeID, err)
	}
	c.ctr = ctr
	if b.cfg.Snapshotter == "btrfs" {
		if spec.Limits.DiskBytes > 0 {
			err = b.limitBtrfs(ctx, c.id, spec.Limits.DiskBytes)
			c.kernelLimit = spec.Limits.DiskBytes
		}
	} else {
		c.upper, err = b.upperDir(ctx, c.id)
	}
	if err != nil {
		c.remove(context.WithoutCancel(ctx))
		return err
	}
	return nil
}

// engineErr maps a containerd error to the sandbox sentinels.
func (b *Backend) engineErr(op string, err error) error {
	return fmt.Errorf("containerd: %s: %w", op, b.mapErr(err))
}

// mapErr is err, or the sentence saying containerd is gone when it is.
func (b *Backend) mapErr(err error) error {
	if cerrdefs.IsUnavailable(err) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, os.ErrNotExist) && strings.Contains(err.Error(), ".sock") {
		return fmt.Errorf("containerd at %s does not answer: run 'make containerd' or start containerd: %w: %v", b.addr, sandbox.ErrUnavailable, err)
	}
	return err
}

// startTask creates the container's task (the agent as PID 1), brings up
// loopback in its new network namespace and starts it.
func (c *container) startTask(ctx context.Context) error {
	ctx = c.b.ctx(ctx)
	task, err := c.ctr.NewTask(ctx, cio.LogFile(filepath.Join(c.RunDir, agentLog)))
	if err != nil {
		return c.b.engineErr("start "+c.id, err)
	}
	c.task = task
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	c.stopWait = stop
	if c.exited, err = task.Wait(wctx); err != nil {
		return c.b.engineErr("start "+c.id+": wait", err)
	}
	if err := loopbackUp(int(task.Pid())); err != nil {
		return fmt.Errorf("containerd: start %s: %w", c.id, err)
	}
	if err := task.Start(ctx); err != nil {
		return c.b.engineErr("start "+c.id, err)
	}
	return nil
}

// connect dials the agent's socket, retrying while the agent starts, and
// fails with the agent's last output when it never listens.
func (c *container) connect(ctx context.Context, lease time.Duration) error {
	sock := filepath.Join(c.RunDir, hostside.AgentSockName)
	return c.Dial(ctx, "containerd", sock, hostside.ConnectTimeout, lease, c.Logger(), func(context.Context) error {
		select {
		case st := <-c.exited:
			return fmt.Errorf("container exited (code %d); last logs: %s", st.ExitCode(), c.lastLogs())
		default:
			return nil
		}
	})
}

// lastLogs returns the agent's last output lines on one line, for error
// messages.
func (c *container) lastLogs() string {
	b, err := os.ReadFile(filepath.Join(c.RunDir, agentLog))
	if err != nil {
		return "(none: " + err.Error() + ")"
	}
	if len(b) > 64<<10 {
		b = b[len(b)-64<<10:]
	}
	return hostside.LogSummary(string(b))
}

// Close shuts the agent down, removes the task, the container with its
// snapshot and the host directory. It runs once; later and concurrent
// calls return its result.
func (c *container) Close(ctx context.Context) error { return c.b.core.Close(ctx, c) }

// remove deletes the task (killing it), then the container with its
// snapshot; ctx carries the namespace.
func (c *container) remove(ctx context.Context) error {
	var errs []error
	if c.task != nil {
		if _, err := c.task.Delete(ctx, client.WithProcessKill); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, c.b.engineErr("delete task "+c.id, err))
		}
	}
	if c.stopWait != nil {
		c.stopWait()
	}
	if c.ctr != nil {
		if err := c.ctr.Delete(ctx, client.WithSnapshotCleanup); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, c.b.engineErr("delete container "+c.id, err))
		}
		if err := c.removeForkSnapshot(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
