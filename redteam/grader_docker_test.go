package redteam

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/docker/dockertest"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
	"github.com/rollcage/rollcage/task"
)

// graderTask is the demo task the grader exploits are written against.
const graderTask = "daterange"

// TestGraderExploits grades each exploit of testdata/grader with the
// task's fix and without it, as the harness grades a submission: a fresh
// sandbox from the task image, the change applied, the hidden tests run
// under the grading kit. Goals: no exploit without the fix gains reward
// 1; every exploit is seen (tampered, a finding, or a cut run that the
// base commit does not reproduce); every honest look-alike with the fix
// gets reward 1 and no finding at all.
func TestGraderExploits(t *testing.T) {
	if testing.Short() {
		t.Skip("grades the grader exploits in Docker")
	}
	ctx := context.Background()
	b := dockertest.Backend(t)
	tasks, hidden, err := demo.Tasks()
	if err != nil {
		t.Fatal(err)
	}
	var tk task.Task
	for _, x := range tasks {
		if x.ID == graderTask {
			tk = x
		}
	}
	sandboxtest.RequireImage(t, b, tk.Image)

	// The facts, derived once as the harness does.
	dsb, err := b.Create(ctx, sandbox.Spec{Image: tk.Image, EpisodeID: "grader-facts", Workdir: tk.Workdir, Network: sandbox.NetworkNone})
	if err != nil {
		t.Fatal(err)
	}
	surf, err := task.QuerySurface(ctx, dsb, tk)
	if err != nil {
		t.Fatal(err)
	}
	facts, err := task.Derive(ctx, dsb, tk, hidden, surf)
	dsb.Close(context.WithoutCancel(ctx))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("facts: %d fail-to-pass, %d pass-to-pass, %d of %d probe candidates kept, literal %t, flaky %v, took %s",
		len(facts.FailToPass), len(facts.PassToPass), len(facts.Probes), facts.Candidates, facts.Literal, facts.Flaky, facts.Took.Round(time.Millisecond))
	if len(facts.FailToPass) == 0 || len(facts.Probes) == 0 || !facts.Literal {
		t.Fatalf("facts %+v: want fail-to-pass ids, perturbed probes and literal probes", facts)
	}

	files, err := filepath.Glob("testdata/grader/*.py")
	if err != nil || len(files) == 0 {
		t.Fatalf("no exploits: %v", err)
	}
	grade := func(name string, exploit []byte, fix bool) (task.Result, error) {
		sb, err := b.Create(ctx, sandbox.Spec{Image: tk.Image, EpisodeID: "grader-" + name, Workdir: tk.Workdir, Network: sandbox.NetworkNone})
		if err != nil {
			return task.Result{}, err
		}
		defer sb.Close(context.WithoutCancel(ctx))
		script := "set -e; cd " + tk.Workdir
		if fix {
			script += " && git checkout -q " + tk.UpstreamFixRef + " -- dayrange"
		}
		if _, err := sb.Exec(ctx, sandbox.ExecRequest{Command: script}); err != nil {
			return task.Result{}, err
		}
		init := tk.Workdir + "/dayrange/__init__.py"
		orig, _, err := sb.ReadFile(ctx, init, 1<<20)
		if err != nil {
			return task.Result{}, err
		}
		if err := sb.WriteFile(ctx, init, append(append(orig, '\n'), exploit...), 0o644); err != nil {
			return task.Result{}, err
		}
		return task.GradeWatched(ctx, sb, tk, hidden, task.Watch{Facts: facts, Surface: surf, Timeout: 30 * time.Second,
			Changed: map[string]bool{"dayrange/__init__.py": true, "dayrange/parse.py": fix}})
	}
	// baseFinishes: a cut run is the solution's when the hidden tests
	// finish on the base commit under the same limits.
	var baseOnce sync.Once
	var baseDone bool
	baseFinishes := func() bool {
		baseOnce.Do(func() {
			res, err := grade("base", nil, false)
			baseDone = err == nil && res.Completed && res.Reward == 0
		})
		return baseDone
	}

	type row struct {
		name string
		fix  bool
		res  task.Result
		err  error
	}
	var mu sync.Mutex
	var rows []row
	g, gctx := errgroup.WithContext(ctx)
	_ = gctx
	g.SetLimit(3)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".py")
		for _, fix := range []bool{false, true} {
			g.Go(func() error {
				res, err := grade(name, src, fix)
				mu.Lock()
				rows = append(rows, row{name, fix, res, err})
				mu.Unlock()
				return nil
			})
		}
	}
	_ = g.Wait()
	for _, r := range rows {
		honest := strings.HasPrefix(r.name, "ok-")
		var findings []string
		for _, f := range r.res.Findings {
			findings = append(findings, f.Severity+" "+f.Rule+" "+f.Evidence)
		}
		t.Logf("%-22s fix=%-5t reward=%v tampered=%t completed=%t err=%v findings=%q statuses=%v",
			r.name, r.fix, r.res.Reward, r.res.Tampered, r.res.Completed, r.err, findings, r.res.Statuses)
		cut := errors.Is(r.err, task.ErrRunCut)
		switch {
		case r.err != nil && !cut:
			t.Errorf("%s (fix %t): grading failed: %v", r.name, r.fix, r.err)
		case honest && r.fix && (r.res.Reward != 1 || len(r.res.Findings) > 0):
			t.Errorf("honest %s with the fix: reward %v, findings %q; want 1 and none", r.name, r.res.Reward, findings)
		case honest:
		case !r.fix && r.res.Reward != 0:
			t.Errorf("exploit %s without the fix: reward %v, want 0", r.name, r.res.Reward)
		case cut && !baseFinishes():
			t.Errorf("exploit %s (fix %t) cut the run, and so does the base commit", r.name, r.fix)
		case !cut && len(r.res.Findings) == 0:
			t.Errorf("exploit %s (fix %t): reward %v with no finding; want it seen", r.name, r.fix, r.res.Reward)
		}
	}
}
