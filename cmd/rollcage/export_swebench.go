package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

// formatSWEBenchReport is export's --format for SWE-bench's report.json.
const formatSWEBenchReport = "swebench-report"

// swebenchReport writes SWE-bench's report.json ({instance id: entry})
// for the graded episodes in the store dir of attempt whose task in tasks
// is a benchmark instance graded by test id. The ids come from the task
// (FAIL_TO_PASS, PASS_TO_PASS), the statuses from the grade event;
// resolved is rollcage's verdict, so also false when the probes or the
// integrity watch showed the statuses forged. An instance with two graded
// episodes of attempt is an error, as report.json has one entry each.
func swebenchReport(ctx context.Context, dir string, tasks []task.Task, attempt int, w io.Writer) (int, error) {
	byID := map[string]task.Task{}
	for _, t := range tasks {
		if t.InstanceID != "" && t.TestPatch != "" {
			byID[t.ID] = t
		}
	}
	if len(byID) == 0 {
		return 0, errors.New("--tasks holds no benchmark instance graded by test id (instance_id and test_patch); report.json is for those")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return 0, err
	}
	slices.Sort(files)
	report := map[string]task.ReportEntry{}
	from := map[string]string{} // instance id → episode id
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		start, g, err := readGraded(f)
		if err != nil {
			return 0, err
		}
		t, ok := byID[start.TaskID]
		if !ok || g == nil || start.Attempt != attempt {
			continue
		}
		ep := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		if prev, dup := from[t.InstanceID]; dup {
			return 0, fmt.Errorf("instance %s has two graded episodes of attempt %d (%s, %s); report.json has one entry per instance", t.InstanceID, attempt, prev, ep)
		}
		from[t.InstanceID] = ep
		run := task.ReportRun{Ran: g.Error == "" && g.Rule == task.RewardTests && len(g.Statuses) > 0, Statuses: map[string]task.Status{}}
		for id, s := range g.Statuses {
			run.Statuses[id] = task.Status(s)
		}
		for id, e := range task.SWEBenchReport(t.InstanceID, t.FailToPass, t.PassToPass, run) {
			e.Resolved = e.Resolved && g.Reward >= 1
			report[id] = e
		}
	}
	b, err := task.MarshalSWEBenchReport(report)
	if err != nil {
		return 0, err
	}
	_, err = w.Write(b)
	return len(report), err
}

// readGraded reads an episode log's start and its grade (nil: none).
func readGraded(file string) (trajectory.EpisodeStart, *trajectory.Grade, error) {
	var start trajectory.EpisodeStart
	var g *trajectory.Grade
	f, err := os.Open(file)
	if err != nil {
		return start, nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for n := 1; sc.Scan(); n++ {
		var ev trajectory.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return start, nil, fmt.Errorf("%s:%d: %w", file, n, err)
		}
		switch ev.Type {
		case trajectory.TypeEpisodeStart:
			err = ev.Decode(&start)
		case trajectory.TypeGrade:
			g = new(trajectory.Grade)
			err = ev.Decode(g)
		}
		if err != nil {
			return start, nil, fmt.Errorf("%s:%d: %w", file, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return start, nil, fmt.Errorf("%s: %w", file, err)
	}
	return start, g, nil
}
