// Package servetest builds the rollcage binary and runs `rollcage serve`
// as a real process for the tests that drive the gateway from another
// language's client (the E2B SDK, the Python client).
package servetest

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// ModuleRoot is the directory of go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// FreeAddr is a loopback address nothing listens on (yet).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Serve builds rollcage (and the sandbox agent, see
// sandboxtest.EnsureAgent), starts `rollcage serve args...` and waits
// until its stdout prints a line containing ready. The process is
// interrupted (a graceful shutdown) when the test ends; its logs are
// printed if the test failed.
func Serve(t testing.TB, ready string, args ...string) {
	t.Helper()
	if _, err := sandboxtest.EnsureAgent(); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "rollcage")
	build := exec.Command("go", "build", "-o", bin, "./cmd/rollcage")
	build.Dir = ModuleRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build rollcage: %v\n%s", err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, append([]string{"serve"}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	var logs bytes.Buffer
	cmd.Stderr = &logs
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	up := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), ready) {
				up <- true
			}
		}
		up <- false
		io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("rollcage serve logs:\n%s", ClipTail(logs.String(), 8000))
		}
	})
	select {
	case ok := <-up:
		if !ok {
			t.Fatalf("rollcage serve exited before serving: %s", logs.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("rollcage serve did not come up: %s", logs.String())
	}
}

// ClipTail is the last n bytes of s.
func ClipTail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
