package memnet

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Listener hands out the server ends of the connections Dial makes. Its
// zero value is not usable: use Listen.
type Listener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

var _ net.Listener = (*Listener)(nil)

// Listen returns a Listener with nothing connected yet.
func Listen() *Listener {
	return &Listener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept waits for the next Dial, or Close.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close makes Accept and Dial fail from now on; connections already made
// stay open. It is idempotent.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is the same placeholder for every Listener.
func (l *Listener) Addr() net.Addr { return addr{} }

// Dial connects to l: it returns the client end of a net.Pipe once Accept
// has taken the server end.
func (l *Listener) Dial(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	var err error
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		err = net.ErrClosed
	case <-ctx.Done():
		err = ctx.Err()
	}
	client.Close()
	server.Close()
	return nil, &net.OpError{Op: "dial", Net: "memnet", Err: err}
}

// DialContext is Dial with net.Dialer.DialContext's signature; it ignores
// network and address (l is the only host).
func (l *Listener) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	return l.Dial(ctx)
}

type addr struct{}

func (addr) Network() string { return "memnet" }
func (addr) String() string  { return "memnet" }

// Server is an HTTP server on a Listener, with a client that reaches it.
type Server struct {
	// URL is the base URL for Client's requests; any host name reaches
	// the same server.
	URL string
	// Transport dials the server; wrap it to change requests.
	Transport *http.Transport
	// Client uses Transport.
	Client *http.Client

	srv    *http.Server
	served chan error // Serve's result
	once   sync.Once
	err    error // Serve's result, set by close

	mu      sync.Mutex
	arrived []time.Time // guarded by mu; when each request came
}

// NewServer serves h on a new Listener until t's cleanup, which closes
// the server, its connections and the client's idle ones, so a synctest
// bubble ends with none of their goroutines left.
func NewServer(t testing.TB, h http.Handler) *Server {
	t.Helper()
	ln := Listen()
	tr := &http.Transport{DialContext: ln.DialContext}
	s := &Server{URL: "http://memnet", Transport: tr, Client: &http.Client{Transport: tr}, served: make(chan error, 1)}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.arrived = append(s.arrived, time.Now())
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	})}
	go func() { s.served <- s.srv.Serve(ln) }()
	t.Cleanup(func() {
		if err := s.close(); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("memnet: serve: %v", err)
		}
	})
	return s
}

// Close stops the server and closes its connections; later dials fail
// with net.ErrClosed. It is idempotent.
func (s *Server) Close() { s.close() }

func (s *Server) close() error {
	s.once.Do(func() {
		s.srv.Close()
		s.Transport.CloseIdleConnections()
		s.err = <-s.served
	})
	return s.err
}

// Waits returns the times between the requests' arrivals so far: in a
// synctest bubble, exactly how long a client waited between them (retry
// backoffs, timeouts).
func (s *Server) Waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d []time.Duration
	for i := 1; i < len(s.arrived); i++ {
		d = append(d, s.arrived[i].Sub(s.arrived[i-1]))
	}
	return d
}
