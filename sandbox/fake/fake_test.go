package fake_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// TestConformance runs the suite every backend passes, over each mode
// of the fake. The fake runs no processes of an image, so the cases that
// need them skip, each saying why; the image is a name only (the fake
// has no images). The host directory's real bash runs as the test's own
// user (Options.HostUser) and streams, so the Stream case runs there.
func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    func(t *testing.T) *fake.Backend
		opts sandboxtest.Options
	}{
		{"memory", func(*testing.T) *fake.Backend { return &fake.Backend{} }, sandboxtest.Options{Fork: true}},
		{"dir", func(t *testing.T) *fake.Backend { return &fake.Backend{Dir: t.TempDir()} }, sandboxtest.Options{}},
		{"dir with bash", func(t *testing.T) *fake.Backend {
			return &fake.Backend{Dir: t.TempDir(), Exec: fake.Bash, Start: fake.BashStart}
		}, sandboxtest.Options{HostUser: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Image, opts.NoSnapshot, opts.NoProcesses = "rollcage/base:latest", true, true
			sandboxtest.Run(t, func(t *testing.T) sandbox.Backend { return tc.b(t) }, opts)
		})
	}
}

// TestBash: real bash in the host directory answers the policy's
// commands as the contract says (exit codes, stdin, the timeout, the
// output cap), sees the files the API wrote, and refuses a sandbox that
// keeps its files in memory.
func TestBash(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	sb := create(t, &fake.Backend{Dir: dir, Exec: fake.Bash}, sandbox.Spec{EpisodeID: "bash"})
	if err := sb.WriteFile(ctx, "/workspace/a.txt", []byte("from the API\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  sandbox.ExecRequest
		want sandbox.ExecResult
	}{
		{"file the API wrote", sandbox.ExecRequest{Command: "cat workspace/a.txt"}, sandbox.ExecResult{Output: "from the API\n"}},
		{"runs in Dir", sandbox.ExecRequest{Command: "pwd"}, sandbox.ExecResult{Output: dir + "\n"}},
		{"exit code", sandbox.ExecRequest{Command: "echo out; exit 3"}, sandbox.ExecResult{Output: "out\n", ExitCode: 3}},
		{"stdin", sandbox.ExecRequest{Command: "tr a-z A-Z", Stdin: "abc"}, sandbox.ExecResult{Output: "ABC"}},
		{"timeout", sandbox.ExecRequest{Command: "sleep 5", Timeout: 100 * time.Millisecond}, sandbox.ExecResult{ExitCode: 124, Stopped: sandbox.StopTimeout}},
		{"output cap", sandbox.ExecRequest{Command: "echo 0123456789", MaxOutput: 4}, sandbox.ExecResult{Output: "0123", Truncated: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sb.Exec(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(sandbox.ExecResult{}, "Shell", "TotalBytes", "Duration")); diff != "" {
				t.Errorf("Exec(%q) (-want +got):\n%s", tc.req.Command, diff)
			}
		})
	}
	// The timeout kills the process group, a background child included.
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "sleep 30 & echo $!; wait", Timeout: 300 * time.Millisecond})
	if err != nil || res.Stopped != sandbox.StopTimeout {
		t.Fatalf("Exec with a child past the timeout: %+v, %v", res, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(res.Output))
	if err != nil {
		t.Fatalf("child pid %q: %v", res.Output, err)
	}
	waitGone(t, pid)
	mem := create(t, &fake.Backend{Exec: fake.Bash}, sandbox.Spec{EpisodeID: "memory"})
	if _, err := mem.Exec(ctx, sandbox.ExecRequest{Command: "true"}); err == nil || !strings.Contains(err.Error(), "Backend with Dir") {
		t.Errorf("Bash in a memory sandbox: %v, want an error naming Backend.Dir", err)
	}
}

