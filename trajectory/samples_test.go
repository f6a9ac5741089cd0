package trajectory

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/parquet-go/parquet-go"
)

// ev is one event of a hand-built episode.
type ev struct {
	typ  string
	seg  int
	step int
	v    any
}

func events(t *testing.T, id string, evs ...ev) []Event {
	t.Helper()
	var out []Event
	for i, e := range evs {
		x := mustEvent(t, e.typ, e.seg, e.step, e.v)
		x.EpisodeID, x.Offset = id, int64(i)
		out = append(out, x)
	}
	return out
}

var (
	sysM  = Message{Role: RoleSystem, Content: "sys"}
	userM = Message{Role: RoleUser, Content: "fix it"}
	callA = Message{Role: RoleAssistant, ToolCalls: []FunctionCall{{ID: "a", Type: "function", Function: Function{Name: "bash", Arguments: `{"command":"ls"}`}}}}
	outA  = Message{Role: RoleTool, ToolCallID: "a", Name: "bash", Content: "x.py"}
	callB = Message{Role: RoleAssistant, ToolCalls: []FunctionCall{{ID: "b", Type: "function", Function: Function{Name: "submit", Arguments: `{}`}}}}
	tools = json.RawMessage(`[{"type":"function","function":{"name":"bash"}}]`)
)

// tokenEpisode: two turns with token ids where the second prompt extends
// the first prompt and completion by the tool output's tokens (6, 7).
func tokenEpisode(t *testing.T) []Event {
	return events(t, "ep",
		ev{TypeEpisodeStart, 0, 0, EpisodeStart{TaskID: "task", Model: "m", Instruction: "fix it"}},
		ev{TypeModelTurn, 0, 0, ModelTurn{Model: "m", Request: []Message{sysM, userM}, Response: callA, Tools: tools, Params: json.RawMessage(`{"temperature":1}`),
			PromptTokenIDs: []int64{1, 2, 3}, TokenIDs: []int64{4, 5}, Logprobs: []float64{-0.5, -0.25},
			TopLogprobs: [][]TopLogprob{{{Token: "a", Logprob: -0.5}}, {{Token: "b", Logprob: -0.25}}}, Usage: Usage{PromptTokens: 3, CompletionTokens: 2}}},
		ev{TypeToolCall, 0, 1, ToolCall{ToolCallID: "a", Call: json.RawMessage(`{"tool":"bash","args":{"command":"ls"}}`)}},
		ev{TypeDecision, 0, 1, Decision{Action: ActionAllow}},
		ev{TypeToolOutput, 0, 1, ToolOutput{ToolCallID: "a", Output: "x.py"}},
		ev{TypeModelTurn, 0, 1, ModelTurn{Model: "m", Request: []Message{sysM, userM, callA, outA}, Response: callB, Tools: tools,
			PromptTokenIDs: []int64{1, 2, 3, 4, 5, 6, 7}, TokenIDs: []int64{8}, Logprobs: []float64{-0.125},
			TopLogprobs: [][]TopLogprob{{{Token: "c", Logprob: -0.125}}}, Usage: Usage{PromptTokens: 7, CompletionTokens: 1}}},
		ev{TypeToolCall, 0, 2, ToolCall{ToolCallID: "b", Call: json.RawMessage(`{"tool":"submit","args":{}}`)}},
		ev{TypeDecision, 0, 2, Decision{Action: ActionAllow}},
		ev{TypeToolOutput, 0, 2, ToolOutput{ToolCallID: "b", Output: "submitted"}},
		ev{TypeGrade, 0, 2, Grade{Reward: 0, Failed: 1}},
		ev{TypeEpisodeEnd, 0, 2, EpisodeEnd{Reward: 0, Label: LabelClean, FailureClass: FailureAgent, Reason: "submit"}},
	)
}

