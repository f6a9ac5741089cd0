package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rollcage/rollcage/rules"
)

// hostPolicy allows exactly one host; everything else is denied with a flag.
type hostPolicy struct {
	allow string
	mu    sync.Mutex
	seen  []Request // guarded by mu
}

func (p *hostPolicy) Allow(_ context.Context, req Request) Decision {
	p.mu.Lock()
	p.seen = append(p.seen, req)
	p.mu.Unlock()
	if req.Host == p.allow {
		return Decision{Allow: true, Reason: "code host"}
	}
	return Decision{Reason: "not allow-listed", Flags: []rules.Flag{{
		Rule: "egress.allowlist", Category: rules.CatNetwork, Severity: rules.Suspicious, Reason: "host not allow-listed", Evidence: req.Host,
	}}}
}

// eventLog collects NetworkEvents; wait blocks until n have arrived.
type eventLog struct {
	mu     sync.Mutex
	events []Event
	ch     chan struct{}
}

func newEventLog() *eventLog { return &eventLog{ch: make(chan struct{}, 100)} }

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
	l.ch <- struct{}{}
}

func (l *eventLog) wait(t *testing.T, n int) []Event {
	t.Helper()
	for {
		l.mu.Lock()
		got := append([]Event(nil), l.events...)
		l.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-l.ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("got %d network events, want %d: %+v", len(got), n, got)
		}
	}
}

type proxyFixture struct {
	proxy  *Proxy
	addr   string
	events *eventLog
	call   *atomic.Value
	policy *hostPolicy
}

func startProxy(t *testing.T, ln net.Listener) *proxyFixture {
	t.Helper()
	return startProxyWith(t, ln, nil)
}

// startProxyWith starts a proxy whose Config tweak may change.
func startProxyWith(t *testing.T, ln net.Listener, tweak func(*Config)) *proxyFixture {
	t.Helper()
	f := &proxyFixture{events: newEventLog(), call: new(atomic.Value), policy: &hostPolicy{allow: "127.0.0.1"}}
	f.call.Store("call-1")
	cfg := Config{
		EpisodeID:    "ep-7",
		Policy:       f.policy,
		OnEvent:      f.events.add,
		CallInFlight: func() string { return f.call.Load().(string) },
		DialTimeout:  2 * time.Second,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ln == nil {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
	}
	f.proxy, f.addr = p, ln.Addr().String()
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return f
}

func (f *proxyFixture) client(t *testing.T, tlsConf *tls.Config) *http.Client {
	u, _ := url.Parse("http://" + f.addr)
	tr := &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: tlsConf, DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func codeHost(t *testing.T) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Proxy-Connection") != "" {
			http.Error(w, "hop-by-hop header leaked", 500)
			return
		}
		w.Header().Set("X-Code-Host", "yes")
		io.WriteString(w, "hello from code host "+r.URL.Path+" "+string(body))
	}))
	t.Cleanup(ts.Close)
	return ts
}

func portOf(t *testing.T, rawURL string) int {
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(u.Port())
	return p
}

var ignoreTiming = cmpopts.IgnoreFields(Event{}, "Time", "Duration")

func TestEgressHTTP(t *testing.T) {
	ts := codeHost(t)
	f := startProxy(t, nil)
	c := f.client(t, nil)
	port := portOf(t, ts.URL)

	resp, err := c.Get(ts.URL + "/repo.git")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello from code host /repo.git " || resp.Header.Get("X-Code-Host") != "yes" {
		t.Fatalf("allowed GET: %d %q headers %v", resp.StatusCode, body, resp.Header)
	}

	f.call.Store("call-2")
	denied := "http://localhost:" + strconv.Itoa(port) + "/secret"
	resp, err = c.Get(denied)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || string(body) != "blocked by egress policy\n" {
		t.Fatalf("denied GET: %d %q, want 403 blocked by egress policy", resp.StatusCode, body)
	}

	f.call.Store("call-3")
	resp, err = c.Post(ts.URL+"/upload", "text/plain", strings.NewReader("12345"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	got := f.events.wait(t, 3)
	want := []Event{
		{EpisodeID: "ep-7", CallRequestID: "call-1", Method: "GET", Host: "127.0.0.1", Port: port, URL: ts.URL + "/repo.git",
			Allowed: true, Status: 200, Reason: "code host", BytesDown: int64(len("hello from code host /repo.git "))},
		{EpisodeID: "ep-7", CallRequestID: "call-2", Method: "GET", Host: "localhost", Port: port, URL: denied,
			Status: 403, Reason: "not allow-listed", Flags: f.policy.Allow(context.Background(), Request{Host: "localhost"}).Flags},
		{EpisodeID: "ep-7", CallRequestID: "call-3", Method: "POST", Host: "127.0.0.1", Port: port, URL: ts.URL + "/upload",
			Allowed: true, Status: 200, Reason: "code host", BytesUp: 5, BytesDown: int64(len("hello from code host /upload 12345"))},
	}
	if d := cmp.Diff(want, got, ignoreTiming); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	for _, e := range got {
		if e.Time.IsZero() {
			t.Errorf("event without time: %+v", e)
		}
	}
}

func TestEgressConnect(t *testing.T) {
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "tls hello")
	}))
	t.Cleanup(ts.Close)
	tlsConf := ts.Client().Transport.(*http.Transport).TLSClientConfig
	f := startProxy(t, nil)
	c := f.client(t, tlsConf)

	resp, err := c.Get(ts.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "tls hello" {
		t.Fatalf("tunnelled GET: %q", body)
	}
	c.Transport.(*http.Transport).CloseIdleConnections()

	ev := f.events.wait(t, 1)[0]
	if ev.Method != "CONNECT" || ev.Host != "127.0.0.1" || ev.Port != portOf(t, ts.URL) || ev.URL != "" ||
		!ev.Allowed || ev.Status != 200 || ev.CallRequestID != "call-1" || ev.BytesUp == 0 || ev.BytesDown == 0 {
		t.Errorf("CONNECT event: %+v", ev)
	}
}

