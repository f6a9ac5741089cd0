package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rollcage/rollcage/sandbox"
)

// waitFor polls cond; used only where the kernel, not our code, decides
// when something happens (a killed process being reaped, a file appearing
// from a command that is still running).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// readPid reads the pid a shell wrote with `echo $! > path`. The shell
// creates the file before it writes the line, so an empty or partial file
// is read again until the line is whole (10 s at most).
func readPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("pid file %s: %q", path, b)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid file %s: %q, %v (no whole line in 10 s)", path, b, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSessionsRunConcurrently(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	d := t.TempDir()
	// Each waits for the file the other creates: serialized, they would
	// both run into their timeout.
	cmds := map[string]string{
		"a": fmt.Sprintf("touch %[1]s/a; while [ ! -e %[1]s/b ]; do sleep 0.01; done; echo a done", d),
		"b": fmt.Sprintf("touch %[1]s/b; while [ ! -e %[1]s/a ]; do sleep 0.01; done; echo b done", d),
	}
	var wg sync.WaitGroup
	results := make(map[string]sandbox.ExecResult)
	var mu sync.Mutex
	for name, cmd := range cmds {
		wg.Go(func() {
			res, err := c.Exec(t.Context(), sandbox.ExecRequest{Session: name, Command: cmd, Timeout: 15 * time.Second})
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			results[name] = res
			mu.Unlock()
		})
	}
	wg.Wait()
	for name, res := range results {
		if res.Stopped != "" || res.Output != name+" done\n" {
			t.Errorf("session %s: stopped=%q output=%q", name, res.Stopped, res.Output)
		}
	}
}

