package sandboxtest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/sandbox"
)

// Options configure a Run.
type Options struct {
	// Image is the image every sandbox of the suite starts from. It needs
	// bash, coreutils, procps and python3, a user with uid 1000 and a
	// /workspace that user owns. Required.
	Image string
	// RemoveImage, when set, removes an image the Snapshot test made.
	RemoveImage func(ctx context.Context, ref string) error
	// Fork says the backend forks: the fork cases run and must pass. When
	// false, Fork must fail with sandbox.ErrUnsupported.
	Fork bool
	// NoSnapshot says the backend cannot commit a sandbox to an image
	// (Kubernetes): Snapshot must then fail with sandbox.ErrUnsupported.
	NoSnapshot bool
	// Labels, when set, returns the backend's labels of a sandbox, so the
	// fork cases can check that children carry the parent's.
	Labels func(ctx context.Context, sb sandbox.Sandbox) (map[string]string, error)
	// NoProcesses says the backend runs no real processes (an in-memory
	// fake such as sandbox/fake): no shell runs the image's programs and no
	// kernel enforces limits. The cases that check what a command did, or
	// what the kernel does to processes (timeouts, pids, network, canary
	// opens), are skipped, each saying why; the cases of the API itself
	// (files, copies, Snapshot and Fork refusals, Close) still run, with
	// their shell checks left out.
	NoProcesses bool
	// HostUser says the backend's processes run as the test's own user
	// (sandbox/fake's host directory with real bash), not as the sandbox
	// user uid 1000: the cases that ask a process its uid expect
	// os.Getuid() instead.
	HostUser bool
	// ForkUnlabelled gives the fork cases' parent no labels of its own, for
	// a backend that makes children of warm containers only then (Docker
	// cannot relabel a running container); the children's labels are not
	// checked.
	ForkUnlabelled bool
}

// canaryPath is planted in the shared sandbox of a Run.
const canaryPath = "/opt/rollcage-canary/answers.txt"

// Run runs the conformance suite against the backend newBackend returns.
// newBackend is called once; closing the backend is its business (with
// t.Cleanup).
func Run(t *testing.T, newBackend func(t *testing.T) sandbox.Backend, opts Options) {
	if opts.Image == "" {
		t.Fatal("sandboxtest.Run: Options.Image is empty: name an image with bash, procps and python3 (e.g. rollcage/base:latest)")
	}
	b := newBackend(t)
	s := &suite{b: b, opts: opts}
	// One sandbox serves the tests that leave it usable; those that
	// exhaust, snapshot or close a sandbox make their own.
	shared := s.create(t, sandbox.Spec{
		EpisodeID: "conformance-shared",
		Canaries:  []sandbox.Canary{{Path: canaryPath, Content: "decoy: expected outputs\n"}},
	})
	// needs says why a case cannot run without real processes
	// (Options.NoProcesses); "" means it runs on every backend.
	for _, tc := range []struct {
		name  string
		fn    func(t *testing.T, sb sandbox.Sandbox)
		needs string
	}{
		{"SessionPersistence", s.testSessionPersistence, "a shell whose cd, exports and functions persist"},
		{"ConcurrentSessions", s.testConcurrentSessions, "shells that run at once and see each other's files"},
		{"Timeout", s.testTimeout, "a process group the timeout kills"},
		{"IdleTimeout", s.testIdleTimeout, "a process whose silence the idle timeout ends"},
		{"CancelledExec", s.testCancelledExec, "a running process a cancel kills"},
		{"OutputCap", s.testOutputCap, "100 MB written by head and tr"},
		{"BinaryOutput", s.testBinaryOutput, "bytes printf writes"},
		{"ExitCodes", s.testExitCodes, "a shell's exit codes, 137 from a kill"},
		{"RequestIDRunsOnce", s.testRequestID, "a command whose side effect counts its runs"},
		{"NonRootNoCapabilities", s.testNonRoot, "a process's uid and capability sets"},
		{"AgentUnreachable", s.testAgentUnreachable, "an agent socket guarded by file modes"},
		{"NoNetwork", s.testNoNetwork, "a network namespace"},
		{"NoDockerSocket", s.testNoDockerSocket, "a mount namespace to look into"},
		{"Files", s.testFiles, ""},
		{"CopyInOut", s.testCopy, ""},
		{"CopyInPlantedSymlink", s.testCopyInSymlink, "symlinks ln makes"},
		{"CanaryOpen", s.testCanary, "a file open the agent sees"},
		{"Stream", s.testStream, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.skipWithoutProcesses(t, tc.needs)
			tc.fn(t, shared)
		})
	}
	t.Run("ForkBombContained", func(t *testing.T) {
		s.skipWithoutProcesses(t, "a pids limit the kernel enforces")
		s.testForkBomb(t)
	})
	t.Run("PidsExhaustedAgentAnswers", func(t *testing.T) {
		s.skipWithoutProcesses(t, "a pids limit the kernel enforces")
		s.testPidsExhausted(t)
	})
	if opts.NoSnapshot {
		t.Run("SnapshotUnsupported", s.testSnapshotUnsupported)
	} else {
		t.Run("Snapshot", s.testSnapshot)
	}
	if opts.Fork {
		if opts.NoProcesses {
			// Fork's shell state, background process and cgroup
			// limits need processes; what the API alone shows remains.
			t.Run("ForkFiles", s.testForkFiles)
		} else {
			t.Run("Fork", s.testFork)
		}
	} else {
		t.Run("ForkUnsupported", s.testForkUnsupported)
	}
	t.Run("Close", s.testClose)
}

