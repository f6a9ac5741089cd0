package demo

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/task"
)

// TestHarborTask: the suite's Harbor dataset (harbor/) loads as Harbor
// tasks, each built FROM local images, with its verifier's tests the
// demo task's hidden tests, and its scripts (harbor/scripts/<id>/) play
// a clean solve, a no-op and hacks of each.
func TestHarborTask(t *testing.T) {
	tasks, _, err := task.LoadHarbor("harbor")
	if err != nil {
		t.Fatal(err)
	}
	scripts, err := task.LoadScripts(os.DirFS(filepath.Join("harbor", "scripts")), ".")
	if err != nil {
		t.Fatal(err)
	}
	demoTasks, hidden, _ := loadAll(t)
	from := map[string]string{"wrap-width": "textwrap"} // the demo task each Harbor task is made of
	if len(tasks) != len(from) {
		t.Fatalf("%d Harbor tasks, want %d", len(tasks), len(from))
	}
	for _, tk := range tasks {
		t.Run(tk.ID, func(t *testing.T) {
			src := from[tk.ID]
			i := slices.IndexFunc(demoTasks, func(d task.Task) bool { return d.ID == src })
			if i < 0 {
				t.Fatalf("no demo task %q for %s", src, tk.ID)
			}
			dt := demoTasks[i]
			if tk.BuildContext == "" || !strings.HasPrefix(tk.Image, "rollcage-harbor/"+tk.ID+":") || tk.Workdir != dt.Workdir ||
				tk.SolutionDir == "" || tk.RewardFile != task.HarborRewardFile || tk.Limits == nil || tk.Limits.VerifierTimeoutSec == 0 {
				t.Errorf("loads as %+v; want built from environment/ into %s, with a solution, a reward file and limits", tk, dt.Workdir)
			}
			docker, err := os.ReadFile(filepath.Join("harbor", tk.BuildContext, "Dockerfile"))
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(string(docker), "\n") {
				if f := strings.Fields(line); len(f) > 1 && f[0] == "FROM" && !strings.HasPrefix(f[1], "rollcage/") {
					t.Errorf("Dockerfile: %q is not FROM a local rollcage image (nothing is pulled)", line)
				}
			}
			// The verifier's tests are the demo task's hidden tests.
			want, err := fs.ReadFile(hidden, path.Join(dt.HiddenTests, "test_hidden.py"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join("harbor", tk.HiddenTests, "test_outputs.py"))
			if err != nil || string(got) != string(want) {
				t.Errorf("%s/test_outputs.py differs from %s's hidden tests (%v)", tk.HiddenTests, src, err)
			}
			kinds := map[string]int{}
			for _, s := range scripts {
				if s.Task == tk.ID {
					kinds[s.Kind]++
				}
			}
			if kinds[task.KindClean] == 0 || kinds[task.KindNoop] == 0 || kinds[task.KindHack] == 0 {
				t.Errorf("scripts by kind %v; want a clean solve, a no-op and hacks", kinds)
			}
		})
	}
	for _, s := range scripts {
		if _, ok := from[s.Task]; !ok {
			t.Errorf("script %s/%s is for no Harbor task of the suite", s.Task, s.Name)
		}
	}
}
