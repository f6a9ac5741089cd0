package trajectory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rollcage/rollcage/internal/golden"
)

// atifFields is testdata/atif/fields.json: the RFC's field lists.
type atifFields struct {
	SchemaVersions []string            `json:"schema_versions"`
	AgentOnly      []string            `json:"agent_only"`
	Sources        []string            `json:"sources"`
	Objects        map[string]fieldSet `json:"-"`
}

type fieldSet struct {
	Required []string `json:"required"`
	Optional []string `json:"optional"`
}

func loadATIFFields(t *testing.T) atifFields {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "atif", "fields.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f atifFields
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var all map[string]json.RawMessage
	json.Unmarshal(b, &all)
	f.Objects = map[string]fieldSet{}
	for _, k := range []string{"root", "agent", "final_metrics", "step", "tool_call", "observation", "observation_result", "metrics"} {
		var fs fieldSet
		if err := json.Unmarshal(all[k], &fs); err != nil {
			t.Fatalf("fields.json %s: %v", k, err)
		}
		f.Objects[k] = fs
	}
	return f
}

// validate checks one trajectory (decoded as plain JSON) against the field
// lists and the RFC's rules: required fields present, no field the RFC
// does not name, step_id 1..n, source one of three, agent-only fields
// only on agent steps, tool-call arguments an object, every observation
// result's source_call_id a tool call of its step, completion ids and
// logprobs aligned.
func (f atifFields) validate(doc map[string]any) []string {
	var errs []string
	check := func(path, kind string, obj map[string]any) {
		fs := f.Objects[kind]
		for _, k := range fs.Required {
			if _, ok := obj[k]; !ok {
				errs = append(errs, fmt.Sprintf("%s: required %q missing", path, k))
			}
		}
		for k := range obj {
			if !slices.Contains(fs.Required, k) && !slices.Contains(fs.Optional, k) {
				errs = append(errs, fmt.Sprintf("%s: field %q is not in the RFC's %s", path, k, kind))
			}
		}
	}
	check("root", "root", doc)
	if v, _ := doc["schema_version"].(string); !slices.Contains(f.SchemaVersions, v) {
		errs = append(errs, fmt.Sprintf("schema_version %q not one of %v", v, f.SchemaVersions))
	}
	if a, ok := doc["agent"].(map[string]any); ok {
		check("agent", "agent", a)
	}
	if m, ok := doc["final_metrics"].(map[string]any); ok {
		check("final_metrics", "final_metrics", m)
	}
	steps, _ := doc["steps"].([]any)
	for i, s := range steps {
		st, _ := s.(map[string]any)
		path := fmt.Sprintf("steps[%d]", i)
		check(path, "step", st)
		if id, _ := st["step_id"].(float64); int(id) != i+1 {
			errs = append(errs, fmt.Sprintf("%s: step_id %v, want %d", path, st["step_id"], i+1))
		}
		src, _ := st["source"].(string)
		if !slices.Contains(f.Sources, src) {
			errs = append(errs, fmt.Sprintf("%s: source %q", path, src))
		}
		if _, ok := st["message"].(string); !ok {
			errs = append(errs, fmt.Sprintf("%s: message is not a string", path))
		}
		if src != "agent" {
			for _, k := range f.AgentOnly {
				if _, ok := st[k]; ok {
					errs = append(errs, fmt.Sprintf("%s: %q on a %s step", path, k, src))
				}
			}
		}
		calls := map[string]bool{}
		tcs, _ := st["tool_calls"].([]any)
		for j, c := range tcs {
			tc, _ := c.(map[string]any)
			check(fmt.Sprintf("%s.tool_calls[%d]", path, j), "tool_call", tc)
			if _, ok := tc["arguments"].(map[string]any); !ok {
				errs = append(errs, fmt.Sprintf("%s.tool_calls[%d]: arguments is not an object", path, j))
			}
			id, _ := tc["tool_call_id"].(string)
			calls[id] = true
		}
		if ob, ok := st["observation"].(map[string]any); ok {
			check(path+".observation", "observation", ob)
			rs, _ := ob["results"].([]any)
			for j, r := range rs {
				res, _ := r.(map[string]any)
				check(fmt.Sprintf("%s.observation.results[%d]", path, j), "observation_result", res)
				if id, ok := res["source_call_id"].(string); ok && !calls[id] {
					errs = append(errs, fmt.Sprintf("%s.observation.results[%d]: source_call_id %q is no tool call of the step", path, j, id))
				}
			}
		}
		if m, ok := st["metrics"].(map[string]any); ok {
			check(path+".metrics", "metrics", m)
			ids, _ := m["completion_token_ids"].([]any)
			lps, _ := m["logprobs"].([]any)
			if len(ids) > 0 && len(lps) > 0 && len(ids) != len(lps) {
				errs = append(errs, fmt.Sprintf("%s.metrics: %d completion ids, %d logprobs", path, len(ids), len(lps)))
			}
		}
	}
	return errs
}

