package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rollcage/rollcage/rules"
)

// Policy decides whether one request out of a sandbox may leave it.
// The monitor's implementation asks the rules about the host and URL; it
// must be safe for concurrent use.
type Policy interface {
	Allow(ctx context.Context, req Request) Decision
}

// PolicyFunc adapts a function to Policy.
type PolicyFunc func(ctx context.Context, req Request) Decision

// Allow calls f.
func (f PolicyFunc) Allow(ctx context.Context, req Request) Decision {
	return f(ctx, req)
}

// Request is one request a sandbox makes through the proxy.
type Request struct {
	EpisodeID string `json:"episode_id,omitempty"`
	Method    string `json:"method"` // CONNECT for TLS tunnels
	Host      string `json:"host"`   // lowercase, no port
	Port      int    `json:"port"`
	// URL is the absolute URL of a plain HTTP request; empty for CONNECT,
	// where the proxy sees only host and port (TLS is not intercepted).
	URL string `json:"url,omitempty"`
	// Route is the model route the request is under ("" for none); the
	// policy is asked all the same.
	Route string `json:"route,omitempty"`
}

// Decision is the policy's answer.
type Decision struct {
	Allow  bool         `json:"allow"`
	Flags  []rules.Flag `json:"flags,omitempty"`
	Reason string       `json:"reason,omitempty"`
}

// Event records one request through the proxy, attributed to the
// tool call in flight when it arrived.
type Event struct {
	EpisodeID     string        `json:"episode_id,omitempty"`
	CallRequestID string        `json:"call_request_id,omitempty"`
	Method        string        `json:"method"`
	Host          string        `json:"host"`
	Port          int           `json:"port"`
	URL           string        `json:"url,omitempty"`
	Route         string        `json:"route,omitempty"` // the model route matched
	Allowed       bool          `json:"allowed"`
	Status        int           `json:"status"` // what the sandbox got: 200 for an open tunnel, 403, 502, the upstream's
	Reason        string        `json:"reason,omitempty"`
	Flags         []rules.Flag  `json:"flags,omitempty"`
	BytesUp       int64         `json:"bytes_up"`   // sandbox → upstream (request body / tunnel)
	BytesDown     int64         `json:"bytes_down"` // upstream → sandbox (response body / tunnel)
	Time          time.Time     `json:"time"`       // when the request arrived
	Duration      time.Duration `json:"duration_ns"`
}

// Config configures an Proxy. The zero value of every optional
// field is usable.
type Config struct {
	EpisodeID string
	// Policy decides each request. Required: a proxy without a policy
	// would be an open door.
	Policy Policy
	// OnEvent receives every request after it finished (tunnels when they
	// close). Called from the serving goroutine; keep it quick. Optional.
	OnEvent func(Event)
	// CallInFlight returns the request id of the tool call running now, for
	// attribution. Optional.
	CallInFlight func() string
	// Routes are the episode's model routes (the trainer's model adapter):
	// a request under one is put to the Policy like any other; a request
	// to a route's host (or a subdomain of it) that is under none is
	// refused without asking.
	Routes []Route
	// CloseLoopback refuses requests that would connect to the proxy's
	// own host over loopback (127.0.0.0/8, ::1, 0.0.0.0, or a name that
	// resolves there): the sandbox's own loopback never reaches the proxy,
	// so such a request aims at the host's services. Requests under a
	// route and hosts in OpenLoopback pass. Checked on the address dialled,
	// after the Policy allowed the request.
	CloseLoopback bool
	// OpenLoopback are hosts, as requests name them, exempt from
	// CloseLoopback: the task's allowed hosts.
	OpenLoopback []string
	// DialTimeout bounds connecting upstream. Zero: 10s.
	DialTimeout time.Duration
	// Dial connects upstream. Nil: a net.Dialer with DialTimeout.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Logger gets Debug per request and Info for lifecycle. Nil: discard.
	Logger *slog.Logger
}