func TestSamplesTokens(t *testing.T) {
	evs := tokenEpisode(t)
	base := Sample{EpisodeID: "ep", TaskID: "task", Label: LabelClean, Tools: tools, Tokens: TokenIDsPresent, TrainingReward: ptr(0.0)}

	chain := base
	chain.SampleID, chain.Kind, chain.Turns = "ep/segment/0/0", KindSegment, 2
	chain.Messages = []Message{sysM, userM, callA, outA, callB}
	chain.MessageMask = []int32{0, 0, 1, 0, 1}
	chain.MessageTokenIDs = [][]int64{nil, nil, {4, 5}, nil, {8}}
	chain.MessageLogprobs = [][]float64{nil, nil, {-0.5, -0.25}, nil, {-0.125}}
	chain.PromptTokenIDs = []int64{1, 2, 3}
	chain.CompletionTokenIDs = []int64{4, 5, 6, 7, 8}
	chain.LossMask = []int32{0, 0, 0, 1, 1, 0, 0, 1}
	chain.Logprobs = []float64{-0.5, -0.25, 0, 0, -0.125}
	chain.TopLogprobs = [][]TopLogprob{{{Token: "a", Logprob: -0.5}}, {{Token: "b", Logprob: -0.25}}, nil, nil, {{Token: "c", Logprob: -0.125}}}

	t0, t1 := base, base
	t0.SampleID, t0.Kind, t0.Turns, t0.Params = "ep/turn/0/0", KindTurn, 1, json.RawMessage(`{"temperature":1}`)
	t0.Messages, t0.MessageMask = []Message{sysM, userM, callA}, []int32{0, 0, 1}
	t0.MessageTokenIDs, t0.MessageLogprobs = [][]int64{nil, nil, {4, 5}}, [][]float64{nil, nil, {-0.5, -0.25}}
	t0.PromptTokenIDs, t0.CompletionTokenIDs, t0.LossMask = []int64{1, 2, 3}, []int64{4, 5}, []int32{0, 0, 0, 1, 1}
	t0.Logprobs, t0.TopLogprobs = []float64{-0.5, -0.25}, [][]TopLogprob{{{Token: "a", Logprob: -0.5}}, {{Token: "b", Logprob: -0.25}}}
	t1.SampleID, t1.Kind, t1.Turn, t1.Turns = "ep/turn/0/1", KindTurn, 1, 1
	t1.Messages, t1.MessageMask = []Message{sysM, userM, callA, outA, callB}, []int32{0, 0, 0, 0, 1}
	t1.MessageTokenIDs, t1.MessageLogprobs = [][]int64{nil, nil, nil, nil, {8}}, [][]float64{nil, nil, nil, nil, {-0.125}}
	t1.PromptTokenIDs, t1.CompletionTokenIDs, t1.LossMask = []int64{1, 2, 3, 4, 5, 6, 7}, []int64{8}, []int32{0, 0, 0, 0, 0, 0, 0, 1}
	t1.Logprobs, t1.TopLogprobs = []float64{-0.125}, [][]TopLogprob{{{Token: "c", Logprob: -0.125}}}

	for _, tc := range []struct {
		granularity string
		want        []Sample
	}{
		{GranularitySegment, []Sample{chain}},
		{GranularityTurn, []Sample{t0, t1}},
	} {
		got, err := SamplesOf(evs, tc.granularity)
		if err != nil {
			t.Fatal(err)
		}
		// A graded, unresolved submission has no failure class, even in a
		// log that still says agent.
		if d := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s samples (-want +got):\n%s", tc.granularity, d)
		}
		for _, s := range got {
			if len(s.LossMask) != len(s.PromptTokenIDs)+len(s.CompletionTokenIDs) || len(s.Logprobs) != len(s.CompletionTokenIDs) {
				t.Errorf("%s: loss_mask %d, ids %d+%d, logprobs %d: not parallel", s.SampleID, len(s.LossMask), len(s.PromptTokenIDs), len(s.CompletionTokenIDs), len(s.Logprobs))
			}
		}
	}
}