// skipWithoutProcesses skips t on a backend without real processes
// (Options.NoProcesses) when the case needs them; needs says for what.
func (s *suite) skipWithoutProcesses(t *testing.T, needs string) {
	t.Helper()
	if s.opts.NoProcesses && needs != "" {
		t.Skipf("the backend runs no processes (Options.NoProcesses); this case needs %s", needs)
	}
}

// RunFork runs only the fork cases against b, for a backend whose forks
// take another path under another configuration (containerd's from a warm
// pool) than the one Run covers.
func RunFork(t *testing.T, b sandbox.Backend, opts Options) {
	if opts.Image == "" {
		t.Fatal("sandboxtest.RunFork: Options.Image is empty: name an image with bash, procps and python3 (e.g. rollcage/base:latest)")
	}
	s := &suite{b: b, opts: opts}
	t.Run("Fork", s.testFork)
}

type suite struct {
	b    sandbox.Backend
	opts Options
}

func (s *suite) create(t *testing.T, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	if spec.Image == "" {
		spec.Image = s.opts.Image
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	sb, err := s.b.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create(%s): %v", spec.EpisodeID, err)
	}
	t.Cleanup(func() {
		if err := sb.Close(context.Background()); err != nil {
			t.Errorf("Close(%s): %v", spec.EpisodeID, err)
		}
	})
	return sb
}

// run execs req and fails t on an error (a non-zero exit is not one).
func run(t *testing.T, sb sandbox.Sandbox, req sandbox.ExecRequest) sandbox.ExecResult {
	t.Helper()
	if req.Timeout == 0 {
		req.Timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(t.Context(), req.Timeout+30*time.Second)
	defer cancel()
	res, err := sb.Exec(ctx, req)
	if err != nil {
		t.Fatalf("Exec(%q): %v", req.Command, err)
	}
	return res
}

// sh runs cmd in the default session and returns its trimmed output,
// failing t unless it exits 0.
func sh(t *testing.T, sb sandbox.Sandbox, cmd string) string {
	t.Helper()
	res := run(t, sb, sandbox.ExecRequest{Command: cmd})
	if res.ExitCode != 0 {
		t.Fatalf("Exec(%q): exit %d, output %q", cmd, res.ExitCode, res.Output)
	}
	return strings.TrimSpace(res.Output)
}

func (s *suite) testSessionPersistence(t *testing.T, sb sandbox.Sandbox) {
	set := run(t, sb, sandbox.ExecRequest{Session: "persist", Command: `mkdir -p /tmp/persist && cd /tmp/persist && export ROLLCAGE_X=42 && greet() { echo "hi $1"; }`})
	if set.ExitCode != 0 {
		t.Fatalf("setup exit %d: %q", set.ExitCode, set.Output)
	}
	got := run(t, sb, sandbox.ExecRequest{Session: "persist", Command: `pwd; echo "$ROLLCAGE_X"; greet there`})
	if diff := cmp.Diff("/tmp/persist\n42\nhi there\n", got.Output); diff != "" {
		t.Errorf("state did not persist in the session (-want +got):\n%s", diff)
	}
	if got.Cwd != "/tmp/persist" {
		t.Errorf("Cwd = %q, want /tmp/persist", got.Cwd)
	}
	if got.Shell != "bash" && got.Shell != "sh" {
		t.Errorf("Shell = %q, want bash or sh", got.Shell)
	}
	// Another session starts fresh, in the workdir.
	other := run(t, sb, sandbox.ExecRequest{Session: "persist-other", Command: `pwd; echo "[$ROLLCAGE_X]"; type greet >/dev/null 2>&1 && echo leaked || echo isolated`})
	if diff := cmp.Diff("/workspace\n[]\nisolated\n", other.Output); diff != "" {
		t.Errorf("sessions share state (-want +got):\n%s", diff)
	}
}

// testConcurrentSessions proves that sessions run at the same time: the
// first waits for a file only the second creates, which a backend that
// serialises commands could never deliver before the first times out.
func (s *suite) testConcurrentSessions(t *testing.T, sb sandbox.Sandbox) {
	flag := "/tmp/concurrent-" + randHex()
	const n = 4
	var wg sync.WaitGroup
	results := make([]sandbox.ExecResult, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := fmt.Sprintf(`export MINE=%d; while [ ! -e %s ]; do sleep 0.05; done; echo "session $MINE saw it"`, i, flag)
			results[i], errs[i] = sb.Exec(t.Context(), sandbox.ExecRequest{Session: fmt.Sprintf("conc-%d", i), Command: cmd, Timeout: 60 * time.Second})
		}()
	}
	sh(t, sb, "touch "+flag)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("session %d: %v", i, errs[i])
			continue
		}
		want := fmt.Sprintf("session %d saw it\n", i)
		if results[i].Output != want || results[i].Stopped != sandbox.StopNone {
			t.Errorf("session %d: output %q stopped %q, want %q", i, results[i].Output, results[i].Stopped, want)
		}
	}
}

