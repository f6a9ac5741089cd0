package trajectory

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// auxEpisode is tokenEpisode with three auxiliary calls between its two
// turns, each through the same proxy: one the client marked, one without
// the episode's tools, one with its own system prompt.
func auxEpisode(t *testing.T) []Event {
	evs := tokenEpisode(t)
	title := ModelTurn{Model: "m", Request: []Message{{Role: RoleSystem, Content: "Name the task in 5 words."}, userM},
		Response: Message{Role: RoleAssistant, Content: "Fix the wrap"}, Tools: tools, Auxiliary: "title",
		PromptTokenIDs: []int64{90, 91}, TokenIDs: []int64{92}}
	noTools := ModelTurn{Model: "m", Request: []Message{sysM, userM}, Response: Message{Role: RoleAssistant, Content: "ok"},
		PromptTokenIDs: []int64{1, 2, 3}, TokenIDs: []int64{93}}
	summary := ModelTurn{Model: "m", Request: []Message{{Role: RoleSystem, Content: "Summarize."}, userM, callA, outA},
		Response: Message{Role: RoleAssistant, Content: "listed files"}, Tools: tools,
		PromptTokenIDs: []int64{80, 81}, TokenIDs: []int64{94}}
	var aux []Event
	for _, mt := range []ModelTurn{title, noTools, summary} {
		aux = append(aux, mustEvent(t, TypeModelTurn, 0, 1, mt))
	}
	// After turn 0's tool output (offset 4), before turn 1.
	out := append(append(append([]Event(nil), evs[:5]...), aux...), evs[5:]...)
	for i := range out {
		out[i].EpisodeID, out[i].Offset = "ep", int64(i)
	}
	return out
}

// TestSamplesAuxiliary: auxiliary calls are recorded but are not samples
// of the episode unless asked; they do not break the episode's chain;
// asked for, each is a sample of its own that says why it is auxiliary.
func TestSamplesAuxiliary(t *testing.T) {
	evs := auxEpisode(t)
	type got struct {
		ID        string `json:"sample_id"`
		Turns     int    `json:"turns"`
		Auxiliary string `json:"auxiliary"`
		Tokens    string `json:"tokens"`
		Prompt    []int  `json:"prompt_token_ids"`
		Comp      []int  `json:"completion_token_ids"`
	}
	main := got{ID: "ep/segment/0/0", Turns: 2, Tokens: TokenIDsPresent, Prompt: []int{1, 2, 3}, Comp: []int{4, 5, 6, 7, 8}}
	tests := []struct {
		name string
		opts ExportOptions
		want []got
		left int
	}{
		{"default", ExportOptions{}, []got{main}, 3},
		{"turns", ExportOptions{Granularity: GranularityTurn}, []got{
			{ID: "ep/turn/0/0", Turns: 1, Tokens: TokenIDsPresent, Prompt: []int{1, 2, 3}, Comp: []int{4, 5}},
			{ID: "ep/turn/0/4", Turns: 1, Tokens: TokenIDsPresent, Prompt: []int{1, 2, 3, 4, 5, 6, 7}, Comp: []int{8}},
		}, 3},
		{"asked", ExportOptions{Auxiliary: true}, []got{
			main,
			{ID: "ep/segment/0/1", Turns: 1, Auxiliary: AuxClient, Tokens: TokenIDsPresent, Prompt: []int{90, 91}, Comp: []int{92}},
			{ID: "ep/segment/0/2", Turns: 1, Auxiliary: AuxNoTools, Tokens: TokenIDsPresent, Prompt: []int{1, 2, 3}, Comp: []int{93}},
			{ID: "ep/segment/0/3", Turns: 1, Auxiliary: AuxSystemPrompt, Tokens: TokenIDsPresent, Prompt: []int{80, 81}, Comp: []int{94}},
		}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			left := map[string]int{}
			tc.opts.LeftOut = func(id string, n int) { left[id] += n }
			var buf bytes.Buffer
			x, err := NewExporter(&buf, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := x.Episode(evs); err != nil {
				t.Fatal(err)
			}
			var samples []got
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				var s got
				if err := json.Unmarshal([]byte(line), &s); err != nil {
					t.Fatal(err)
				}
				samples = append(samples, s)
			}
			if d := cmp.Diff(tc.want, samples); d != "" {
				t.Errorf("samples (-want +got):\n%s", d)
			}
			if left["ep"] != tc.left {
				t.Errorf("LeftOut told %v, want %d auxiliary turns of ep", left, tc.left)
			}
		})
	}
	// ATIF: the episode's own chain alone, or the auxiliary ones after it.
	for _, tc := range []struct {
		aux  bool
		want []string
	}{{false, []string{""}}, {true, []string{"", AuxClient, AuxNoTools, AuxSystemPrompt}}} {
		ts, _, err := atifOf(evs, ExportOptions{Auxiliary: tc.aux})
		if err != nil {
			t.Fatal(err)
		}
		var reasons []string
		for _, tr := range ts {
			r, _ := tr.Extra["auxiliary"].(string)
			reasons = append(reasons, r)
		}
		if d := cmp.Diff(tc.want, reasons); d != "" {
			t.Errorf("ATIF auxiliary %v: trajectories' extra.auxiliary (-want +got):\n%s", tc.aux, d)
		}
	}
}