func TestCallsInOneSessionAreSerialized(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	d := t.TempDir()
	// Each call appends start and end marks; overlapping calls would
	// interleave them.
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			cmd := fmt.Sprintf("echo s%d >> %s/log; sleep 0.05; echo e%d >> %s/log", i, d, i, d)
			if _, err := c.Exec(t.Context(), sandbox.ExecRequest{Command: cmd}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	b, _ := os.ReadFile(filepath.Join(d, "log"))
	lines := strings.Fields(string(b))
	if len(lines) != 8 {
		t.Fatalf("log: %q", lines)
	}
	for i := 0; i < 8; i += 2 {
		if lines[i][0] != 's' || lines[i+1] != "e"+lines[i][1:] {
			t.Errorf("calls overlapped: %q", lines)
		}
	}
}

func TestTimeoutKillsProcessGroup(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	d := t.TempDir()
	tests := []struct {
		name    string
		req     sandbox.ExecRequest
		stopped string
		output  string
	}{
		{
			name:    "hard timeout",
			req:     sandbox.ExecRequest{Command: fmt.Sprintf("sleep 1000 & echo $! > %s/pid; echo started; while :; do :; done", d), Timeout: 500 * time.Millisecond},
			stopped: sandbox.StopTimeout,
			output:  "started\n",
		},
		{
			name:    "idle timeout",
			req:     sandbox.ExecRequest{Command: fmt.Sprintf("sleep 1000 & echo $! > %s/pid; echo started; sleep 1000", d), Timeout: 30 * time.Second, IdleTimeout: 300 * time.Millisecond},
			stopped: sandbox.StopIdle,
			output:  "started\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run(t, c, "", "cd /tmp; export KEPT=yes")
			res, err := c.Exec(t.Context(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Stopped != tc.stopped || res.Output != tc.output || res.ExitCode != 128+int(syscall.SIGKILL) {
				t.Errorf("stopped=%q output=%q exit=%d, want %q %q 137", res.Stopped, res.Output, res.ExitCode, tc.stopped, tc.output)
			}
			pid := readPid(t, filepath.Join(d, "pid"))
			waitFor(t, "backgrounded sleep to die", func() bool { return !alive(pid) })
			// The session answers, with the state of the last completed call.
			if got := run(t, c, "", "echo $KEPT; pwd").Output; got != "yes\n/tmp\n" {
				t.Errorf("after kill: %q", got)
			}
		})
	}
}

func TestSteadyOutputIsNotIdle(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	res, err := c.Exec(t.Context(), sandbox.ExecRequest{Command: "for i in 1 2 3 4 5; do echo $i; sleep 0.1; done", IdleTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stopped != "" || res.Output != "1\n2\n3\n4\n5\n" {
		t.Errorf("stopped=%q output=%q", res.Stopped, res.Output)
	}
}

func TestBackgroundProcessDoesNotHoldCall(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	d := t.TempDir()
	res := run(t, c, "", fmt.Sprintf("sleep 30 & echo $! > %s/pid; echo back", d))
	pid := readPid(t, filepath.Join(d, "pid"))
	// The call returned while the sleep, which holds the output pipe, lives.
	if !alive(pid) {
		t.Errorf("background sleep already gone; the call waited for it")
	}
	if res.Output != "back\n" || res.Stopped != "" || res.ExitCode != 0 {
		t.Errorf("result %+v", res)
	}
	syscall.Kill(pid, syscall.SIGKILL)
}

func TestLargeOutputIsCapped(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	res, err := c.Exec(t.Context(), sandbox.ExecRequest{
		Command: `head -c 100000000 /dev/zero | tr '\0' a; printf END`,
		Timeout: 60 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	half := DefaultMaxOutput / 2
	want := strings.Repeat("a", half) +
		fmt.Sprintf("\n[... rollcage: 100000003 bytes of output, %d cut from the middle ...]\n", 100000003-DefaultMaxOutput) +
		strings.Repeat("a", half-3) + "END"
	if res.Output != want {
		t.Errorf("output of %d bytes does not match head+marker+tail (start %q, end %q)", len(res.Output), res.Output[:40], res.Output[len(res.Output)-40:])
	}
	if res.TotalBytes != 100000003 || !res.Truncated {
		t.Errorf("total=%d truncated=%v", res.TotalBytes, res.Truncated)
	}
}

func TestOutputEscapingAndInterleaving(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	tests := []struct {
		cmd, want string
	}{
		{`printf '\xff\xfe\x00abc'`, `\xff\xfe\x00abc`},
		{`printf 'back\\slash \xe2\x9c\x93'`, `back\slash ✓`},
		{"echo out; echo err >&2; echo out2", "out\nerr\nout2\n"},
		{"echo to-dev-stderr > /dev/stderr", "to-dev-stderr\n"},
	}
	for _, tc := range tests {
		if got := run(t, c, "", tc.cmd).Output; got != tc.want {
			t.Errorf("%q: output %q, want %q", tc.cmd, got, tc.want)
		}
	}
}

func TestStdin(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	res, err := c.Exec(t.Context(), sandbox.ExecRequest{Command: "tr a-z A-Z", Stdin: "hello\n"})
	if err != nil || res.Output != "HELLO\n" {
		t.Errorf("output %q, err %v", res.Output, err)
	}
}

func TestRequestIDDedupe(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	d := t.TempDir()
	req := sandbox.ExecRequest{RequestID: "call-1", Command: fmt.Sprintf("echo x >> %s/runs; wc -l < %s/runs", d, d)}

	first, err := c.Exec(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Exec(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if first.Replayed || !second.Replayed {
		t.Errorf("replayed: first %v second %v", first.Replayed, second.Replayed)
	}
	if diff := cmp.Diff(first, second, cmpopts.IgnoreFields(sandbox.ExecResult{}, "Replayed")); diff != "" {
		t.Errorf("replay differs (-first +second):\n%s", diff)
	}

	// Two at once: the retry waits for the first instead of running.
	req2 := sandbox.ExecRequest{RequestID: "call-2", Command: fmt.Sprintf("sleep 0.2; echo y >> %s/runs2", d)}
	var wg sync.WaitGroup
	replays := make(chan bool, 2)
	for range 2 {
		wg.Go(func() {
			res, err := c.Exec(t.Context(), req2)
			if err != nil {
				t.Error(err)
			}
			replays <- res.Replayed
		})
	}
	wg.Wait()
	close(replays)
	n := 0
	for r := range replays {
		if r {
			n++
		}
	}
	b, _ := os.ReadFile(filepath.Join(d, "runs"))
	b2, _ := os.ReadFile(filepath.Join(d, "runs2"))
	if string(b) != "x\n" || string(b2) != "y\n" || n != 1 {
		t.Errorf("runs %q runs2 %q replayed %d, want one run each and one replay", b, b2, n)
	}
}

func TestShFallback(t *testing.T) {
	srv, c := newTestServer(t, ServerConfig{Shell: "sh"})
	if srv.Shell() != "sh" {
		t.Fatalf("shell %q", srv.Shell())
	}
	info, err := c.Ping(t.Context())
	if err != nil || info.Shell != "sh" {
		t.Fatalf("ping: %+v %v", info, err)
	}
	d := t.TempDir()
	run(t, c, "", "cd "+d+"; export FOO=\"it's\"")
	res := run(t, c, "", `pwd; echo "$FOO"; exit 4`)
	if res.Output != d+"\nit's\n" || res.ExitCode != 4 || res.Shell != "sh" {
		t.Errorf("result %+v", res)
	}
}

func TestCancelKillsGroup(t *testing.T) {
	srv, c := newTestServer(t, ServerConfig{})
	d := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, sandbox.ExecRequest{Command: fmt.Sprintf("sleep 1000 & echo $! > %s/pid.tmp; mv %s/pid.tmp %s/pid; wait", d, d, d)})
		errc <- err
	}()
	pidFile := filepath.Join(d, "pid")
	waitFor(t, "command to start", func() bool { _, err := os.Stat(pidFile); return err == nil })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("exec err %v, want context.Canceled", err)
	}
	pid := readPid(t, pidFile)
	waitFor(t, "cancelled group to die", func() bool { return !alive(pid) })
	waitFor(t, "call to finish", func() bool { return srv.active.Load() == 0 })
	if got := run(t, c, "", "echo still here").Output; got != "still here\n" {
		t.Errorf("after cancel: %q", got)
	}
}

// TestOutputSurvivesLateReader: when the drain deadline has passed before
// the reading goroutine runs (a loaded machine), what the shell wrote
// before exiting, and its state dump, are still read.
func TestOutputSurvivesLateReader(t *testing.T) {
	old := drainAfterExit
	drainAfterExit = -time.Second // the deadline is already over when reading starts
	t.Cleanup(func() { drainAfterExit = old })
	_, c := newTestServer(t, ServerConfig{})
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		res, err := c.Exec(ctx, sandbox.ExecRequest{Session: "late", Command: fmt.Sprintf("echo line-%d; export N=%d", i, i)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Output != fmt.Sprintf("line-%d\n", i) {
			t.Fatalf("call %d: output %q", i, res.Output)
		}
		res, err = c.Exec(ctx, sandbox.ExecRequest{Session: "late", Command: "echo $N"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Output != fmt.Sprintf("%d\n", i) {
			t.Fatalf("call %d: state lost, $N = %q", i, res.Output)
		}
	}
}