func (s *suite) testTimeout(t *testing.T, sb sandbox.Sandbox) {
	res := run(t, sb, sandbox.ExecRequest{Session: "timeout", Command: `echo started; sleep 1000 & while true; do :; done`, Timeout: 2 * time.Second})
	if res.Stopped != sandbox.StopTimeout {
		t.Fatalf("Stopped = %q, want %q (output %q)", res.Stopped, sandbox.StopTimeout, res.Output)
	}
	if !strings.Contains(res.Output, "started") {
		t.Errorf("output before the timeout lost: %q", res.Output)
	}
	if got := run(t, sb, sandbox.ExecRequest{Session: "timeout", Command: "echo still here"}); got.Output != "still here\n" {
		t.Errorf("session after timeout: %q", got.Output)
	}
	waitNoProcess(t, sb, "sleep 1000")
}

// waitNoProcess fails t unless no process matching pattern is left; the
// kill is asynchronous to the result, so it polls briefly.
func waitNoProcess(t *testing.T, sb sandbox.Sandbox, pattern string) {
	t.Helper()
	res := run(t, sb, sandbox.ExecRequest{Command: fmt.Sprintf(`for i in $(seq 50); do pgrep -f %q >/dev/null || exit 0; sleep 0.1; done; pgrep -af %q; exit 1`, pattern, pattern)})
	if res.ExitCode != 0 {
		t.Errorf("process %q survived: %s", pattern, res.Output)
	}
}

func (s *suite) testIdleTimeout(t *testing.T, sb sandbox.Sandbox) {
	res := run(t, sb, sandbox.ExecRequest{Command: `echo tick; sleep 300`, Timeout: 60 * time.Second, IdleTimeout: 1 * time.Second})
	if res.Stopped != sandbox.StopIdle {
		t.Fatalf("Stopped = %q, want %q", res.Stopped, sandbox.StopIdle)
	}
	if res.Output != "tick\n" {
		t.Errorf("output %q, want %q", res.Output, "tick\n")
	}
	waitNoProcess(t, sb, "sleep 300")
}

func (s *suite) testCancelledExec(t *testing.T, sb sandbox.Sandbox) {
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := sb.Exec(ctx, sandbox.ExecRequest{Session: "cancel", Command: `sleep 400; echo never`, Timeout: 60 * time.Second})
		errc <- err
	}()
	// Cancel once the command runs, which the process list shows.
	waitProcess(t, sb, "sleep 400")
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Exec: err = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancelled Exec did not return within 10s")
	}
	waitNoProcess(t, sb, "sleep 400")
	if got := sh(t, sb, "echo after"); got != "after" {
		t.Errorf("after cancel: %q", got)
	}
}

func waitProcess(t *testing.T, sb sandbox.Sandbox, pattern string) {
	t.Helper()
	res := run(t, sb, sandbox.ExecRequest{Session: "watch", Command: fmt.Sprintf(`for i in $(seq 100); do pgrep -f %q >/dev/null && exit 0; sleep 0.05; done; exit 1`, pattern)})
	if res.ExitCode != 0 {
		t.Fatalf("process %q never appeared", pattern)
	}
}

