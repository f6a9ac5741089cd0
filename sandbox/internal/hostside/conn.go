package hostside

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/rollcage/rollcage/agent"
	"github.com/rollcage/rollcage/sandbox"
)

// Conn is the host's side of one container sandbox's agent: the file and
// exec methods of sandbox.Sandbox, the disk watchdog in front of them, the
// closed flag every method checks, and the session names a fork carries.
// A backend's container embeds it and adds what needs the engine.
type Conn struct {
	name   func() string // the sandbox's name now, for errors
	agent  *agent.Client // set by Dial, then never changed
	disk   *DiskWatch    // set by WatchDisk at start, then never changed
	guard  atomic.Value  // sandbox.DiskGuard: what holds the disk limit
	closed atomic.Bool
	// dead is Dial's (or Use's) container check; lost what it said once
	// the agent went away under a call.
	dead     func(ctx context.Context) error
	lostOnce sync.Once
	lost     error

	mu       sync.Mutex
	sessions map[string]bool // guarded by mu; session names the host used
}

// NewConn is a Conn whose errors name the sandbox by name().
func NewConn(name func() string) *Conn { return &Conn{name: name} }

// Dial connects to the agent's socket, retrying with backoff while the
// agent starts, for at most timeout. dead, polled while waiting (less
// and less often: each poll asks a possibly loaded engine), returns a
// non-nil error (with the container's last logs) once the container has
// exited; prefix names the backend in errors.
func (c *Conn) Dial(ctx context.Context, prefix, sock string, timeout, lease time.Duration, log *slog.Logger, dead func(ctx context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	waits := &backoff.ExponentialBackOff{InitialInterval: time.Millisecond, Multiplier: 2, MaxInterval: maxDialWait}   // between dials
	checks := &backoff.ExponentialBackOff{InitialInterval: firstAgentCheck, Multiplier: 2, MaxInterval: maxAgentCheck} // between the container's checks
	check := time.Now().Add(checks.NextBackOff())
	for {
		conn, err := d.DialContext(cctx, "unix", sock)
		if err == nil {
			c.dead = dead
			c.agent = agent.NewClient(conn, agent.ClientOptions{Heartbeat: lease / 3, Logger: log})
			return nil
		}
		// (the dialer may time out on cctx's deadline before cctx says so)
		timedOut := errors.Is(err, os.ErrDeadlineExceeded) || cctx.Err() != nil
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ECONNREFUSED) && !timedOut {
			return fmt.Errorf("%s: connect %s: dial agent: %w: %v", prefix, c.name(), sandbox.ErrAgent, err)
		}
		// Poll the container too: an agent that crashed at start should
		// fail the create now, not after the full timeout.
		if now := time.Now(); !now.Before(check) {
			if err := dead(cctx); err != nil {
				return fmt.Errorf("%s: connect %s: %w: %w", prefix, c.name(), sandbox.ErrAgent, err)
			}
			check = now.Add(checks.NextBackOff())
		}
		select {
		case <-cctx.Done():
			if ctx.Err() != nil {
				return fmt.Errorf("%s: connect %s: %w", prefix, c.name(), ctx.Err())
			}
			state := "running"
			if err := dead(context.WithoutCancel(ctx)); err != nil {
				state = err.Error()
			}
			return fmt.Errorf("%s: connect %s: agent did not listen on %s within the %v limit of its start: %w (container: %s)",
				prefix, c.name(), sock, timeout, sandbox.ErrAgent, state)
		case <-time.After(waits.NextBackOff()):
		}
	}
}

// How Dial waits: dials back off to maxDialWait apart; the container is
// first checked after firstAgentCheck (an agent that crashed at start
// fails the create at once), then at doubling intervals up to
// maxAgentCheck.
const (
	maxDialWait     = 100 * time.Millisecond
	firstAgentCheck = 30 * time.Millisecond
	maxAgentCheck   = time.Second
)

// Use connects the Conn over rwc, a stream already open to the agent
// (a Kubernetes pod's attach stream), instead of dialing its socket.
// dead, as Dial's, says why the sandbox ended once the stream is lost.
func (c *Conn) Use(rwc io.ReadWriteCloser, lease time.Duration, log *slog.Logger, dead func(ctx context.Context) error) {
	c.dead = dead
	c.agent = agent.NewClient(rwc, agent.ClientOptions{Heartbeat: lease / 3, Logger: log})
}

