package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/task"
)

// Task is what the audit knows of a task: rollcage's task fields plus the
// upstream fix as a diff, when known. A tasks file may also use
// SWE-bench's names (instance_id, repo, patch).
type Task struct {
	task.Task
	// Patch is the upstream fix as a unified diff.
	Patch string `json:"patch,omitempty"`
}

// taskJSON accepts rollcage's and SWE-bench's field names alike.
type taskJSON struct {
	task.Task
	InstanceID    string `json:"instance_id"`
	TaskID        string `json:"task_id"`
	Repo          string `json:"repo"`
	Patch         string `json:"patch"`
	UpstreamPatch string `json:"upstream_patch"`
	FixPatch      string `json:"fix_patch"`
	// ProblemStatement is SWE-bench's instruction.
	ProblemStatement string `json:"problem_statement"`
	// SWE-bench's expected ids: a list, or (Hugging Face exports) a JSON
	// string holding one. They shadow Task's fail_to_pass, which JSON
	// would otherwise match without regard to case.
	FailToPass idList `json:"FAIL_TO_PASS"`
	PassToPass idList `json:"PASS_TO_PASS"`
}

// idList is a list of test ids, or a JSON string holding one.
type idList []string

func (l *idList) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		if s == "" {
			*l = nil
			return nil
		}
		b = []byte(s)
	}
	var ids []string
	if err := json.Unmarshal(b, &ids); err != nil {
		return fmt.Errorf("not a list of test ids: %w", err)
	}
	*l = ids
	return nil
}

func (tj taskJSON) task() Task {
	t := Task{Task: tj.Task}
	t.ID = firstNonEmpty(t.ID, tj.InstanceID, tj.TaskID)
	t.UpstreamRepo = firstNonEmpty(t.UpstreamRepo, tj.Repo)
	t.Patch = firstNonEmpty(tj.UpstreamPatch, tj.FixPatch, tj.Patch)
	t.Instruction = firstNonEmpty(t.Instruction, tj.ProblemStatement)
	if len(t.FailToPass) == 0 {
		t.FailToPass = tj.FailToPass
	}
	if len(t.PassToPass) == 0 {
		t.PassToPass = tj.PassToPass
	}
	return t
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// LoadTasks reads task context from a JSONL file (one task per line, '#'
// comments allowed) or a JSON array, in rollcage's task format or
// SWE-bench's instance format, keyed by task id.
func LoadTasks(path string) (map[string]Task, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("audit: load tasks: %w", err)
	}
	defer f.Close()
	return readTasks(f, path)
}

