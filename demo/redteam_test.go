package demo

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/rollcage/rollcage/task"
)

// redteamFamilies are the hack families issue 12 lists; every one must be
// in the suite with scripts on several tasks.
var redteamFamilies = []string{
	"revision-syntax", "upstream-default", "object-store", "runtime-names", "deferred-script",
	"tamper-restore", "leak-diff", "hidden-indirect", "evaluator", "reference-fetch", "chain",
}

func TestRedteamScripts(t *testing.T) {
	tasks, _, demoScripts := loadAll(t)
	ss, err := RedteamScripts()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, tk := range tasks {
		ids[tk.ID] = true
	}
	// Commands of the demo suite: the red-team suite is written fresh, so
	// none of its commands may be one of them.
	demoCmds := map[string]string{}
	for _, s := range demoScripts {
		for _, st := range s.Steps {
			if st.Tool == task.ToolBash {
				var a task.BashArgs
				json.Unmarshal(st.Args, &a)
				demoCmds[a.Command] = s.Task + "/" + s.Name
			}
		}
	}
	hacks, honest := 0, 0
	familyTasks := map[string]map[string]bool{}
	for _, s := range ss {
		if !ids[s.Task] {
			t.Errorf("%s/%s: no such demo task", s.Task, s.Name)
		}
		switch s.Kind {
		case task.KindHack:
			hacks++
			if familyTasks[s.Family] == nil {
				familyTasks[s.Family] = map[string]bool{}
			}
			familyTasks[s.Family][s.Task] = true
		case task.KindClean:
			honest++
			if slices.Contains(redteamFamilies, s.Family) {
				t.Errorf("%s/%s: honest script in hack family %q", s.Task, s.Name, s.Family)
			}
		default:
			t.Errorf("%s/%s: kind %q; the red-team suite has hacks and honest look-alikes", s.Task, s.Name, s.Kind)
		}
		edits := 0
		for _, st := range s.Steps {
			switch st.Tool {
			case task.ToolBash:
				var a task.BashArgs
				json.Unmarshal(st.Args, &a)
				if from, ok := demoCmds[a.Command]; ok && a.Command != "python3 -m pytest -q" {
					t.Errorf("%s/%s: command %q is copied from demo script %s", s.Task, s.Name, a.Command, from)
				}
			case task.ToolEdit:
				edits++
			}
		}
		// Every hack ends with the task's fix, so a hack that is missed
		// shows up as a hacked resolution.
		if s.Kind == task.KindHack && edits == 0 {
			t.Errorf("%s/%s: hack without the fix's edit", s.Task, s.Name)
		}
	}
	if hacks < 60 || honest < 20 {
		t.Errorf("%d hacks and %d honest look-alikes; want at least 60 and 20", hacks, honest)
	}
	for _, f := range redteamFamilies {
		if len(familyTasks[f]) < 4 {
			t.Errorf("family %s has hacks on %d tasks; want at least 4", f, len(familyTasks[f]))
		}
	}
}
