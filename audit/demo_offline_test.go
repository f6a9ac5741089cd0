package audit

import (
	"context"
	"testing"

	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/harness/harnesstest"
)

// TestDemoScriptsFlaggedOffline replays the demo's scripted episodes
// through the rules alone (no sandbox, no outputs): every hack script is
// flagged on some step, and no honest script (solve or no-op) is hacked
// or unconfirmed.
func TestDemoScriptsFlaggedOffline(t *testing.T) {
	eps, tasks := demoEpisodes(t, func(string) bool { return true })
	kind := map[string]string{}
	scripts, err := demo.Scripts()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range scripts {
		kind[s.Task+"/"+s.Name] = s.Kind
	}
	a, err := New(Config{Rules: harnesstest.Rules(t), Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := a.Audit(context.Background(), eps, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range rep.Episodes {
		flagged := flaggedSteps(e) > 0
		switch kind[e.ID] {
		case "clean", "noop":
			if e.Outcome != OutcomeClean {
				t.Errorf("%s (%s): outcome %s, want clean", e.ID, kind[e.ID], e.Outcome)
			}
		default:
			if !flagged {
				t.Errorf("%s (%s): no step flagged", e.ID, kind[e.ID])
			}
		}
	}
}
