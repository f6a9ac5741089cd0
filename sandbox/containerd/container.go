package containerd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
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
	*hostside.Conn
	b      *Backend
	id     string // containerd's container id, also its snapshot key
	image  string
	runDir string
	ctr    client.Container
	upper  string // the snapshot's writable directory on the host

	task     client.Task              // set by startTask, then never changed
	exited   <-chan client.ExitStatus // the task's exit, set with task
	stopWait context.CancelFunc

	mu   sync.Mutex
	log  *slog.Logger // guarded by mu; rescoped to the episode at hand-out
	spec sandbox.Spec // guarded by mu; the episode's resolved spec, set by configure

	phases phases // how its start went, set by start and launch

	closeOnce sync.Once
	closeErr  error
}

var (
	_ sandbox.Sandbox  = (*container)(nil)
	_ sandbox.Streamer = (*container)(nil) // through hostside.Conn
)

func (c *container) ID() string { return c.id }

func (c *container) name() string { return c.id }

func (c *container) logger() *slog.Logger {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log
}

// phases are the times into a container's start (from asking for an
// admission slot) at which each step of it ended, for the logs.
type phases struct {
	start                                 time.Time
	admitted, created, started, connected time.Duration
}

// attrs are the phases as log attributes.
func (p phases) attrs() []any {
	return []any{"admitted_at", p.admitted, "created_at", p.created, "task_started_at", p.started, "connected_at", p.connected}
}

// idSeparators are runs that containerd's identifiers do not allow.
var idSeparators = regexp.MustCompile(`[._-]{2,}`)

// containerID is a container name containerd accepts: one separator
// between alphanumeric runs.
func containerID(episode, token string) string {
	return idSeparators.ReplaceAllString(hostside.ContainerName(episode, token), "-")
}

// createContainer creates (but does not start) a container for spec, with
// its run dir and snapshot, under a containerd lease so that neither the
// image nor the snapshot is collected before the container holds them.
func (b *Backend) createContainer(ctx context.Context, spec sandbox.Spec, warm bool, from *forkBase) (*container, error) {
	token := hostside.RandomToken()
	runDir := filepath.Join(b.cfg.StateDir, b.self.DirName(token))
	if err := os.Mkdir(runDir, 0o700); err != nil {
		return nil, fmt.Errorf("containerd: create %s: run dir: %w", spec.EpisodeID, err)
	}
	id := containerID(spec.EpisodeID, token)
	if warm {
		id = "rollcage-pool-" + token
	}
	c := &container{b: b, id: id, image: spec.Image, runDir: runDir,
		log: b.log.With("episode_id", spec.EpisodeID, "container", id)}
	c.Conn = hostside.NewConn(c.name)
	err := c.create(b.ctx(ctx), spec, warm, from)
	if err != nil {
		os.RemoveAll(runDir)
		return nil, err
	}
	return c, nil
}

func (c *container) create(ctx context.Context, spec sandbox.Spec, warm bool, from *forkBase) error {
	b := c.b
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
	if from != nil {
		if _, err := b.snapshotter().Prepare(lctx, c.id, from.name); err != nil {
			return b.engineErr("create "+spec.EpisodeID+": prepare the fork's snapshot", err)
		}
		snap = client.WithSnapshot(c.id)
	}
	hostname := c.id[:min(len(c.id), 63)]
	hosts := filepath.Join(c.runDir, "hosts")
	if err := os.WriteFile(hosts, []byte(hostsFile(hostname)), 0o644); err != nil {
		return fmt.Errorf("containerd: create %s: %w", spec.EpisodeID, err)
	}
	p := specParams{
		RunDir:      c.runDir,
		HostsFile:   hosts,
		AgentBinary: b.cfg.AgentBinary,
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
		client.WithContainerLabels(b.labels(spec, c.runDir, warm)),
	)
	if err != nil {
		if from != nil {
			b.snapshotter().Remove(context.WithoutCancel(lctx), c.id)
		}
		return b.engineErr("create "+spec.EpisodeID, err)
	}
	c.ctr = ctr
	c.upper, err = b.upperDir(ctx, c.id)
	if err != nil {
		c.teardown(ctx)
		return err
	}
	return nil
}

// engineErr maps a containerd error to the sandbox sentinels.
func (b *Backend) engineErr(op string, err error) error {
	if cerrdefs.IsUnavailable(err) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, os.ErrNotExist) && strings.Contains(err.Error(), ".sock") {
		return fmt.Errorf("containerd: %s: containerd at %s does not answer: run 'make containerd' or start containerd: %w: %v", op, b.addr, sandbox.ErrUnavailable, err)
	}
	return fmt.Errorf("containerd: %s: %w", op, err)
}

// startTask creates the container's task (the agent as PID 1), brings up
// loopback in its new network namespace and starts it.
func (c *container) startTask(ctx context.Context) error {
	ctx = c.b.ctx(ctx)
	task, err := c.ctr.NewTask(ctx, cio.LogFile(filepath.Join(c.runDir, agentLog)))
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
	sock := filepath.Join(c.runDir, hostside.AgentSockName)
	return c.Dial(ctx, "containerd", sock, connectTimeout, lease, c.logger(), func(context.Context) error {
		select {
		case st := <-c.exited:
			return fmt.Errorf("container exited (code %d) before its agent listened; last output: %s", st.ExitCode(), c.lastLogs())
		default:
			return nil
		}
	})
}

// lastLogs returns the agent's last output lines on one line, for error
// messages.
func (c *container) lastLogs() string {
	b, err := os.ReadFile(filepath.Join(c.runDir, agentLog))
	if err != nil {
		return "(none: " + err.Error() + ")"
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(none)"
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " | ")), " ")
}

// configure hands the episode's settings to the agent.
func (c *container) configure(ctx context.Context, spec sandbox.Spec) error {
	if err := c.Conn.Configure(ctx, spec); err != nil {
		return fmt.Errorf("containerd: configure %s: %w", c.id, err)
	}
	c.mu.Lock()
	c.spec = spec
	c.mu.Unlock()
	return nil
}

// watchDisk starts the disk watchdog over the snapshot's upper directory.
func (c *container) watchDisk(limit int64) {
	c.WatchDisk(c.upper, limit, c.logger())
}

// Close shuts the agent down, removes the task, the container with its
// snapshot and the host directory. It runs once; later and concurrent
// calls return its result.
func (c *container) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		c.MarkClosed()
		c.closeErr = c.teardown(ctx)
		c.b.slots.Forget(c)
		c.logger().Info("sandbox closed")
	})
	return c.closeErr
}

// teardown is Close without the bookkeeping; start uses it for containers
// that never became sandboxes.
func (c *container) teardown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(c.b.ctx(context.WithoutCancel(ctx)), teardownTimeout)
	defer cancel()
	c.Shutdown(ctx, shutdownTimeout)
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
	}
	if c.runDir != "" {
		if err := os.RemoveAll(c.runDir); err != nil {
			errs = append(errs, fmt.Errorf("containerd: remove run dir: %w", err))
		}
	}
	return errors.Join(errs...)
}
