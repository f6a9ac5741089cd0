package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// maxFrame bounds one frame; file and tar payloads travel inside frames.
const maxFrame = 1 << 30

// ClientOptions tune a Client. The zero value is usable.
type ClientOptions struct {
	// Heartbeat sends a ping this often to keep the agent's lease alive
	// (0: off). Backends set it to a third of the lease.
	Heartbeat time.Duration
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// Client is the host side of one agent connection. It is safe for
// concurrent use; calls are multiplexed on the connection.
type Client struct {
	conn io.ReadWriteCloser
	log  *slog.Logger

	wmu sync.Mutex // serializes frame writes
	enc *json.Encoder

	mu      sync.Mutex
	nextID  uint64                    // guarded by mu
	pending map[uint64]chan response  // guarded by mu
	streams map[uint64]func(response) // guarded by mu; More frames of opStart requests
	err     error                     // guarded by mu; set once the connection is gone

	done      chan struct{} // closed when the read loop ends
	closeOnce sync.Once
}

// NewClient starts reading responses from conn. The Client owns conn.
func NewClient(conn io.ReadWriteCloser, opts ClientOptions) *Client {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{
		conn:    conn,
		log:     log,
		enc:     json.NewEncoder(conn),
		pending: make(map[uint64]chan response),
		streams: make(map[uint64]func(response)),
		done:    make(chan struct{}),
	}
	go c.readLoop()
	if opts.Heartbeat > 0 {
		go c.heartbeat(opts.Heartbeat)
	}
	return c
}

func (c *Client) readLoop() {
	defer close(c.done)
	br := bufio.NewReaderSize(c.conn, 64<<10)
	var err error
	for {
		var line []byte
		line, err = readFrame(br)
		if err != nil {
			break
		}
		var resp response
		if err = json.Unmarshal(line, &resp); err != nil {
			err = fmt.Errorf("bad frame from agent: %w", err)
			break
		}
		c.mu.Lock()
		if resp.More {
			fn := c.streams[resp.ID]
			c.mu.Unlock()
			if fn != nil {
				fn(resp)
			}
			continue
		}
		ch := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		delete(c.streams, resp.ID)
		c.mu.Unlock()
		if ch == nil {
			// The caller gave up (ctx cancelled); nobody wants it.
			continue
		}
		ch <- resp
	}
	c.fail(fmt.Errorf("connection lost: %v: %w", err, sandbox.ErrClosed))
}

// readFrame reads one newline-terminated frame, refusing frames over maxFrame.
func readFrame(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) > maxFrame {
			return nil, fmt.Errorf("frame over %d bytes", maxFrame)
		}
		if err == bufio.ErrBufferFull {
			buf = append(buf, chunk...)
			continue
		}
		if err != nil {
			return nil, err
		}
		if buf == nil {
			return chunk, nil
		}
		return append(buf, chunk...), nil
	}
}

// fail marks the client broken and wakes every pending call.
func (c *Client) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
	for id, ch := range c.pending {
		delete(c.pending, id)
		close(ch)
	}
}

func (c *Client) heartbeat(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), every)
			if _, err := c.Ping(ctx); err != nil {
				c.log.Debug("agent heartbeat failed", "err", err)
			}
			cancel()
		}
	}
}

// call sends req and waits for its response. Cancelling ctx returns at once;
// if cancelOnAbort, the agent is also told to stop the request.
func (c *Client) call(ctx context.Context, req request, cancelOnAbort bool) (response, error) {
	ch := make(chan response, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return response{}, fmt.Errorf("agent %s: %w", req.Op, err)
	}
	c.nextID++
	req.ID = c.nextID
	c.pending[req.ID] = ch
	c.mu.Unlock()

	if err := c.send(req); err != nil {
		c.forget(req.ID)
		return response{}, fmt.Errorf("agent %s: send: %v: %w", req.Op, err, sandbox.ErrClosed)
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			c.mu.Lock()
			err := c.err
			c.mu.Unlock()
			return response{}, fmt.Errorf("agent %s: %w", req.Op, err)
		}
		if resp.Error != nil {
			return response{}, resp.Error.err(req.Op)
		}
		return resp, nil
	case <-ctx.Done():
		c.forget(req.ID)
		if cancelOnAbort {
			// Best effort, without blocking the caller on a slow connection.
			go func() {
				if err := c.send(request{Op: opCancel, Target: req.ID}); err != nil {
					c.log.Debug("agent cancel not sent", "id", req.ID, "err", err)
				}
			}()
		}
		return response{}, fmt.Errorf("agent %s: %w", req.Op, ctx.Err())
	}
}

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	delete(c.streams, id)
	c.mu.Unlock()
}