// Agent is the agent's client (nil before Dial or Use).
func (c *Conn) Agent() *agent.Client { return c.agent }

// WatchDisk starts the disk watchdog over upper, the writable layer on
// the host; at the limit the sandbox user's background processes are
// stopped through the agent.
func (c *Conn) WatchDisk(upper string, limit int64, log *slog.Logger) {
	if c.disk != nil {
		c.disk.Close() // a warm sandbox's, before a fork gave it another layer
	}
	c.SetDiskGuard(sandbox.DiskWatchdog)
	c.disk = NewDiskWatch(upper, limit, log, func(ctx context.Context) {
		// As the sandbox user, kill -1 reaches every process of that user
		// but the shell sending it; the agent (root) is untouched.
		_, err := c.agent.Exec(ctx, sandbox.ExecRequest{Session: "rollcage-disk", Command: "kill -9 -1 2>/dev/null; true", Timeout: 5 * time.Second})
		if err != nil {
			log.Warn("disk watchdog: stopping background processes failed", "err", err)
		}
	})
}

// SetDiskGuard records what holds the sandbox's disk limit (WatchDisk
// records the watchdog itself).
func (c *Conn) SetDiskGuard(g sandbox.DiskGuard) { c.guard.Store(g) }

// DiskGuard says what holds the sandbox's disk limit: sandbox.DiskNone
// until the backend said.
func (c *Conn) DiskGuard() sandbox.DiskGuard {
	if g, ok := c.guard.Load().(sandbox.DiskGuard); ok {
		return g
	}
	return sandbox.DiskNone
}

// Configure hands the episode's settings to the agent.
func (c *Conn) Configure(ctx context.Context, spec sandbox.Spec) error {
	return c.agent.Configure(ctx, agentConfig(spec, ""))
}

// agentConfig is the agent's configuration for spec, its root changed to
// root unless that is "".
func agentConfig(spec sandbox.Spec, root string) agent.Config {
	return agent.Config{Root: root, Workdir: spec.Workdir, Env: spec.Env, Canaries: spec.Canaries, Watch: spec.Watch}
}

// MarkClosed makes every later call fail with ErrClosed.
func (c *Conn) MarkClosed() { c.closed.Store(true) }

// IsClosed reports whether MarkClosed was called.
func (c *Conn) IsClosed() bool { return c.closed.Load() }

// Wrap gives an agent error the sandbox's name and operation.
func (c *Conn) Wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sandbox.ErrClosed) && !c.IsClosed() {
		if why := c.whyLost(); why != nil {
			return fmt.Errorf("sandbox %s: %s: %w (%w)", c.name(), op, err, why)
		}
	}
	return fmt.Errorf("sandbox %s: %s: %w", c.name(), op, err)
}

// whyLost is what the container says after the agent's connection was
// lost without a Close: its exit and last logs, waited for up to 2 s
// (the container ends just after its agent). Nil when it still runs.
func (c *Conn) whyLost() error {
	c.lostOnce.Do(func() {
		if c.dead == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for {
			if err := c.dead(ctx); err != nil {
				c.lost = err
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	return c.lost
}

// ErrClosed is the error of op on a closed sandbox.
func (c *Conn) ErrClosed(op string) error {
	return fmt.Errorf("sandbox %s: %s: %w", c.name(), op, sandbox.ErrClosed)
}

// Shutdown stops the watchdog and shuts the agent down (it kills its
// process groups), then closes the connection. The engine's forced
// removal is what guarantees the container is gone.
func (c *Conn) Shutdown(ctx context.Context, timeout time.Duration) {
	if c.disk != nil {
		c.disk.Close()
	}
	if c.agent != nil {
		sctx, cancel := context.WithTimeout(ctx, timeout)
		_ = c.agent.Shutdown(sctx)
		cancel()
		c.agent.Close()
	}
}

// RecordSession notes a session name the host used, for a fork.
func (c *Conn) RecordSession(name string) {
	if name == "" {
		name = "default"
	}
	if HostSession(name) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions == nil {
		c.sessions = map[string]bool{}
	}
	c.sessions[name] = true
}

// Sessions are the session names recorded, sorted.
func (c *Conn) Sessions() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.sessions))
}

// Exec runs a command in a shell session through the agent.
func (c *Conn) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if c.closed.Load() {
		return sandbox.ExecResult{}, c.ErrClosed("exec")
	}
	c.RecordSession(req.Session)
	var res sandbox.ExecResult
	var err error
	if c.disk != nil {
		res, err = c.disk.Exec(ctx, req, c.agent.Exec)
	} else {
		res, err = c.agent.Exec(ctx, req)
	}
	return res, c.Wrap("exec", err)
}

