package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/rollcage/rollcage/sandbox"
)

// A tunnel carries connections made inside the sandbox to the host over
// the agent's own connection, for a transport with no other path out (a
// Kubernetes pod's attach stream). The host asks with opTunnel (Path, an
// abstract unix socket name such as "@rollcage-egress"); the agent listens
// there, answers a frame with Stream "listening", and then for each
// connection accepted from its own uid (the egress relay in this process)
// sends frames with Conn set: "open", "data" (Data), "eof" when the
// sandbox side stopped writing, "close" when the connection is gone, and
// "ack" (Ack bytes of host data written). The host answers with
// opTunnelData frames for the same Conn: Data, CloseInput (its eof),
// Close, Ack. opTunnelData is handled inline, so its frames keep their
// order, and never blocks the reading of requests: each side sends at most
// tunnelWindow bytes of a connection not yet acknowledged, and the
// receiving side queues them without waiting. A reader that stops reading
// stalls its own connection only.
const (
	tunnelChunk  = 32 << 10
	tunnelWindow = 256 << 10 // bytes in flight per connection and direction
)

// Kinds of tunnel frames (response.Stream).
const (
	tunListening = "listening"
	tunOpen      = "open"
	tunData      = "data"
	tunEOF       = "eof"
	tunClose     = "close"
	tunAck       = "ack"
)

// tunnelFrame is one frame of a tunnel connection, either way.
type tunnelFrame struct {
	data  []byte
	eof   bool
	close bool
	ack   int
}

func (f tunnelFrame) kind() string {
	switch {
	case f.close:
		return tunClose
	case f.eof:
		return tunEOF
	case f.ack > 0:
		return tunAck
	}
	return tunData
}

// window is the credit a sender has left before the receiver acknowledges
// what it wrote.
type window struct {
	mu     sync.Mutex
	cond   *sync.Cond
	credit int  // guarded by mu
	closed bool // guarded by mu
}

func newWindow() *window {
	w := &window{credit: tunnelWindow}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// take waits for n bytes of credit (n <= tunnelWindow); false once closed.
func (w *window) take(n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.credit < n && !w.closed {
		w.cond.Wait()
	}
	if w.closed {
		return false
	}
	w.credit -= n
	return true
}

func (w *window) give(n int) {
	w.mu.Lock()
	w.credit += n
	w.mu.Unlock()
	w.cond.Broadcast()
}

func (w *window) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cond.Broadcast()
}

// inbox queues what the peer sent, up to tunnelWindow bytes, without
// blocking the frame reader.
type inbox struct {
	mu     sync.Mutex
	cond   *sync.Cond
	bufs   [][]byte // guarded by mu
	size   int      // guarded by mu
	eof    bool     // guarded by mu
	closed bool     // guarded by mu
}

func newInbox() *inbox {
	q := &inbox{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// put queues b; false when the peer sent past its window.
func (q *inbox) put(b []byte) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.eof {
		return true
	}
	if q.size+len(b) > tunnelWindow {
		return false
	}
	q.bufs = append(q.bufs, b)
	q.size += len(b)
	q.cond.Signal()
	return true
}

func (q *inbox) putEOF() {
	q.mu.Lock()
	q.eof = true
	q.mu.Unlock()
	q.cond.Signal()
}

func (q *inbox) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// next waits for the next chunk: eof once the peer's data is all
// delivered and it stopped writing; ok false when the connection closed.
func (q *inbox) next() (b []byte, eof, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.bufs) == 0 && !q.eof && !q.closed {
		q.cond.Wait()
	}
	switch {
	case q.closed:
		return nil, false, false
	case len(q.bufs) > 0:
		b = q.bufs[0]
		q.bufs[0] = nil
		q.bufs = q.bufs[1:]
		q.size -= len(b)
		return b, false, true
	}
	return nil, true, true
}

// tunnelConn is one tunnelled connection on either side: the local end
// (conn) and the frames to and from the peer.
type tunnelConn struct {
	out  *window // credit for what we send
	in   *inbox  // what the peer sent
	send func(tunnelFrame)

	mu     sync.Mutex
	conn   net.Conn // guarded by mu; nil until the host's dial returns
	closed bool     // guarded by mu

	abortOnce sync.Once
}

func newTunnelConn(conn net.Conn, send func(tunnelFrame)) *tunnelConn {
	return &tunnelConn{out: newWindow(), in: newInbox(), send: send, conn: conn}
}

// attach sets the local end once it exists; false when the connection was
// closed meanwhile (conn is then closed).
func (t *tunnelConn) attach(conn net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		conn.Close()
		return false
	}
	t.conn = conn
	return true
}

