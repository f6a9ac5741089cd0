package sandboxtest

import (
	"errors"
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
// still no direct route; and that it does not fork (its children would
// share its proxy socket, their egress counted as its episode's): Fork
// fails with sandbox.ErrUnsupported and the sandbox goes on.
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
	if fr, err := sandbox.Fork(t.Context(), sb, 1); !errors.Is(err, sandbox.ErrUnsupported) {
		for _, c := range fr.Children {
			c.Close(t.Context())
		}
		t.Fatalf("Fork of a proxy-mode sandbox: %v, want an error wrapping ErrUnsupported", err)
	}
	if res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "echo on"}); err != nil || strings.TrimSpace(res.Output) != "on" {
		t.Errorf("the sandbox after a refused fork: %v %+v", err, res)
	}
}