// TestSamplesRewrittenHistory: a harness that condenses its history (turn
// 2's prompt drops the first exchange) yields two chains; all four
// recorded turns are exported, none lost.
func TestSamplesRewrittenHistory(t *testing.T) {
	a := func(c string) Message { return Message{Role: RoleAssistant, Content: c} }
	u := func(c string) Message { return Message{Role: RoleUser, Content: c} }
	condensed := u("summary: listed files")
	evs := events(t, "ep",
		ev{TypeModelTurn, 0, 0, ModelTurn{Request: []Message{sysM, u("1")}, Response: a("r1"), PromptTokenIDs: []int64{1, 2}, TokenIDs: []int64{3}}},
		ev{TypeModelTurn, 0, 0, ModelTurn{Request: []Message{sysM, u("1"), a("r1"), u("2")}, Response: a("r2"), PromptTokenIDs: []int64{1, 2, 3, 4}, TokenIDs: []int64{5}}},
		// Condensed: the prompt no longer starts with 1 2 3 4 5.
		ev{TypeModelTurn, 0, 0, ModelTurn{Request: []Message{sysM, condensed}, Response: a("r3"), PromptTokenIDs: []int64{1, 9}, TokenIDs: []int64{6}}},
		ev{TypeModelTurn, 0, 0, ModelTurn{Request: []Message{sysM, condensed, a("r3"), u("3")}, Response: a("r4"), PromptTokenIDs: []int64{1, 9, 6, 7}, TokenIDs: []int64{8}}},
		// A turn whose stream broke is not a sample.
		ev{TypeModelTurn, 0, 0, ModelTurn{Request: []Message{sysM}, Response: a("cut"), Error: "upstream closed the stream"}},
		ev{TypeEpisodeEnd, 0, 0, EpisodeEnd{}},
	)
	segs, err := SamplesOf(evs, GranularitySegment)
	if err != nil {
		t.Fatal(err)
	}
	type shape struct {
		ID          string
		Prompt, Gen []int64
		Mask        []int32
		MsgMask     []int32
	}
	var got []shape
	for _, s := range segs {
		got = append(got, shape{s.SampleID, s.PromptTokenIDs, s.CompletionTokenIDs, s.LossMask, s.MessageMask})
	}
	want := []shape{
		{"ep/segment/0/0", []int64{1, 2}, []int64{3, 4, 5}, []int32{0, 0, 1, 0, 1}, []int32{0, 0, 1, 0, 1}},
		{"ep/segment/0/2", []int64{1, 9}, []int64{6, 7, 8}, []int32{0, 0, 1, 0, 1}, []int32{0, 0, 1, 0, 1}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("chains (-want +got):\n%s", d)
	}
	turns, err := SamplesOf(evs, GranularityTurn)
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 4 {
		t.Errorf("%d turn samples, want the 4 recorded turns that did not fail", len(turns))
	}
}

// TestSamplesAbsentTokens: without ids from the server a sample says so
// and carries text only; nothing is re-tokenized.
func TestSamplesAbsentTokens(t *testing.T) {
	evs := events(t, "ep",
		ev{TypeModelTurn, 0, 0, ModelTurn{Request: []Message{sysM, userM}, Response: callA}},
		ev{TypeModelTurn, 0, 0, ModelTurn{Request: []Message{sysM, userM, callA, outA}, Response: callB, TokenIDs: []int64{8}}},
		ev{TypeEpisodeEnd, 0, 0, EpisodeEnd{}},
	)
	for _, g := range []string{GranularitySegment, GranularityTurn} {
		ss, err := SamplesOf(evs, g)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{GranularitySegment: TokenIDsAbsent + " ", GranularityTurn: TokenIDsAbsent + " " + TokenIDsCompletionOnly + " "}[g]
		var got strings.Builder
		for _, s := range ss {
			got.WriteString(s.Tokens + " ")
			if s.Tokens == TokenIDsAbsent && (len(s.PromptTokenIDs)+len(s.CompletionTokenIDs)+len(s.LossMask)) != 0 {
				t.Errorf("%s: absent tokens but ids %v %v mask %v", s.SampleID, s.PromptTokenIDs, s.CompletionTokenIDs, s.LossMask)
			}
		}
		if got.String() != want {
			t.Errorf("%s: token states %q, want %q", g, got.String(), want)
		}
	}
}

// TestToolTrajectory: an episode driven through /calls or MCP alone
// exports its calls, decisions and outputs as one tool_trajectory sample.
func TestToolTrajectory(t *testing.T) {
	evs := events(t, "ep",
		ev{TypeEpisodeStart, 0, 0, EpisodeStart{TaskID: "task"}},
		ev{TypeToolCall, 0, 1, ToolCall{ToolCallID: "r1", Call: json.RawMessage(`{"tool":"bash","args":{"command":"ls"}}`)}},
		ev{TypeDecision, 0, 1, Decision{Action: ActionAllow}},
		ev{TypeToolOutput, 0, 1, ToolOutput{ToolCallID: "r1", Output: "a.py\n"}},
		ev{TypeToolCall, 0, 2, ToolCall{ToolCallID: "r2", Call: json.RawMessage(`{"tool":"read_file","args":{"path":"/grader/t.py"}}`)}},
		ev{TypeDecision, 0, 2, Decision{Action: ActionBlock, Blocked: true, Dummy: true, Hack: true, Categories: []string{"protected_access"}}},
		ev{TypeToolOutput, 0, 2, ToolOutput{ToolCallID: "r2", Output: "No such file", ExitCode: 1, Dummy: true}},
		ev{TypeGrade, 0, 2, Grade{}},
		ev{TypeEpisodeEnd, 0, 2, EpisodeEnd{Hacked: true, Label: LabelHacked, Reason: "submit"}},
	)
	got, err := Samples(evs)
	if err != nil {
		t.Fatal(err)
	}
	want := []Sample{{SampleID: "ep/tool_trajectory/0/0", Kind: KindToolTrajectory, EpisodeID: "ep", TaskID: "task", Tokens: TokenIDsAbsent,
		Hacked: true, Label: LabelHacked, HackCategories: []string{"protected_access"}, BlockedSteps: []int64{2}, TrainingReward: ptr(0.0),
		ToolSteps: []ToolStep{
			{Step: 1, ToolCallID: "r1", Tool: "bash", Args: `{"command":"ls"}`, Action: ActionAllow, Output: "a.py\n"},
			{Step: 2, ToolCallID: "r2", Tool: "read_file", Args: `{"path":"/grader/t.py"}`, Action: ActionBlock, Blocked: true, Hack: true,
				Categories: []string{"protected_access"}, Output: "No such file", ExitCode: 1, Dummy: true},
		}}}
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("tool trajectory (-want +got):\n%s", d)
	}
}