func (s *suite) testOutputCap(t *testing.T, sb sandbox.Sandbox) {
	const total = 100_000_000
	const maxOut = 64 << 10
	res := run(t, sb, sandbox.ExecRequest{
		Command:   fmt.Sprintf(`echo HEAD-MARK; head -c %d /dev/zero | tr '\0' x; echo; echo TAIL-MARK`, total),
		MaxOutput: maxOut,
		Timeout:   120 * time.Second,
	})
	if res.ExitCode != 0 || res.Stopped != "" {
		t.Fatalf("exit %d stopped %q", res.ExitCode, res.Stopped)
	}
	if !res.Truncated {
		t.Error("Truncated = false for 100 MB of output")
	}
	if res.TotalBytes < total {
		t.Errorf("TotalBytes = %d, want >= %d", res.TotalBytes, total)
	}
	if len(res.Output) > maxOut+1024 {
		t.Errorf("output is %d bytes, cap %d", len(res.Output), maxOut)
	}
	if !strings.HasPrefix(res.Output, "HEAD-MARK\nxxx") {
		t.Errorf("head lost: %.40q", res.Output)
	}
	if !strings.HasSuffix(res.Output, "xxx\nTAIL-MARK\n") {
		t.Errorf("tail lost: ...%q", res.Output[max(0, len(res.Output)-40):])
	}
	if !strings.Contains(res.Output, "cut from the middle") {
		t.Error("no truncation marker in the output")
	}
}

func (s *suite) testBinaryOutput(t *testing.T, sb sandbox.Sandbox) {
	res := run(t, sb, sandbox.ExecRequest{Command: `printf 'A\377\376B\000C\n'; printf 'caf\303\251\n'`})
	if !utf8.ValidString(res.Output) {
		t.Fatalf("output is not valid UTF-8: %q", res.Output)
	}
	for _, want := range []string{`A\xff\xfeB`, "C\n", "café\n"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("output %q lacks %q", res.Output, want)
		}
	}
}

func (s *suite) testExitCodes(t *testing.T, sb sandbox.Sandbox) {
	for _, tc := range []struct {
		cmd  string
		want int
	}{
		{"true", 0},
		{"false", 1},
		{"exit 3", 3},
		{"(exit 42)", 42},
		{"no-such-command-rollcage", 127},
		{"kill -9 $$", 137},
	} {
		if got := run(t, sb, sandbox.ExecRequest{Session: "exits", Command: tc.cmd}); got.ExitCode != tc.want {
			t.Errorf("%q: exit %d, want %d (output %q)", tc.cmd, got.ExitCode, tc.want, got.Output)
		}
	}
	if got := run(t, sb, sandbox.ExecRequest{Session: "exits", Command: "echo ok"}); got.Output != "ok\n" {
		t.Errorf("session after exits: %q", got.Output)
	}
}

func (s *suite) testRequestID(t *testing.T, sb sandbox.Sandbox) {
	file := "/tmp/rid-" + randHex()
	req := sandbox.ExecRequest{RequestID: "rid-" + randHex(), Command: fmt.Sprintf(`echo run >> %s; wc -l < %s`, file, file)}
	first := run(t, sb, req)
	second := run(t, sb, req)
	if first.Output != "1\n" || first.Replayed {
		t.Errorf("first: output %q replayed %v", first.Output, first.Replayed)
	}
	if second.Output != first.Output || !second.Replayed {
		t.Errorf("retry: output %q replayed %v, want %q replayed", second.Output, second.Replayed, first.Output)
	}
	if got := sh(t, sb, "wc -l < "+file); got != "1" {
		t.Errorf("command ran %s times, want 1", got)
	}
}

func (s *suite) testNonRoot(t *testing.T, sb sandbox.Sandbox) {
	out := sh(t, sb, `id -u; grep -E '^Cap(Eff|Prm|Amb):' /proc/self/status`)
	lines := strings.Split(out, "\n")
	if len(lines) != 4 {
		t.Fatalf("unexpected output %q", out)
	}
	if lines[0] == "0" {
		t.Errorf("commands run as root")
	}
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) != 2 || strings.Trim(f[1], "0") != "" {
			t.Errorf("capabilities left: %q", l)
		}
	}
	// No way back to root either.
	if res := run(t, sb, sandbox.ExecRequest{Command: "su -c id root </dev/null; sudo -n id"}); strings.Contains(res.Output, "uid=0") {
		t.Errorf("got root: %q", res.Output)
	}
}

