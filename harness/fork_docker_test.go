package harness

import (
	"context"
	"io/fs"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/docker/dockertest"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
	"github.com/rollcage/rollcage/task"
)

// TestRunTreeInDocker: a demo task's clean script as a tree rollout on
// real sandboxes (sealed image): branched after its first call into 3
// leaves, each makes the fix in its own sandbox and is graded resolved
// and clean on its own.
func TestRunTreeInDocker(t *testing.T) {
	b := dockertest.Backend(t)
	tk, hidden, s := firstDemoScript(t, b, func(s task.Script) bool { return s.Kind == task.KindClean && len(s.Steps) >= 3 })
	r, _ := newTestRunner(t, Config{Backend: b, Seal: true})
	outs, err := r.RunTree(context.Background(), tk, hidden, EpisodeMeta{}, Replay{Script: s}, Tree{At: 1, Branches: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 3 {
		t.Fatalf("%d leaves, want 3: %+v", len(outs), outs)
	}
	for i, o := range outs {
		if err := Expect(s, o); err != nil {
			t.Errorf("leaf %d: %v\noutcome: %+v", i, err, o)
		}
		if i > 0 && (o.ParentEpisodeID != outs[0].EpisodeID || deref(o.BranchStep) != 1) {
			t.Errorf("leaf %d: parent %q at %d, want %s at 1", i, o.ParentEpisodeID, deref(o.BranchStep), outs[0].EpisodeID)
		}
	}
}

// TestForkRefusesWhileStreaming: an episode with a streamed call running
// does not fork (that call's output would be in no child) and says what
// to do; once the call has ended it forks.
func TestForkRefusesWhileStreaming(t *testing.T) {
	b := dockertest.Backend(t)
	tk, hidden, _ := firstDemoScript(t, b, func(task.Script) bool { return true })
	r, _ := newTestRunner(t, Config{Backend: b, Seal: true})
	ctx := context.Background()
	ep, err := r.Start(ctx, tk, hidden, EpisodeMeta{})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close(ctx)
	run, err := ep.Start(ctx, bashCall("sleep 2; echo done"), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ep.Fork(ctx, 1); err == nil || !strings.Contains(err.Error(), "streamed calls are still running") {
		t.Errorf("Fork with a streamed call running: %v, want a refusal saying so", err)
	}
	if res, err := run.Wait(ctx); err != nil || !strings.Contains(res.Output, "done") {
		t.Fatalf("streamed call: %+v, %v", res, err)
	}
	kids, err := ep.Fork(ctx, 1)
	if err != nil {
		t.Fatalf("Fork after the stream ended: %v", err)
	}
	kids[0].Close(ctx)
}

// firstDemoScript is the first demo task, its hidden tests and the first
// of its demo scripts that pick takes; the task's image must be there.
func firstDemoScript(t *testing.T, b sandbox.Backend, pick func(task.Script) bool) (task.Task, fs.FS, task.Script) {
	t.Helper()
	tasks, hidden, scripts := demoSuite(t)
	tk := tasks[0]
	sandboxtest.RequireImage(t, b, tk.Image)
	for _, s := range scripts {
		if s.Task == tk.ID && pick(s) {
			return tk, hidden, s
		}
	}
	t.Fatalf("no demo script of %s fits", tk.ID)
	return task.Task{}, nil, task.Script{}
}
