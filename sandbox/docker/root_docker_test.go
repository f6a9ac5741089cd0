package docker

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// TestRootRefusedWithoutRemap: on an engine that does not remap users
// (the default one here) a root sandbox is refused, saying why.
func TestRootRefusedWithoutRemap(t *testing.T) {
	b := newTestBackend(t, Config{})
	if b.remap != nil {
		t.Skip("the default engine remaps users; the refusal needs one that does not")
	}
	_, err := b.Create(t.Context(), sandbox.Spec{Image: testImage(), EpisodeID: "root-refused", User: sandbox.UserRoot})
	if !errors.Is(err, sandbox.ErrUnsupported) || !strings.Contains(err.Error(), "--userns-remap") {
		t.Fatalf("Create(root) on an engine without remapping: got %v, want ErrUnsupported naming --userns-remap", err)
	}
	// A default sandbox runs every command as its own user.
	sb := sandboxtest.Create(t, b, sandbox.Spec{Image: testImage(), EpisodeID: "root-refused-user"})
	defer sb.Close(context.WithoutCancel(t.Context()))
	if _, err := startAs(t, sb, "root", "id"); err == nil || !strings.Contains(err.Error(), "only a root sandbox") {
		t.Errorf("Start as root in a default sandbox: %v, want a refusal", err)
	}
	if err := sb.(sandbox.UserWriter).WriteFileAs(t.Context(), "root", "/tmp/x", []byte("x"), 0o644); err == nil || !strings.Contains(err.Error(), "only a root sandbox") {
		t.Errorf("WriteFileAs(root) in a default sandbox: %v, want a refusal", err)
	}
}

func rootSandbox(t *testing.T, watch *sandbox.Watch) (*Backend, sandbox.Sandbox) {
	t.Helper()
	t.Setenv("DOCKER_HOST", sandboxtest.UserNSEngine(t, testImage()))
	b := newTestBackend(t, Config{})
	if b.remap == nil {
		t.Fatalf("engine %s does not report a user remapping in docker info", os.Getenv("DOCKER_HOST"))
	}
	sb := sandboxtest.Create(t, b, sandbox.Spec{Image: testImage(), EpisodeID: "root", User: sandbox.UserRoot, Watch: watch})
	t.Cleanup(func() { sb.Close(context.WithoutCancel(t.Context())) })
	return b, sb
}

func run(t *testing.T, sb sandbox.Sandbox, session, cmd string) sandbox.ExecResult {
	t.Helper()
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Session: session, Command: cmd, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return res
}

