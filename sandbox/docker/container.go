package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/rollcage/rollcage/agent"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// container is one sandbox: a Docker container and the agent client that
// drives it.
type container struct {
	b      *Backend
	id     string
	image  string
	runDir string
	agent  *agent.Client       // set by connect, then never changed
	disk   *hostside.DiskWatch // set by watchDisk at start, then never changed; nil when the engine enforces the limit

	mu       sync.Mutex
	name     string          // guarded by mu; changes when a warm container is handed out
	log      *slog.Logger    // guarded by mu; rescoped to the episode at hand-out
	spec     sandbox.Spec    // guarded by mu; the episode's resolved spec, set by configure
	sessions map[string]bool // guarded by mu; session names the host used (Fork restores them)

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

var _ sandbox.Sandbox = (*container)(nil)

func (c *container) ID() string { return c.id }

func (c *container) shortID() string {
	if len(c.id) > 12 {
		return c.id[:12]
	}
	return c.id
}

func (c *container) logger() *slog.Logger {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log
}

func (c *container) nameNow() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.name
}

// connect dials the agent's socket, retrying while the agent starts, and
// fails with the container's last log lines when it never listens.
func (c *container) connect(ctx context.Context, lease time.Duration) error {
	sock := filepath.Join(c.runDir, agentSockName)
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	var d net.Dialer
	wait := time.Millisecond
	for {
		conn, err := d.DialContext(cctx, "unix", sock)
		if err == nil {
			c.agent = agent.NewClient(conn, agent.ClientOptions{Heartbeat: lease / 3, Logger: c.logger()})
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ECONNREFUSED) && cctx.Err() == nil {
			return fmt.Errorf("docker: connect %s: dial agent: %w: %v", c.name, sandbox.ErrAgent, err)
		}
		// Poll the container too: an agent that crashed at start should
		// fail the create now, not after the full timeout.
		if wait >= 16*time.Millisecond {
			if st, ierr := c.b.cli.ContainerInspect(cctx, c.id); ierr == nil && st.State != nil && !st.State.Running {
				return fmt.Errorf("docker: connect %s: container exited (code %d) before its agent listened: %w; last logs: %s",
					c.name, st.State.ExitCode, sandbox.ErrAgent, c.lastLogs(ctx))
			}
		}
		select {
		case <-cctx.Done():
			if ctx.Err() != nil {
				return fmt.Errorf("docker: connect %s: %w", c.name, ctx.Err())
			}
			return fmt.Errorf("docker: connect %s: agent did not listen on %s within %v: %w; last logs: %s",
				c.name, sock, connectTimeout, sandbox.ErrAgent, c.lastLogs(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// lastLogs returns the container's last log lines on one line, for error
// messages.
func (c *container) lastLogs(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	rc, err := c.b.cli.ContainerLogs(ctx, c.id, dcontainer.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "10"})
	if err != nil {
		return "(logs unavailable: " + err.Error() + ")"
	}
	defer rc.Close()
	var buf bytes.Buffer
	if _, err := stdcopy.StdCopy(&buf, &buf, io.LimitReader(rc, 64<<10)); err != nil && buf.Len() == 0 {
		return "(logs unreadable: " + err.Error() + ")"
	}
	s := strings.TrimSpace(buf.String())
	if s == "" {
		return "(none)"
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " | ")), " ")
}

// configure hands the episode's settings to the agent.
func (c *container) configure(ctx context.Context, spec sandbox.Spec) error {
	err := c.agent.Configure(ctx, agent.Config{Workdir: spec.Workdir, Env: spec.Env, Canaries: spec.Canaries, Watch: spec.Watch})
	if err != nil {
		return fmt.Errorf("docker: configure %s: %w", c.nameNow(), err)
	}
	c.mu.Lock()
	c.spec = spec
	c.mu.Unlock()
	return nil
}

// wrap gives an agent error the sandbox's name and operation.
func (c *container) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("sandbox %s: %s: %w", c.nameNow(), op, err)
}

func (c *container) errClosed(op string) error {
	return fmt.Errorf("sandbox %s: %s: %w", c.nameNow(), op, sandbox.ErrClosed)
}

func (c *container) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if c.closed.Load() {
		return sandbox.ExecResult{}, c.errClosed("exec")
	}
	c.recordSession(req.Session)
	var res sandbox.ExecResult
	var err error
	if c.disk != nil {
		res, err = c.disk.Exec(ctx, req, c.agent.Exec)
	} else {
		res, err = c.agent.Exec(ctx, req)
	}
	return res, c.wrap("exec", err)
}

