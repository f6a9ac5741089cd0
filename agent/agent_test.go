package agent

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// newTestServer starts a Server on a unix socket in a temp dir and returns
// a connected Client.
func newTestServer(t *testing.T, cfg ServerConfig) (*Server, *Client) {
	t.Helper()
	if cfg.Workdir == "" {
		cfg.Workdir = t.TempDir()
	}
	if cfg.ShellMode == "" {
		cfg.ShellMode = testShellMode()
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		srv.Close()
		<-served
	})
	return srv, dial(t, sock)
}

func dial(t *testing.T, sock string) *Client {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(conn, ClientOptions{})
	t.Cleanup(func() { c.Close() })
	return c
}

func run(t *testing.T, c *Client, session, command string) sandbox.ExecResult {
	t.Helper()
	res, err := c.Exec(t.Context(), sandbox.ExecRequest{Session: session, Command: command, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("exec %q: %v", command, err)
	}
	return res
}

func TestSessionStatePersists(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	dir := t.TempDir()
	steps := []struct {
		cmd, want string
	}{
		{fmt.Sprintf("cd %s && mkdir -p sub && cd sub", dir), ""},
		{"pwd", dir + "/sub\n"},
		{"export FOO='two words'; BAR=local; greet() { echo \"hi $1\"; }", ""},
		{`echo "$FOO|$BAR"; greet you`, "two words|" + map[string]string{ModePersistent: "local", ModePerCall: ""}[testShellMode()] + "\nhi you\n"},
		{"multi=$'line1\\nline2'; export multi", ""},
		{`printf '%s\n' "$multi"`, "line1\nline2\n"},
		{"cat <<'EOF'\n$NOT_EXPANDED\nEOF", "$NOT_EXPANDED\n"},
		{"unset FOO; exit 3", ""},
		{`echo "[${FOO-unset}]"; type greet >/dev/null && echo fn`, "[unset]\nfn\n"},
		{"echo $LANG $TERM $PAGER $GIT_PAGER", "C.UTF-8 dumb cat cat\n"},
	}
	for i, s := range steps {
		res := run(t, c, "", s.cmd)
		if res.Output != s.want {
			t.Errorf("step %d %q: output %q, want %q", i, s.cmd, res.Output, s.want)
		}
		if res.Shell != "bash" {
			t.Errorf("step %d: shell %q", i, res.Shell)
		}
	}
	if res := run(t, c, "", "true"); res.Cwd != dir+"/sub" {
		t.Errorf("cwd %q, want %q", res.Cwd, dir+"/sub")
	}
	// Another session starts fresh.
	if res := run(t, c, "other", `echo "[${FOO-unset}]"; pwd`); !strings.HasPrefix(res.Output, "[unset]\n") || strings.Contains(res.Output, "/sub") {
		t.Errorf("other session: %q", res.Output)
	}
}

func TestExitCodes(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	tests := []struct {
		cmd  string
		want int
	}{
		{"true", 0},
		{"false", 1},
		{"exit 7", 7},
		{"set -e; false; echo not reached", 1},
		{"kill -TERM $$", 128 + int(syscall.SIGTERM)},
		{"(exit 300)", 44},
		{"return 5", 5},
	}
	for _, tc := range tests {
		if got := run(t, c, "", tc.cmd).ExitCode; got != tc.want {
			t.Errorf("%q: exit %d, want %d", tc.cmd, got, tc.want)
		}
	}
	// The session survives all of that.
	if got := run(t, c, "", "echo ok").Output; got != "ok\n" {
		t.Errorf("after exits: %q", got)
	}
}

// TestConfigureRootRefused: the refusals of a root change, which must not
// reach chroot (that would change this test process's root). The change
// itself runs in containerd's TestForkWarm, inside a sandbox.
func TestConfigureRootRefused(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	ctx := t.Context()
	if err := c.Configure(ctx, Config{Root: "relative/dir"}); err == nil || !strings.Contains(err.Error(), "not absolute") {
		t.Errorf("Configure(Root relative): %v, want an error saying it is not absolute", err)
	}
	if _, err := c.Exec(ctx, sandbox.ExecRequest{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Configure(ctx, Config{Root: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "after a session started") {
		t.Errorf("Configure(Root) after a session: %v, want a refusal", err)
	}
}