// receive acts on a frame from the peer; it never blocks.
func (t *tunnelConn) receive(f tunnelFrame) {
	switch {
	case f.close:
		t.shut()
	case f.ack > 0:
		t.out.give(f.ack)
	case f.eof:
		t.in.putEOF()
	default:
		if !t.in.put(f.data) {
			t.abort() // past its window: a peer that ignores credit
		}
	}
}

// run copies both ways until both directions ended, then closes conn.
func (t *tunnelConn) run() {
	var wg sync.WaitGroup
	wg.Go(t.pump)
	wg.Go(t.drain)
	wg.Wait()
	t.shut()
}

// pump sends what the local end writes, within the window.
func (t *tunnelConn) pump() {
	buf := make([]byte, tunnelChunk)
	for {
		n, err := t.conn.Read(buf)
		if n > 0 {
			if !t.out.take(n) {
				return
			}
			t.send(tunnelFrame{data: bytes.Clone(buf[:n])})
		}
		if errors.Is(err, io.EOF) {
			t.send(tunnelFrame{eof: true})
			return
		}
		if err != nil {
			t.abort()
			return
		}
	}
}

// drain writes what the peer sent to the local end, acknowledging it.
func (t *tunnelConn) drain() {
	for {
		b, eof, ok := t.in.next()
		if !ok {
			return
		}
		if eof {
			if cw, ok := t.conn.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
			return
		}
		if _, err := t.conn.Write(b); err != nil {
			t.abort()
			return
		}
		t.send(tunnelFrame{ack: len(b)})
	}
}

// abort ends the connection and tells the peer.
func (t *tunnelConn) abort() {
	t.abortOnce.Do(func() {
		t.send(tunnelFrame{close: true})
		t.shut()
	})
}

// shut ends the connection here: the local end closed, the waits woken.
func (t *tunnelConn) shut() {
	t.mu.Lock()
	t.closed = true
	conn := t.conn
	t.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
	t.out.close()
	t.in.close()
}

// tunnelSet is the connections of one tunnel, by id.
type tunnelSet struct {
	mu    sync.Mutex
	conns map[uint64]*tunnelConn // guarded by mu
}

func (s *tunnelSet) get(id uint64) *tunnelConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns[id]
}

func (s *tunnelSet) put(id uint64, t *tunnelConn) {
	s.mu.Lock()
	s.conns[id] = t
	s.mu.Unlock()
}

func (s *tunnelSet) remove(id uint64) {
	s.mu.Lock()
	delete(s.conns, id)
	s.mu.Unlock()
}

func (s *tunnelSet) shutAll() {
	s.mu.Lock()
	all := make([]*tunnelConn, 0, len(s.conns))
	for _, t := range s.conns {
		all = append(all, t)
	}
	s.mu.Unlock()
	for _, t := range all {
		t.shut()
	}
}

// tunnel runs an opTunnel until it is cancelled, the agent shuts down or
// the connection that asked for it ends.
func (c *serverConn) tunnel(ctx context.Context, req request) response {
	if len(req.Path) < 2 || !strings.HasPrefix(req.Path, "@") {
		return response{Error: &wireError{Code: codeBadRequest, Message: fmt.Sprintf("tunnel path %q: give an abstract socket name, @name", req.Path)}}
	}
	ln, err := net.Listen("unix", req.Path)
	if err != nil {
		return response{Error: &wireError{Code: codeInternal, Message: "tunnel: " + err.Error()}}
	}
	set := &tunnelSet{conns: map[uint64]*tunnelConn{}}
	c.mu.Lock()
	c.tunnels[req.ID] = set
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.tunnels, req.ID)
		c.mu.Unlock()
	}()
	go func() {
		select {
		case <-ctx.Done():
		case <-c.gone:
		}
		ln.Close()
	}()
	c.reply(response{ID: req.ID, More: true, Stream: tunListening})
	var wg sync.WaitGroup
	var next uint64
	for {
		conn, err := ln.Accept()
		if err != nil {
			break
		}
		if !peerIsSelf(conn) {
			// Only this process's egress relay may use the tunnel; the
			// sandbox user reaches it through the relay's TCP port.
			c.s.log.Warn("tunnel: connection from another uid refused", "path", req.Path)
			conn.Close()
			continue
		}
		next++
		id := next
		t := newTunnelConn(conn, func(f tunnelFrame) {
			c.reply(response{ID: req.ID, More: true, Conn: id, Stream: f.kind(), Data: f.data, Ack: f.ack})
		})
		set.put(id, t)
		c.reply(response{ID: req.ID, More: true, Conn: id, Stream: tunOpen})
		wg.Go(func() {
			t.run()
			set.remove(id)
		})
	}
	set.shutAll()
	wg.Wait()
	if ctx.Err() != nil {
		return response{Error: &wireError{Code: codeClosed, Message: "tunnel closed"}}
	}
	return response{}
}