func (c *Client) send(req request) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.enc.Encode(req) // Encode appends the newline that ends the frame
}

// Configure sets the session environment and workdir and plants and watches
// the canaries. Call it once before the first Exec.
func (c *Client) Configure(ctx context.Context, cfg Config) error {
	_, err := c.call(ctx, request{Op: opConfigure, Config: &cfg}, false)
	return err
}

// Exec runs a command in a session. A non-zero exit or a timeout is a
// result, not an error. Cancelling ctx returns at once and asks the agent to
// kill the command's process group.
func (c *Client) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	resp, err := c.call(ctx, request{Op: opExec, Exec: &req}, true)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	if resp.Exec == nil {
		return sandbox.ExecResult{}, fmt.Errorf("agent exec: response without result: %w", sandbox.ErrAgent)
	}
	return *resp.Exec, nil
}

// ReadFile reads at most max bytes (max <= 0: all, up to 64 MiB) of the
// regular file path with the sandbox user's permissions and says whether
// it was cut. Errors of the caller's making are a *sandbox.PathError.
func (c *Client) ReadFile(ctx context.Context, path string, max int64) ([]byte, bool, error) {
	resp, err := c.call(ctx, request{Op: opReadFile, Path: path, Max: max, Timeout: timeLeft(ctx)}, true)
	if err != nil {
		return nil, false, err
	}
	if resp.Data == nil {
		resp.Data = []byte{}
	}
	return resp.Data, resp.Truncated, nil
}

// WriteFile writes data to path as the sandbox user, creating parent
// directories.
func (c *Client) WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error {
	return c.WriteFileAs(ctx, "", path, data, mode)
}

// WriteFileAs is WriteFile as the sandbox's user named user (a root
// sandbox's; "" is WriteFile).
func (c *Client) WriteFileAs(ctx context.Context, user, path string, data []byte, mode fs.FileMode) error {
	_, err := c.call(ctx, request{Op: opWriteFile, Path: path, Data: data, Mode: uint32(mode.Perm()), User: user, Timeout: timeLeft(ctx)}, true)
	return err
}

// timeLeft is what remains of ctx's deadline, for the agent to stop at.
func timeLeft(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return max(time.Until(d), time.Millisecond)
}

// KillAll kills every process of the sandbox but the agent's own, of
// any uid, without the agent starting a process or a thread: it works
// with the sandbox's pid table full, where no shell can start. It stops
// at ctx's deadline (DefaultKillTimeout without one) and then reports
// the processes still alive in KillResult.Survivors; none is left when
// it returns with no survivors. Session shells die too (the next Exec
// starts a fresh one). An agent that is not under its own reaper at
// PID 1 of the sandbox's pid namespace refuses.
func (c *Client) KillAll(ctx context.Context) (KillResult, error) {
	resp, err := c.call(ctx, request{Op: opKillAll, Timeout: timeLeft(ctx)}, true)
	if err != nil {
		return KillResult{}, err
	}
	if resp.Kill == nil {
		return KillResult{}, fmt.Errorf("agent kill_all: response without result: %w", sandbox.ErrAgent)
	}
	return *resp.Kill, nil
}

// CopyIn extracts a tar stream into dir as root; entries keep the tar's
// ownership and modes.
func (c *Client) CopyIn(ctx context.Context, dir string, tar io.Reader) error {
	data, err := io.ReadAll(tar)
	if err != nil {
		return fmt.Errorf("agent copy_in: read tar: %w", err)
	}
	_, err = c.call(ctx, request{Op: opCopyIn, Path: dir, Data: data}, false)
	return err
}

// CopyOut returns a tar stream of path, read as root.
func (c *Client) CopyOut(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := c.call(ctx, request{Op: opCopyOut, Path: path}, false)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(resp.Data)), nil
}

// Ping checks the agent is alive and resets its lease.
func (c *Client) Ping(ctx context.Context) (Info, error) {
	resp, err := c.call(ctx, request{Op: opPing}, false)
	if err != nil {
		return Info{}, err
	}
	if resp.Info == nil {
		return Info{}, fmt.Errorf("agent ping: response without info: %w", sandbox.ErrAgent)
	}
	return *resp.Info, nil
}