// Validate reports a config that cannot work.
func (c Config) Validate() error {
	if c.Policy == nil {
		return errors.New("egress: config: Policy is nil: pass the rules-backed policy (or an PolicyFunc)")
	}
	if c.DialTimeout < 0 {
		return fmt.Errorf("egress: config: DialTimeout %v is negative: use 0 for the 10s default", c.DialTimeout)
	}
	return nil
}

// Proxy is the HTTP/HTTPS forward proxy of one episode. A sandbox in
// proxy mode reaches the network only through it: CONNECT tunnels are
// decided on host and port, plain HTTP requests on host and URL; denied
// requests get 403 Forbidden with "blocked by egress policy".
type Proxy struct {
	cfg       Config
	log       *slog.Logger
	srv       *http.Server
	transport *http.Transport

	mu      sync.Mutex
	tunnels map[net.Conn]struct{} // hijacked client and upstream conns; guarded by mu
	closed  bool                  // guarded by mu
}

var _ http.Handler = (*Proxy)(nil)

// New returns a proxy; start it with Serve.
func New(cfg Config) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{cfg: cfg, log: log.With("episode_id", cfg.EpisodeID), tunnels: make(map[net.Conn]struct{})}
	p.transport = &http.Transport{
		Proxy:                 nil, // never chain to the host's own proxy settings
		DialContext:           p.dial,
		MaxIdleConns:          16,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		DisableCompression:    true, // pass bodies through as sent
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	return p, nil
}

// ListenSocket listens on a unix socket at path, replacing a stale one, and
// makes it connectable by the sandbox user (the socket is bind-mounted into
// the container, whose user is not the host's).
func ListenSocket(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("egress: listen %s: remove stale socket: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("egress: listen %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("egress: listen %s: chmod: %w", path, err)
	}
	return ln, nil
}

// Serve accepts connections on ln until Shutdown; it then returns nil.
// Any listener works: the unix socket of the Docker backend or a TCP
// loopback listener.
func (p *Proxy) Serve(ln net.Listener) error {
	p.log.Info("egress proxy serving", "addr", ln.Addr().String())
	err := p.srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("egress: serve: %w", err)
}

// Shutdown stops accepting, closes open tunnels and waits (until ctx ends)
// for plain requests in progress.
func (p *Proxy) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	for c := range p.tunnels {
		c.Close()
	}
	p.mu.Unlock()
	err := p.srv.Shutdown(ctx)
	p.transport.CloseIdleConnections()
	if err != nil {
		p.srv.Close()
		return fmt.Errorf("egress: shutdown: %w", err)
	}
	p.log.Info("egress proxy stopped")
	return nil
}

// noLoopback marks a request's context: its upstream may not be the
// proxy host's loopback (Config.CloseLoopback).
type noLoopback struct{}

// errLoopback is a dial refused by Config.CloseLoopback.
var errLoopback = errors.New("the host's loopback is closed to the sandbox")

func (p *Proxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	closed := ctx.Value(noLoopback{}) != nil
	if p.cfg.Dial == nil {
		var d net.Dialer
		if closed {
			// Checked on the address resolved, before connecting: a
			// name may resolve to loopback, and a refused port must
			// look like any other.
			d.Control = func(_, address string, _ syscall.RawConn) error {
				if host, _, err := net.SplitHostPort(address); err == nil && loopbackIP(host) {
					return errLoopback
				}
				return nil
			}
		}
		c, err := d.DialContext(dctx, network, addr)
		if errors.Is(err, errLoopback) {
			return nil, fmt.Errorf("%s: %w", addr, errLoopback)
		}
		return c, err
	}
	c, err := p.cfg.Dial(dctx, network, addr)
	if err != nil || !closed {
		return c, err
	}
	// A custom dialer: the address connected to, before a byte is sent.
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok && loopbackIP(ta.IP.String()) {
		c.Close()
		return nil, fmt.Errorf("%s: %w", addr, errLoopback)
	}
	return c, nil
}