func (s *suite) testAgentUnreachable(t *testing.T, sb sandbox.Sandbox) {
	for _, cmd := range []string{
		"ls /.rollcage/run",
		"cat /.rollcage/run/agent.sock",
		`python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.connect('/.rollcage/run/agent.sock')"`,
		"echo x > /.rollcage/rollcage-agent",
	} {
		if res := run(t, sb, sandbox.ExecRequest{Command: cmd}); res.ExitCode == 0 {
			t.Errorf("%q succeeded as the sandbox user: %q", cmd, res.Output)
		}
	}
}

func (s *suite) testNoNetwork(t *testing.T, sb sandbox.Sandbox) {
	res := run(t, sb, sandbox.ExecRequest{
		Command: `python3 -c "import socket; s=socket.create_connection(('1.1.1.1', 80), timeout=20); print('connected')"`,
		Timeout: 60 * time.Second,
	})
	if res.ExitCode == 0 || strings.Contains(res.Output, "connected") {
		t.Fatalf("connected to 1.1.1.1: %q", res.Output)
	}
	// No route fails at once; a 20 s socket timeout would mean packets
	// leave the sandbox and are dropped somewhere.
	if !strings.Contains(res.Output, "unreachable") {
		t.Errorf("connect failed, but not for want of a route: %q", res.Output)
	}
	if got := sh(t, sb, `ls /sys/class/net | sort | tr '\n' ' '`); got != "lo" {
		t.Errorf("network interfaces %q, want only lo", got)
	}
}

func (s *suite) testNoDockerSocket(t *testing.T, sb sandbox.Sandbox) {
	for _, p := range []string{"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock"} {
		if res := run(t, sb, sandbox.ExecRequest{Command: "test -e " + p}); res.ExitCode == 0 {
			t.Errorf("%s exists in the sandbox", p)
		}
	}
}

func (s *suite) testFiles(t *testing.T, sb sandbox.Sandbox) {
	ctx := t.Context()
	dir := "/workspace/files-" + randHex()
	path := dir + "/sub/hello.txt"
	if err := sb.WriteFile(ctx, path, []byte("hello, sandbox\n"), 0o640); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	data, cut, err := sb.ReadFile(ctx, path, 0)
	if err != nil || cut || string(data) != "hello, sandbox\n" {
		t.Errorf("ReadFile = %q, %v, %v", data, cut, err)
	}
	data, cut, err = sb.ReadFile(ctx, path, 5)
	if err != nil || !cut || string(data) != "hello" {
		t.Errorf("ReadFile(max 5) = %q, %v, %v; want \"hello\", true, nil", data, cut, err)
	}
	if !s.opts.NoProcesses {
		if got := sh(t, sb, "stat -c '%u %a' "+path); got != "1000 640" {
			t.Errorf("written file owner and mode %q, want \"1000 640\"", got)
		}
	}
	if _, _, err := sb.ReadFile(ctx, dir+"/missing", 0); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("ReadFile(missing): %v, want ErrNotFound", err)
	}
	// The sandbox user's permissions apply.
	if _, _, err := sb.ReadFile(ctx, "/etc/shadow", 0); err == nil {
		t.Error("ReadFile(/etc/shadow) succeeded as the sandbox user")
	}
	if err := sb.WriteFile(ctx, "/etc/rollcage-test", []byte("x"), 0o644); err == nil {
		t.Error("WriteFile(/etc/...) succeeded as the sandbox user")
	}
}