// TestRootSandbox: root in the sandbox does what E2B's root does (users,
// system git config, installs into /usr/local and /opt, runuser, su), and
// a process of it is an unprivileged uid on the host.
func TestRootSandbox(t *testing.T) {
	b, sb := rootSandbox(t, nil)
	tests := []struct {
		cmd, want string
	}{
		{"id -u", "0"},
		{"useradd -m coder && runuser -u coder -- id -un", "coder"},
		{"su coder -c 'id -un'", "coder"},
		{"git config --system user.name rollcage && git config --system user.name", "rollcage"},
		{"mkdir -p /opt/node22 && echo ok >/usr/local/bin/tool && chmod 755 /usr/local/bin/tool && cat /usr/local/bin/tool", "ok"},
		{"chown coder /opt/node22 && stat -c %U /opt/node22", "coder"},
	}
	for _, tc := range tests {
		res := run(t, sb, "", tc.cmd)
		if got := strings.TrimSpace(res.Output); res.ExitCode != 0 || got != tc.want {
			t.Errorf("%s: exit %d, output %q; want exit 0, %q", tc.cmd, res.ExitCode, got, tc.want)
		}
	}

	// A streamed command runs as the user it names (E2B's per-command
	// user), with that user's home; an unknown user is refused.
	users := []struct{ user, want string }{
		{"coder", "coder 1001 /home/coder"},
		{"root", "root 0 /root"},
		{"", "root 0 /root"},
	}
	for _, tc := range users {
		if got, err := startAs(t, sb, tc.user, `echo "$(id -un) $(id -u) $HOME"`); err != nil || got != tc.want {
			t.Errorf("Start as %q: %q, %v; want %q", tc.user, got, err, tc.want)
		}
	}
	if _, err := startAs(t, sb, "nobody-here", "true"); err == nil || !strings.Contains(err.Error(), "useradd") {
		t.Errorf("Start as an unknown user: %v, want a refusal saying to create it", err)
	}

	// A file written as a user is that user's, with that user's rights.
	uw := sb.(sandbox.UserWriter)
	if err := uw.WriteFileAs(t.Context(), "coder", "/home/coder/note", []byte("hi\n"), 0o644); err != nil {
		t.Errorf("WriteFileAs(coder, its home): %v", err)
	} else if got := strings.TrimSpace(run(t, sb, "", "stat -c %U:%G /home/coder/note").Output); got != "coder:coder" {
		t.Errorf("a file written as coder is owned by %q", got)
	}
	var pe *sandbox.PathError
	if err := uw.WriteFileAs(t.Context(), "coder", "/etc/coder-note", []byte("x"), 0o644); !errors.As(err, &pe) || pe.Kind != sandbox.KindPermission {
		t.Errorf("WriteFileAs(coder, /etc): %v, want permission denied", err)
	}
	if err := uw.WriteFileAs(t.Context(), "", "/etc/root-note", []byte("x"), 0o644); err != nil {
		t.Errorf("WriteFileAs(root, /etc): %v", err)
	}

	// All the policy's processes share one namespace: a process another
	// session left running is seen and signalled.
	run(t, sb, "a", "sleep 777 >/dev/null 2>&1 &")
	// (Retried: the background sleep may not have exec'd yet.)
	if res := run(t, sb, "b", "for i in $(seq 50); do pkill -x -f 'sleep 777' && echo killed && exit 0; sleep 0.1; done; exit 1"); strings.TrimSpace(res.Output) != "killed" {
		t.Errorf("pkill of another session's process: exit %d, %q", res.ExitCode, res.Output)
	}

	// KillAll stops every process of the policy, root's included, and the
	// sandbox goes on (a new zygote, a new shell).
	run(t, sb, "a", "sleep 778 >/dev/null 2>&1 &")
	kr, err := sb.(sandbox.ProcessKiller).KillAll(t.Context())
	if err != nil || len(kr.Survivors) > 0 {
		t.Errorf("KillAll: %+v, %v; want no survivors", kr, err)
	}
	if res := run(t, sb, "a", "pgrep -x -f 'sleep 778' || echo none"); strings.TrimSpace(res.Output) != "none" {
		t.Errorf("after KillAll: %q, want none", res.Output)
	}

	// A root process of the sandbox, found on the host by its command line.
	marker := "4242." + strconv.Itoa(os.Getpid())
	run(t, sb, "", "sleep "+marker+" >/dev/null 2>&1 &")
	uid := -1
	for deadline := time.Now().Add(10 * time.Second); uid < 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range cmdlines {
			if b, _ := os.ReadFile(p); bytes.Equal(b, []byte("sleep\x00"+marker+"\x00")) {
				uid = hostUID(t, filepath.Dir(p))
			}
		}
	}
	if uid < 0 {
		t.Fatalf("no process 'sleep %s' on the host", marker)
	}
	if uid != b.remap.UID {
		t.Errorf("the sandbox's root runs as host uid %d; want %d, the engine's unprivileged base", uid, b.remap.UID)
	}
}

// startAs runs cmd as a streamed command of user and returns its output.
func startAs(t *testing.T, sb sandbox.Sandbox, user, cmd string) (string, error) {
	t.Helper()
	p, err := sb.(sandbox.Streamer).Start(t.Context(), sandbox.StartRequest{Command: cmd, User: user, Timeout: time.Minute}, func(sandbox.Output) {})
	if err != nil {
		return "", err
	}
	res, err := p.Wait(t.Context())
	return strings.TrimSpace(res.Output), err
}

