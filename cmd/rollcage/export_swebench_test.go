package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

// writeEpisode writes an episode log of task id with grade g (nil: none)
// to dir.
func writeEpisode(t *testing.T, dir, episode, id string, attempt int, g *trajectory.Grade) {
	t.Helper()
	var b bytes.Buffer
	for i, ev := range []struct {
		typ     string
		payload any
	}{{trajectory.TypeEpisodeStart, trajectory.EpisodeStart{TaskID: id, Attempt: attempt}}, {trajectory.TypeGrade, g}} {
		if ev.typ == trajectory.TypeGrade && g == nil {
			continue
		}
		e, err := trajectory.NewEvent(episode, 0, 0, ev.typ, ev.payload)
		if err != nil {
			t.Fatal(err)
		}
		e.Offset = int64(i)
		line, _ := json.Marshal(e)
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(filepath.Join(dir, episode+".jsonl"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSWEBenchReport exports graded episodes of the two test instances
// as report.json: resolved only when every expected id passed and the
// grade was not forged; an episode with no grade, of another attempt or of
// a task that is no instance is left out.
func TestSWEBenchReport(t *testing.T) {
	tasks, _, err := task.LoadFile("../../task/testdata/instances/swebench.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	a, b := tasks[0], tasks[1]
	passed := func(tk task.Task, fail ...string) map[string]string {
		st := map[string]string{}
		for _, id := range append(append([]string{}, tk.FailToPass...), tk.PassToPass...) {
			st[id] = string(task.StatusPassed)
		}
		for _, id := range fail {
			st[id] = string(task.StatusFailed)
		}
		return st
	}
	tests := []struct {
		name     string
		grades   map[string]*trajectory.Grade // by instance
		attempt  int
		resolved map[string]bool
		err      string
	}{
		{name: "all passed", grades: map[string]*trajectory.Grade{a.ID: {Reward: 1, Rule: task.RewardTests, Statuses: passed(a)}, b.ID: {Reward: 1, Rule: task.RewardTests, Statuses: passed(b)}},
			resolved: map[string]bool{a.InstanceID: true, b.InstanceID: true}},
		{name: "one FAIL_TO_PASS failed", grades: map[string]*trajectory.Grade{a.ID: {Reward: 0, Rule: task.RewardTests, Statuses: passed(a, a.FailToPass[0])}},
			resolved: map[string]bool{a.InstanceID: false}},
		{name: "forged statuses", grades: map[string]*trajectory.Grade{a.ID: {Reward: 0, Rule: task.RewardTests, Statuses: passed(a), Tampered: true}},
			resolved: map[string]bool{a.InstanceID: false}},
		{name: "no grade", grades: map[string]*trajectory.Grade{a.ID: nil}, resolved: map[string]bool{}},
		{name: "another attempt", grades: map[string]*trajectory.Grade{a.ID: {Reward: 1, Rule: task.RewardTests, Statuses: passed(a)}}, attempt: 1, resolved: map[string]bool{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for id, g := range tc.grades {
				writeEpisode(t, dir, id+".a0.x", id, 0, g)
			}
			writeEpisode(t, dir, "other.a0.x", "other", 0, &trajectory.Grade{Reward: 1})
			var out bytes.Buffer
			n, err := swebenchReport(context.Background(), dir, tasks, tc.attempt, &out)
			if err != nil {
				t.Fatal(err)
			}
			var rep map[string]task.ReportEntry
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for id, e := range rep {
				got[id] = e.Resolved
				if e.TestsStatus == nil || len(e.TestsStatus.FailToPass.Success)+len(e.TestsStatus.FailToPass.Failure) == 0 {
					t.Errorf("%s: tests_status %+v, want the FAIL_TO_PASS ids", id, e.TestsStatus)
				}
			}
			if diff := cmp.Diff(tc.resolved, got); diff != "" || n != len(tc.resolved) {
				t.Errorf("resolved by instance (-want +got), %d entries:\n%s", n, diff)
			}
		})
	}
	t.Run("two episodes of an instance", func(t *testing.T) {
		dir := t.TempDir()
		writeEpisode(t, dir, a.ID+".a0.x", a.ID, 0, &trajectory.Grade{Reward: 1, Rule: task.RewardTests, Statuses: passed(a)})
		writeEpisode(t, dir, a.ID+".a0.y", a.ID, 0, &trajectory.Grade{Reward: 1, Rule: task.RewardTests, Statuses: passed(a)})
		_, err := swebenchReport(context.Background(), dir, tasks, 0, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "two graded episodes of attempt 0") {
			t.Errorf("error %v, want two graded episodes", err)
		}
	})
}