func (s *suite) testCopy(t *testing.T, sb sandbox.Sandbox) {
	ctx := t.Context()
	dir := "/workspace/copy-" + randHex()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name     string
		body     string
		uid, gid int
	}{
		{"tests/test_hidden.py", "def test_x():\n    assert True\n", 0, 0},
		{"tests/data.txt", "user data\n", 1000, 1000},
	} {
		hdr := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Uid: f.uid, Gid: f.gid, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f.body))
	}
	tw.Close()
	if err := sb.CopyIn(ctx, dir, &buf); err != nil {
		t.Fatalf("CopyIn: %v", err)
	}
	out := dir + "-out"
	if s.opts.NoProcesses {
		// No stat to ask for owners: the content must be there.
		if data, _, err := sb.ReadFile(ctx, dir+"/tests/data.txt", 0); err != nil || string(data) != "user data\n" {
			t.Errorf("copied-in tests/data.txt = %q, %v; want \"user data\\n\"", data, err)
		}
		if err := sb.WriteFile(ctx, out+"/sub/r.txt", []byte("result\n"), 0o644); err != nil {
			t.Fatalf("WriteFile: %v", err)
		}
	} else {
		got := sh(t, sb, fmt.Sprintf("cd %s && stat -c '%%n %%u' tests/test_hidden.py tests/data.txt && cat tests/data.txt", dir))
		if diff := cmp.Diff("tests/test_hidden.py 0\ntests/data.txt 1000\nuser data", got); diff != "" {
			t.Errorf("copied-in files (-want +got):\n%s", diff)
		}
		// CopyIn made dir as root; the sandbox user writes next to it.
		sh(t, sb, fmt.Sprintf("mkdir -p %s/sub && echo result > %s/sub/r.txt", out, out))
	}
	rc, err := sb.CopyOut(ctx, out)
	if err != nil {
		t.Fatalf("CopyOut: %v", err)
	}
	files := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("CopyOut tar: %v", err)
		}
		if hdr.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			files[strings.TrimPrefix(hdr.Name, "./")] = string(b)
		}
	}
	rc.Close()
	found := false
	for name, body := range files {
		if strings.HasSuffix(name, "r.txt") && body == "result\n" {
			found = true
		}
	}
	if !found {
		t.Errorf("CopyOut tar lacks r.txt: %v", files)
	}

	rc, err = sb.CopyOut(ctx, out+"/missing")
	if err == nil {
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
	}
	if !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("CopyOut(missing): %v, want ErrNotFound", err)
	}
}

// testCopyInSymlink: CopyIn runs as root (hidden tests go in through it);
// a symlink the sandbox user planted, on the destination's path or inside
// the destination, must not send the files where the user chose: into a
// directory they can read, or over root's files.
func (s *suite) testCopyInSymlink(t *testing.T, sb sandbox.Sandbox) {
	ctx := t.Context()
	base := "/workspace/plant-" + randHex()
	loot := "/tmp/loot-" + randHex()
	planted := "rollcage-planted-" + randHex()
	sh(t, sb, fmt.Sprintf("mkdir -p %[1]s %[2]s/repo && ln -s %[1]s %[2]s/grader && ln -s %[1]s %[2]s/repo/tests && ln -s /etc %[2]s/etc",
		loot, base))
	tarOf := func(name string) io.Reader {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		body := "def test_hidden():\n    assert True\n"
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
		tw.Close()
		return &buf
	}
	for _, tc := range []struct{ name, dir, entry string }{
		{"destination is the link", base + "/grader", "test_hidden.py"},
		{"destination below the link", base + "/grader/hidden", "test_hidden.py"},
		{"entry below a link in the destination", base + "/repo", "tests/test_hidden.py"},
		{"destination is a link to /etc", base + "/etc", planted},
	} {
		if err := sb.CopyIn(ctx, tc.dir, tarOf(tc.entry)); err == nil {
			t.Errorf("%s: CopyIn(%s, %s) succeeded; want it refused", tc.name, tc.dir, tc.entry)
		}
	}
	if got := sh(t, sb, "ls -A "+loot); got != "" {
		t.Errorf("CopyIn followed the sandbox user's symlinks into %s: %s", loot, got)
	}
	if got := sh(t, sb, "test -e /etc/"+planted+" && echo written || echo absent"); got != "absent" {
		t.Errorf("CopyIn followed the sandbox user's symlink into /etc: /etc/%s %s", planted, got)
	}
	// A real directory beside the links still takes a copy.
	if err := sb.CopyIn(ctx, base+"/real", tarOf("test_hidden.py")); err != nil {
		t.Errorf("CopyIn into a plain directory next to the links: %v", err)
	}
}

func (s *suite) testCanary(t *testing.T, sb sandbox.Sandbox) {
	clean := run(t, sb, sandbox.ExecRequest{Command: "ls /workspace >/dev/null; echo fine"})
	if len(clean.CanaryOpens) != 0 {
		t.Errorf("canary opens reported for a command that opened none: %v", clean.CanaryOpens)
	}
	res := run(t, sb, sandbox.ExecRequest{Command: "cat " + canaryPath})
	if !strings.Contains(res.Output, "decoy") {
		t.Errorf("canary content not planted: %q", res.Output)
	}
	if diff := cmp.Diff([]string{canaryPath}, res.CanaryOpens); diff != "" {
		t.Errorf("CanaryOpens (-want +got):\n%s", diff)
	}
}

