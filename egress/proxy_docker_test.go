package egress_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollcage/rollcage/egress"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/docker/dockertest"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// TestEgressDockerEndToEnd runs curl inside a real sandbox in proxy mode:
// the sandbox has no network but the agent's relay on 127.0.0.1:3128, which
// reaches this proxy through the bind-mounted unix socket.
func TestEgressDockerEndToEnd(t *testing.T) {
	sandboxtest.RequireDocker(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	// The code host listens on the host's loopback; the sandbox can only
	// reach it by name through the proxy, which maps code.test to it.
	code := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from code host "+r.URL.Path)
	}))
	defer code.Close()
	codeAddr := code.Listener.Addr().String()

	var mu sync.Mutex
	var events []egress.Event
	var call atomic.Value
	call.Store("")
	proxy, err := egress.New(egress.Config{
		EpisodeID: "ep-e2e",
		Policy: egress.PolicyFunc(func(_ context.Context, r egress.Request) egress.Decision {
			return egress.Decision{Allow: r.Host == "code.test", Reason: "allow-list"}
		}),
		OnEvent: func(e egress.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		},
		CallInFlight: func() string { return call.Load().(string) },
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if host, _, _ := net.SplitHostPort(addr); host == "code.test" {
				addr = codeAddr
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := egress.ListenSocket(sock)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- proxy.Serve(ln) }()
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := proxy.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	b := dockertest.Backend(t)
	image := os.Getenv("ROLLCAGE_TEST_IMAGE")
	if image == "" {
		image = "rollcage/base:latest"
	}
	sb := sandboxtest.Create(t, b, sandbox.Spec{Image: image, EpisodeID: "ep-e2e", Network: sandbox.NetworkProxy, ProxySocket: sock})

	tests := []struct {
		call, cmd, want string
	}{
		{"c-allowed", "curl -sS --max-time 20 http://code.test:8080/repo.git", "hello from code host /repo.git"},
		{"c-denied", "curl -s --max-time 20 -o /dev/null -w '%{http_code}' http://evil.test/x", "403"},
		{"c-https-denied", "curl -s --max-time 20 https://evil.test/ ; echo exit=$?", "exit=56"},
		// Without the proxy there is no route anywhere.
		{"c-direct", "curl -s --noproxy '*' --max-time 5 http://" + codeAddr + "/ ; echo exit=$?", "exit=7"},
	}
	for _, tc := range tests {
		call.Store(tc.call)
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: tc.cmd, Timeout: 60 * time.Second})
		if err != nil {
			t.Fatalf("%s: Exec: %v", tc.call, err)
		}
		if got := strings.TrimSpace(res.Output); got != tc.want {
			t.Errorf("%s: %q printed %q, want %q", tc.call, tc.cmd, got, tc.want)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	byCall := map[string]egress.Event{}
	for _, e := range events {
		byCall[e.CallRequestID] = e
	}
	if e := byCall["c-allowed"]; !e.Allowed || e.Status != 200 || e.Host != "code.test" || e.Port != 8080 || e.BytesDown == 0 || e.EpisodeID != "ep-e2e" {
		t.Errorf("allowed request event: %+v", e)
	}
	if e := byCall["c-denied"]; e.Allowed || e.Status != 403 || e.Host != "evil.test" || e.URL != "http://evil.test/x" {
		t.Errorf("denied request event: %+v", e)
	}
	if e := byCall["c-https-denied"]; e.Method != "CONNECT" || e.Allowed || e.Status != 403 || e.Port != 443 {
		t.Errorf("denied CONNECT event: %+v", e)
	}
	if e, ok := byCall["c-direct"]; ok {
		t.Errorf("a direct connection reached the proxy: %+v", e)
	}
}