// loopbackIP reports whether an IP address reaches the local host:
// loopback or unspecified (0.0.0.0 and :: connect to the host itself).
func loopbackIP(s string) bool {
	ip := net.ParseIP(s)
	return ip != nil && (ip.IsLoopback() || ip.IsUnspecified())
}

// refused answers a request whose upstream dial was refused: a 403 like
// a policy denial. It reports false for other errors.
func refused(w http.ResponseWriter, ev *Event, err error) bool {
	if !errors.Is(err, errLoopback) {
		return false
	}
	ev.Allowed, ev.Status = false, http.StatusForbidden
	ev.Reason = joinReason(ev.Reason, errLoopback.Error())
	forbid(w)
	return true
}

// track registers hijacked conns so Shutdown can close them; it reports
// false (and closes them) when the proxy is already shutting down.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.tunnels[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	for _, c := range cs {
		delete(p.tunnels, c)
	}
	p.mu.Unlock()
}

// ServeHTTP handles one proxy request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ev := Event{EpisodeID: p.cfg.EpisodeID, Method: r.Method, Time: time.Now()}
	if p.cfg.CallInFlight != nil {
		ev.CallRequestID = p.cfg.CallInFlight()
	}
	defer func() {
		ev.Duration = time.Since(ev.Time)
		p.log.Debug("egress", "method", ev.Method, "host", ev.Host, "port", ev.Port, "url", ev.URL,
			"allowed", ev.Allowed, "status", ev.Status, "call", ev.CallRequestID)
		if p.cfg.OnEvent != nil {
			p.cfg.OnEvent(ev)
		}
	}()

	var hostport string
	if r.Method == http.MethodConnect {
		hostport = r.Host
	} else {
		if !r.URL.IsAbs() || r.URL.Host == "" {
			ev.Status = http.StatusBadRequest
			ev.Reason = "not a proxy request"
			http.Error(w, "egress proxy: send absolute-form requests (http://host/path) via HTTP_PROXY", ev.Status)
			return
		}
		if r.URL.Scheme != "http" {
			ev.Status = http.StatusBadRequest
			ev.Reason = "unsupported scheme " + r.URL.Scheme
			http.Error(w, "egress proxy: only http:// is forwarded; use CONNECT for https", ev.Status)
			return
		}
		hostport = r.URL.Host
		ev.URL = r.URL.String()
	}
	host, port, err := splitHostPort(hostport, r.Method == http.MethodConnect)
	if err != nil {
		ev.Status = http.StatusBadRequest
		ev.Reason = err.Error()
		http.Error(w, "egress proxy: "+err.Error(), ev.Status)
		return
	}
	ev.Host, ev.Port = host, port

	route, routeHost := p.route(r.Method, host, port, r.URL.Path)
	ev.Route = route
	if routeHost && route == "" {
		ev.Status = http.StatusForbidden
		ev.Reason = "not under a model route of " + host
		forbid(w)
		return
	}
	d := p.cfg.Policy.Allow(r.Context(), Request{
		EpisodeID: p.cfg.EpisodeID, Method: r.Method, Host: host, Port: port, URL: ev.URL, Route: route,
	})
	ev.Allowed, ev.Reason, ev.Flags = d.Allow, d.Reason, d.Flags
	if !d.Allow {
		ev.Status = http.StatusForbidden
		forbid(w)
		return
	}
	if p.cfg.CloseLoopback && route == "" && !slices.Contains(p.cfg.OpenLoopback, host) {
		r = r.WithContext(context.WithValue(r.Context(), noLoopback{}, true))
	}
	target := net.JoinHostPort(host, strconv.Itoa(port))
	if r.Method == http.MethodConnect {
		p.tunnel(w, r, target, &ev)
		return
	}
	p.forward(w, r, &ev)
}