// rawConnect speaks CONNECT by hand and returns the proxy's response.
func rawConnect(t *testing.T, proxyAddr, target string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	io.WriteString(conn, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		t.Fatal(err)
	}
	return resp, conn, br
}

func TestEgressConnectDenied(t *testing.T) {
	f := startProxy(t, nil)
	resp, _, br := rawConnect(t, f.addr, "evil.example:443")
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("CONNECT denied: status %d, want 403", resp.StatusCode)
	}
	body, _ := io.ReadAll(io.LimitReader(br, int64(len("blocked by egress policy\n"))))
	if string(body) != "blocked by egress policy\n" {
		t.Errorf("body %q", body)
	}
	ev := f.events.wait(t, 1)[0]
	if ev.Allowed || ev.Status != 403 || ev.Host != "evil.example" || ev.Port != 443 || len(ev.Flags) != 1 {
		t.Errorf("event: %+v", ev)
	}
}

func TestEgressUpstreamDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now

	f := startProxy(t, nil)
	resp, err := f.client(t, nil).Get("http://" + dead + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("GET to a dead upstream: %d, want 502", resp.StatusCode)
	}
	cresp, _, _ := rawConnect(t, f.addr, dead)
	if cresp.StatusCode != http.StatusBadGateway {
		t.Errorf("CONNECT to a dead upstream: %d, want 502", cresp.StatusCode)
	}
	for _, ev := range f.events.wait(t, 2) {
		if !ev.Allowed || ev.Status != 502 {
			t.Errorf("event: %+v", ev)
		}
	}
}

func TestEgressBadRequests(t *testing.T) {
	f := startProxy(t, nil)
	tests := []struct {
		name, req string
		want      int
	}{
		{"origin form", "GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400},
		{"bad port", "CONNECT 127.0.0.1:99999 HTTP/1.1\r\nHost: x\r\n\r\n", 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", f.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			io.WriteString(conn, tc.req)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	if n := len(f.policy.seen); n != 0 {
		t.Errorf("policy asked %d times about malformed requests", n)
	}
}

func TestEgressUnixSocketAndShutdownClosesTunnels(t *testing.T) {
	// An upstream that echoes and never closes: the tunnel stays open
	// until Shutdown ends it.
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()

	sock := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := ListenSocket(sock)
	if err != nil {
		t.Fatal(err)
	}
	f := startProxy(t, ln)

	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	target := echo.Addr().String()
	// The CONNECT and the first tunnel bytes in one write: the proxy must
	// forward what it buffered while reading the request.
	io.WriteString(conn, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\nping")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT over unix socket: %v %v", resp, err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo through tunnel: %q %v", buf, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.proxy.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = br.ReadByte()
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("tunnel still open after Shutdown: read err %v", err)
	}
	ev := f.events.wait(t, 1)[0]
	if ev.Method != "CONNECT" || ev.BytesUp != 4 || ev.BytesDown != 4 || ev.Status != 200 {
		t.Errorf("tunnel event: %+v", ev)
	}
	if _, err := net.Dial("unix", sock); err == nil {
		t.Error("socket still accepting after Shutdown")
	}
}

func TestEgressConfigValidate(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New without a policy: want an error")
	}
	allow := PolicyFunc(func(context.Context, Request) Decision { return Decision{Allow: true} })
	if err := (Config{Policy: allow, DialTimeout: -1}).Validate(); err == nil {
		t.Error("negative DialTimeout: want an error")
	}
	if err := (Config{Policy: allow}).Validate(); err != nil {
		t.Errorf("minimal config: %v", err)
	}
}