// TestMarkAuxiliary: which turns are auxiliary, by the client's mark, a
// missing tools list or another system prompt.
func TestMarkAuxiliary(t *testing.T) {
	turn := func(sys string, withTools bool, mark string) turnRec {
		mt := ModelTurn{Request: []Message{{Role: RoleUser, Content: "hi"}}, Auxiliary: mark}
		if sys != "" {
			mt.Request = append([]Message{{Role: RoleSystem, Content: sys}}, mt.Request...)
		}
		if withTools {
			mt.Tools = tools
		}
		return turnRec{mt: mt}
	}
	// compaction is the harness's summary request after t: t's
	// conversation and answer, then the ask, without tools.
	// then is the turn after t in t's conversation: its messages and
	// answer, then a user message.
	then := func(t turnRec, withTools bool) turnRec {
		mt := ModelTurn{Request: append(slices.Clone(t.mt.Request), t.mt.Response, Message{Role: RoleUser, Content: "go on"})}
		if withTools {
			mt.Tools = tools
		}
		return turnRec{mt: mt}
	}
	compaction := func(t turnRec) turnRec { return then(t, false) }
	plan := turn("a", false, "")
	plan.mt.Response = Message{Role: RoleAssistant, Content: "First read wrap.py, then test."}
	tests := []struct {
		name  string
		turns []turnRec
		want  []string
	}{
		{"one conversation", []turnRec{turn("a", true, ""), turn("a", true, "")}, []string{"", ""}},
		{"no tools anywhere", []turnRec{turn("a", false, ""), turn("a", false, "")}, []string{"", ""}},
		{"no tools first", []turnRec{turn("q", false, ""), turn("a", true, ""), turn("a", true, "")}, []string{AuxNoTools, "", ""}},
		{"empty tools list", []turnRec{{mt: ModelTurn{Tools: json.RawMessage(" [] ")}}, turn("a", true, "")}, []string{AuxNoTools, ""}},
		{"other system prompt", []turnRec{turn("a", true, ""), turn("b", true, ""), turn("", true, "")}, []string{"", AuxSystemPrompt, AuxSystemPrompt}},
		{"marked first", []turnRec{turn("t", false, "title"), turn("a", false, ""), turn("a", false, "")}, []string{AuxClient, "", ""}},
		{"marked, same prompt", []turnRec{turn("a", true, ""), turn("a", true, "summary")}, []string{"", AuxClient}},
		{"compaction: continues without tools", []turnRec{turn("a", true, ""), compaction(turn("a", true, "")), turn("a", true, "")}, []string{"", "", ""}},
		{"planning call the tool loop continues", []turnRec{plan, then(plan, true), turn("q", false, "")}, []string{"", "", AuxNoTools}},
		{"marked, continued: still the client's", []turnRec{turn("a", true, "title"), then(turn("a", true, "title"), true)}, []string{AuxClient, ""}},
		{"an aside does not continue", []turnRec{turn("a", true, ""), turn("q", false, ""), compaction(turn("q", false, ""))}, []string{"", AuxNoTools, AuxNoTools}},
	}
	for _, tc := range tests {
		markAuxiliary(tc.turns)
		var got []string
		for _, tr := range tc.turns {
			got = append(got, tr.aux)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}
}