// forbid answers a denied request.
func forbid(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	io.WriteString(w, "blocked by egress policy\n")
}

// route returns the model route a request is under, and whether its host
// is named by any route, itself or as a parent domain (and so closed
// outside its routes: the rules, which see a route's host as allowed,
// would allow its subdomains too).
func (p *Proxy) route(method, host string, port int, path string) (string, bool) {
	named := false
	for _, r := range p.cfg.Routes {
		if r.Host != host && !strings.HasSuffix(host, "."+r.Host) {
			continue
		}
		named = true
		if r.match(method, host, port, path) {
			return r.String(), true
		}
	}
	return "", named
}

// splitHostPort parses host[:port]; a missing port is 443 for CONNECT and
// 80 otherwise.
func splitHostPort(hp string, connect bool) (string, int, error) {
	host, ps, err := net.SplitHostPort(hp)
	if err != nil {
		host, ps = hp, ""
		if connect {
			ps = "443"
		} else {
			ps = "80"
		}
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" {
		return "", 0, fmt.Errorf("no host in %q", hp)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", hp)
	}
	return host, port, nil
}

// hopHeaders are meaningful to one connection only and are not forwarded.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, ev *Event) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	var up countingReader
	if r.Body != nil && r.Body != http.NoBody {
		up.r = r.Body
		out.Body = io.NopCloser(&up)
	}
	resp, err := p.transport.RoundTrip(out)
	// The transport may still be writing the body when the response
	// arrives (an upstream that answers early), so the count is atomic and
	// read again once the response has been relayed.
	ev.BytesUp = up.n.Load()
	if refused(w, ev, err) {
		return
	}
	if err != nil {
		ev.Status = http.StatusBadGateway
		ev.Reason = joinReason(ev.Reason, "upstream: "+err.Error())
		http.Error(w, "egress proxy: upstream unreachable", http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	ev.Status = resp.StatusCode
	n, _ := io.Copy(w, resp.Body)
	ev.BytesDown = n
	ev.BytesUp = up.n.Load()
}

func joinReason(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request, target string, ev *Event) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		ev.Status = http.StatusInternalServerError
		http.Error(w, "egress proxy: connection cannot be tunnelled", ev.Status)
		return
	}
	upstream, err := p.dial(r.Context(), "tcp", target)
	if refused(w, ev, err) {
		return
	}
	if err != nil {
		ev.Status = http.StatusBadGateway
		ev.Reason = joinReason(ev.Reason, "upstream: "+err.Error())
		http.Error(w, "egress proxy: upstream unreachable", http.StatusBadGateway)
		return
	}
	client, brw, err := hj.Hijack()
	if err != nil {
		upstream.Close()
		ev.Status = http.StatusInternalServerError
		ev.Reason = joinReason(ev.Reason, "hijack: "+err.Error())
		return
	}
	if !p.track(client, upstream) {
		ev.Status = http.StatusServiceUnavailable
		ev.Reason = joinReason(ev.Reason, "proxy shutting down")
		return
	}
	defer func() {
		p.untrack(client, upstream)
		client.Close()
		upstream.Close()
	}()
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		ev.Status = http.StatusOK
		return
	}
	ev.Status = http.StatusOK

	// Bytes the client sent right after its CONNECT may sit in the
	// server's reader already.
	var fromClient io.Reader = client
	if n := brw.Reader.Buffered(); n > 0 {
		fromClient = io.MultiReader(io.LimitReader(brw.Reader, int64(n)), client)
	}
	done := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(upstream, fromClient)
		closeWrite(upstream)
		done <- n
	}()
	down, _ := io.Copy(client, upstream)
	closeWrite(client)
	ev.BytesDown = down
	// The upstream finished; the client has nothing left to say to it.
	client.SetReadDeadline(time.Now().Add(time.Second))
	ev.BytesUp = <-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

type countingReader struct {
	r io.Reader
	n atomic.Int64 // read by the handler while the transport's writer adds to it
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}
