package harness

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/rollcage/rollcage/harness/harnesstest"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
	"github.com/rollcage/rollcage/trajectory"
)

// TestGradingDiskQuota: on the quota engine (make quota-engine) the
// solution's own code cannot write past the disk limit at grading time.
// The fix is right, but importing the package writes 1 GiB into an
// unlinked temporary file, the watchdog's blind spot (issue 35): the
// kernel refuses it at the 64 MiB limit, the import fails, the hidden
// tests error, and the reward is 0, the solution's failure and not the
// infrastructure's. The grade and episode_start say the kernel held the
// limit.
func TestGradingDiskQuota(t *testing.T) {
	sandboxtest.RequireQuotaEngine(t)
	tk, hidden := harnesstest.DemoTask(t, "textwrap")
	r, st := blindRunner(t)
	r.cfg.SandboxLimits.DiskBytes = 64 << 20
	sandboxtest.RequireImage(t, r.cfg.Backend, tk.Image)
	hog := `printf 'import tempfile\n_f = tempfile.TemporaryFile()\nfor _ in range(1024):\n    _f.write(bytes(1 << 20))\n_f.flush()\n' >> textkit/__init__.py && echo planted`
	o, err := r.Run(context.Background(), tk, hidden, EpisodeMeta{}, Replay{Script: bashScript("disk-hog", textwrapFix, hog)})
	if err != nil {
		t.Fatal(err)
	}
	evs := events(t, st, o.EpisodeID)
	g, graded := gradeEvent(t, evs)
	if !graded {
		t.Fatalf("no grade: failure %q error %q", o.FailureClass, o.Error)
	}
	if o.Resolved || g.Reward != 0 {
		t.Errorf("resolved %v reward %v: the 1 GiB write at import landed (grade %+v)", o.Resolved, g.Reward, g)
	}
	if o.FailureClass == "infrastructure" {
		t.Errorf("failure class %q (%s): a full disk limit is the solution's failure", o.FailureClass, o.Error)
	}
	if g.Disk != string(sandbox.DiskKernel) {
		t.Errorf("grade disk %q, want %q", g.Disk, sandbox.DiskKernel)
	}
	starts := harnesstest.Payloads[trajectory.EpisodeStart](t, evs, trajectory.TypeEpisodeStart)
	if len(starts) != 1 {
		t.Fatalf("%d episode_start events", len(starts))
	}
	var ctx struct {
		Disk struct {
			Guard      string `json:"guard"`
			LimitBytes int64  `json:"limit_bytes"`
		} `json:"disk"`
	}
	if err := json.Unmarshal(starts[0].Context, &ctx); err != nil {
		t.Fatal(err)
	}
	if ctx.Disk.Guard != string(sandbox.DiskKernel) || ctx.Disk.LimitBytes != 64<<20 {
		t.Errorf("episode_start disk %+v, want the kernel holding 64 MiB", ctx.Disk)
	}
}