// instanceEpisode: a SWE-bench instance's episode, graded by test id.
func instanceEpisode(t *testing.T) []Event {
	return events(t, "inst",
		ev{TypeEpisodeStart, 0, 0, EpisodeStart{TaskID: "acme__lib-7", Instance: &Instance{InstanceID: "acme__lib-7", Benchmark: "swe-bench",
			Repo: "acme/lib", BaseCommit: "abc1234", Version: "1.2", EnvironmentSetupCommit: "def5678",
			FailToPass: []string{"t.py::test_new"}, PassToPass: []string{"t.py::test_old"}}}},
		ev{TypeToolCall, 0, 1, ToolCall{ToolCallID: "r1", Call: json.RawMessage(`{"tool":"submit","args":{}}`)}},
		ev{TypeDecision, 0, 1, Decision{Action: ActionAllow}},
		ev{TypeGrade, 0, 1, Grade{Reward: 1, Rule: "tests", Statuses: map[string]string{"t.py::test_new": "PASSED", "t.py::test_old": "PASSED"},
			TestsStatus: json.RawMessage(`{"FAIL_TO_PASS":{"success":["t.py::test_new"],"failure":[]},"PASS_TO_PASS":{"success":["t.py::test_old"],"failure":[]}}`)}},
		ev{TypeEpisodeEnd, 0, 1, EpisodeEnd{Reward: 1, Resolved: true, Label: LabelClean, Reason: "submit"}},
	)
}

