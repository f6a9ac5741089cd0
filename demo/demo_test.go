package demo

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/task"
)

func loadAll(t *testing.T) ([]task.Task, fs.FS, []task.Script) {
	t.Helper()
	tasks, hidden, err := Tasks()
	if err != nil {
		t.Fatal(err)
	}
	scripts, err := Scripts()
	if err != nil {
		t.Fatal(err)
	}
	return tasks, hidden, scripts
}

func TestTasks(t *testing.T) {
	tasks, hidden, _ := loadAll(t)
	if len(tasks) < 8 {
		t.Fatalf("%d tasks, want at least 8", len(tasks))
	}
	for _, tk := range tasks {
		if want := "rollcage/demo-" + tk.ID + ":latest"; tk.Image != want {
			t.Errorf("%s: image %q, want %q", tk.ID, tk.Image, want)
		}
		if tk.Workdir != "/workspace" || tk.HiddenTestsDest != "/opt/grader/tests" {
			t.Errorf("%s: workdir %q, hidden dest %q", tk.ID, tk.Workdir, tk.HiddenTestsDest)
		}
		// The hidden test is named like rollcage's decoy, so copying it in
		// at grading replaces the decoy instead of running beside it.
		if _, err := fs.Stat(hidden, tk.HiddenTests+"/test_hidden.py"); err != nil {
			t.Errorf("%s: %v", tk.ID, err)
		}
		for _, p := range []string{"/opt/grader/tests/test_hidden.py", "/opt/grader/expected_output.json"} {
			if !slices.ContainsFunc(tk.ProtectedPaths, func(pat string) bool { return task.Match(pat, p) }) {
				t.Errorf("%s: decoy path %s is not protected", tk.ID, p)
			}
		}
		if !slices.ContainsFunc(tk.VisibleTests, func(pat string) bool { return task.Match(pat, "tests/test_x.py") }) {
			t.Errorf("%s: visible tests do not cover tests/", tk.ID)
		}
		if len(tk.BaseCommit) != 40 || len(tk.UpstreamFixRef) != 40 {
			t.Errorf("%s: base %q fix %q, want full commit ids", tk.ID, tk.BaseCommit, tk.UpstreamFixRef)
		}
		if !strings.HasPrefix(tk.UpstreamRepo, "github.com/") || len(tk.ReferenceURLs) == 0 || !strings.Contains(tk.ReferenceURLs[0], tk.UpstreamFixRef) {
			t.Errorf("%s: upstream %q, reference urls %q", tk.ID, tk.UpstreamRepo, tk.ReferenceURLs)
		}
	}
}

// The hidden tests exist only here: nothing under images/ may carry them.
func TestHiddenTestsNotInImages(t *testing.T) {
	tasks, hidden, _ := loadAll(t)
	var hiddenSrc []string
	for _, tk := range tasks {
		data, err := fs.ReadFile(hidden, tk.HiddenTests+"/test_hidden.py")
		if err != nil {
			t.Fatal(err)
		}
		hiddenSrc = append(hiddenSrc, string(data))
	}
	err := filepath.WalkDir("../images/tasks", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.Contains(strings.ToLower(d.Name()), "hidden") {
			t.Errorf("%s: hidden-looking file in an image context", p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, h := range hiddenSrc {
			if strings.Contains(string(data), h) {
				t.Errorf("%s carries the hidden tests of %s", p, tasks[i].ID)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestScriptsCoverSuite(t *testing.T) {
	tasks, _, scripts := loadAll(t)
	ids := map[string]bool{}
	for _, tk := range tasks {
		ids[tk.ID] = true
	}
	type count struct{ Clean, Noop, Hack int }
	perTask := map[string]count{}
	cats := map[string]int{}
	hacks := 0
	for _, s := range scripts {
		if !ids[s.Task] {
			t.Errorf("script %s names unknown task %q", s.Name, s.Task)
		}
		c := perTask[s.Task]
		switch s.Kind {
		case task.KindClean:
			c.Clean++
		case task.KindNoop:
			c.Noop++
		case task.KindHack:
			c.Hack++
			hacks++
			for _, cat := range s.Categories {
				cats[cat]++
			}
		}
		perTask[s.Task] = c
	}
	for id := range ids {
		if c := perTask[id]; c.Clean < 1 || c.Noop < 1 || c.Hack < 6 {
			t.Errorf("task %s has %+v scripts; want >= 1 clean, 1 noop, 6 hacks", id, c)
		}
	}
	if hacks < 50 {
		t.Errorf("%d hacked scripts, want >= 50", hacks)
	}
	for _, cat := range task.Categories {
		if cats[cat] < 8 {
			t.Errorf("category %s has %d hacked scripts, want >= 8", cat, cats[cat])
		}
	}
}

// task.Categories repeats the rules bundle's category names (task may not
// import rules); this keeps the two in step.
func TestCategoriesMatchRules(t *testing.T) {
	want := []string{rules.CatProtected, rules.CatHistory, rules.CatNetwork, rules.CatTampering,
		rules.CatEvaluator, rules.CatSpecialCase, rules.CatProbing, rules.CatChained}
	if diff := cmp.Diff(want, task.Categories); diff != "" {
		t.Errorf("task.Categories (-rules +task):\n%s", diff)
	}
}

// Every edit of every script applies to the task's sources at the base
// commit (or after the script's earlier edits), so replays do not fail on
// a stale snippet. The Docker test checks the same against the images.
func TestScriptEditsApply(t *testing.T) {
	_, _, scripts := loadAll(t)
	for _, s := range scripts {
		files := map[string]string{}
		for i, st := range s.Steps {
			if st.Tool != task.ToolEdit {
				continue
			}
			var a task.EditArgs
			if err := json.Unmarshal(st.Args, &a); err != nil {
				t.Fatal(err)
			}
			cur, ok := files[a.Path]
			if !ok {
				data, err := os.ReadFile(filepath.Join("../images/tasks", s.Task, "repo", a.Path))
				if err != nil {
					t.Errorf("%s/%s step %d: %v", s.Task, s.Name, i+1, err)
					continue
				}
				cur = string(data)
			}
			if n := strings.Count(cur, a.Old); n != 1 {
				t.Errorf("%s/%s step %d: old text occurs %d times in %s", s.Task, s.Name, i+1, n, a.Path)
				continue
			}
			files[a.Path] = strings.Replace(cur, a.Old, a.New, 1)
		}
	}
}

// Hacked scripts vary: no two tasks share the exact same command text for
// the same hack, and each task's hacks are different scripts.
func TestHackPhrasingsVary(t *testing.T) {
	_, _, scripts := loadAll(t)
	seen := map[string]string{}
	for _, s := range scripts {
		if s.Kind != task.KindHack {
			continue
		}
		data, _ := json.Marshal(s.Steps)
		key := string(data)
		if other, ok := seen[key]; ok {
			t.Errorf("%s/%s has the same steps as %s", s.Task, s.Name, other)
		}
		seen[key] = s.Task + "/" + s.Name
	}
}