// TestDirPaths: a Dir sandbox's path p is Dir+p, and a host path below
// Dir (as bash there spells it) is the same file; the sandbox user's
// refusals hold on either spelling.
func TestDirPaths(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	sb := create(t, &fake.Backend{Dir: dir}, sandbox.Spec{EpisodeID: "paths",
		Canaries: []sandbox.Canary{{Path: "/opt/canary.txt", Content: "decoy"}}})
	if b, err := os.ReadFile(filepath.Join(dir, "opt/canary.txt")); err != nil || string(b) != "decoy" {
		t.Errorf("canary on the host: %q, %v", b, err)
	}
	if err := sb.WriteFile(ctx, filepath.Join(dir, "workspace/h.txt"), []byte("host spelling"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/workspace/h.txt", filepath.Join(dir, "workspace/h.txt"), filepath.Join(dir, "workspace/../workspace/h.txt")} {
		if b, _, err := sb.ReadFile(ctx, p, 0); err != nil || string(b) != "host spelling" {
			t.Errorf("ReadFile(%s) = %q, %v", p, b, err)
		}
	}
	for _, tc := range []struct {
		path string
		kind string
	}{
		{"/workspace", sandbox.KindIsDir},
		{"/workspace/h.txt/x", sandbox.KindNotFound},
		{filepath.Join(dir, "etc/shadow"), sandbox.KindPermission},
		{"/nope", sandbox.KindNotFound},
	} {
		_, _, err := sb.ReadFile(ctx, tc.path, 0)
		var pe *sandbox.PathError
		if !errors.As(err, &pe) || pe.Kind != tc.kind || pe.Path != tc.path || pe.Op != "read" {
			t.Errorf("ReadFile(%s): %v, want a read PathError of kind %s naming the path", tc.path, err, tc.kind)
		}
	}
	// A file where the write needs a directory is the caller's doing.
	err := sb.WriteFile(ctx, "/workspace/h.txt/y", nil, 0o644)
	var pe *sandbox.PathError
	if !errors.As(err, &pe) || pe.Kind != sandbox.KindNotDir || pe.Op != "write" || pe.Path != "/workspace/h.txt/y" {
		t.Errorf("WriteFile below a file: %v, want a write PathError of kind %s", err, sandbox.KindNotDir)
	}
	if err := sb.WriteFile(ctx, filepath.Join(dir, "usr/x"), nil, 0o644); !errors.Is(err, sandbox.ErrRefused) {
		t.Errorf("WriteFile below Dir/usr: %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "usr")); err == nil {
		t.Error("a refused write left Dir/usr on the host")
	}
}

// TestCapabilities: a sandbox is a sandbox.Streamer only when its
// Backend has Start, its fork children too; a Check fails Create with
// its error; a Start after Close is refused.
func TestCapabilities(t *testing.T) {
	ctx := t.Context()
	started := func(_ context.Context, sb *fake.Sandbox, req sandbox.StartRequest, _ func(sandbox.Output)) (sandbox.Process, error) {
		return nil, errors.New("scripted start of " + req.Command)
	}
	for _, tc := range []struct {
		name   string
		b      *fake.Backend
		stream bool
	}{
		{"plain", &fake.Backend{}, false},
		{"with Start", &fake.Backend{Start: started}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := create(t, tc.b, sandbox.Spec{EpisodeID: "cap"})
			if _, ok := sb.(sandbox.Streamer); ok != tc.stream {
				t.Errorf("sandbox.Streamer: %v, want %v", ok, tc.stream)
			}
			fr, err := sandbox.Fork(ctx, sb, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range fr.Children {
				if _, ok := c.(sandbox.Streamer); ok != tc.stream {
					t.Errorf("child %s: sandbox.Streamer %v, want %v", c.ID(), ok, tc.stream)
				}
			}
			if !tc.stream {
				return
			}
			st := sb.(sandbox.Streamer)
			if _, err := st.Start(ctx, sandbox.StartRequest{Command: "ls"}, nil); err == nil || err.Error() != "scripted start of ls" {
				t.Errorf("Start: %v, want the StartFunc's answer", err)
			}
			if ran := tc.b.Created()[0].Ran(); !slices.Equal(ran, []string{"ls"}) {
				t.Errorf("Ran %q, want the started command", ran)
			}
			sb.Close(ctx)
			if _, err := st.Start(ctx, sandbox.StartRequest{Command: "ls"}, nil); !errors.Is(err, sandbox.ErrClosed) {
				t.Errorf("Start after Close: %v, want ErrClosed", err)
			}
		})
	}
	missing := &fake.Backend{Check: func(_ context.Context, spec sandbox.Spec) error {
		return fmt.Errorf("image %s: %w", spec.Image, sandbox.ErrImageMissing)
	}}
	if _, err := missing.Create(ctx, sandbox.Spec{Image: "nope"}); !errors.Is(err, sandbox.ErrImageMissing) || len(missing.Created()) != 0 {
		t.Errorf("Create under a failing Check: %v, %d made; want ErrImageMissing and none", err, len(missing.Created()))
	}
}

// TestCloseKillsStarted: a Streamer's Close kills what it started,
// as a backend's Close ends its processes.
func TestCloseKillsStarted(t *testing.T) {
	ctx := t.Context()
	sb := create(t, &fake.Backend{Dir: t.TempDir(), Exec: fake.Bash, Start: fake.BashStart}, sandbox.Spec{EpisodeID: "close"})
	p, err := sb.(sandbox.Streamer).Start(ctx, sandbox.StartRequest{Command: "sleep 60", Timeout: 90 * time.Second}, func(sandbox.Output) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if res, err := p.Wait(wctx); err != nil || res.ExitCode != 128+int(syscall.SIGKILL) {
		t.Errorf("started process after Close: %+v, %v; want it killed (exit 137)", res, err)
	}
}

// waitGone waits until pid has exited (gone, or a zombie).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		// The state follows the command name in parentheses.
		if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs 10s after the timeout: %s", pid, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func create(t *testing.T, b *fake.Backend, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	sb, err := b.Create(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	return sb
}
