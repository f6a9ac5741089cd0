package sandboxtest

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// ImageEnv names the image a backend's tests start.
const ImageEnv = "ROLLCAGE_TEST_IMAGE"

// TestImage is $ROLLCAGE_TEST_IMAGE, else rollcage/base:latest.
func TestImage() string {
	if img := os.Getenv(ImageEnv); img != "" {
		return img
	}
	return "rollcage/base:latest"
}

// VictimEnv, set to a state dir, makes a backend's test binary the victim
// of its reaper test instead of running tests.
const VictimEnv = "ROLLCAGE_TEST_REAPER_CHILD"

// MainWithVictim is TestMain for a backend whose reaper test kills a copy
// of its test binary: run with VictimEnv set, the binary runs only
// victim(stateDir), which creates sandboxes and calls Hold; else the agent
// is built (EnsureAgent) and the tests run.
func MainWithVictim(m *testing.M, victim func(stateDir string) int) {
	if dir := os.Getenv(VictimEnv); dir != "" {
		os.Exit(victim(dir))
	}
	cleanup, err := EnsureAgent()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// Hold is the end of a victim: it reports the ids of the sandboxes it
// holds to StartVictim and waits to be killed.
func Hold(ids ...string) {
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "ID %s\n", id)
	}
	b.WriteString("READY\n")
	os.Stdout.WriteString(b.String())
	select {} // until kill -9
}

// Victim is a reaper test's victim, running and holding sandboxes.
type Victim struct {
	IDs []string // of the sandboxes it holds, as it reported them
	cmd *exec.Cmd
}

// StartVictim runs this test binary as a victim on stateDir and waits for
// it to report its sandboxes; a line it prints instead (its error) fails
// t. It is killed at cleanup at the latest.
func StartVictim(t *testing.T, stateDir string) *Victim {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), VictimEnv+"="+stateDir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	v := &Victim{cmd: cmd}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "ID "); ok {
			v.IDs = append(v.IDs, id)
		} else if line == "READY" {
			return v
		} else {
			t.Fatalf("victim: %s", line)
		}
	}
	t.Fatalf("victim exited before it was ready: %v", sc.Err())
	return nil
}

// Kill kills the victim with SIGKILL, as a crash would, and waits for it.
func (v *Victim) Kill(t *testing.T) {
	t.Helper()
	if err := v.cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	v.cmd.Wait()
}

// VerboseLogger is a debug logger writing to t's log under go test -v,
// else nil (a backend's Logger default: discard).
func VerboseLogger(t testing.TB) *slog.Logger {
	if !testing.Verbose() {
		return nil
	}
	return Logger(t, slog.LevelDebug)
}

// Logger writes what reaches level to t's log.
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: level}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// CloseAtCleanup closes a backend when t ends, within two minutes (pods
// take longer to go than containers), failing t on an error.
func CloseAtCleanup(t testing.TB, b interface{ Close(context.Context) error }) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Errorf("Backend.Close: %v", err)
		}
	})
}
