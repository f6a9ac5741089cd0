package sandboxtest

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/sandbox"
)

// ProxyMode checks the only way out of a proxy-mode sandbox of b: HTTP
// through 127.0.0.1:3128, relayed by the agent to a host unix socket, and
// still no direct route.
func ProxyMode(t *testing.T, b sandbox.Backend, image string) {
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case seen <- r.Method + " " + r.URL.String():
		default:
		}
		fmt.Fprint(w, "via-host-proxy")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	sb, err := b.Create(t.Context(), sandbox.Spec{Image: image, EpisodeID: "proxy", Network: sandbox.NetworkProxy, ProxySocket: sock})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { sb.Close(t.Context()) })
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: `python3 -c "import urllib.request; print(urllib.request.urlopen('http://example.invalid/pkg').read().decode())"`})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !strings.Contains(res.Output, "via-host-proxy") {
		t.Fatalf("request through the proxy: exit %d %q", res.ExitCode, res.Output)
	}
	if got := <-seen; got != "GET http://example.invalid/pkg" {
		t.Errorf("host proxy saw %q", got)
	}
	// Still no direct route.
	res, err = sb.Exec(t.Context(), sandbox.ExecRequest{Command: `python3 -c "import socket; socket.create_connection(('1.1.1.1', 80), timeout=5)"`})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 {
		t.Error("direct connection succeeded in proxy mode")
	}
}