// testForkBomb runs a fork bomb under a timeout: the pids limit must keep
// it from taking the host down, the timeout's group kill must end it, and
// the sandbox must answer afterwards with no bomb left behind.
func (s *suite) testForkBomb(t *testing.T) {
	sb := s.create(t, sandbox.Spec{EpisodeID: "conformance-forkbomb", Limits: sandbox.Limits{Pids: 256}})
	res := run(t, sb, sandbox.ExecRequest{Command: `:(){ :|:& };:; sleep 600`, Timeout: 3 * time.Second, MaxOutput: 4096})
	if res.Stopped != sandbox.StopTimeout {
		t.Errorf("fork bomb: stopped %q, want %q (exit %d)", res.Stopped, sandbox.StopTimeout, res.ExitCode)
	}
	// The kernel needs a moment to tear down a few hundred processes;
	// retry briefly before calling the sandbox unresponsive.
	var last string
	for range 40 {
		got, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "ps -u $(id -u) --no-headers | wc -l", Timeout: 10 * time.Second})
		if err == nil && got.ExitCode == 0 {
			// ps, wc and their shell: a handful, not the bomb.
			if n := strings.TrimSpace(got.Output); len(n) > 1 {
				t.Errorf("%s processes of the sandbox user left after the fork bomb was killed", n)
			}
			return
		}
		last = fmt.Sprintf("%q, %v", got.Output, err)
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("sandbox unresponsive after a fork bomb: %s", last)
}

// testPidsExhausted keeps the sandbox's pids limit full (a fork bomb held
// for several seconds) while the host reads and writes files and runs
// commands. Every pid the agent's runtime would need then is taken: an
// agent that creates an OS thread for a file operation, or for one more
// blocked syscall, dies (the Go runtime throws when clone fails), and the
// episode with it. The calls may fail, commands may not fork, but the agent
// must answer each one and the sandbox must work once the bomb is gone.
func (s *suite) testPidsExhausted(t *testing.T) {
	sb := s.create(t, sandbox.Spec{EpisodeID: "conformance-pids-full", Limits: sandbox.Limits{Pids: 64}})
	sh(t, sb, "echo before > /workspace/before.txt")
	bomb := make(chan error, 1)
	go func() {
		_, err := sb.Exec(t.Context(), sandbox.ExecRequest{Session: "bomb", Command: `:(){ :|:& };:; sleep 600`, Timeout: 8 * time.Second, MaxOutput: 4096})
		bomb <- err
	}()
	time.Sleep(1500 * time.Millisecond) // the bomb fills 64 pids in far less
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	st, streams := sb.(sandbox.Streamer)
	for i := range 8 {
		if streams {
			// A streamed command whose shell cannot fork answers as
			// Exec does: exit 126 with bash's words, not an error.
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- streamUnderFullPids(t.Context(), st)
			}()
		}
		wg.Add(3)
		go func() {
			defer wg.Done()
			_, _, err := sb.ReadFile(t.Context(), "/workspace/before.txt", 0)
			errs <- err
		}()
		go func() {
			defer wg.Done()
			errs <- sb.WriteFile(t.Context(), fmt.Sprintf("/workspace/during-%d.txt", i), []byte("x"), 0o644)
		}()
		go func() {
			defer wg.Done()
			_, err := sb.Exec(t.Context(), sandbox.ExecRequest{Session: fmt.Sprintf("s%d", i), Command: "true", Timeout: 2 * time.Second})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		// A file operation may fail as the user's would; a command whose
		// shell cannot fork is a result (exit 126), not an error.
		var pe *sandbox.PathError
		if err != nil && !errors.As(err, &pe) {
			t.Errorf("a call while the pids limit was full: %v (the agent must answer, not fail or die)", err)
		}
	}
	if err := <-bomb; err != nil {
		t.Fatalf("the bomb's Exec: %v", err)
	}
	var last string
	for range 40 {
		got, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "cat /workspace/before.txt", Timeout: 10 * time.Second})
		if err == nil && got.ExitCode == 0 && strings.TrimSpace(got.Output) == "before" {
			return
		}
		last = fmt.Sprintf("%q, %v", got.Output, err)
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("sandbox unresponsive after the pids limit was full: %s", last)
}

