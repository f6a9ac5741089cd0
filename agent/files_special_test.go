package agent

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// goroutinesSettle waits for the goroutine count to come back to at most
// want, and fails with the stacks when it does not: a file op that hangs
// or leaks leaves one behind.
func goroutinesSettle(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), want, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// TestFileOpsRefuseSpecialFiles: read_file and write_file (and so edit)
// answer at once with a PathError for anything but a regular file, never
// block on a FIFO without a peer, bound what they read, and leave no
// goroutine or thread behind.
func TestFileOpsRefuseSpecialFiles(t *testing.T) {
	cfg := ServerConfig{}
	d := t.TempDir()
	if os.Getuid() == 0 {
		// Through asUser, the path the sandbox takes.
		d = openDir(t)
		os.Chown(d, 65534, 65534)
		cfg = ServerConfig{User: "65534:65534", Workdir: d}
	}
	_, c := newTestServer(t, cfg)
	ctx := t.Context()

	fifo := filepath.Join(d, "fifo")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(fifo, 0o666)
	sock := filepath.Join(d, "sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	os.Chmod(sock, 0o777)
	huge := filepath.Join(d, "huge")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(maxWholeRead + 1) // sparse
	f.Close()
	os.Chmod(huge, 0o666)

	// Warm up: the first call starts the connection's goroutines.
	if _, _, err := c.ReadFile(ctx, huge, 1); err != nil {
		t.Fatal(err)
	}
	g0, th0 := runtime.NumGoroutine(), threads(t)

	tests := []struct {
		name string
		do   func() error
		kind string
	}{
		{"read fifo without writer", func() error { _, _, err := c.ReadFile(ctx, fifo, 0); return err }, sandbox.KindNotRegular},
		{"write fifo without reader", func() error { return c.WriteFile(ctx, fifo, []byte("x"), 0) }, sandbox.KindNotRegular},
		{"read /dev/zero", func() error { _, _, err := c.ReadFile(ctx, "/dev/zero", 0); return err }, sandbox.KindNotRegular},
		{"read /dev/urandom capped", func() error { _, _, err := c.ReadFile(ctx, "/dev/urandom", 10); return err }, sandbox.KindNotRegular},
		{"write /dev/null", func() error { return c.WriteFile(ctx, "/dev/null", []byte("x"), 0) }, sandbox.KindNotRegular},
		{"read socket", func() error { _, _, err := c.ReadFile(ctx, sock, 0); return err }, sandbox.KindNotRegular},
		{"write socket", func() error { return c.WriteFile(ctx, sock, []byte("x"), 0) }, sandbox.KindNotRegular},
		{"read directory", func() error { _, _, err := c.ReadFile(ctx, d, 0); return err }, sandbox.KindIsDir},
		{"write directory", func() error { return c.WriteFile(ctx, d, []byte("x"), 0) }, sandbox.KindIsDir},
		{"read huge whole", func() error { _, _, err := c.ReadFile(ctx, huge, 0); return err }, sandbox.KindTooLarge},
		{"read under a file", func() error { _, _, err := c.ReadFile(ctx, huge+"/x", 0); return err }, sandbox.KindNotDir},
		{"write under a file", func() error { return c.WriteFile(ctx, huge+"/x/y", []byte("x"), 0) }, sandbox.KindNotDir},
		{"read missing", func() error { _, _, err := c.ReadFile(ctx, d+"/nope", 0); return err }, sandbox.KindNotFound},
	}
	for round := 0; round < 5; round++ {
		for _, tc := range tests {
			start := time.Now()
			err := tc.do()
			var pe *sandbox.PathError
			if !errors.As(err, &pe) || pe.Kind != tc.kind || pe.Reason == "" {
				t.Fatalf("%s: err %v, want a PathError of kind %s", tc.name, err, tc.kind)
			}
			if time.Since(start) > 5*time.Second {
				t.Errorf("%s took %v", tc.name, time.Since(start))
			}
		}
	}
	// A capped read of the huge file is fine and bounded.
	data, cut, err := c.ReadFile(ctx, huge, 1000)
	if err != nil || len(data) != 1000 || !cut {
		t.Errorf("capped read of huge file: %d bytes, cut %v, err %v", len(data), cut, err)
	}
	// The FIFO is untouched and still works for a shell.
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("fifo after the calls: %v %v", fi, err)
	}
	goroutinesSettle(t, g0)
	// Each asUser call ends its locked thread; 65 refused calls may leave
	// idle threads of the runtime's own, never one per call.
	if th := threads(t); th > th0+8 {
		t.Errorf("threads grew from %d to %d over %d calls", th0, th, 5*len(tests))
	}
}

// TestFileOpsHonourDeadline: a read stops at the caller's deadline (here
// already past) instead of running on in the agent.
func TestFileOpsHonourDeadline(t *testing.T) {
	s, _ := newTestServer(t, ServerConfig{})
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, []byte("data"), 0o644)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := s.readFile(ctx, p, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("read with a cancelled context: %v, want context.Canceled", err)
	}
	if err := s.writeFile(ctx, p, []byte("new"), 0); !errors.Is(err, context.Canceled) {
		t.Errorf("write with a cancelled context: %v, want context.Canceled", err)
	}
}