// TestInstanceSamples: an instance's samples carry its benchmark fields
// and the grade's tests_status, so they join with the benchmark's tooling.
func TestInstanceSamples(t *testing.T) {
	got, err := Samples(instanceEpisode(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []Sample{{SampleID: "inst/tool_trajectory/0/0", Kind: KindToolTrajectory, EpisodeID: "inst", TaskID: "acme__lib-7", Tokens: TokenIDsAbsent,
		Reward: 1, Resolved: true, Label: LabelClean, TrainingReward: ptr(1.0),
		InstanceID: "acme__lib-7", Benchmark: "swe-bench", Repo: "acme/lib", BaseCommit: "abc1234", Version: "1.2", EnvironmentSetupCommit: "def5678",
		TestsStatus: json.RawMessage(`{"FAIL_TO_PASS":{"success":["t.py::test_new"],"failure":[]},"PASS_TO_PASS":{"success":["t.py::test_old"],"failure":[]}}`),
		ToolSteps:   []ToolStep{{Step: 1, ToolCallID: "r1", Tool: "submit", Args: `{}`, Action: ActionAllow}}}}
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("instance samples (-want +got):\n%s", d)
	}
	trs, err := ATIF(instanceEpisode(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(trs)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"instance":{"instance_id":"acme__lib-7"`) || !strings.Contains(string(b), `"tests_status":{"FAIL_TO_PASS"`) {
		t.Errorf("ATIF extra lacks the instance or its tests_status: %s", b)
	}
}

// TestExportCrashedLogs: logs as crashes leave them export each sample
// once: a torn last line after episode_end, an episode_end written twice
// (nothing after the first counts) and an unfinished episode.
func TestExportCrashedLogs(t *testing.T) {
	dir := t.TempDir()
	write := func(id string, evs []Event, tail string) {
		var b bytes.Buffer
		for _, e := range evs {
			line, _ := json.Marshal(e)
			b.Write(append(line, '\n'))
		}
		b.WriteString(tail)
		if err := os.WriteFile(filepath.Join(dir, id+".jsonl"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	evs := tokenEpisode(t)
	write("ep", evs, `{"offset":11,"episode_id":"ep","type":"outc`)
	twice := events(t, "ep2", ev{TypeModelTurn, 0, 0, ModelTurn{Request: []Message{userM}, Response: callB}},
		ev{TypeEpisodeEnd, 0, 0, EpisodeEnd{Reward: 1, Resolved: true}},
		ev{TypeModelTurn, 0, 0, ModelTurn{Request: []Message{userM}, Response: callA}}, ev{TypeEpisodeEnd, 0, 0, EpisodeEnd{}})
	write("ep2", twice, "")
	write("ep3", evs[:5], "")
	var ids []string
	for range 2 {
		var buf bytes.Buffer
		if err := Export(context.Background(), dir, &buf, ExportOptions{Granularity: GranularityTurn}); err != nil {
			t.Fatal(err)
		}
		ids = nil
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var s Sample
			if err := json.Unmarshal([]byte(line), &s); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, s.SampleID)
			if s.EpisodeID == "ep2" && s.Reward != 1 {
				t.Errorf("ep2 sample has reward %v: the second episode_end was read", s.Reward)
			}
		}
	}
	if d := cmp.Diff([]string{"ep/turn/0/0", "ep/turn/0/1", "ep2/turn/0/0"}, ids); d != "" {
		t.Errorf("exported samples (-want +got):\n%s", d)
	}
}

// TestParquetRoundTrip: token fields, top_logprobs (ids included), tools
// and params as JSON columns, and tool steps survive Parquet.
func TestParquetRoundTrip(t *testing.T) {
	var want []Sample
	for _, g := range []string{GranularityTurn, GranularitySegment} {
		ss, err := SamplesOf(tokenEpisode(t), g)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ss...)
	}
	id := int64(7)
	want[0].TopLogprobs[0][0].ID = &id
	tt, err := Samples(events(t, "tools",
		ev{TypeToolCall, 0, 1, ToolCall{ToolCallID: "r1", Call: json.RawMessage(`{"tool":"bash","args":{"command":"ls"}}`)}},
		ev{TypeDecision, 0, 1, Decision{Action: ActionBlock, Blocked: true, Categories: []string{"x"}}},
		ev{TypeToolOutput, 0, 1, ToolOutput{ToolCallID: "r1", Output: "no", Dummy: true}},
		ev{TypeEpisodeEnd, 0, 1, EpisodeEnd{}}))
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, tt...)
	inst, err := Samples(instanceEpisode(t))
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, inst...)
	var buf bytes.Buffer
	pw := parquet.NewGenericWriter[Sample](&buf)
	if _, err := pw.Write(want); err != nil {
		t.Fatal(err)
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := parquet.Read[Sample](bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range got { // a JSON column reads an absent value back as null
		for _, m := range []*json.RawMessage{&got[i].Tools, &got[i].Params, &got[i].TestsStatus} {
			if string(*m) == "null" {
				*m = nil
			}
		}
	}
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("parquet round trip (-want +got):\n%s", d)
	}
}
