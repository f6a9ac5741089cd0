package task

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheckHarborDir(t *testing.T) {
	tasks, fsys, problems := CheckHarborDir("testdata/harbor")
	var got []string
	for _, p := range problems {
		got = append(got, p.Error())
	}
	want := []string{
		"testdata/harbor/needs-net/task.toml:5: invalid TOML: expected '.' or ']' to end table name, but got '\\n' instead",
		"testdata/harbor/needs-net/tests/test.sh:2: installs tools over the network (apt-get update), which the verifier has not: install them in environment/Dockerfile and drop the line",
		"testdata/harbor/needs-net/tests/test.sh:3: installs tools over the network (curl -LsSf https://astral.sh/uv/0.9.7/install.sh | sh), which the verifier has not: install them in environment/Dockerfile and drop the line",
		"testdata/harbor/needs-net/tests/test.sh:5: installs tools over the network (uvx), which the verifier has not: install them in environment/Dockerfile and drop the line",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if len(tasks) != 1 {
		t.Fatalf("tasks: %d, want csv-sum alone", len(tasks))
	}
	tk := tasks[0]
	if !strings.HasPrefix(tk.Image, "rollcage-harbor/csv-sum:") || len(tk.Image) != len("rollcage-harbor/csv-sum:")+12 {
		t.Errorf("image %q, want rollcage-harbor/csv-sum:<12 hex digits>", tk.Image)
	}
	tk.Image = ""
	wantTask := Task{
		ID: "csv-sum", InstanceID: "rollcage/csv-sum", Benchmark: BenchmarkHarbor,
		Instruction: "Write `/app/total.py`: it reads `/app/data.csv` (columns `name,amount`) and\nprints the sum of the `amount` column, as an integer, on one line.\n",
		Workdir:     "/app", HiddenTests: "csv-sum/tests", HiddenTestsDest: "/tests",
		TestCommand: "bash /tests/test.sh", RewardFile: "/logs/verifier/reward.txt", Grade: GradeSnapshot,
		BuildContext: "csv-sum/environment", SolutionDir: "csv-sum/solution",
		Limits: &Limits{AgentTimeoutSec: 300, VerifierTimeoutSec: 60, BuildTimeoutSec: 300, CPUs: 1, MemoryMB: 1024, StorageMB: 2048},
		Seal:   new(bool),
	}
	if diff := cmp.Diff(wantTask, tk); diff != "" {
		t.Errorf("task (-want +got):\n%s", diff)
	}
	if err := tk.Validate(); err == nil {
		t.Error("a task without an image validates")
	}
	// The paths are relative to the returned file system.
	if _, err := fsys.Open("csv-sum/tests/test.sh"); err != nil {
		t.Errorf("tests not under the returned FS: %v", err)
	}
}

// TestHarborOneTask: a task directory itself, its image tag following its
// environment's content.
func TestHarborOneTask(t *testing.T) {
	tasks, _, err := LoadHarbor("testdata/harbor/csv-sum")
	if err != nil {
		t.Fatal(err)
	}
	if tasks[0].ID != "rollcage__csv-sum" || tasks[0].HiddenTests != "tests" || tasks[0].BuildContext != "environment" {
		t.Errorf("task %+v", tasks[0])
	}
	all, _, _ := CheckHarborDir("testdata/harbor")
	if tag := func(s string) string { return s[strings.LastIndex(s, ":"):] }; tag(tasks[0].Image) != tag(all[0].Image) {
		t.Errorf("same environment, different tags: %s, %s", tasks[0].Image, all[0].Image)
	}
	dir := t.TempDir()
	if _, _, err := LoadHarbor(dir); err == nil || !strings.Contains(err.Error(), "neither a Harbor task directory (task.toml) nor a dataset of them") {
		t.Errorf("empty dir: error %v", err)
	}
	for d, want := range map[string]bool{"harbor": true, "harbor/csv-sum": true, "instances": false, "harbor/csv-sum/tests": false} {
		if got := IsHarborDir(os.DirFS("testdata"), d); got != want {
			t.Errorf("IsHarborDir(%s) = %v, want %v", d, got, want)
		}
	}
}

func TestParseReward(t *testing.T) {
	tests := []struct {
		name, data string
		want       float64
		err        string
	}{
		{"reward.txt", "1\n", 1, ""},
		{"reward.txt", " 0.25 ", 0.25, ""},
		{"reward.json", `{"reward": 0.5, "partial": 1}`, 0.5, ""},
		{"reward.json", `{"score": 1}`, 1, ""},
		{"reward.txt", "yes", 0, `reward reward.txt: "yes" is not a number`},
		{"reward.txt", "2", 0, "reward reward.txt: 2 is outside [0, 1]"},
		{"reward.json", `{"a": 1, "b": 0}`, 0, `reward reward.json: no "reward" among 2 values`},
		{"reward.json", `[1]`, 0, "reward reward.json: want a JSON object of numbers: "},
	}
	for _, tc := range tests {
		got, err := ParseReward(tc.name, []byte(tc.data))
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("ParseReward(%s, %q): error %v, want %q", tc.name, tc.data, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseReward(%s, %q) = %g, %v; want %g", tc.name, tc.data, got, err, tc.want)
		}
	}
}

// rewardDir makes the reward file's directory afresh: root's, writable by
// the verifier, with every reward file it could leave empty.
func TestRewardDir(t *testing.T) {
	tests := []struct {
		file string
		want []string
	}{
		{"/logs/verifier/reward.txt", []string{"logs/ 755", "logs/verifier/ 777", "logs/verifier/reward.txt 666", "logs/verifier/reward.json 666"}},
		{"/logs/verifier/reward.json", []string{"logs/ 755", "logs/verifier/ 777", "logs/verifier/reward.json 666", "logs/verifier/reward.txt 666"}},
		{"/out/score", []string{"out/ 777", "out/score 666", "out/reward.txt 666", "out/reward.json 666"}},
	}
	for _, tc := range tests {
		var got []string
		for _, f := range rewardDir(tc.file) {
			if f.uid != 0 || len(f.data) != 0 {
				t.Errorf("%s: %s: uid %d, %d bytes; want root's and empty", tc.file, f.name, f.uid, len(f.data))
			}
			got = append(got, fmt.Sprintf("%s %o", f.name, f.mode))
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("rewardDir(%q) (-want +got):\n%s", tc.file, diff)
		}
	}
}
