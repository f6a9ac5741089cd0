package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/sandbox"
)

// chunks collects a streamed command's output; got is safe to call while
// it runs.
type chunks struct {
	mu  sync.Mutex
	all []sandbox.Output
}

func (c *chunks) add(o sandbox.Output) {
	c.mu.Lock()
	c.all = append(c.all, o)
	c.mu.Unlock()
}

func (c *chunks) text(stream string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, o := range c.all {
		if o.Stream == stream {
			b.Write(o.Data)
		}
	}
	return b.String()
}

func TestStartStreamsStdoutAndStderrApart(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	var got chunks
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	// The second line waits for the test to have seen the first: output
	// that came only at the end would never open the gate.
	p, err := c.Start(t.Context(), sandbox.StartRequest{Command: fmt.Sprintf(
		"echo out-1; echo err-1 >&2; while [ ! -e %s ]; do sleep 0.01; done; echo out-2; exit 3", gate), Timeout: 20 * time.Second}, got.add)
	if err != nil {
		t.Fatal(err)
	}
	if p.PID() <= 0 || !alive(p.PID()) {
		t.Fatalf("pid %d is no live process", p.PID())
	}
	waitFor(t, "first lines streamed", func() bool { return got.text(sandbox.Stdout) == "out-1\n" && got.text(sandbox.Stderr) == "err-1\n" })
	touch(t, gate)
	res, err := p.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 {
		t.Errorf("exit %d, want 3", res.ExitCode)
	}
	if diff := cmp.Diff("out-1\nout-2\n", got.text(sandbox.Stdout)); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	for _, want := range []string{"out-1\n", "err-1\n", "out-2\n"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("result output %q lacks %q", res.Output, want)
		}
	}
}

func TestStartRunsBesideSessions(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	var got chunks
	p, err := c.Start(t.Context(), sandbox.StartRequest{Command: "read line; echo got:$line", Stdin: true, Timeout: 20 * time.Second}, got.add)
	if err != nil {
		t.Fatal(err)
	}
	// Two more streams and a session call while the first waits on stdin.
	for i := range 2 {
		q, err := c.Start(t.Context(), sandbox.StartRequest{Command: fmt.Sprintf("echo other-%d", i)}, func(sandbox.Output) {})
		if err != nil {
			t.Fatal(err)
		}
		if r, err := q.Wait(t.Context()); err != nil || r.Output != fmt.Sprintf("other-%d\n", i) {
			t.Fatalf("concurrent stream: %+v, %v", r, err)
		}
	}
	if r := run(t, c, "", "echo session"); r.Output != "session\n" {
		t.Fatalf("session call beside a stream: %q", r.Output)
	}
	if err := p.Input(t.Context(), []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait(t.Context())
	if err != nil || res.Output != "got:hello\n" || got.text(sandbox.Stdout) != "got:hello\n" {
		t.Fatalf("after input: %+v, %v, streamed %q", res, err, got.text(sandbox.Stdout))
	}
	if err := p.Input(t.Context(), []byte("late")); err == nil {
		t.Error("input after the process ended: no error")
	}
}

func TestStartCloseInputAndSignal(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	p, err := c.Start(t.Context(), sandbox.StartRequest{Command: "wc -c", Stdin: true, Timeout: 20 * time.Second}, func(sandbox.Output) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Input(t.Context(), []byte("12345")); err != nil {
		t.Fatal(err)
	}
	if err := p.CloseInput(t.Context()); err != nil {
		t.Fatal(err)
	}
	if res, err := p.Wait(t.Context()); err != nil || strings.TrimSpace(res.Output) != "5" {
		t.Fatalf("wc after close: %+v, %v", res, err)
	}

	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child")
	p, err = c.Start(t.Context(), sandbox.StartRequest{Command: fmt.Sprintf("sleep 30 & echo $! > %s; wait", pidFile), Timeout: 20 * time.Second}, func(sandbox.Output) {})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "child pid", func() bool { return fileExists(pidFile) })
	child := readPid(t, pidFile)
	if err := p.Signal(t.Context(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d after SIGTERM, want %d", res.ExitCode, 128+int(syscall.SIGTERM))
	}
	waitFor(t, "the group's child to die", func() bool { return !alive(child) })
	if err := p.Signal(t.Context(), syscall.SIGKILL); err != nil {
		t.Errorf("signal after the end: %v (want none)", err)
	}
}

func TestStartTimeoutAndDetached(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	p, err := c.Start(t.Context(), sandbox.StartRequest{Command: "echo before; sleep 30", Timeout: 300 * time.Millisecond}, func(sandbox.Output) {})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait(t.Context())
	if err != nil || res.Stopped != sandbox.StopTimeout || res.Output != "before\n" {
		t.Fatalf("timed out: %+v, %v", res, err)
	}

	// A detached process outlives the command that started it.
	pidFile := filepath.Join(t.TempDir(), "detached")
	p, err = c.Start(t.Context(), sandbox.StartRequest{Command: fmt.Sprintf("setsid sleep 30 >/dev/null 2>&1 & echo $! > %s", pidFile)}, func(sandbox.Output) {})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	pid := readPid(t, pidFile)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if !alive(pid) {
		t.Error("the detached process died with its starter")
	}
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestStartQuickCommands: a command that ends before Start looked at its
// pid still starts (its end kept for Wait), many at once.
func TestStartQuickCommands(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := c.Start(t.Context(), sandbox.StartRequest{Command: fmt.Sprintf("echo %d", i)}, func(sandbox.Output) {})
			if err != nil {
				errs <- err
				return
			}
			if res, err := p.Wait(t.Context()); err != nil || res.Output != fmt.Sprintf("%d\n", i) {
				errs <- fmt.Errorf("%d: %+v, %v", i, res, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
