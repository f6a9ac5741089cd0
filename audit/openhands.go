package audit

import (
	"errors"
	"fmt"
	"strconv"

	jsonv2 "github.com/go-json-experiment/json"
	json "github.com/go-json-experiment/json/v1"

	"github.com/rollcage/rollcage/toolcall"
)

// ohEvent is one event of an OpenHands history (output.jsonl): an
// action by the agent, or the observation that answers one (cause is the
// action's id).
type ohEvent struct {
	ID          json.RawMessage `json:"id"` // a number, or a string in some writers
	Source      string          `json:"source"`
	Action      string          `json:"action"`
	Observation string          `json:"observation"`
	Cause       json.RawMessage `json:"cause"`
	Content     string          `json:"content"`
	Args        struct {
		Command  string `json:"command"`
		Path     string `json:"path"`
		FileText string `json:"file_text"`
		OldStr   string `json:"old_str"`
		NewStr   string `json:"new_str"`
		Content  string `json:"content"`
		Code     string `json:"code"`
		URL      string `json:"url"`
	} `json:"args"`
}

// ohID reads an event id written as 12 or "12"; -1 when neither.
func ohID(raw json.RawMessage) int {
	var n int
	if json.Unmarshal(raw, &n) == nil {
		return n
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if n, err := strconv.Atoi(s); err == nil {
			return n
		}
	}
	return -1
}

// ohInstance is the SWE-bench instance OpenHands stores beside the
// history.
type ohInstance struct {
	InstanceID       string `json:"instance_id"`
	Repo             string `json:"repo"`
	BaseCommit       string `json:"base_commit"`
	ProblemStatement string `json:"problem_statement"`
}

// parseOpenHands reads one OpenHands output.jsonl record: {instance_id,
// instruction, instance, history: [events], test_result: {git_patch}}.
// The agent's actions become steps (indexed by event id); messages,
// thoughts and the system prompt are not tool calls and are left out.
func parseOpenHands(base, name string, obj map[string]json.RawMessage) (Trace, error) {
	var events []ohEvent
	// one pass (an error fails the episode: no partial result is kept)
	if err := jsonv2.Unmarshal(obj["history"], &events, elementOpts); err != nil {
		return Trace{}, fmt.Errorf("\"history\" is not a list of OpenHands events: %v", err)
	}
	var rec struct {
		InstanceID  string `json:"instance_id"`
		Instruction string `json:"instruction"`
		TestResult  struct {
			GitPatch string `json:"git_patch"`
			Resolved *bool  `json:"resolved"`
		} `json:"test_result"`
	}
	_ = json.Unmarshal(obj["instance_id"], &rec.InstanceID)
	_ = json.Unmarshal(obj["instruction"], &rec.Instruction)
	if has(obj, "test_result") {
		_ = json.Unmarshal(obj["test_result"], &rec.TestResult)
	}
	var inst ohInstance
	if has(obj, "instance") {
		_ = json.Unmarshal(obj["instance"], &inst)
	}
	id := firstNonEmpty(rec.InstanceID, inst.InstanceID, base)
	ep := Trace{ID: id, Source: name, Format: FormatOpenHands, TaskID: id,
		Patch: rec.TestResult.GitPatch, Resolved: rec.TestResult.Resolved}
	ep.Task = &Task{}
	ep.Task.ID, ep.Task.BaseCommit, ep.Task.UpstreamRepo = id, inst.BaseCommit, inst.Repo
	ep.Task.Instruction = firstNonEmpty(rec.Instruction, inst.ProblemStatement)
	byID := map[int]int{}
	for _, ev := range events {
		if ev.Source != "agent" {
			continue
		}
		if ev.Observation != "" {
			if i, ok := byID[ohID(ev.Cause)]; ok {
				ep.Steps[i].Output = ev.Content
			}
			continue
		}
		c, ok := ohCall(ev)
		if !ok {
			continue
		}
		n := ohID(ev.ID)
		byID[n] = len(ep.Steps)
		st := Step{Index: n}
		st.set(c)
		if ev.Action != "run" {
			st.Original = ev.Action
		}
		ep.Steps = append(ep.Steps, st)
	}
	if len(ep.Steps) == 0 {
		return Trace{}, errors.New("OpenHands history with no agent actions; nothing to audit")
	}
	return ep, nil
}

// ohCall maps an OpenHands action onto rollcage's tool model; ok is
// false for events that run nothing (message, think, system, recall).
func ohCall(ev ohEvent) (toolcall.Prepared, bool) {
	a := ev.Args
	switch ev.Action {
	case "run":
		return bash(a.Command), true
	case "run_ipython":
		return toolcall.Prepared{Call: toolcall.Call{Tool: "ipython", Args: mustJSON(map[string]string{"code": a.Code})}}, true
	case "read":
		return editorCall("view", a.Path, "", "", ""), true
	case "edit":
		if a.Command == "" { // the LLM-based editor: the whole new content
			return call(toolcall.WriteFile, toolcall.WriteFileArgs{Path: a.Path, Content: a.Content}), true
		}
		return editorCall(a.Command, a.Path, a.FileText, a.OldStr, a.NewStr), true
	case "write":
		return call(toolcall.WriteFile, toolcall.WriteFileArgs{Path: a.Path, Content: a.Content}), true
	case "finish":
		return call(toolcall.Submit, toolcall.SubmitArgs{}), true
	case "browse":
		return bash("curl " + shq(a.URL)), true // a fetch, as the rules know fetches
	}
	return toolcall.Prepared{}, false
}
