package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/sandbox"
)

// TestShellRobustness runs sequences of calls in one session; each step's
// output and exit code is checked, so a call that broke the shell (or its
// framing) shows up in the steps after it. Runs in both modes.
func TestShellRobustness(t *testing.T) {
	type step struct {
		cmd    string
		stdin  string
		output string
		exit   int
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"syntax error then a normal command", []step{
			{cmd: "echo 'unclosed", exit: 2},
			{cmd: "if true; then echo x", exit: 2},
			{cmd: "echo fine", output: "fine\n"},
		}},
		{"stdin readers return at once", []step{
			{cmd: "cat", output: ""},
			{cmd: "read x; echo \"rc=$? x=$x\"", output: "rc=1 x=\n"},
			{cmd: "cat; echo done", stdin: "given\n", output: "given\ndone\n"},
			{cmd: "cat", output: ""},
		}},
		{"redirections and options do not outlive the call", []step{
			{cmd: "exec >/dev/null 2>&1; echo hidden"},
			{cmd: "echo shown; echo err >&2", output: "shown\nerr\n"},
			{cmd: "set -x; echo traced", output: "+++ echo traced\ntraced\n"},
			{cmd: "echo plain", output: "plain\n"},
			{cmd: "set -e"},
			{cmd: "false; echo after", output: "after\n"},
			{cmd: "set -u"},
			{cmd: "echo \"[$UNSET_VAR]\"", output: "[]\n"},
		}},
		{"exit ends the shell, not the session", []step{
			{cmd: "export KEEP=1; cd /tmp"},
			{cmd: "exit 3", exit: 3},
			{cmd: "echo $KEEP; pwd", output: "1\n/tmp\n"},
			{cmd: "export KEEP=2; exit", exit: 0},
			{cmd: "echo $KEEP", output: "2\n"},
			{cmd: "kill -KILL $$", exit: 137},
			{cmd: "echo $KEEP", output: "2\n"},
		}},
		{"break, continue and return at top level", []step{
			{cmd: "break 2>/dev/null; echo b", output: "b\n"},
			{cmd: "return 4; echo not", exit: 4},
			{cmd: "echo ok", output: "ok\n"},
		}},
		{"commands shadowing builtins", []step{
			{cmd: "printf() { echo fake; }; pwd() { echo fake; }; cd() { echo fake; }; export -f printf"},
			{cmd: "builtin cd /tmp; echo x", output: "x\n"},
			{cmd: "builtin pwd", output: "/tmp\n"},
		}},
	}
	_, c := newTestServer(t, ServerConfig{})
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			session := fmt.Sprintf("s%d", i)
			for j, s := range tc.steps {
				res, err := c.Exec(t.Context(), sandbox.ExecRequest{Session: session, Command: s.cmd, Stdin: s.stdin, Timeout: 10 * time.Second})
				if err != nil {
					t.Fatalf("step %d %q: %v", j, s.cmd, err)
				}
				// Syntax errors name the file the command came from; only
				// their presence matters.
				got := res.Output
				if s.exit == 2 {
					got = ""
				}
				if got != s.output || res.ExitCode != s.exit || res.Stopped != "" {
					t.Errorf("step %d %q: output %q exit %d stopped %q, want %q exit %d", j, s.cmd, res.Output, res.ExitCode, res.Stopped, s.output, s.exit)
				}
			}
		})
	}
}

// TestOneShellPerSession: in persistent mode calls of a session share one
// process (and its non-exported variables) until it dies; sessions have
// their own.
func TestOneShellPerSession(t *testing.T) {
	if testShellMode() != ModePersistent {
		t.Skip("per-call mode starts a shell per call")
	}
	_, c := newTestServer(t, ServerConfig{})
	first := run(t, c, "a", "local_var=kept; echo $$").Output
	if got := run(t, c, "a", "echo $$ $local_var").Output; got != strings.TrimSpace(first)+" kept\n" {
		t.Errorf("second call: %q, want the same pid %q and the variable", got, first)
	}
	if other := run(t, c, "b", "echo $$").Output; other == first {
		t.Errorf("sessions a and b share shell %s", other)
	}
	run(t, c, "a", "exit 1")
	if again := run(t, c, "a", "echo $$").Output; again == first {
		t.Errorf("after exit the shell is still %s", again)
	}
}

