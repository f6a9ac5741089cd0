package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rollcage/rollcage/agent"
	"github.com/rollcage/rollcage/sandbox"
)

// TestMain lets the test binary stand in for rollcage-agent when a test
// runs it as a subprocess.
func TestMain(m *testing.M) {
	if os.Getenv("ROLLCAGE_AGENT_TEST_MAIN") == "1" {
		args := os.Args[1:]
		if len(args) > 0 && args[0] == "serve" {
			args = args[1:]
		}
		os.Exit(serve(args))
	}
	os.Exit(m.Run())
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{nil, ""},
		{[]string{"--stdio"}, ""},
		{[]string{"--listen", "tcp:1.2.3.4:5"}, "give unix:"},
		{[]string{"--proxy-listen", "127.0.0.1:3128"}, "go together"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"--lease", "soon"}, "invalid value"},
	}
	for _, tc := range tests {
		_, err := parseFlags(tc.args)
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("parseFlags(%q): %v, want error containing %q", tc.args, err, tc.wantErr)
		}
	}
}

func TestAgentBinary(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	cmd := exec.Command(os.Args[0], "serve", "--listen", "unix:"+sock, "--workdir", dir, "--lease", "30s",
		"--proxy-listen", "127.0.0.1:0", "--proxy-socket", filepath.Join(dir, "proxy.sock"))
	cmd.Env = append(os.Environ(), "ROLLCAGE_AGENT_TEST_MAIN=1", "IMAGE_VAR=from-image")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })

	var conn net.Conn
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		if conn, err = net.Dial("unix", sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent never listened: %v", err)
		}
		select {
		case werr := <-done:
			t.Fatalf("agent exited before listening: %v", werr)
		case <-time.After(10 * time.Millisecond):
		}
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, %v; want 0600", fi.Mode(), err)
	}
	c := agent.NewClient(conn, agent.ClientOptions{Heartbeat: time.Second})
	defer c.Close()
	ctx := t.Context()
	if err := c.Configure(ctx, agent.Config{Env: map[string]string{"TASK": "t1"}}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Exec(ctx, sandbox.ExecRequest{Command: `echo "$TASK $IMAGE_VAR $NO_PROXY"; pwd; case $HTTP_PROXY in http://127.0.0.1:*) echo proxied;; esac`})
	if err != nil {
		t.Fatal(err)
	}
	if want := "t1 from-image localhost,127.0.0.1\n" + dir + "\nproxied\n"; res.Output != want {
		t.Errorf("output %q, want %q", res.Output, want)
	}
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("agent exit: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("agent did not exit after Shutdown")
	}
}

func TestInstall(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "rollcage-agent")
	if code := install([]string{dest}); code != exitOK {
		t.Fatalf("install: exit %d", code)
	}
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dest)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(self) {
		t.Errorf("installed %d bytes, not a copy of the %d-byte executable", len(got), len(self))
	}
	if fi, err := os.Stat(dest); err != nil || fi.Mode().Perm() != 0o555 {
		t.Errorf("installed mode %v, %v; want 0555", fi.Mode(), err)
	}
	for _, args := range [][]string{nil, {"relative/path"}, {dest, "extra"}} {
		if code := install(args); code != exitUsage {
			t.Errorf("install(%q): exit %d, want %d", args, code, exitUsage)
		}
	}
}

// TestSignalExit: an agent stopped by a signal exits 128+n, so a pod the
// kubelet evicted is Failed (keeping the reason Evicted), not Succeeded.
func TestSignalExit(t *testing.T) {
	tests := []struct {
		sig  syscall.Signal
		want int
	}{
		{syscall.SIGTERM, 143},
		{syscall.SIGINT, 130},
	}
	for _, tc := range tests {
		t.Run(tc.sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "serve", "--stdio", "--workdir", t.TempDir(), "--lease", "0")
			cmd.Env = append(os.Environ(), "ROLLCAGE_AGENT_TEST_MAIN=1")
			// stdin stays open (a pipe nobody writes), as an attach stream.
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill() })
			// "agent ready" is logged after the signal handler is set.
			sc := bufio.NewScanner(stderr)
			for sc.Scan() && !strings.Contains(sc.Text(), "agent ready") {
			}
			go io.Copy(io.Discard, stderr)
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.want {
				t.Fatalf("agent stopped by %v: %v; want exit code %d", tc.sig, err, tc.want)
			}
		})
	}
}
