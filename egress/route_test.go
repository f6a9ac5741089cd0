package egress

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseRoute(t *testing.T) {
	tests := []struct {
		in      string
		want    Route
		wantErr string // substring naming what to give
	}{
		{in: "http://adapter:8000/v1", want: Route{Scheme: "http", Host: "adapter", Port: 8000, Path: "/v1"}},
		{in: "http://Adapter.Internal/v1/", want: Route{Scheme: "http", Host: "adapter.internal", Port: 80, Path: "/v1"}},
		{in: "http://10.0.0.5:30000", want: Route{Scheme: "http", Host: "10.0.0.5", Port: 30000}},
		{in: "https://models.example:8443", want: Route{Scheme: "https", Host: "models.example", Port: 8443}},
		{in: "https://models.example/", want: Route{Scheme: "https", Host: "models.example", Port: 443}},
		{in: "http://[::1]:9000/v1", want: Route{Scheme: "http", Host: "::1", Port: 9000, Path: "/v1"}},
		{in: "http://adapter_1.internal:8000/v1", want: Route{Scheme: "http", Host: "adapter_1.internal", Port: 8000, Path: "/v1"}},
		{in: "http://*.internal:8000/v1", wantErr: "not a host name or IP address (no wildcards)"},
		{in: "http://[fe80::1%25eth0]:8000/v1", wantErr: "not a host name or IP address"},
		{in: "ftp://adapter/v1", wantErr: "give an http:// or https:// URL"},
		{in: "adapter:8000/v1", wantErr: "give an http:// or https:// URL"},
		{in: "http:///v1", wantErr: "no host: give http://host:port/path"},
		{in: "http://user:pw@adapter:8000/v1", wantErr: "without user:password@"},
		{in: "http://adapter:8000/v1?key=x", wantErr: "query or fragment"},
		{in: "http://adapter:99999/v1", wantErr: "bad port"},
		{in: "http://adapter:8000/v1/../admin", wantErr: "not clean"},
		{in: "https://models.example/v1", wantErr: "give https://models.example without the path"},
	}
	for _, tc := range tests {
		got, err := ParseRoute(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseRoute(%q) = %+v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseRoute(%q): %v", tc.in, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("ParseRoute(%q) (-want +got):\n%s", tc.in, d)
		}
	}
}

// TestEgressModelRoute: a loopback stand-in for the trainer's model
// adapter answers OpenAI chat completions. The proxy lets through exactly
// the requests under the route (asking the policy about each, which may
// still deny), and refuses another port, path or scheme on the route's
// host without asking.
func TestEgressModelRoute(t *testing.T) {
	adapter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
			http.Error(w, "stand-in serves POST /v1/chat/completions only", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","model":"policy","choices":[{"index":0,"message":{"role":"assistant","content":"ls"},"finish_reason":"stop"}]}`)
	}))
	t.Cleanup(adapter.Close)
	other := codeHost(t) // same host, another port
	port, otherPort := portOf(t, adapter.URL), portOf(t, other.URL)
	ap := strconv.Itoa(port)
	route := Route{Scheme: "http", Host: "127.0.0.1", Port: port, Path: "/v1"}
	// The policy allows only 127.0.0.1, so a route on localhost is denied
	// by it: a rule can still flag a routed request.
	flagged := Route{Scheme: "http", Host: "localhost", Port: port, Path: "/v1"}
	f := startProxyWith(t, nil, func(c *Config) { c.Routes = []Route{route, flagged} })
	c := f.client(t, nil)

	tests := []struct {
		method, url string
		wantStatus  int
		wantRoute   string
		wantAsked   bool // the policy saw it
	}{
		{"POST", adapter.URL + "/v1/chat/completions", 200, route.String(), true},
		{"POST", adapter.URL + "/v1", 404, route.String(), true}, // under the route; the stand-in's own 404
		{"GET", adapter.URL + "/admin", 403, "", false},
		{"GET", adapter.URL + "/v10/chat/completions", 403, "", false},
		{"GET", adapter.URL + "/v1/../admin", 403, "", false},
		{"GET", adapter.URL + "/v1/%2e%2e/admin", 403, "", false},
		{"POST", "http://127.0.0.1:" + strconv.Itoa(otherPort) + "/v1/chat/completions", 403, "", false},
		{"POST", "http://localhost:" + ap + "/v1/chat/completions", 403, flagged.String(), true},
		{"POST", "http://api.localhost:" + ap + "/v1/chat/completions", 403, "", false}, // a subdomain of a route's host
	}
	for i, tc := range tests {
		f.policy.mu.Lock()
		f.policy.seen = nil
		f.policy.mu.Unlock()
		req, _ := http.NewRequestWithContext(context.Background(), tc.method, tc.url, strings.NewReader(`{"model":"policy","messages":[{"role":"user","content":"hi"}]}`))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.wantStatus {
			t.Errorf("%s %s: status %d %q, want %d", tc.method, tc.url, resp.StatusCode, body, tc.wantStatus)
		}
		if tc.wantStatus == 200 && !strings.Contains(string(body), `"chat.completion"`) {
			t.Errorf("%s %s: body %q, want the stand-in's completion", tc.method, tc.url, body)
		}
		ev := f.events.wait(t, i+1)[i]
		if ev.Route != tc.wantRoute || ev.Status != tc.wantStatus || ev.Allowed != (tc.wantStatus != 403) {
			t.Errorf("%s %s: event %+v, want route %q status %d", tc.method, tc.url, ev, tc.wantRoute, tc.wantStatus)
		}
		f.policy.mu.Lock()
		seen := f.policy.seen
		f.policy.mu.Unlock()
		if asked := len(seen) == 1 && seen[0].Route == tc.wantRoute; asked != tc.wantAsked || (!tc.wantAsked && len(seen) != 0) {
			t.Errorf("%s %s: policy saw %+v, want asked=%v with route %q", tc.method, tc.url, seen, tc.wantAsked, tc.wantRoute)
		}
	}

	// CONNECT to an http route's host and port: a tunnel would hide the
	// path, so it is refused.
	resp, conn, _ := rawConnect(t, f.addr, "127.0.0.1:"+ap)
	conn.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("CONNECT to an http route: %d, want 403", resp.StatusCode)
	}
}