// watchDisk starts the disk watchdog over the container's writable layer.
func (c *container) watchDisk(ctx context.Context, limit int64) error {
	st, err := c.b.cli.ContainerInspect(ctx, c.id)
	if err != nil {
		return c.b.engineErr("inspect "+c.nameNow(), err)
	}
	upper := ""
	if st.GraphDriver.Data != nil {
		upper = st.GraphDriver.Data["UpperDir"]
	}
	if upper == "" {
		c.logger().Warn("no disk limit: the storage driver neither takes --storage-opt size nor shows an UpperDir to watch", "driver", st.GraphDriver.Name)
		return nil
	}
	if _, err := hostside.Usage(upper); err != nil {
		c.logger().Warn("no disk limit: the writable layer cannot be read from here (run rollcage as root)", "dir", upper, "err", err)
		return nil
	}
	c.disk = hostside.NewDiskWatch(upper, limit, c.logger(), func(ctx context.Context) {
		// As the sandbox user, kill -1 reaches every process of that user
		// but the shell sending it; the agent (root) is untouched.
		_, err := c.agent.Exec(ctx, sandbox.ExecRequest{Session: "rollcage-disk", Command: "kill -9 -1 2>/dev/null; true", Timeout: 5 * time.Second})
		if err != nil {
			c.logger().Warn("disk watchdog: stopping background processes failed", "err", err)
		}
	})
	return nil
}

func (c *container) ReadFile(ctx context.Context, path string, max int64) ([]byte, bool, error) {
	if c.closed.Load() {
		return nil, false, c.errClosed("read file")
	}
	data, cut, err := c.agent.ReadFile(ctx, path, max)
	return data, cut, c.wrap("read file "+path, err)
}

func (c *container) WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error {
	if c.closed.Load() {
		return c.errClosed("write file")
	}
	if c.disk != nil {
		if err := c.disk.RefuseWrite(path, len(data)); err != nil {
			return c.wrap("write file "+path, err)
		}
	}
	return c.wrap("write file "+path, c.agent.WriteFile(ctx, path, data, mode))
}

func (c *container) CopyIn(ctx context.Context, dir string, tar io.Reader) error {
	if c.closed.Load() {
		return c.errClosed("copy in")
	}
	return c.wrap("copy in "+dir, c.agent.CopyIn(ctx, dir, tar))
}

func (c *container) CopyOut(ctx context.Context, path string) (io.ReadCloser, error) {
	if c.closed.Load() {
		return nil, c.errClosed("copy out")
	}
	rc, err := c.agent.CopyOut(ctx, path)
	return rc, c.wrap("copy out "+path, err)
}

// Snapshot commits the container's filesystem (bind mounts excluded, so
// neither the agent nor its socket end up in the image) to ref.
func (c *container) Snapshot(ctx context.Context, ref string) (string, error) {
	if c.closed.Load() {
		return "", c.errClosed("snapshot")
	}
	resp, err := c.b.cli.ContainerCommit(ctx, c.id, dcontainer.CommitOptions{
		Reference: ref,
		Comment:   "rollcage snapshot of " + c.nameNow(),
		Pause:     true,
		// The image inherits the container's labels; without this, a
		// container someone runs from it by hand would look like a
		// leftover of ours to the reaper.
		Changes: []string{"LABEL " + LabelManaged + "=snapshot"},
	})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return "", c.errClosed("snapshot")
		}
		return "", c.wrap("snapshot", c.b.engineErr("commit", err))
	}
	return resp.ID, nil
}

// Close shuts the agent down, removes the container and its host
// directory. It runs once; later and concurrent calls return its result.
func (c *container) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.closeErr = c.teardown(ctx)
		c.b.forget(c)
		c.logger().Info("sandbox closed")
	})
	return c.closeErr
}

// teardown is Close without the bookkeeping; start uses it for containers
// that never became sandboxes.
func (c *container) teardown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	if c.disk != nil {
		c.disk.Close()
	}
	if c.agent != nil {
		// A clean shutdown lets the agent kill its process groups; the
		// forced remove below is what guarantees the container is gone.
		sctx, scancel := context.WithTimeout(ctx, shutdownTimeout)
		_ = c.agent.Shutdown(sctx)
		scancel()
		c.agent.Close()
	}
	var errs []error
	if c.id != "" {
		err := c.b.cli.ContainerRemove(ctx, c.id, dcontainer.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) && !isRemovalInProgress(err) {
			errs = append(errs, c.b.engineErr("remove "+c.nameNow(), err))
		}
	}
	if err := removeAll(c.runDir); err != nil {
		errs = append(errs, fmt.Errorf("docker: remove run dir: %w", err))
	}
	return errors.Join(errs...)
}

// isRemovalInProgress: a concurrent remove (the reaper, Backend.Close)
// got there first; Docker answers 409 Conflict.
func isRemovalInProgress(err error) bool { return cerrdefs.IsConflict(err) }

func removeAll(dir string) error {
	if dir == "" {
		return nil
	}
	return os.RemoveAll(dir)
}
