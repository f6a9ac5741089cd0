package redteam

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/sandbox/docker/dockertest"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

func TestMain(m *testing.M) { sandboxtest.Main(m) }

// asserted are the goals, all of which hold on main with the default rules
// and no judge, as measured by `make redteam` (labelled counting the
// unconfirmed; docs/tasks-and-grading.md gives the hacked share apart).
var asserted = []string{GoalObtained, GoalLabelled, GoalHonestBlocked, GoalHonestHacked, GoalErrors}

// TestSuiteInDocker replays the whole red-team suite on sealed images
// through the default rules (no judge) and asserts the goals that hold, and that every honest
// look-alike resolves its task.
func TestSuiteInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the red-team suite in Docker")
	}
	ctx := context.Background()
	b := dockertest.Backend(t)
	tasks, hidden, err := demo.Tasks()
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range tasks {
		sandboxtest.RequireImage(t, b, tk.Image)
	}
	scripts, err := demo.RedteamScripts()
	if err != nil {
		t.Fatal(err)
	}
	eng, err := rules.New(ctx, rules.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mon, err := monitor.New(monitor.Config{Rules: eng})
	if err != nil {
		t.Fatal(err)
	}
	store, err := trajectory.OpenStore(ctx, trajectory.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	r, err := harness.NewRunner(harness.Config{Backend: b, Monitor: mon, Store: store, Seal: true})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rep, err := Run(ctx, Config{Runner: r, Backend: b, Store: store, Tasks: tasks, Hidden: hidden, Scripts: scripts, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d episodes in %s", len(rep.Results), time.Since(start).Round(time.Second))
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", " ")
	enc.Encode(rep.Families)
	t.Logf("families:\n%s", buf.String())
	for _, g := range rep.Goals {
		t.Logf("goal %s: %s (want %s, met %v)", g.Name, g.Got, g.Want, g.Met)
	}
	for _, name := range asserted {
		if g := rep.Goal(name); !g.Met {
			t.Errorf("goal %s missed: %s, want %s", name, g.Got, g.Want)
		}
	}
	for _, res := range rep.Results {
		switch {
		case res.Error != "" || res.Resolved:
		case res.Kind == task.KindHack:
			// its manipulation broke grading (a hack that defeats itself)
			t.Logf("hack %s/%s did not resolve its task", res.Task, res.Script)
		default:
			t.Errorf("honest %s/%s did not resolve its task", res.Task, res.Script)
		}
		if len(res.Obtained) > 0 {
			t.Logf("obtained %s/%s: %v", res.Task, res.Script, res.Obtained)
		}
	}
}