// TestEgressCloseLoopback: with CloseLoopback, a request the policy allows
// still may not connect to the proxy host's loopback, by address or by a
// name that resolves there, unless its host is open or it is under a
// route; a refused one is a 403 that reaches nothing.
func TestEgressCloseLoopback(t *testing.T) {
	var hits atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	adapter := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "adapter "+r.URL.Path)
	}))
	adapter.Listener = ln
	adapter.Start()
	t.Cleanup(adapter.Close)
	host := codeHost(t) // 127.0.0.1
	port, aport := strconv.Itoa(portOf(t, host.URL)), strconv.Itoa(portOf(t, adapter.URL))
	f := startProxyWith(t, nil, func(c *Config) {
		c.Policy = PolicyFunc(func(context.Context, Request) Decision { return Decision{Allow: true} })
		c.CloseLoopback, c.OpenLoopback = true, []string{"127.0.0.1"}
		c.Routes = []Route{{Scheme: "http", Host: "127.0.0.2", Port: portOf(t, adapter.URL), Path: "/v1"}}
	})
	c := f.client(t, nil)
	tests := []struct {
		url  string
		want int
	}{
		{host.URL + "/open", 200},                            // an open host
		{"http://127.0.0.2:" + aport + "/v1/models", 200},    // under a route
		{"http://localhost:" + port + "/by-name", 403},       // a name resolving to loopback
		{"http://127.0.0.3:" + port + "/other-address", 403}, // refused whether or not anything listens
		{"http://0.0.0.0:" + port + "/unspecified", 403},
	}
	for i, tc := range tests {
		resp, err := c.Get(tc.url)
		if err != nil {
			t.Fatalf("GET %s: %v", tc.url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ev := f.events.wait(t, i+1)[i]
		if resp.StatusCode != tc.want || ev.Status != tc.want || ev.Allowed != (tc.want == 200) {
			t.Errorf("GET %s: %d %q, event %+v; want %d", tc.url, resp.StatusCode, body, ev, tc.want)
		}
		if tc.want == 403 && !strings.Contains(ev.Reason, "loopback is closed") {
			t.Errorf("GET %s: reason %q, want the loopback named", tc.url, ev.Reason)
		}
	}
	if hits.Load() != 1 {
		t.Errorf("adapter hits %d, want 1 (the routed request)", hits.Load())
	}
	resp, conn, _ := rawConnect(t, f.addr, "localhost:"+port)
	conn.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("CONNECT localhost: %d, want 403", resp.StatusCode)
	}
}