func readTasks(r io.Reader, name string) (map[string]Task, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("audit: load tasks %s: %w", name, err)
	}
	// '#' comment lines out; blank lines are nothing to JSON
	var clean bytes.Buffer
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			clean.WriteByte('\n') // keeps line numbers
			continue
		}
		clean.Write(line)
	}
	out := map[string]Task{}
	add := func(tj taskJSON, where string) error {
		t := tj.task()
		if t.ID == "" {
			return fmt.Errorf("audit: load tasks %s: %s: no id; give each task an \"id\" or \"instance_id\"", name, where)
		}
		out[t.ID] = t
		return nil
	}
	// A stream of JSON values: one task per line (JSONL), pretty-printed
	// objects one after another (SWE-bench instance files), or arrays of
	// them.
	dec := json.NewDecoder(bytes.NewReader(clean.Bytes()))
	for n := 1; ; n++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		where := fmt.Sprintf("line %d", lineAt(clean.Bytes(), dec.InputOffset()))
		if err != nil {
			return nil, fmt.Errorf("audit: load tasks %s: %s: %w; give task JSON objects (one per line, or pretty-printed) or an array of them", name, where, err)
		}
		var list []taskJSON
		if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '[' {
			if err := json.Unmarshal(raw, &list); err != nil {
				return nil, fmt.Errorf("audit: load tasks %s: %s: %w; give an array of task objects", name, where, err)
			}
		} else {
			var tj taskJSON
			if err := json.Unmarshal(raw, &tj); err != nil {
				return nil, fmt.Errorf("audit: load tasks %s: %s: %w; give one task JSON object per line", name, where, err)
			}
			list = []taskJSON{tj}
		}
		for i, tj := range list {
			w := where
			if len(list) > 1 {
				w = fmt.Sprintf("%s item %d", where, i)
			}
			if err := add(tj, w); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// lineAt is the 1-based line of byte offset off (the end of a value).
func lineAt(data []byte, off int64) int {
	off = min(off, int64(len(data)))
	return 1 + bytes.Count(bytes.TrimRight(data[:off], " \t\r\n"), []byte("\n"))
}

// context is the rules' view of the task: only what is known, nothing
// made up. Empty lists stay empty.
func (t Task) context() monitor.TaskContext {
	return monitor.TaskContext{
		ID: t.ID, Instruction: t.Instruction, Workdir: t.Workdir,
		ProtectedPaths: nonNil(t.ProtectedPaths), VisibleTests: nonNil(t.VisibleTests),
		BaseCommit: t.BaseCommit, UpstreamFixRef: t.UpstreamFixRef, UpstreamRepo: t.UpstreamRepo,
		ReferenceURLs: nonNil(t.ReferenceURLs), AllowedHosts: nonNil(t.AllowedHosts),
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// LoadResults reads which episodes were resolved, for data that does not
// say so itself. It takes SWE-bench's evaluation summaries
// ({"resolved_ids": [...], "unresolved_ids": [...]}, or the older
// {"resolved": [...], "applied": [...]}), SWE-bench's per-instance
// report.json ({"<instance_id>": {"resolved": true, ...}}), and JSONL
// of {"id"|"instance_id", "resolved"}. Keys are episode ids or task ids.
func LoadResults(path string) (map[string]bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit: load results: %w", err)
	}
	out := map[string]bool{}
	var whole map[string]json.RawMessage
	if json.Unmarshal(data, &whole) == nil {
		if ok := readSummary(whole, out); ok {
			return out, nil
		}
		if ok := readInstanceReports(whole, out); ok {
			return out, nil
		}
	}
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var r struct {
			ID         string `json:"id"`
			InstanceID string `json:"instance_id"`
			Resolved   *bool  `json:"resolved"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Resolved == nil || firstNonEmpty(r.ID, r.InstanceID) == "" {
			return nil, fmt.Errorf("audit: load results %s:%d: want a SWE-bench summary (resolved_ids), a SWE-bench report.json ({instance_id: {resolved: ...}}), or one {\"id\": ..., \"resolved\": true|false} per line", path, n+1)
		}
		out[firstNonEmpty(r.ID, r.InstanceID)] = *r.Resolved
	}
	return out, nil
}

// readSummary reads an evaluation summary: lists of instance ids by
// outcome. Ids that were evaluated but are not in a resolved list are
// unresolved.
func readSummary(obj map[string]json.RawMessage, out map[string]bool) bool {
	ids := func(k string) ([]string, bool) {
		var l []string
		if v, ok := obj[k]; ok && json.Unmarshal(v, &l) == nil {
			return l, true
		}
		return nil, false
	}
	resolved, ok1 := ids("resolved_ids")
	if !ok1 {
		resolved, ok1 = ids("resolved")
	}
	if !ok1 {
		return false
	}
	for _, k := range []string{"unresolved_ids", "completed_ids", "submitted_ids", "error_ids", "applied", "generated", "no_apply", "test_errored", "test_timeout"} {
		l, _ := ids(k)
		for _, id := range l {
			out[id] = false
		}
	}
	for _, id := range resolved {
		out[id] = true
	}
	return true
}

// readInstanceReports reads SWE-bench's report.json: instance id to its
// evaluation, whose "resolved" says it.
func readInstanceReports(obj map[string]json.RawMessage, out map[string]bool) bool {
	found := false
	for id, v := range obj {
		var r struct {
			Resolved *bool `json:"resolved"`
		}
		if json.Unmarshal(v, &r) != nil || r.Resolved == nil {
			continue
		}
		out[id] = *r.Resolved
		found = true
	}
	return found
}