// KillAll stops every process of the sandbox but the agent, without
// starting one (sandbox.ProcessKiller).
func (c *Conn) KillAll(ctx context.Context) (sandbox.KillResult, error) {
	if c.closed.Load() {
		return sandbox.KillResult{}, c.ErrClosed("kill all")
	}
	r, err := c.agent.KillAll(ctx)
	out := sandbox.KillResult{Rounds: r.Rounds}
	for _, s := range r.Survivors {
		out.Survivors = append(out.Survivors, sandbox.Survivor{PID: s.PID, UID: s.UID, State: s.State, Comm: s.Comm})
	}
	return out, c.Wrap("kill all", err)
}

// ReadFile reads a file through the agent.
func (c *Conn) ReadFile(ctx context.Context, path string, max int64) ([]byte, bool, error) {
	if c.closed.Load() {
		return nil, false, c.ErrClosed("read file")
	}
	data, cut, err := c.agent.ReadFile(ctx, path, max)
	return data, cut, c.Wrap("read file "+path, err)
}

// WriteFile writes a file through the agent, refused at the disk limit.
func (c *Conn) WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error {
	return c.WriteFileAs(ctx, "", path, data, mode)
}

// WriteFileAs is WriteFile as a root sandbox's user named user
// (sandbox.UserWriter); "" is WriteFile.
func (c *Conn) WriteFileAs(ctx context.Context, user, path string, data []byte, mode fs.FileMode) error {
	if c.closed.Load() {
		return c.ErrClosed("write file")
	}
	if c.disk != nil {
		if err := c.disk.RefuseWrite(path, len(data)); err != nil {
			return c.Wrap("write file "+path, err)
		}
	}
	return c.Wrap("write file "+path, c.agent.WriteFileAs(ctx, user, path, data, mode))
}

// CopyIn extracts a tar stream into dir through the agent.
func (c *Conn) CopyIn(ctx context.Context, dir string, tar io.Reader) error {
	if c.closed.Load() {
		return c.ErrClosed("copy in")
	}
	return c.Wrap("copy in "+dir, c.agent.CopyIn(ctx, dir, tar))
}

// CopyOut returns a tar stream of path through the agent.
func (c *Conn) CopyOut(ctx context.Context, path string) (io.ReadCloser, error) {
	if c.closed.Load() {
		return nil, c.ErrClosed("copy out")
	}
	rc, err := c.agent.CopyOut(ctx, path)
	return rc, c.Wrap("copy out "+path, err)
}

// Restore configures a fork's child and replays the parent's sessions.
func (c *Conn) Restore(ctx context.Context, spec sandbox.Spec, scripts map[string]string) error {
	return c.RestoreIn(ctx, "", spec, scripts)
}

// RestoreIn is Restore in a sandbox whose agent first changes its root to
// root (a directory in the sandbox; "" keeps it).
func (c *Conn) RestoreIn(ctx context.Context, root string, spec sandbox.Spec, scripts map[string]string) error {
	if err := c.agent.Configure(ctx, agentConfig(spec, root)); err != nil {
		return c.Wrap("configure", err)
	}
	return c.Wrap("fork", RestoreSessions(ctx, c.agent.Exec, scripts, c.RecordSession))
}

// LogSummary puts an agent's log on one line for an error message: the
// lines that say why a Go program died (a fatal error, a panic and the
// runtime's lines before them) first, since a crash's goroutine dump
// would push them out of any tail, then the last lines. "(none)" when
// the log is empty.
func LogSummary(log string) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	var why []string
	for i, l := range lines {
		if strings.HasPrefix(l, "fatal error:") || strings.HasPrefix(l, "panic:") {
			for j := max(i-3, 0); j <= i; j++ {
				if j == i || strings.HasPrefix(lines[j], "runtime:") {
					why = append(why, lines[j])
				}
			}
			break
		}
	}
	tail := lines[max(len(lines)-6, 0):]
	out := strings.Join(tail, " | ")
	if len(why) > 0 {
		out = strings.Join(why, " | ") + " | … | " + out
	}
	out = strings.Join(strings.Fields(out), " ")
	if out == "" {
		return "(none)"
	}
	return out
}
