package sandboxtest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// forkLabel is a label of the forked parent every child must carry.
const forkLabel = "rollcage.test/fork"

// testForkUnsupported: a backend that says it cannot fork says so with
// ErrUnsupported, not some other failure.
func (s *suite) testForkUnsupported(t *testing.T) {
	sb := s.create(t, sandbox.Spec{EpisodeID: "conformance-nofork"})
	res, err := sandbox.Fork(t.Context(), sb, 1)
	if !errors.Is(err, sandbox.ErrUnsupported) {
		t.Fatalf("Fork on a backend without fork: err %v, want one wrapping sandbox.ErrUnsupported", err)
	}
	if len(res.Children) != 0 {
		t.Fatalf("a failed Fork returned %d children", len(res.Children))
	}
}

// testFork forks a parent that changed files, sessions and left a process
// in the background, then checks every child and their isolation.
func (s *suite) testFork(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	spec := sandbox.Spec{
		EpisodeID: "conformance-fork",
		Limits:    sandbox.Limits{MemoryBytes: 768 << 20, Pids: 300},
		Labels:    map[string]string{forkLabel: "yes"},
	}
	if s.opts.ForkUnlabelled {
		spec.Labels = nil
	}
	parent := s.create(t, spec)
	if err := parent.WriteFile(ctx, "/workspace/written.txt", []byte("before the fork\n"), 0o644); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	// A sparse file makes the layer large enough for a backend to pre-copy
	// it before the freeze (hostside.PrecopyMin) without writing much.
	sh(t, parent, `mkdir -p /workspace/sub/deep && seq 1 2000 > /workspace/sub/deep/numbers && ln -s deep/numbers /workspace/sub/link && rm ~/.bash_logout && truncate -s 9M /workspace/sparse`)
	set := run(t, parent, sandbox.ExecRequest{Command: `cd /workspace/sub && export FORK_VAR="a 'b' c" && fork_fn() { echo "fn-$1"; } && shopt -s extglob && set -o pipefail && { sleep 300 >/dev/null 2>&1 & }`})
	if set.ExitCode != 0 {
		t.Fatalf("set-up: exit %d: %s", set.ExitCode, set.Output)
	}
	run(t, parent, sandbox.ExecRequest{Session: "other", Command: `cd /tmp && export OTHER_VAR=7`})
	limitsCmd := `cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max`
	parentLimits := sh(t, parent, limitsCmd)

	const n = 3
	res := forkChildren(ctx, t, parent, n)
	if res.Paused <= 0 || res.Duration < res.Paused {
		t.Errorf("Fork: paused %v, duration %v: want 0 < paused <= duration", res.Paused, res.Duration)
	}
	if res.ChangedBytes < 8000 {
		t.Errorf("Fork: ChangedBytes %d, want at least the ~9 kB written", res.ChangedBytes)
	}
	if !slices.Contains(res.Sessions, "default") || !slices.Contains(res.Sessions, "other") {
		t.Errorf("Fork: sessions %v, want default and other", res.Sessions)
	}
	if !slices.ContainsFunc(res.NotCarried, func(c string) bool { return strings.Contains(c, "sleep 300") }) {
		t.Errorf("Fork: NotCarried %q does not list the background sleep", res.NotCarried)
	}
	for i, c := range res.Children {
		checks := []struct{ cmd, want string }{
			{"cat /workspace/written.txt", "before the fork"},
			{"wc -l < /workspace/sub/deep/numbers", "2000"},
			{"readlink /workspace/sub/link", "deep/numbers"},
			{"test -e ~/.bash_logout && echo present || echo deleted", "deleted"},
			{"test -e ~/.bashrc && echo present", "present"},
			{"stat -c %s /workspace/sparse", "9437184"},
			{"pwd", "/workspace/sub"},
			{`echo "$FORK_VAR"`, "a 'b' c"},
			{`bash -c 'echo "$FORK_VAR"'`, "a 'b' c"},
			{"fork_fn x", "fn-x"},
			{"shopt -q extglob && [[ -o pipefail ]] && echo on", "on"},
			{"id -u", "1000"},
			{"pgrep -f 'sleep 300' || echo none", "none"},
			{limitsCmd, parentLimits},
		}
		for _, ck := range checks {
			if got := sh(t, c, ck.cmd); got != ck.want {
				t.Errorf("child %d: %s = %q, want %q", i+1, ck.cmd, got, ck.want)
			}
		}
		other := run(t, c, sandbox.ExecRequest{Session: "other", Command: `echo "$PWD $OTHER_VAR"`})
		if got := strings.TrimSpace(other.Output); got != "/tmp 7" {
			t.Errorf("child %d: session other = %q, want %q", i+1, got, "/tmp 7")
		}
		if s.opts.Labels != nil && !s.opts.ForkUnlabelled {
			labels, err := s.opts.Labels(ctx, c)
			if err != nil {
				t.Fatalf("Labels(child %d): %v", i+1, err)
			}
			if labels[forkLabel] != "yes" {
				t.Errorf("child %d: label %s = %q, want the parent's %q", i+1, forkLabel, labels[forkLabel], "yes")
			}
		}
	}

	// Isolation: a write in one child is in no other nor the parent; the
	// parent goes on and its later writes reach no child.
	sh(t, res.Children[0], "echo mine > /workspace/only-child1 && echo changed > /workspace/written.txt")
	sh(t, parent, "echo later > /workspace/parent-after")
	for name, sb := range map[string]sandbox.Sandbox{"parent": parent, "child 2": res.Children[1], "child 3": res.Children[2]} {
		if got := sh(t, sb, "cat /workspace/only-child1 2>/dev/null || echo absent"); got != "absent" {
			t.Errorf("%s sees child 1's file: %q", name, got)
		}
		if got := sh(t, sb, "cat /workspace/written.txt"); got != "before the fork" {
			t.Errorf("%s sees child 1's overwrite: %q", name, got)
		}
	}
	for i, c := range res.Children {
		if got := sh(t, c, "cat /workspace/parent-after 2>/dev/null || echo absent"); got != "absent" {
			t.Errorf("child %d sees the parent's later write: %q", i+1, got)
		}
	}
	// The parent is running again, its state untouched by the dump.
	if got := sh(t, parent, `echo "$PWD $FORK_VAR"; pgrep -f 'sleep 300' >/dev/null && echo alive`); got != "/workspace/sub a 'b' c\nalive" {
		t.Errorf("parent after the fork: %q", got)
	}
	// A child forks in turn.
	grand, err := sandbox.Fork(ctx, res.Children[1], 1)
	if err != nil {
		t.Fatalf("Fork of a child: %v", err)
	}
	defer grand.Children[0].Close(context.Background())
	if got := sh(t, grand.Children[0], "cat /workspace/written.txt; pwd"); got != "before the fork\n/workspace/sub" {
		t.Errorf("grandchild: %q", got)
	}
	if !s.opts.NoSnapshot {
		s.checkForkSnapshot(t, grand.Children[0])
	}

	if _, err := sandbox.Fork(ctx, parent, 0); err == nil {
		t.Error("Fork(0) succeeded, want an error")
	}
	closed := s.create(t, sandbox.Spec{EpisodeID: "conformance-fork-closed"})
	closed.Close(ctx)
	if _, err := sandbox.Fork(ctx, closed, 1); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Fork after Close: %v, want ErrClosed", err)
	}
}

