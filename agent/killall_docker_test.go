package agent_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"

	"github.com/rollcage/rollcage/agent"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { sandboxtest.Main(m) }

// dockerAgent starts the agent as a Docker sandbox starts it (PID 1 of
// the container's pid namespace, root with the agent's capabilities,
// commands as uid 1000, a pids limit) and returns a client of it.
func dockerAgent(t *testing.T, pidsLimit int64) *agent.Client {
	t.Helper()
	sandboxtest.RequireDocker(t)
	if _, err := sandboxtest.EnsureAgent(); err != nil {
		t.Fatal(err)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	img := sandboxtest.TestImage()
	if _, err := cli.ImageInspect(t.Context(), img); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("test image %s: %v: run 'make images'", img, err)
		}
		t.Skipf("test image %s missing (run 'make images'): %v", img, err)
	}
	run := t.TempDir()
	args := []string{"--listen", "unix:/.rollcage/run/agent.sock", "--user", "1000:1000", "--workdir", "/tmp", "--lease", "2m"}
	if os.Getuid() != 0 {
		args = append(args, "--socket-owner", fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()))
	}
	cfg := &dcontainer.Config{Image: img, User: "0:0", Entrypoint: []string{"/.rollcage/rollcage-agent"}, Cmd: args, WorkingDir: "/"}
	hc := &dcontainer.HostConfig{
		NetworkMode: "none",
		Mounts: []mount.Mount{
			{Type: mount.TypeBind, Source: os.Getenv(host.AgentBinEnv), Target: "/.rollcage/rollcage-agent", ReadOnly: true},
			{Type: mount.TypeBind, Source: run, Target: "/.rollcage/run"},
		},
		CapDrop:     []string{"ALL"},
		CapAdd:      []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"},
		SecurityOpt: []string{"no-new-privileges"},
		Resources:   dcontainer.Resources{PidsLimit: &pidsLimit},
	}
	ctr, err := cli.ContainerCreate(t.Context(), cfg, hc, nil, nil, "rollcage-agent-test-"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatInt(time.Now().UnixNano()%1e9, 36))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cli.ContainerRemove(context.Background(), ctr.ID, dcontainer.RemoveOptions{Force: true})
	})
	if err := cli.ContainerStart(t.Context(), ctr.ID, dcontainer.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(run, "agent.sock")
	deadline := time.Now().Add(30 * time.Second)
	var conn net.Conn
	for {
		if conn, err = net.Dial("unix", sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent never listened on %s: %v", sock, err)
		}
		time.Sleep(20 * time.Millisecond) // another process creates the socket: poll, bounded
	}
	c := agent.NewClient(conn, agent.ClientOptions{Heartbeat: 5 * time.Second})
	t.Cleanup(func() { c.Close() })
	if err := c.Configure(t.Context(), agent.Config{}); err != nil {
		t.Fatal(err)
	}
	return c
}

// pids reads the sandbox's pids cgroup file (pids.max, pids.current),
// cgroup v2 or v1, through the agent's own threads (no process starts).
func pids(t *testing.T, c *agent.Client, name string) int {
	t.Helper()
	var b []byte
	var err error
	for _, dir := range []string{"/sys/fs/cgroup/", "/sys/fs/cgroup/pids/"} {
		if b, _, err = c.ReadFile(t.Context(), dir+name, 64); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %q", name, b)
	}
	return n
}

// TestKillAllFullPidTable: with the sandbox's pid table full, no command
// can start; KillAll still kills every process but the agent's own, and
// commands run again after it.
func TestKillAllFullPidTable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Docker container")
	}
	c := dockerAgent(t, 96)
	ctx := t.Context()
	// Fill the table: forks until fork fails, every child asleep.
	bomb := `import os, time
while True:
    try:
        if os.fork() == 0:
            time.sleep(3600)
            os._exit(0)
    except OSError:
        break
time.sleep(3600)`
	res, err := c.Exec(ctx, sandbox.ExecRequest{Command: "setsid python3 -c '" + bomb + "' >/dev/null 2>&1 </dev/null & echo started", Timeout: 30 * time.Second})
	if err != nil || res.Output != "started\n" {
		t.Fatalf("starting the fork bomb: %+v, %v", res, err)
	}
	limit := pids(t, c, "pids.max")
	for deadline := time.Now().Add(60 * time.Second); pids(t, c, "pids.current") < limit; {
		if time.Now().After(deadline) {
			t.Fatalf("the pid table never filled: %d of %d", pids(t, c, "pids.current"), limit)
		}
		time.Sleep(50 * time.Millisecond) // the bomb forks in another process: poll, bounded
	}
	// The starvation a submit met: no shell can start.
	if res, err := c.Exec(ctx, sandbox.ExecRequest{Session: "other", Command: "true", Timeout: 10 * time.Second}); err == nil && res.ExitCode == 0 {
		t.Fatalf("a command ran with the pid table full (%+v): the test did not fill it", res)
	}

	kctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	kr, err := c.KillAll(kctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(kr.Survivors) != 0 {
		t.Fatalf("KillAll left %d processes after %d rounds: %+v", len(kr.Survivors), kr.Rounds, kr.Survivors)
	}
	t.Logf("KillAll: %d rounds; pids %d of %d after", kr.Rounds, pids(t, c, "pids.current"), limit)

	info, err := c.Ping(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err = c.Exec(ctx, sandbox.ExecRequest{Session: "after", Command: "ps -eo pid=,comm=", Timeout: 30 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("a command after KillAll: %+v, %v", res, err)
	}
	// Left: the reaper (PID 1), the agent, and this command's shell and ps.
	var left []string
	for _, line := range strings.Split(strings.TrimSpace(res.Output), "\n") {
		pid, comm, _ := strings.Cut(strings.TrimSpace(line), " ")
		if n, _ := strconv.Atoi(pid); n == 1 || n == info.PID || comm == "bash" || comm == "ps" {
			continue
		}
		left = append(left, line)
	}
	if len(left) != 0 {
		t.Errorf("processes left after KillAll: %q", left)
	}
}