func hostUID(t *testing.T, procDir string) int {
	t.Helper()
	status, err := os.ReadFile(procDir + "/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(status)) {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return -1
}

// TestRootCannotReachAgent: what a root policy tries against what
// watches it is refused or seen, and the agent answers afterwards.
func TestRootCannotReachAgent(t *testing.T) {
	b, sb := rootSandbox(t, &sandbox.Watch{Roots: []string{"/workspace"}, MaxEffects: 64})
	reaper, agentPID := agentPIDs(t, b, sb)
	ap := strconv.Itoa(agentPID)
	refused := []struct{ name, cmd string }{
		{"see the reaper in /proc", "test -e /proc/" + strconv.Itoa(reaper)},
		{"see the agent in /proc", "test -e /proc/" + ap},
		{"signal the agent", "kill -0 " + ap},
		{"kill the agent", "kill -9 " + ap},
		{"ptrace the agent", `python3 -c 'import ctypes,sys; l=ctypes.CDLL(None, use_errno=True); sys.exit(0 if l.ptrace(16, ` + ap + `, None, None) == 0 else 1)'`},
		// pidfd_open needs no permission; signalling through it does.
		{"kill the agent by pidfd", `python3 -c 'import os,signal; signal.pidfd_send_signal(os.pidfd_open(` + ap + `), signal.SIGKILL)'`},
		{"read PID 1's environment", "cat /proc/1/environ"},
		{"signal the reaper", "kill -TERM 1"},
		// A pid hidden from /proc that takes a signal would be the agent's.
		{"signal a hidden pid", "for p in $(seq 1 400); do [ -d /proc/$p ] || ! kill -0 $p 2>/dev/null || echo $p; done | grep ."},
		{"ptrace PID 1", `python3 -c 'import ctypes,sys; l=ctypes.CDLL(None, use_errno=True); sys.exit(0 if l.ptrace(16, 1, None, None) == 0 else 1)'`},
		{"mount over the workspace", "mount -t tmpfs none /workspace"},
		{"bind over the workspace", "mkdir -p /tmp/decoy && mount --bind /tmp/decoy /workspace"},
		{"uncover the agent's run directory", "umount /.rollcage/run"},
		{"uncover the agent's proc", "umount /proc"},
		{"a namespace of its own", "unshare -m true"},
		{"a user namespace of its own", "unshare -U true"},
		{"list the agent's run directory", "ls -A /.rollcage/run | grep ."},
	}
	for _, tc := range refused {
		res := run(t, sb, "attack", tc.cmd)
		if res.ExitCode == 0 {
			t.Errorf("%s: %q exited 0 (output %q); want it refused", tc.name, tc.cmd, res.Output)
		}
	}
	// kill -9 -1 reaches every process the caller may signal: its own
	// shell among them, never the agent.
	run(t, sb, "attack", "kill -9 -1")

	// The agent's file operations refuse what the shells cannot see.
	for _, p := range []string{"/proc/1/environ", "/.rollcage/run/agent.sock"} {
		if _, _, err := sb.ReadFile(t.Context(), p, 0); !errors.Is(err, sandbox.ErrRefused) {
			t.Errorf("ReadFile(%s): got %v, want a refusal", p, err)
		}
	}

	// A flood of the watched directory is seen: the call says effects
	// were lost.
	res := run(t, sb, "", "for i in $(seq 1 2000); do : >/workspace/f$i; done")
	if !res.EffectsTruncated || len(res.Effects) == 0 {
		t.Errorf("flood of /workspace: %d effects, truncated %v; want effects and truncated", len(res.Effects), res.EffectsTruncated)
	}
	res = run(t, sb, "", "echo x >/workspace/after.txt")
	if !containsEffect(res.Effects, "/workspace/after.txt") {
		t.Errorf("a write after the flood: effects %v, want /workspace/after.txt", res.Effects)
	}
	if res := run(t, sb, "", "echo alive"); strings.TrimSpace(res.Output) != "alive" {
		t.Errorf("agent after the attacks: %q", res.Output)
	}
}

// agentPIDs are the reaper's and the agent's pids in the sandbox, read
// on the host: the container's init and its child, by NSpid.
func agentPIDs(t *testing.T, b *Backend, sb sandbox.Sandbox) (reaper, agent int) {
	t.Helper()
	st, err := b.cli.ContainerInspect(t.Context(), sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	// The child is listed under the thread that forked it.
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(st.State.Pid) + "/task/*/children")
	var kids []byte
	for _, p := range tasks {
		b, _ := os.ReadFile(p)
		kids = append(kids, b...)
	}
	if len(strings.Fields(string(kids))) == 0 {
		t.Fatalf("the reaper (host pid %d) has no child", st.State.Pid)
	}
	nspid := func(host string) int {
		status, err := os.ReadFile("/proc/" + host + "/status")
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(status)) {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "NSpid:" {
				n, _ := strconv.Atoi(f[len(f)-1])
				return n
			}
		}
		t.Fatalf("no NSpid in /proc/%s/status", host)
		return 0
	}
	reaper, agent = nspid(strconv.Itoa(st.State.Pid)), nspid(strings.Fields(string(kids))[0])
	if reaper != 1 || agent <= 1 {
		t.Fatalf("reaper pid %d, agent pid %d in the sandbox; want 1 and another", reaper, agent)
	}
	return reaper, agent
}