// forkChildren forks parent into n children, closed when t ends, and
// fails t unless there are n of them, each with a new id.
func forkChildren(ctx context.Context, t *testing.T, parent sandbox.Sandbox, n int) sandbox.ForkResult {
	t.Helper()
	res, err := sandbox.Fork(ctx, parent, n)
	if err != nil {
		t.Fatalf("Fork(%d): %v", n, err)
	}
	for _, c := range res.Children {
		t.Cleanup(func() {
			if err := c.Close(context.Background()); err != nil {
				t.Errorf("Close(child %s): %v", c.ID(), err)
			}
		})
	}
	if len(res.Children) != n {
		t.Fatalf("Fork(%d) returned %d children", n, len(res.Children))
	}
	ids := map[string]bool{parent.ID(): true}
	for _, c := range res.Children {
		if ids[c.ID()] {
			t.Fatalf("child id %s is not new", c.ID())
		}
		ids[c.ID()] = true
	}
	return res
}

// testForkFiles is what testFork checks through the API alone, for a
// backend without processes (Options.NoProcesses): children with the
// parent's files at the fork and new ids, files isolated between them
// and the parent afterwards, a grandchild, Fork(0) and a Fork after
// Close refused.
func (s *suite) testForkFiles(t *testing.T) {
	ctx := t.Context()
	write := func(sb sandbox.Sandbox, p, data string) {
		t.Helper()
		if err := sb.WriteFile(ctx, p, []byte(data), 0o644); err != nil {
			t.Fatalf("WriteFile(%s): %v", p, err)
		}
	}
	// read returns a file's content, or "absent" when it does not exist.
	read := func(sb sandbox.Sandbox, p string) string {
		t.Helper()
		data, _, err := sb.ReadFile(ctx, p, 0)
		if errors.Is(err, sandbox.ErrNotFound) {
			return "absent"
		}
		if err != nil {
			t.Fatalf("ReadFile(%s): %v", p, err)
		}
		return string(data)
	}
	parent := s.create(t, sandbox.Spec{EpisodeID: "conformance-fork-files"})
	write(parent, "/workspace/written.txt", "before the fork\n")
	const n = 3
	res := forkChildren(ctx, t, parent, n)
	for i, c := range res.Children {
		if got := read(c, "/workspace/written.txt"); got != "before the fork\n" {
			t.Errorf("child %d: written.txt = %q, want the parent's", i+1, got)
		}
	}
	write(res.Children[0], "/workspace/only-child1", "mine\n")
	write(res.Children[0], "/workspace/written.txt", "changed\n")
	write(parent, "/workspace/parent-after", "later\n")
	for name, sb := range map[string]sandbox.Sandbox{"parent": parent, "child 2": res.Children[1], "child 3": res.Children[2]} {
		if got := read(sb, "/workspace/only-child1"); got != "absent" {
			t.Errorf("%s sees child 1's file: %q", name, got)
		}
		if got := read(sb, "/workspace/written.txt"); got != "before the fork\n" {
			t.Errorf("%s sees child 1's overwrite: %q", name, got)
		}
	}
	for i, c := range res.Children {
		if got := read(c, "/workspace/parent-after"); got != "absent" {
			t.Errorf("child %d sees the parent's later write: %q", i+1, got)
		}
	}
	grand, err := sandbox.Fork(ctx, res.Children[1], 1)
	if err != nil {
		t.Fatalf("Fork of a child: %v", err)
	}
	defer grand.Children[0].Close(context.Background())
	if got := read(grand.Children[0], "/workspace/written.txt"); got != "before the fork\n" {
		t.Errorf("grandchild: written.txt = %q", got)
	}
	if _, err := sandbox.Fork(ctx, parent, 0); err == nil {
		t.Error("Fork(0) succeeded, want an error")
	}
	closed := s.create(t, sandbox.Spec{EpisodeID: "conformance-fork-files-closed"})
	closed.Close(ctx)
	if _, err := sandbox.Fork(ctx, closed, 1); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Fork after Close: %v, want ErrClosed", err)
	}
}