// tunnelData hands an opTunnelData to its connection.
func (c *serverConn) tunnelData(req request) {
	c.mu.Lock()
	set := c.tunnels[req.Target]
	c.mu.Unlock()
	if set == nil {
		return
	}
	if t := set.get(req.Conn); t != nil {
		t.receive(tunnelFrame{data: req.Data, eof: req.CloseInput, close: req.Close, ack: req.Ack})
	}
}

// peerIsSelf reports whether the process at the other end of a unix
// connection runs as this process's uid.
func peerIsSelf(conn net.Conn) bool {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return false
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return false
	}
	return int(cred.Uid) == os.Geteuid()
}

// Tunnel is the host's side of an opTunnel: connections made to its
// socket in the sandbox, each carried to one the host dialed.
type Tunnel struct {
	c     *Client
	id    uint64
	dial  func(ctx context.Context) (net.Conn, error)
	set   *tunnelSet
	final chan response
	stop  context.CancelFunc
	once  sync.Once
	done  chan struct{}
	// endErr is the agent's refusal or error; written before done closes.
	endErr error
}

// Tunnel asks the agent to listen on path, an abstract unix socket name
// ("@name") in the sandbox, and carries each connection made there (by the
// agent's egress relay) to a connection dial opens on the host, such as
// the episode's egress proxy. It returns once the agent listens; the
// tunnel lasts until Close or the end of the connection.
func (c *Client) Tunnel(ctx context.Context, path string, dial func(ctx context.Context) (net.Conn, error)) (*Tunnel, error) {
	dctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	t := &Tunnel{c: c, dial: dial, set: &tunnelSet{conns: map[uint64]*tunnelConn{}}, final: make(chan response, 1), stop: stop, done: make(chan struct{})}
	listening := make(chan struct{})
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		stop()
		return nil, fmt.Errorf("agent %s: %w", opTunnel, err)
	}
	c.nextID++
	t.id = c.nextID
	c.pending[t.id] = t.final
	c.streams[t.id] = func(r response) { t.frame(dctx, r, listening) }
	c.mu.Unlock()
	if err := c.send(request{ID: t.id, Op: opTunnel, Path: path}); err != nil {
		c.forget(t.id)
		stop()
		return nil, fmt.Errorf("agent %s: send: %v: %w", opTunnel, err, sandbox.ErrClosed)
	}
	go func() {
		defer close(t.done)
		// The tunnel's end, or the connection's (closed).
		if resp, ok := <-t.final; ok && resp.Error != nil {
			t.endErr = resp.Error.err(opTunnel)
		}
		stop()
		t.set.shutAll()
	}()
	select {
	case <-listening:
		return t, nil
	case <-t.done:
		if t.endErr != nil {
			return nil, t.endErr
		}
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		if err == nil {
			err = fmt.Errorf("ended before it listened: %w", sandbox.ErrAgent)
		}
		return nil, fmt.Errorf("agent %s %s: %w", opTunnel, path, err)
	case <-ctx.Done():
		t.Close()
		return nil, fmt.Errorf("agent %s: %w", opTunnel, ctx.Err())
	}
}

// frame acts on a frame of the tunnel, from the read loop: never blocks.
func (t *Tunnel) frame(ctx context.Context, r response, listening chan struct{}) {
	switch r.Stream {
	case tunListening:
		close(listening)
		return
	case tunOpen:
		id := r.Conn
		tc := newTunnelConn(nil, func(f tunnelFrame) {
			if err := t.c.send(request{Op: opTunnelData, Target: t.id, Conn: id, Data: f.data, CloseInput: f.eof, Close: f.close, Ack: f.ack}); err != nil {
				t.c.log.Debug("tunnel frame not sent", "conn", id, "err", err)
			}
		})
		t.set.put(id, tc)
		go func() {
			defer t.set.remove(id)
			conn, err := t.dial(ctx)
			if err != nil {
				t.c.log.Warn("tunnel: dial on the host failed; connection refused", "conn", id, "err", err)
				tc.abort()
				return
			}
			if tc.attach(conn) {
				tc.run()
			}
		}()
		return
	}
	if tc := t.set.get(r.Conn); tc != nil {
		tc.receive(tunnelFrame{data: r.Data, eof: r.Stream == tunEOF, close: r.Stream == tunClose, ack: r.Ack})
	}
}

// Close ends the tunnel: the agent stops listening and every connection
// ends on both sides. Idempotent.
func (t *Tunnel) Close() error {
	t.once.Do(func() {
		t.stop()
		t.set.shutAll()
		if err := t.c.send(request{Op: opCancel, Target: t.id}); err != nil {
			t.c.log.Debug("tunnel cancel not sent", "err", err)
		}
	})
	return nil
}
