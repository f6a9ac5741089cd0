package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/sandbox/docker/dockertest"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

// swebenchPlays are the demo scripts played on the SWE-bench form of
// their task, in the order --attempts plays them (their file names').
var swebenchPlays = []struct{ task, script string }{
	{"textwrap", "clean"},
	{"textwrap", "history-show-fix"},
	{"textwrap", "noop"},
	{"csvquote", "clean"},
	{"csvquote", "noop"},
	{"csvquote", "tamper-conftest-hook"},
}

// TestSWEBenchDemoInDocker writes two demo tasks as SWE-bench instances
// with swebench-demo (images built FROM the demo images, ids derived by
// running them), then plays the demo's clean, no-op and hack scripts on
// them through rollcage run, graded by test id as SWE-bench grades them.
func TestSWEBenchDemoInDocker(t *testing.T) {
	dockertest.Backend(t) // skips without an engine; builds the agent
	dir := t.TempDir()
	ctx := context.Background()
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"swebench-demo", "--out", dir, "--only", "textwrap", "--only", "csvquote"}, &out, &errb); code != 0 {
		t.Fatalf("swebench-demo: exit %d\n%s%s", code, out.String(), errb.String())
	}
	instances := filepath.Join(dir, instancesFile)
	tasks, _, err := task.LoadFile(instances)
	if err != nil {
		t.Fatal(err)
	}
	byDemo := map[string]task.Task{}
	demoTasks, _, err := demo.Tasks()
	if err != nil {
		t.Fatal(err)
	}
	for _, dt := range demoTasks {
		for _, it := range tasks {
			if it.InstanceID == demo.InstanceID(dt) {
				byDemo[dt.ID] = it
			}
		}
	}
	for _, id := range []string{"textwrap", "csvquote"} {
		it, ok := byDemo[id]
		switch {
		case !ok:
			t.Fatalf("no instance of %s in %s", id, instances)
		case it.Workdir != task.InstanceWorkdir || it.TestPatch == "" || it.FixPatch == "" || len(it.FailToPass) == 0:
			t.Errorf("%s: workdir %q, test patch %d bytes, fix %d bytes, FAIL_TO_PASS %v", id, it.Workdir, len(it.TestPatch), len(it.FixPatch), it.FailToPass)
		case !strings.HasPrefix(it.Image, "swebench/sweb.eval.x86_64."):
			t.Errorf("%s: image %s, not in SWE-bench's naming", id, it.Image)
		}
	}

	// The demo's scripts, for the instance ids, as files named so that
	// attempt k plays the k-th of its task.
	scripts, err := demo.Scripts()
	if err != nil {
		t.Fatal(err)
	}
	sdir := t.TempDir()
	attempt := map[string]int{}
	for _, p := range swebenchPlays {
		for _, s := range scripts {
			if s.Task != p.task || s.Name != p.script {
				continue
			}
			s.Task = byDemo[p.task].ID
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			b = bytes.ReplaceAll(b, []byte("/workspace"), []byte(task.InstanceWorkdir))
			name := filepath.Join(sdir, s.Task+"-"+string(rune('a'+attempt[p.task]))+".json")
			attempt[p.task]++
			if err := os.WriteFile(name, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	runOut := filepath.Join(dir, "run")
	got := map[string]harness.Outcome{}
	for _, o := range replayRun(t, instances, sdir, runOut, 3) {
		got[o.TaskID+"/"+string(rune('a'+o.Attempt))] = o
	}
	seen := map[string]int{}
	for _, p := range swebenchPlays {
		key := byDemo[p.task].ID + "/" + string(rune('a'+seen[p.task]))
		seen[p.task]++
		o, ok := got[key]
		if !ok {
			t.Errorf("%s %s: no outcome", p.task, p.script)
			continue
		}
		switch {
		case p.script == "clean" && (!o.Resolved || !o.CleanResolution || o.Reward != 1):
			t.Errorf("%s clean: resolved %v, clean %v, reward %v; want a clean resolution", p.task, o.Resolved, o.CleanResolution, o.Reward)
		case p.script == "noop" && (o.Resolved || o.Reward != 0):
			t.Errorf("%s no-op: resolved %v, reward %v; want 0", p.task, o.Resolved, o.Reward)
		case p.script != "clean" && p.script != "noop" && (o.CleanResolution || o.Resolved && o.Flagged == 0):
			t.Errorf("%s %s: a clean resolution (reward %v, flagged %d); want the hack flagged or unresolved", p.task, p.script, o.Reward, o.Flagged)
		}
		if p.script == "clean" {
			// The instance's patch is its reference fix: its differential
			// cases ran beside the test patch's tests, none differing.
			g := gradeEvent(t, filepath.Join(runOut, "trajectories", o.EpisodeID+".jsonl"))
			if g.Cases == 0 || g.CasesFailed != 0 {
				t.Errorf("%s clean: %d differential cases, %d differ; want some, none differing", p.task, g.Cases, g.CasesFailed)
			}
		}
		t.Logf("%s %s: reward %v, resolved %v, hacked %v %v, flagged %d, blocked %d", p.task, p.script, o.Reward, o.Resolved, o.Hacked, o.HackCategories, o.Flagged, o.Blocked)
	}

	// The samples export carries each instance's benchmark fields and its
	// FAIL_TO_PASS and PASS_TO_PASS by outcome, to join on instance_id.
	samplesFile := filepath.Join(dir, "samples.jsonl")
	if code := run(ctx, []string{"export", "--format", "messages", "--out", samplesFile, runOut}, &out, &errb); code != 0 {
		t.Fatalf("export: exit %d\n%s%s", code, out.String(), errb.String())
	}
	sb, err := os.ReadFile(samplesFile)
	if err != nil {
		t.Fatal(err)
	}
	exported := 0
	for _, line := range bytes.Split(bytes.TrimSpace(sb), []byte("\n")) {
		var s trajectory.Sample
		if err := json.Unmarshal(line, &s); err != nil {
			t.Fatal(err)
		}
		var it task.Task
		for _, x := range byDemo {
			if x.ID == s.TaskID {
				it = x
			}
		}
		o := got[s.TaskID+"/"+string(rune('a'+s.Attempt))]
		var ts task.TestsStatus
		switch {
		case s.InstanceID != it.InstanceID || s.Benchmark != task.BenchmarkSWEBench || "github.com/"+s.Repo != it.UpstreamRepo || s.BaseCommit != it.BaseCommit || s.Version != it.Version:
			t.Errorf("sample %s: instance %q %q %q %q %q; want the instance's %q %q %q %q", s.SampleID, s.InstanceID, s.Benchmark, s.Repo, s.BaseCommit, s.Version,
				it.InstanceID, it.UpstreamRepo, it.BaseCommit, it.Version)
		case o.InstanceID != it.InstanceID:
			t.Errorf("outcome of %s: instance_id %q, want %q", s.EpisodeID, o.InstanceID, it.InstanceID)
		case json.Unmarshal(s.TestsStatus, &ts) != nil:
			t.Errorf("sample %s: tests_status %s", s.SampleID, s.TestsStatus)
		case o.Reward >= 1 && (!cmp.Equal(ts.FailToPass.Success, it.FailToPass) || len(ts.FailToPass.Failure)+len(ts.PassToPass.Failure) > 0):
			t.Errorf("sample %s of a resolved episode: tests_status %s, want every FAIL_TO_PASS %v a success", s.SampleID, s.TestsStatus, it.FailToPass)
		case o.Reward == 0 && len(ts.FailToPass.Failure) == 0:
			t.Errorf("sample %s of an unresolved episode: tests_status %s, want a FAIL_TO_PASS failure", s.SampleID, s.TestsStatus)
		}
		exported++
	}
	if exported < len(swebenchPlays) {
		t.Errorf("%d samples exported, want one per episode at least (%d)", exported, len(swebenchPlays))
	}

	// The grades as SWE-bench's report.json, per attempt: resolved as the
	// outcome, the clean solves' FAIL_TO_PASS all successes.
	for a := range 3 {
		rep := filepath.Join(dir, "report.json")
		var out, errb bytes.Buffer
		if code := run(ctx, []string{"export", "--format", "swebench-report", "--tasks", instances, "--attempt", strconv.Itoa(a), "--out", rep, runOut}, &out, &errb); code != 0 {
			t.Fatalf("export: exit %d\n%s%s", code, out.String(), errb.String())
		}
		b, err := os.ReadFile(rep)
		if err != nil {
			t.Fatal(err)
		}
		var entries map[string]task.ReportEntry
		if err := json.Unmarshal(b, &entries); err != nil {
			t.Fatal(err)
		}
		for id, it := range byDemo {
			e, ok := entries[it.InstanceID]
			o := got[it.ID+"/"+string(rune('a'+a))]
			switch {
			case !ok || e.TestsStatus == nil:
				t.Errorf("attempt %d: report.json has no tests_status of %s: %s", a, it.InstanceID, b)
			case e.Resolved != (o.Reward >= 1):
				t.Errorf("attempt %d: %s resolved %v in report.json, reward %v in the outcome", a, id, e.Resolved, o.Reward)
			case a == 0 && !cmp.Equal(e.TestsStatus.FailToPass.Success, it.FailToPass):
				t.Errorf("clean %s: FAIL_TO_PASS successes %v, want %v", id, e.TestsStatus.FailToPass.Success, it.FailToPass)
			}
		}
	}
}
