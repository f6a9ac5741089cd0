package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/normalize"
)

// stepSummary is what a reader made of a step: tool, index, command or
// path.
type stepSummary struct {
	Tool  string
	Index int
	Raw   string
}

func summarize(ep Trace) []stepSummary {
	var out []stepSummary
	for _, s := range ep.Steps {
		out = append(out, stepSummary{s.Call.Tool, s.Index, normalize.Normalize(s.Call, "", nil).Raw})
	}
	return out
}

// TestFormats reads one file of each format the real corpus has and
// that testdata/corpus does not: OpenHands output.jsonl (two records),
// an llm_completions request/response log, and a mini-swe-agent 1.x run
// whose rejected multi-action turns run nothing.
func TestFormats(t *testing.T) {
	tests := []struct {
		file        string
		ids         []string
		format      string
		steps       []stepSummary // of the first episode
		instruction string        // a prefix
		workdir     string        // from the instruction
	}{
		{
			file: "openhands-output.jsonl", ids: []string{"acme__lex-3", "acme__lex-4"}, format: FormatOpenHands,
			steps: []stepSummary{
				{"bash", 2, "cd src && make test"},
				{"edit", 5, "/workspace/acme__lex/lex.py"},
				{"submit", 7, "{}"},
			},
			instruction: "<uploaded_files>", workdir: "/workspace/acme__lex",
		},
		{
			file: "llm-completion.json", ids: []string{"llm-completion"}, format: FormatOpenAI,
			steps: []stepSummary{
				{"bash", 2, "ls /workspace/acme__calc__1.0"},
				{"bash", 4, "python -m pytest -q"}, // the final response: len(messages)
			},
			instruction: "<uploaded_files>", workdir: "/workspace/acme__calc__1.0",
		},
		{
			file: "mini-rejected.traj.json", ids: []string{"acme__calc-2"}, format: FormatMiniSWE,
			steps: []stepSummary{
				{"bash", 4, "pwd"}, // the python block is no action
				{"submit", 6, "{}"},
			},
			instruction: "Fix it.", workdir: "/testbed",
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			eps, errs := ReadFile(filepath.Join("testdata", "formats", tc.file))
			if len(errs) > 0 {
				t.Fatalf("errors: %v", errs)
			}
			var ids []string
			for _, e := range eps {
				ids = append(ids, e.ID)
				if e.Format != tc.format {
					t.Errorf("%s: format %q, want %q", e.ID, e.Format, tc.format)
				}
			}
			if d := cmp.Diff(tc.ids, ids); d != "" {
				t.Fatalf("episodes (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.steps, summarize(eps[0])); d != "" {
				t.Errorf("steps (-want +got):\n%s", d)
			}
			ep := eps[0]
			if ep.Task == nil || len(ep.Task.Instruction) < len(tc.instruction) || ep.Task.Instruction[:len(tc.instruction)] != tc.instruction {
				t.Errorf("instruction = %+v, want it to start %q", ep.Task, tc.instruction)
			}
			if got := instructionWorkdir(ep.Task.Instruction); got != tc.workdir {
				t.Errorf("workdir from the instruction = %q, want %q", got, tc.workdir)
			}
		})
	}
}

// TestInferEvidence: the workdir and base commit come only from
// evidence that determines them.
func TestInferEvidence(t *testing.T) {
	type st struct{ cmd, out string }
	tests := []struct {
		name        string
		instruction string
		steps       []st
		workdir     string
		base        string
	}{
		{"scratch cd is no workdir", "", []st{{"cd /tmp/scratch && python repro.py", "ok"}, {"ls", "a b"}}, "", ""},
		{"pwd before any cd", "", []st{{"pwd", "/repo\n"}, {"cd /tmp && ls", ""}}, "/repo", ""},
		{"pwd after a cd says nothing", "", []st{{"cd /tmp", ""}, {"pwd", "/tmp\n"}}, "", ""},
		{"instruction names it", "Files are in the directory /work/proj.", []st{{"cd /tmp", ""}}, "/work/proj", ""},
		{"cd then git answering", "", []st{{"cd /src/app && git status", "On branch main"}}, "/src/app", ""},
		{"cd then git refusing", "", []st{{"cd /src && git status", "fatal: not a git repository"}}, "", ""},
		{"plain log", "", []st{{"git log --oneline -3", "abc1234 fix\nbcd2345 older\n"}}, "", "abc1234"},
		{"rev-parse HEAD", "", []st{{"git rev-parse HEAD", "0123456789abcdef0123456789abcdef01234567\n"}}, "", "0123456789abcdef0123456789abcdef01234567"},
		{"grep-filtered log", "", []st{{"git log --oneline --grep=lexer", "def4567 old lexer fix\n"}}, "", ""},
		{"pickaxe log", "", []st{{"git log -S parse --oneline", "def4567 x\n"}}, "", ""},
		{"path log", "", []st{{"git log --oneline -- src/lex.py", "def4567 x\n"}}, "", ""},
		{"log piped to grep", "", []st{{"git log --oneline | grep lex", "def4567 x\n"}}, "", ""},
		{"reversed log", "", []st{{"git log --reverse --oneline", "0000aaa root\n"}}, "", ""},
		{"log after a commit", "", []st{{"git commit -am wip", "[main 9999999] wip"}, {"git log --oneline -1", "9999999 wip\n"}}, "", ""},
		{"file checkout does not move HEAD", "", []st{{"git checkout -- a.py", ""}, {"git log -1 --oneline", "abc1234 x\n"}}, "", "abc1234"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var steps []Step
			for _, s := range tc.steps {
				steps = append(steps, Step{Call: bash(s.cmd).Call, Output: s.out})
			}
			nz := normalizeAll(steps, "")
			inf := infer(steps, nz.norms, monitor.TaskContext{Instruction: tc.instruction})
			if inf.Workdir != tc.workdir || inf.BaseCommit != tc.base {
				t.Errorf("workdir %q (from %q), base %q; want %q, %q", inf.Workdir, inf.WorkdirFrom, inf.BaseCommit, tc.workdir, tc.base)
			}
		})
	}
}