// checkForkSnapshot: the image a fork's grandchild is committed to holds
// what its ancestors changed before the forks (a file, a deletion) and
// what it changed itself.
func (s *suite) checkForkSnapshot(t *testing.T, grand sandbox.Sandbox) {
	ctx := t.Context()
	sh(t, grand, "echo mine > /workspace/grand.txt")
	ref := "rollcage-test/fork-snapshot:" + randHex()
	if _, err := sandbox.Snapshot(ctx, grand, ref); err != nil {
		t.Fatalf("Snapshot of a grandchild: %v", err)
	}
	if s.opts.RemoveImage != nil {
		t.Cleanup(func() {
			if err := s.opts.RemoveImage(context.Background(), ref); err != nil {
				t.Errorf("RemoveImage(%s): %v", ref, err)
			}
		})
	}
	sb := s.create(t, sandbox.Spec{Image: ref, EpisodeID: "conformance-fork-snapshot"})
	want := "before the fork\n2000\nmine\ndeleted"
	if got := sh(t, sb, "cat /workspace/written.txt; wc -l < /workspace/sub/deep/numbers; cat /workspace/grand.txt; test -e ~/.bash_logout && echo present || echo deleted"); got != want {
		t.Errorf("a sandbox of the grandchild's snapshot: %q, want %q", got, want)
	}
}

// WarmForkConfined checks that child, a fork child a backend made of a
// warm container whose agent changed its root, keeps the sandbox's
// confinement: the directory the host mounted its new root at (oldRoot,
// in the old root) is out of sight, the old root out of reach, no
// capabilities and no new privileges, the mounts it needs (/etc/hosts,
// /dev, a read-only cgroup, the run dir runDir, the agent at agent), the
// agent not its PID, chroot refused and only the loopback interface.
func WarmForkConfined(t *testing.T, child sandbox.Sandbox, oldRoot, runDir, agent string) {
	t.Helper()
	for _, ck := range []struct{ cmd, want string }{
		{"test -e " + oldRoot + " && echo visible || echo hidden", "hidden"},
		{"ls /proc/1/root/ >/dev/null 2>&1 && echo reachable || echo denied", "denied"},
		{"grep CapEff /proc/self/status | tr -d '\\t'", "CapEff:0000000000000000"},
		{"grep NoNewPrivs /proc/self/status | tr -d '\\t'", "NoNewPrivs:1"},
		{"grep -c localhost /etc/hosts", "2"},
		{"echo x > /dev/null && head -c 4 /dev/zero | wc -c", "4"},
		{"touch /sys/fs/cgroup/x 2>/dev/null && echo writable || echo read-only", "read-only"},
		{"test -d " + runDir + " && echo present", "present"},
		{"test -x " + agent + " && echo present", "present"},
		{"python3 -c 'import os; print(os.getpid() > 1)'", "True"},
		{"chroot / true 2>/dev/null && echo chrooted || echo refused", "refused"},
		{"ls /sys/class/net", "lo"},
	} {
		if got := sh(t, child, ck.cmd); got != ck.want {
			t.Errorf("warm fork child: %s = %q, want %q", ck.cmd, got, ck.want)
		}
	}
}

// ForkOneWarm forks parent into one child, closed when t ends, and checks
// with forkedWarm (a backend's count of children made of warm containers)
// that it was made of a warm container.
func ForkOneWarm(t *testing.T, parent sandbox.Sandbox, forkedWarm func() int64) sandbox.Sandbox {
	t.Helper()
	before := forkedWarm()
	res, err := sandbox.Fork(t.Context(), parent, 1)
	if err != nil {
		t.Fatal(err)
	}
	child := res.Children[0]
	t.Cleanup(func() { child.Close(context.Background()) })
	if forkedWarm() != before+1 {
		t.Fatalf("the child was not made from a warm container (see the log)")
	}
	return child
}
