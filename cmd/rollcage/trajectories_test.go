package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/cmd/rollcage/servetest"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
	"github.com/rollcage/rollcage/trajectory"
	"github.com/rollcage/rollcage/trajectory/trajectorytest"
)

// TestOwnedDirectoryRefused: a second gateway or run on a trajectory
// directory another one owns is refused, in one line naming the owner,
// before it starts anything (no Docker is needed to see it).
func TestOwnedDirectoryRefused(t *testing.T) {
	out := t.TempDir()
	dirs := map[string]string{
		"serve": filepath.Join(out, "gateway"),
		"run":   filepath.Join(out, "run", "trajectories"),
		"demo":  filepath.Join(out, "demo"),
	}
	for _, dir := range dirs {
		st, err := trajectory.OpenStore(context.Background(), trajectory.Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
	}
	tests := []struct {
		args []string
		dir  string
	}{
		{[]string{"serve", "--addr", "127.0.0.1:0", "--admin-token", "x", "--trajectories", dirs["serve"]}, dirs["serve"]},
		{[]string{"run", "--tasks", "../../demo/tasks.jsonl", "--policy", "replay:../../demo/scripts/textwrap", "--out", filepath.Join(out, "run")}, dirs["run"]},
		{[]string{"demo", "--out", dirs["demo"]}, dirs["demo"]},
	}
	for _, tc := range tests {
		t.Run(tc.args[0], func(t *testing.T) {
			t.Setenv("ROLLCAGE_JUDGE_URL", "")
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			msg := strings.TrimSpace(stderr.String())
			want := fmt.Sprintf("%s is in use by pid %d ", tc.dir, os.Getpid())
			if code != 3 || !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
				t.Errorf("exit %d, want 3 with one line saying %q\nstdout: %s\nstderr: %s", code, want, stdout.String(), stderr.String())
			}
		})
	}
}

// TestMain removes the agent servetest built, if it did.
func TestMain(m *testing.M) { sandboxtest.Main(m) }

// TestSecondGatewayRefused: a second gateway on the trajectory directory
// of a running one (a real `rollcage serve` process) is refused, in one
// line naming the first, and the first serves on.
func TestSecondGatewayRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rollcage and starts a gateway")
	}
	dir := t.TempDir()
	addr := servetest.FreeAddr(t)
	servetest.Serve(t, "listening on http://", "--addr", addr, "--admin-token", "x", "--trajectories", dir)

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--admin-token", "x", "--trajectories", dir}, &stdout, &stderr)
	msg := strings.TrimSpace(stderr.String())
	want := "rollcage serve: trajectory: " + dir + " is in use by pid "
	if code != 3 || !strings.HasPrefix(msg, want) || !strings.Contains(msg, "(rollcage serve), started ") || strings.Contains(msg, "\n") {
		t.Errorf("second gateway: exit %d, stderr %q; want 3 and one line starting %q naming the first", code, msg, want)
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the first gateway after the refusal: healthz %d", resp.StatusCode)
	}
}

// TestExportSkipsCorruptLog: `rollcage export` of a directory with one
// corrupt log exports the others and warns, in one line, which file it
// left out and why.
func TestExportSkipsCorruptLog(t *testing.T) {
	dir := t.TempDir()
	st, err := trajectory.OpenStore(context.Background(), trajectory.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ep-a", "ep-b", "ep-c"} {
		l, err := st.Log(id)
		if err != nil {
			t.Fatal(err)
		}
		turn := trajectory.ModelTurn{
			Request:  []trajectory.Message{{Role: trajectory.RoleUser, Content: "fix it"}},
			Response: trajectory.Message{Role: trajectory.RoleAssistant, Content: "done"},
		}
		for i, ev := range []struct {
			typ string
			v   any
		}{{trajectory.TypeEpisodeStart, trajectory.EpisodeStart{TaskID: "t"}}, {trajectory.TypeModelTurn, turn}, {trajectory.TypeEpisodeEnd, trajectory.EpisodeEnd{}}} {
			e, err := trajectory.NewEvent(id, 0, i, ev.typ, ev.v)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Append(e); err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
	}
	st.Close()
	bad := filepath.Join(dir, "ep-b.jsonl")
	trajectorytest.CorruptLine(t, bad, 1)

	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"export", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("export: exit %d\nstderr: %s", code, stderr.String())
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var s trajectory.Sample
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("stdout line %q: %v", line, err)
		}
		ids = append(ids, s.EpisodeID)
	}
	if strings.Join(ids, ",") != "ep-a,ep-c" {
		t.Errorf("exported episodes %v; want ep-a and ep-c", ids)
	}
	want := "rollcage export: warning: skipped " + bad + ": "
	if msg := stderr.String(); !strings.HasPrefix(msg, want) || !strings.Contains(msg, "trajectory log corrupt") || strings.Count(msg, "\n") != 1 {
		t.Errorf("stderr %q; want one line starting %q and saying why", msg, want)
	}
}
