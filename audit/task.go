package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
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
}

func (tj taskJSON) task() Task {
	t := Task{Task: tj.Task}
	t.ID = firstNonEmpty(t.ID, tj.InstanceID, tj.TaskID)
	t.UpstreamRepo = firstNonEmpty(t.UpstreamRepo, tj.Repo)
	t.Patch = firstNonEmpty(tj.UpstreamPatch, tj.FixPatch, tj.Patch)
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
	out := map[string]Task{}
	add := func(tj taskJSON, where string) error {
		t := tj.task()
		if t.ID == "" {
			return fmt.Errorf("audit: load tasks %s: %s: no id; give each task an \"id\" or \"instance_id\"", name, where)
		}
		out[t.ID] = t
		return nil
	}
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '[' {
		var list []taskJSON
		if err := json.Unmarshal(trimmed, &list); err != nil {
			return nil, fmt.Errorf("audit: load tasks %s: %w; give a JSON array of tasks or one task per line", name, err)
		}
		for i, tj := range list {
			if err := add(tj, fmt.Sprintf("item %d", i)); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var tj taskJSON
		if err := json.Unmarshal([]byte(line), &tj); err != nil {
			return nil, fmt.Errorf("audit: load tasks %s:%d: %w; give one task JSON object per line", name, n, err)
		}
		if err := add(tj, fmt.Sprintf("line %d", n)); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("audit: load tasks %s: %w", name, err)
	}
	return out, nil
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
// say so itself: a SWE-bench report ({"resolved_ids": [...],
// "unresolved_ids": [...]}) or JSONL of {"id"|"instance_id", "resolved"}.
// Keys are episode ids or task ids.
func LoadResults(path string) (map[string]bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit: load results: %w", err)
	}
	out := map[string]bool{}
	var rep struct {
		Resolved   []string `json:"resolved_ids"`
		Unresolved []string `json:"unresolved_ids"`
	}
	if json.Unmarshal(data, &rep) == nil && (rep.Resolved != nil || rep.Unresolved != nil) {
		for _, id := range rep.Unresolved {
			out[id] = false
		}
		for _, id := range rep.Resolved {
			out[id] = true
		}
		return out, nil
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
			return nil, fmt.Errorf("audit: load results %s:%d: want a SWE-bench report with resolved_ids, or one {\"id\": ..., \"resolved\": true|false} per line", path, n+1)
		}
		out[firstNonEmpty(r.ID, r.InstanceID)] = *r.Resolved
	}
	return out, nil
}