func containsEffect(effects []sandbox.Effect, path string) bool {
	for _, e := range effects {
		if e.Path == path {
			return true
		}
	}
	return false
}

// TestRootFork: a root sandbox's fork children are root sandboxes too,
// with the parent's files, and the parent's running processes are
// listed as not carried.
func TestRootFork(t *testing.T) {
	_, sb := rootSandbox(t, nil)
	run(t, sb, "", "echo parent >/opt/mark && sleep 779 >/dev/null 2>&1 &")
	f, ok := sb.(sandbox.Forker)
	if !ok {
		t.Fatalf("a Docker sandbox (%T) is no sandbox.Forker", sb)
	}
	res, err := f.Fork(t.Context(), 1)
	if errors.Is(err, sandbox.ErrUnsupported) {
		// The btrfs quota engine has no upper directory to copy: the
		// refusal must say what a fork needs, and the parent goes on.
		if !strings.Contains(err.Error(), "overlay2") {
			t.Errorf("fork refused with %q, want it to name the overlay2 driver a fork needs", err)
		}
		if got := strings.TrimSpace(run(t, sb, "", "cat /opt/mark").Output); got != "parent" {
			t.Errorf("parent after a refused fork: %q, want its file", got)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	kid := res.Children[0]
	defer kid.Close(context.WithoutCancel(t.Context()))
	if !slices.ContainsFunc(res.NotCarried, func(s string) bool { return strings.Contains(s, "sleep 779") }) {
		t.Errorf("NotCarried %q, want the parent's sleep 779", res.NotCarried)
	}
	if got := strings.TrimSpace(run(t, kid, "", "id -u; cat /opt/mark").Output); got != "0\nparent" {
		t.Errorf("child: %q, want root and the parent's file", got)
	}
	if res := run(t, kid, "", "test -e /proc/1"); res.ExitCode == 0 {
		t.Error("child: the reaper is in the policy's /proc")
	}
}

// BenchmarkRootStart compares a root sandbox with a default one on the
// engine that remaps users: a streamed `true` (a fresh shell; in the root
// sandbox started by its zygote) and `true` in the persistent session.
func BenchmarkRootStart(b *testing.B) {
	b.Setenv("DOCKER_HOST", sandboxtest.UserNSEngine(b, testImage()))
	bk := newTestBackend(b, Config{})
	for _, user := range []string{sandbox.UserDefault, sandbox.UserRoot} {
		name := "default"
		if user == sandbox.UserRoot {
			name = "root"
		}
		sb, err := bk.Create(b.Context(), sandbox.Spec{Image: testImage(), EpisodeID: "bench-" + name, User: user})
		if err != nil {
			b.Fatal(err)
		}
		defer sb.Close(context.WithoutCancel(b.Context()))
		b.Run(name+"/start", func(b *testing.B) {
			var lat latencies
			for b.Loop() {
				lat.time(func() {
					p, err := sb.(sandbox.Streamer).Start(b.Context(), sandbox.StartRequest{Command: "true"}, func(sandbox.Output) {})
					if err == nil {
						_, err = p.Wait(b.Context())
					}
					if err != nil {
						b.Fatal(err)
					}
				})
			}
			lat.report(b)
		})
		b.Run(name+"/exec", func(b *testing.B) {
			var lat latencies
			for b.Loop() {
				lat.time(func() {
					if res, err := sb.Exec(b.Context(), sandbox.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
						b.Fatalf("exec: %v %+v", err, res)
					}
				})
			}
			lat.report(b)
		})
	}
}

// TestRootDiskQuota: on the engine that remaps users (its data root on
// the quota engine's btrfs, under the remapped 165536.165536 directory)
// a root sandbox's disk limit is the kernel's, as a default sandbox's
// is on the quota engine: root in the user namespace gets no way past it.
func TestRootDiskQuota(t *testing.T) {
	t.Setenv("DOCKER_HOST", sandboxtest.UserNSEngine(t, testImage()))
	runDiskQuota(t, sandbox.UserRoot)
}