// Shutdown tells the agent to kill every process and exit, which stops the
// container. A connection that breaks before the answer counts as success.
func (c *Client) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	broken := c.err
	c.mu.Unlock()
	if broken != nil {
		return fmt.Errorf("agent shutdown: %w", broken)
	}
	_, err := c.call(ctx, request{Op: opShutdown}, false)
	if errors.Is(err, sandbox.ErrClosed) {
		return nil
	}
	return err
}

// Close closes the connection only; the agent keeps running until its lease
// expires or another client shuts it down. Pending calls fail with ErrClosed.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.fail(fmt.Errorf("client closed: %w", sandbox.ErrClosed))
		err = c.conn.Close()
	})
	return err
}

// Start starts a streamed command (see sandbox.Streamer). out gets its
// output from the connection's read loop and must not block.
func (c *Client) Start(ctx context.Context, req sandbox.StartRequest, out func(sandbox.Output)) (sandbox.Process, error) {
	p := &clientProc{c: c, final: make(chan response, 1), pid: make(chan int, 1)}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, fmt.Errorf("agent %s: %w", opStart, err)
	}
	c.nextID++
	p.id = c.nextID
	c.pending[p.id] = p.final
	c.streams[p.id] = func(r response) {
		if r.Stream == "" {
			p.pid <- r.PID
			return
		}
		out(sandbox.Output{Stream: r.Stream, Data: r.Data})
	}
	c.mu.Unlock()
	if err := c.send(request{ID: p.id, Op: opStart, Start: &req}); err != nil {
		c.forget(p.id)
		return nil, fmt.Errorf("agent %s: send: %v: %w", opStart, err, sandbox.ErrClosed)
	}
	select {
	case p.started = <-p.pid:
		return p, nil
	case resp, ok := <-p.final:
		select {
		case p.started = <-p.pid:
			// It ran and ended before this select saw its pid: keep the
			// end for Wait.
			ch := make(chan response, 1)
			if ok {
				ch <- resp
			} else {
				close(ch)
			}
			p.final = ch
			return p, nil
		default:
		}
		// It failed before it ran, or the connection broke.
		switch {
		case !ok:
			c.mu.Lock()
			err := c.err
			c.mu.Unlock()
			return nil, fmt.Errorf("agent %s: %w", opStart, err)
		case resp.Error != nil:
			return nil, resp.Error.err(opStart)
		}
		return nil, fmt.Errorf("agent %s: ended before it started: %w", opStart, sandbox.ErrAgent)
	case <-ctx.Done():
		c.forget(p.id)
		go c.send(request{Op: opCancel, Target: p.id})
		return nil, fmt.Errorf("agent %s: %w", opStart, ctx.Err())
	}
}

// clientProc is a streamed command seen from the host.
type clientProc struct {
	c       *Client
	id      uint64
	pid     chan int
	started int
	final   chan response // the last frame, or closed when the connection broke

	once sync.Once
	res  sandbox.ExecResult
	err  error
	done chan struct{}
}

var _ sandbox.Process = (*clientProc)(nil)

func (p *clientProc) PID() int { return p.started }

func (p *clientProc) Input(ctx context.Context, data []byte) error {
	_, err := p.c.call(ctx, request{Op: opInput, Target: p.id, Data: data}, false)
	return err
}

func (p *clientProc) CloseInput(ctx context.Context) error {
	_, err := p.c.call(ctx, request{Op: opInput, Target: p.id, CloseInput: true}, false)
	return err
}

func (p *clientProc) Signal(ctx context.Context, sig syscall.Signal) error {
	_, err := p.c.call(ctx, request{Op: opSignal, Target: p.id, Signal: int(sig)}, false)
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil // it ended meanwhile
	}
	return err
}

// Wait may be called any number of times, from any goroutine.
func (p *clientProc) Wait(ctx context.Context) (sandbox.ExecResult, error) {
	p.once.Do(func() {
		p.done = make(chan struct{})
		go func() {
			defer close(p.done)
			resp, ok := <-p.final
			switch {
			case !ok:
				p.c.mu.Lock()
				err := p.c.err
				p.c.mu.Unlock()
				p.err = fmt.Errorf("agent %s: %w", opStart, err)
			case resp.Error != nil:
				p.err = resp.Error.err(opStart)
			case resp.Exec == nil:
				p.err = fmt.Errorf("agent %s: response without result: %w", opStart, sandbox.ErrAgent)
			default:
				p.res = *resp.Exec
			}
		}()
	})
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		return sandbox.ExecResult{}, fmt.Errorf("agent %s: wait: %w", opStart, ctx.Err())
	}
}