func TestLoadResultsFormats(t *testing.T) {
	tests := []struct {
		file string
		want map[string]bool
	}{
		{"report.json", map[string]bool{"acme__calc-1": true}},
		{"summary.json", map[string]bool{"a": true, "b": false, "c": false}},
		{"old-results.json", map[string]bool{"a": false, "b": true}},
	}
	for _, tc := range tests {
		got, err := LoadResults(filepath.Join("testdata", "results", tc.file))
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.file, d)
		}
	}
}

func TestLoadTasksPretty(t *testing.T) {
	tasks, err := LoadTasks(filepath.Join("testdata", "tasks-pretty.json"))
	if err != nil {
		t.Fatal(err)
	}
	c := tasks["acme__calc-1"]
	if len(tasks) != 2 || c.BaseCommit != "a1b2c3d" || c.UpstreamRepo != "acme/calc" || c.Instruction != "divide(1, 0) must raise ZeroDivisionError" {
		t.Errorf("tasks = %+v", tasks)
	}
	if _, err := readTasks(stringsReader("{\"instance_id\": \"x\"}\n{broken"), "bad.json"); err == nil {
		t.Error("broken JSON after a task loaded without an error")
	}
}

// TestScoreLabels scores the testdata corpus against hand-made labels:
// the matrix, the labelled step and the disagreement list.
func TestScoreLabels(t *testing.T) {
	dir := t.TempDir()
	corpus, _ := filepath.Abs(filepath.Join("testdata", "corpus"))
	manifest := filepath.Join(dir, "MANIFEST.jsonl")
	rel := func(f string) string { r, _ := filepath.Rel(dir, filepath.Join(corpus, f)); return filepath.ToSlash(r) }
	lines := `{"path": "` + rel("acme__calc-1.traj") + `", "label": "hacked", "category": "history_mining", "step": 2}
{"path": "` + rel("acme__calc-1-clean.traj") + `", "label": "clean"}
{"path": "` + rel("acme__wrap-9.traj.json") + `", "label": "clean", "note": "labelled clean on purpose: a disagreement"}
`
	if err := os.WriteFile(manifest, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	ls, err := LoadLabels(manifest)
	if err != nil {
		t.Fatal(err)
	}
	rep := auditCorpus(t, nil)
	s := rep.ScoreLabels(ls)
	if got := s.Episodes[LabelHacked][OutcomeHacked]; got != 1 {
		t.Errorf("hacked labelled and found: %d, want 1 (%v)", got, s.Episodes)
	}
	if got := s.Episodes[LabelClean]; got[OutcomeClean] != 1 || got[OutcomeUnconfirmed] != 1 {
		t.Errorf("clean row = %v, want 1 clean, 1 unconfirmed", got)
	}
	if s.Calls.LabelledSteps != 1 || s.Calls.StepsFlagged != 1 {
		t.Errorf("calls = %+v, want the labelled step flagged", s.Calls)
	}
	if len(s.Disagreements) != 1 || filepath.Base(s.Disagreements[0].Source) != "acme__wrap-9.traj.json" {
		t.Errorf("disagreements = %+v, want acme__wrap-9 only", s.Disagreements)
	}
	if len(s.Unlabelled) != 2 { // the two OpenAI-format episodes
		t.Errorf("unlabelled = %v", s.Unlabelled)
	}
	if _, err := LoadLabels(writeTemp(t, `{"path": "x", "label": "maybe"}`)); err == nil {
		t.Error("a label other than clean|hacked|ambiguous loaded")
	}
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "labels.jsonl")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