// streamUnderFullPids starts one command while the pids limit is full:
// it must start and end with exit 0, or with exit 126 and bash's "fork:
// Resource temporarily unavailable" on stderr and in the result.
func streamUnderFullPids(ctx context.Context, st sandbox.Streamer) error {
	var mu sync.Mutex
	var stderr strings.Builder
	p, err := st.Start(ctx, sandbox.StartRequest{Command: "true", Timeout: 2 * time.Second}, func(o sandbox.Output) {
		if o.Stream == sandbox.Stderr {
			mu.Lock()
			stderr.Write(o.Data)
			mu.Unlock()
		}
	})
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	res, err := p.Wait(ctx)
	if err != nil {
		return fmt.Errorf("wait: %w", err)
	}
	mu.Lock()
	streamed := stderr.String()
	mu.Unlock()
	const words = "fork: Resource temporarily unavailable"
	if res.ExitCode == 126 && !(strings.Contains(res.Output, words) && strings.Contains(streamed, words)) {
		return fmt.Errorf("stream exit 126 with output %q, stderr %q: want bash's %q in both", res.Output, streamed, words)
	}
	if res.ExitCode != 0 && res.ExitCode != 126 && res.Stopped == "" {
		return fmt.Errorf("stream exit %d (%q): want 0, or 126 when no shell could fork", res.ExitCode, res.Output)
	}
	return nil
}

func (s *suite) testSnapshot(t *testing.T) {
	sb := s.create(t, sandbox.Spec{EpisodeID: "conformance-snapshot"})
	token := randHex()
	sh(t, sb, "echo "+token+" > /workspace/snap.txt")
	ref := "rollcage-test/snapshot:" + token
	id, err := sandbox.Snapshot(t.Context(), sb, ref)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if id == "" {
		t.Fatal("Snapshot returned an empty image id")
	}
	if s.opts.RemoveImage != nil {
		t.Cleanup(func() {
			if err := s.opts.RemoveImage(context.Background(), ref); err != nil {
				t.Logf("remove snapshot image: %v", err)
			}
		})
	}
	again := s.create(t, sandbox.Spec{EpisodeID: "conformance-snapshot-restored", Image: ref})
	if got := sh(t, again, "cat /workspace/snap.txt"); got != token {
		t.Errorf("restored snapshot has %q, want %q", got, token)
	}
}

func (s *suite) testSnapshotUnsupported(t *testing.T) {
	sb := s.create(t, sandbox.Spec{EpisodeID: "conformance-snapshot"})
	if _, err := sandbox.Snapshot(t.Context(), sb, "rollcage-test/snapshot:"+randHex()); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Fatalf("Snapshot on a backend without snapshots: %v, want ErrUnsupported", err)
	}
	if s.opts.NoProcesses {
		if err := sb.WriteFile(t.Context(), "/workspace/after-snapshot", []byte("x"), 0o644); err != nil {
			t.Errorf("after a refused Snapshot: %v", err)
		}
		return
	}
	if got := sh(t, sb, "echo still here"); got != "still here" {
		t.Errorf("after a refused Snapshot: %q", got)
	}
}

func (s *suite) testClose(t *testing.T) {
	ctx := t.Context()
	sb, err := s.b.Create(ctx, sandbox.Spec{Image: s.opts.Image, EpisodeID: "conformance-close"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	// A command in flight when Close comes must return, not hang; a
	// backend without processes has none to keep in flight.
	inflight := make(chan error, 1)
	if !s.opts.NoProcesses {
		sh(t, sb, "true")
		go func() {
			_, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "sleep 600", Timeout: 10 * time.Minute})
			inflight <- err
		}()
		waitProcess(t, sb, "sleep 600")
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := sb.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if !s.opts.NoProcesses {
		select {
		case err := <-inflight:
			if !errors.Is(err, sandbox.ErrClosed) {
				t.Errorf("Exec in flight at Close: %v, want ErrClosed", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Exec in flight at Close still hangs after 30s")
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	calls := map[string]error{}
	_, calls["Exec"] = sb.Exec(ctx, sandbox.ExecRequest{Command: "true"})
	_, _, calls["ReadFile"] = sb.ReadFile(ctx, "/etc/hostname", 0)
	calls["WriteFile"] = sb.WriteFile(ctx, "/tmp/x", nil, 0o644)
	calls["CopyIn"] = sb.CopyIn(ctx, "/tmp", bytes.NewReader(nil))
	_, calls["CopyOut"] = sb.CopyOut(ctx, "/tmp")
	_, calls["Snapshot"] = sandbox.Snapshot(ctx, sb, "rollcage-test/closed:"+randHex())
	for name, err := range calls {
		if !errors.Is(err, sandbox.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func randHex() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