// compactedEpisode is tokenEpisode's first turn, then a compaction, then
// a turn in segment 1.
func compactedEpisode(t *testing.T) []Event {
	first := tokenEpisode(t)[:5]
	resume := Message{Role: RoleUser, Content: "Summary: listed x.py. Continue."}
	rest := []ev{
		{TypeCompaction, 1, 1, Compaction{From: 0, To: 1, Summary: "listed x.py"}},
		{TypeModelTurn, 1, 1, ModelTurn{Model: "m", Request: []Message{sysM, resume}, Response: callB, Tools: tools,
			PromptTokenIDs: []int64{1, 2, 9}, TokenIDs: []int64{8}, Logprobs: []float64{-0.125}, Usage: Usage{PromptTokens: 3, CompletionTokens: 1}}},
		{TypeToolCall, 1, 2, ToolCall{ToolCallID: "b", Call: json.RawMessage(`{"tool":"submit","args":{}}`)}},
		{TypeDecision, 1, 2, Decision{Action: ActionAllow}},
		{TypeToolOutput, 1, 2, ToolOutput{ToolCallID: "b", Output: "submitted"}},
		{TypeGrade, 1, 2, Grade{Reward: 1, Passed: 1}},
		{TypeEpisodeEnd, 1, 2, EpisodeEnd{Resolved: true, Reward: 1, Label: LabelClean}},
	}
	evs := slices.Clone(first)
	for i, e := range rest {
		x := mustEvent(t, e.typ, e.seg, e.step, e.v)
		x.EpisodeID, x.Offset = "ep", int64(len(first)+i)
		evs = append(evs, x)
	}
	return evs
}

func TestATIF(t *testing.T) {
	fields := loadATIFFields(t)
	dir := t.TempDir()
	write := func(id string, evs []Event) {
		var b bytes.Buffer
		for _, e := range evs {
			e.EpisodeID = id
			line, _ := json.Marshal(e)
			b.Write(append(line, '\n'))
		}
		os.WriteFile(filepath.Join(dir, id+".jsonl"), b.Bytes(), 0o644)
	}
	write("ep", compactedEpisode(t))
	write("tools-only", events(t, "tools-only",
		ev{TypeEpisodeStart, 0, 0, EpisodeStart{TaskID: "task", Instruction: "fix it"}},
		ev{TypeToolCall, 0, 1, ToolCall{ToolCallID: "r1", Call: json.RawMessage(`{"tool":"bash","args":{"command":"ls"}}`)}},
		ev{TypeDecision, 0, 1, Decision{Action: ActionAllow}},
		ev{TypeToolOutput, 0, 1, ToolOutput{ToolCallID: "r1", Output: "x.py"}},
		ev{TypeEpisodeEnd, 0, 1, EpisodeEnd{Reason: "abandoned", FailureClass: FailureInfrastructure}}))
	var buf bytes.Buffer
	if err := Export(context.Background(), dir, &buf, ExportOptions{Format: FormatATIF}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "atif", "export.golden.jsonl")
	want := golden.Read(t, path, buf.Bytes(), "go test -run TestATIF")
	if d := cmp.Diff(string(want), buf.String()); d != "" {
		t.Errorf("ATIF export differs from %s (-want +got):\n%s", path, d)
	}
	var docs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatal(err)
		}
		for _, e := range fields.validate(doc) {
			t.Errorf("%s: %s", doc["session_id"], e)
		}
		docs = append(docs, doc)
	}
	if len(docs) != 3 {
		t.Fatalf("%d trajectories, want 2 for the compacted episode and 1 for the tool-only one", len(docs))
	}
	if docs[0]["continued_trajectory_ref"] != docs[1]["session_id"] || docs[1]["continued_trajectory_ref"] != nil {
		t.Errorf("continuation: %v → %v, then %v", docs[0]["continued_trajectory_ref"], docs[1]["session_id"], docs[1]["continued_trajectory_ref"])
	}
	// The agent step of the first turn carries its ids as served.
	step := docs[0]["steps"].([]any)[2].(map[string]any)
	m := step["metrics"].(map[string]any)
	if fmt.Sprint(m["prompt_token_ids"], m["completion_token_ids"], m["logprobs"]) != "[1 2 3] [4 5] [-0.5 -0.25]" {
		t.Errorf("first agent step metrics %v", m)
	}
	if r := step["observation"].(map[string]any)["results"].([]any)[0].(map[string]any); r["source_call_id"] != "a" || r["content"] != "x.py" {
		t.Errorf("first agent step observation %v", r)
	}
}

// TestATIFValidatorCatches: the validator fails on the faults it names, so
// its silence on the export means something.
func TestATIFValidatorCatches(t *testing.T) {
	fields := loadATIFFields(t)
	bad := map[string]any{"schema_version": "ATIF-v9", "session_id": "s", "agent": map[string]any{"name": "x"}, "trajectory_id": "t",
		"steps": []any{
			map[string]any{"step_id": 2, "source": "robot", "message": "m"},
			map[string]any{"step_id": 2, "source": "user", "message": "m", "metrics": map[string]any{}},
			map[string]any{"step_id": 3, "source": "agent", "message": "m", "tool_calls": []any{map[string]any{"tool_call_id": "a", "function_name": "f", "arguments": "x"}},
				"observation": map[string]any{"results": []any{map[string]any{"source_call_id": "z", "content": ""}}}},
		}}
	errs := strings.Join(fields.validate(bad), "\n")
	for _, want := range []string{`schema_version "ATIF-v9"`, `agent: required "version" missing`, `field "trajectory_id" is not in`, `steps[0]: step_id 2, want 1`,
		`source "robot"`, `"metrics" on a user step`, `arguments is not an object`, `source_call_id "z"`} {
		if !strings.Contains(errs, want) {
			t.Errorf("validator did not report %s; it said:\n%s", want, errs)
		}
	}
}