// TestTimeoutThenSessionAnswers: a timeout kills the shell with its busy
// loop and what it backgrounded; the next call has the state of the last
// completed call, and $$ is a new shell.
func TestTimeoutThenSessionAnswers(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	d := t.TempDir()
	run(t, c, "", "export EARLIER=yes; greet() { echo hi; }; cd "+d)
	before := run(t, c, "", "echo $$").Output
	res, err := c.Exec(t.Context(), sandbox.ExecRequest{
		Command: fmt.Sprintf("export LATER=no; sleep 1000 & echo $! > %s/pid; while :; do :; done", d),
		Timeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stopped != sandbox.StopTimeout || res.ExitCode != 128+int(syscall.SIGKILL) {
		t.Errorf("stopped %q exit %d, want timeout 137", res.Stopped, res.ExitCode)
	}
	pid := readPid(t, filepath.Join(d, "pid"))
	waitFor(t, "backgrounded sleep to die", func() bool { return !alive(pid) })
	res = run(t, c, "", `echo "$EARLIER [${LATER-unset}]"; greet; pwd; echo $$`)
	lines := strings.Split(res.Output, "\n")
	if len(lines) != 5 || lines[0] != "yes [unset]" || lines[1] != "hi" || lines[2] != d {
		t.Fatalf("after timeout: %q", res.Output)
	}
	if testShellMode() == ModePersistent && lines[3]+"\n" == before {
		t.Errorf("shell %s survived the kill", lines[3])
	}
}

// TestBackgroundOutputDoesNotBreakCalls: a background job that writes
// before, during and after later calls must not change their exit codes or
// hang them; its lines may show up in the output of a call running when
// they were written, never mixed into the middle of a line of ours.
func TestBackgroundOutputDoesNotBreakCalls(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	d := t.TempDir()
	run(t, c, "", fmt.Sprintf("(while :; do echo spam; sleep 0.001; done) & echo $! > %s/pid", d))
	pid := readPid(t, filepath.Join(d, "pid"))
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	late := fmt.Sprintf("(while [ ! -e %s/go ]; do sleep 0.01; done; echo late) &", d)
	run(t, c, "", late)
	for i := range 50 {
		cmd := fmt.Sprintf("echo mine-%d; (exit %d)", i, i%7)
		if i == 25 {
			cmd = "touch " + d + "/go; sleep 0.05; " + cmd
		}
		res, err := c.Exec(t.Context(), sandbox.ExecRequest{Command: cmd, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != i%7 || res.Stopped != "" {
			t.Fatalf("call %d: exit %d stopped %q, want %d", i, res.ExitCode, res.Stopped, i%7)
		}
		var mine []string
		for _, l := range strings.Split(strings.TrimSuffix(res.Output, "\n"), "\n") {
			if l != "spam" && l != "late" {
				mine = append(mine, l)
			}
		}
		if diff := cmp.Diff([]string{fmt.Sprintf("mine-%d", i)}, mine); diff != "" {
			t.Fatalf("call %d: own output (-want +got):\n%s\nfull output %q", i, diff, res.Output)
		}
	}
}

// TestNoLeaks: many calls leave the agent with as many fds and child
// processes as one call did.
func TestNoLeaks(t *testing.T) {
	n := 1000
	if testShellMode() == ModePerCall {
		n = 100 // ~9 ms each
	}
	_, c := newTestServer(t, ServerConfig{})
	run(t, c, "", "true")
	// Files earlier tests dropped without closing are closed by their
	// finalizers at some GC; let that happen before counting, not during.
	runtime.GC()
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	fds0, kids0 := countFDs(t), countChildren(t)
	for range n {
		if res, err := c.Exec(t.Context(), sandbox.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
			t.Fatalf("exec: %+v %v", res, err)
		}
	}
	// Per-call shells are reaped by the time Exec returns; what remains
	// is the persistent shell, if any.
	if fds, kids := countFDs(t), countChildren(t); fds != fds0 || kids != kids0 {
		t.Errorf("after %d calls: %d fds (was %d), %d children (was %d)", n, fds, fds0, kids, kids0)
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// countChildren counts live processes whose parent is this test process.
func countChildren(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	me := os.Getpid()
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(me) && f[0] != "Z" {
			n++
		}
	}
	return n
}

// TestCommandDirRemoved: a command that deletes the agent's command dir
// (as the agent's own user it may) does not break the session.
func TestCommandDirRemoved(t *testing.T) {
	if testShellMode() != ModePersistent {
		t.Skip("per-call mode passes the command on a pipe")
	}
	_, c := newTestServer(t, ServerConfig{})
	run(t, c, "", "export KEEP=1")
	dir := strings.TrimSpace(run(t, c, "", `dirname "$BASH_SOURCE"`).Output)
	if !strings.Contains(dir, ".rollcage-session-") {
		t.Fatalf("command dir %q", dir)
	}
	run(t, c, "", "rm -rf "+dir)
	if res := run(t, c, "", "echo $KEEP"); res.Output != "1\n" || res.ExitCode != 0 {
		t.Errorf("after removing the command dir: %+v", res)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("old dir %s is back", dir)
	}
}
