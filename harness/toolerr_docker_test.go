package harness

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/harness/harnesstest"
	"github.com/rollcage/rollcage/toolcall"
)

// TestPolicyToolErrorsAreOutputs: a tool error of the policy's own making
// (a directory, /etc/shadow, a file it made unreadable, a FIFO, a path
// under a file, ...) is an output with exit code 1 and the episode goes
// on to be graded. Were any of them infrastructure, a policy could mask
// a reward-0 episode by provoking one before submitting.
func TestPolicyToolErrorsAreOutputs(t *testing.T) {
	b, tk, hidden := harnesstest.DockerDemoTask(t, "roman")
	ctx := context.Background()
	st, ep := startEpisode(ctx, t, b, tk, hidden)
	call := func(tool string, args any) (decision.CallResult, error) {
		raw, _ := json.Marshal(args)
		return ep.Call(ctx, toolcall.Call{Tool: tool, Args: raw})
	}
	setup := `mkfifo /workspace/pipe && echo secret > /workspace/locked && chmod 000 /workspace/locked &&
mkdir -p /workspace/closed && echo x > /workspace/closed/f && chmod 000 /workspace/closed &&
python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("/workspace/sock")' && ln -s /etc/shadow /workspace/shadow`
	if res, err := call("bash", map[string]string{"command": setup}); err != nil || res.ExitCode != 0 {
		t.Fatalf("setup: %v: %q", err, res.Output)
	}
	tests := []struct {
		name string
		tool string
		args map[string]string
		want string
	}{
		{"read a directory", "read_file", map[string]string{"path": "/workspace"}, "error: /workspace: Is a directory"},
		{"read /etc/shadow", "read_file", map[string]string{"path": "/etc/shadow"}, "error: /etc/shadow: Permission denied"},
		{"read through a symlink to /etc/shadow", "read_file", map[string]string{"path": "shadow"}, "error: /workspace/shadow: Permission denied"},
		{"read a file made unreadable", "read_file", map[string]string{"path": "locked"}, "error: /workspace/locked: Permission denied"},
		{"read in a directory made unsearchable", "read_file", map[string]string{"path": "closed/f"}, "error: /workspace/closed/f: Permission denied"},
		{"read a missing file", "read_file", map[string]string{"path": "nope.py"}, "error: /workspace/nope.py: No such file or directory"},
		{"read under a file", "read_file", map[string]string{"path": "locked/x"}, "error: /workspace/locked/x: Not a directory"},
		{"read a FIFO", "read_file", map[string]string{"path": "pipe"}, "error: /workspace/pipe: not a regular file (a FIFO); use a command for it"},
		{"read a socket", "read_file", map[string]string{"path": "sock"}, "error: /workspace/sock: not a regular file (a FIFO or socket); use a command for it"},
		{"read /dev/zero", "read_file", map[string]string{"path": "/dev/zero"}, "error: /dev/zero: not a regular file (a character device); use a command for it"},
		{"write /etc/passwd", "write_file", map[string]string{"path": "/etc/passwd", "content": "x"}, "error: /etc/passwd: Permission denied"},
		{"write where it may not create", "write_file", map[string]string{"path": "/usr/lib/x.py", "content": "x"}, "error: /usr/lib/x.py: Permission denied"},
		{"write a directory", "write_file", map[string]string{"path": "/workspace/closed", "content": "x"}, "error: /workspace/closed: Is a directory"},
		{"write a file made unwritable", "write_file", map[string]string{"path": "locked", "content": "x"}, "error: /workspace/locked: Permission denied"},
		{"write a FIFO", "write_file", map[string]string{"path": "pipe", "content": "x"}, "error: /workspace/pipe: not a regular file (a FIFO or socket); use a command for it"},
		{"write /dev/null", "write_file", map[string]string{"path": "/dev/null", "content": "x"}, "error: /dev/null: not a regular file (a character device); use a command for it"},
		{"edit a file made unreadable", "edit", map[string]string{"path": "locked", "old": "secret", "new": "x"}, "error: /workspace/locked: Permission denied"},
		{"edit a directory", "edit", map[string]string{"path": "/workspace", "old": "a", "new": "b"}, "error: /workspace: Is a directory"},
		{"edit a FIFO", "edit", map[string]string{"path": "pipe", "old": "a", "new": "b"}, "error: /workspace/pipe: not a regular file (a FIFO); use a command for it"},
	}
	for _, tc := range tests {
		res, err := call(tc.tool, tc.args)
		if err != nil {
			t.Fatalf("%s: the call failed the episode: %v", tc.name, err)
		}
		if res.Output != tc.want || res.ExitCode != 1 || res.Dummy {
			t.Errorf("%s: output %q exit %d dummy %v, want %q exit 1", tc.name, res.Output, res.ExitCode, res.Dummy, tc.want)
		}
	}
	// The session still works; tidy up what git could not take into the
	// submitted diff (a FIFO, a socket, unreadable files).
	if res, err := call("bash", map[string]string{"command": "chmod 700 closed && cat closed/f && chmod 600 locked && rm -rf pipe sock shadow closed locked"}); err != nil || res.Output != "x\n" {
		t.Errorf("bash after the errors: %v %q", err, res.Output)
	}
	if res, err := call("submit", map[string]string{}); err != nil || !res.Submit {
		t.Fatalf("submit: %v %+v", err, res)
	}
	o, err := ep.Finish(ctx, ReasonSubmit)
	if err != nil {
		t.Fatal(err)
	}
	if o.FailureClass == FailureInfrastructure || o.Error != "" {
		t.Errorf("outcome %+v: failure class %q (%s), want the episode graded", o, o.FailureClass, o.Error)
	}
	if o.FailureClass != "" || o.Resolved {
		t.Errorf("outcome: class %q resolved %v, want graded unresolved with no failure class (nothing was fixed)", o.FailureClass, o.Resolved)
	}
	graded := false
	for _, ev := range events(t, st, ep.ID()) {
		graded = graded || ev.Type == "grade"
	}
	if !graded {
		t.Error("no grade event: the episode was not graded")
	}
}

// TestUnreadableVisibleTestIsGraded: visible tests the policy made
// unreadable, and their directory unsearchable, do not turn the episode
// into infrastructure: it is graded.
func TestUnreadableVisibleTestIsGraded(t *testing.T) {
	b, tk, hidden := harnesstest.DockerDemoTask(t, "roman")
	ctx := context.Background()
	_, ep := startEpisode(ctx, t, b, tk, hidden)
	raw, _ := json.Marshal(map[string]string{"command": "chmod 000 tests/*.py && chmod 000 tests"})
	if res, err := ep.Call(ctx, toolcall.Call{Tool: "bash", Args: raw}); err != nil || res.ExitCode != 0 {
		t.Fatalf("chmod: %v %q", err, res.Output)
	}
	o, err := ep.Finish(ctx, ReasonSubmit)
	if err != nil {
		t.Fatal(err)
	}
	if o.FailureClass == FailureInfrastructure || o.Passed+o.Failed == 0 {
		t.Errorf("outcome %+v: want graded, not infrastructure", o)
	}
}
