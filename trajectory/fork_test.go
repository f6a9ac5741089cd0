package trajectory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// forkedEpisode is tokenEpisode as a fork's child that branched after
// step 1: turn 0 and call 1 are the parent's (copied at the fork), turn 1
// and the submit are the child's own.
func forkedEpisode(t *testing.T) []Event {
	evs := tokenEpisode(t)
	start := mustEvent(t, TypeEpisodeStart, 0, 0, EpisodeStart{TaskID: "task", Model: "m", Instruction: "fix it",
		Fork: &ForkOrigin{ParentEpisodeID: "ep", BranchStep: 1, PrefixEvents: 4, PrefixTurns: 1}})
	evs[0].Data = start.Data
	for i := range evs {
		evs[i].EpisodeID = "kid"
	}
	return evs
}

// TestSamplesForked: a forked episode's samples name the parent and the
// branch step; with PrefixMask the parent's turn is in the chain with
// loss and message mask 0 on it, with PrefixOnce it is left out and the
// child's chain starts at its own turn, whose prompt holds the prefix
// (prefix_turns says how many turns).
func TestSamplesForked(t *testing.T) {
	evs := forkedEpisode(t)
	base := Sample{EpisodeID: "kid", TaskID: "task", Label: LabelClean, Tools: tools, Tokens: TokenIDsPresent, TrainingReward: ptr(0.0),
		ParentEpisodeID: "ep", BranchStep: ptr(int64(1)), ForkGroupID: "ep.b1"}

	masked := base
	masked.SampleID, masked.Kind, masked.Turns, masked.PrefixTurns = "kid/segment/0/0", KindSegment, 2, 1
	masked.Messages = []Message{sysM, userM, callA, outA, callB}
	masked.MessageMask = []int32{0, 0, 0, 0, 1}
	masked.MessageTokenIDs = [][]int64{nil, nil, nil, nil, {8}}
	masked.MessageLogprobs = [][]float64{nil, nil, nil, nil, {-0.125}}
	masked.PromptTokenIDs = []int64{1, 2, 3}
	masked.CompletionTokenIDs = []int64{4, 5, 6, 7, 8}
	masked.LossMask = []int32{0, 0, 0, 0, 0, 0, 0, 1}
	masked.Logprobs = []float64{-0.5, -0.25, 0, 0, -0.125}
	masked.TopLogprobs = [][]TopLogprob{{{Token: "a", Logprob: -0.5}}, {{Token: "b", Logprob: -0.25}}, nil, nil, {{Token: "c", Logprob: -0.125}}}

	t0 := base
	t0.SampleID, t0.Kind, t0.Turns, t0.PrefixTurns, t0.Params = "kid/turn/0/0", KindTurn, 1, 1, json.RawMessage(`{"temperature":1}`)
	t0.Messages, t0.MessageMask = []Message{sysM, userM, callA}, []int32{0, 0, 0}
	t0.MessageTokenIDs, t0.MessageLogprobs = [][]int64{nil, nil, nil}, [][]float64{nil, nil, nil}
	t0.PromptTokenIDs, t0.CompletionTokenIDs, t0.LossMask = []int64{1, 2, 3}, []int64{4, 5}, []int32{0, 0, 0, 0, 0}
	t0.Logprobs, t0.TopLogprobs = []float64{-0.5, -0.25}, [][]TopLogprob{{{Token: "a", Logprob: -0.5}}, {{Token: "b", Logprob: -0.25}}}

	// The child's own turn, alone: the same as a chain of it (PrefixOnce)
	// and as its turn sample.
	own := base
	own.Turn, own.Turns = 1, 1
	own.Messages, own.MessageMask = []Message{sysM, userM, callA, outA, callB}, []int32{0, 0, 0, 0, 1}
	own.MessageTokenIDs, own.MessageLogprobs = [][]int64{nil, nil, nil, nil, {8}}, [][]float64{nil, nil, nil, nil, {-0.125}}
	own.PromptTokenIDs, own.CompletionTokenIDs, own.LossMask = []int64{1, 2, 3, 4, 5, 6, 7}, []int64{8}, []int32{0, 0, 0, 0, 0, 0, 0, 1}
	own.Logprobs, own.TopLogprobs = []float64{-0.125}, [][]TopLogprob{{{Token: "c", Logprob: -0.125}}}
	ownChain, ownTurn := own, own
	ownChain.SampleID, ownChain.Kind = "kid/segment/0/1", KindSegment
	ownTurn.SampleID, ownTurn.Kind = "kid/turn/0/1", KindTurn
	// With PrefixOnce the child's first sample says how many of the
	// parent's turns its prompt holds.
	onceChain, onceTurn := ownChain, ownTurn
	onceChain.PrefixTurns, onceTurn.PrefixTurns = 1, 1

	for _, tc := range []struct {
		granularity, prefix string
		want                []Sample
	}{
		{GranularitySegment, PrefixMask, []Sample{masked}},
		{GranularityTurn, PrefixMask, []Sample{t0, ownTurn}},
		{GranularitySegment, PrefixOnce, []Sample{onceChain}},
		{GranularityTurn, PrefixOnce, []Sample{onceTurn}},
	} {
		got, _, err := samplesOf(evs, ExportOptions{Granularity: tc.granularity, Prefix: tc.prefix})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s, prefix %s: samples (-want +got):\n%s", tc.granularity, tc.prefix, d)
		}
	}
}

// TestExportForkedToolTrajectory: an episode driven without the model
// proxy exports its calls; the parent's are marked prefix, or left out
// with PrefixOnce. ATIF carries the parent and branch in its extra.
func TestExportForkedToolTrajectory(t *testing.T) {
	evs := forkedEpisode(t)
	var calls []Event
	for _, ev := range evs {
		if ev.Type != TypeModelTurn {
			calls = append(calls, ev)
		}
	}
	start := mustEvent(t, TypeEpisodeStart, 0, 0, EpisodeStart{TaskID: "task",
		Fork: &ForkOrigin{ParentEpisodeID: "ep", BranchStep: 1, PrefixEvents: 3}})
	calls[0].Data = start.Data
	for i := range calls {
		calls[i].Offset = int64(i)
	}
	dir := t.TempDir()
	var log bytes.Buffer
	for _, ev := range calls {
		b, _ := json.Marshal(ev)
		log.Write(append(b, '\n'))
	}
	if err := os.WriteFile(filepath.Join(dir, "kid.jsonl"), log.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		prefix string
		steps  []int64
		marked []bool
	}{
		{PrefixMask, []int64{1, 2}, []bool{true, false}},
		{PrefixOnce, []int64{2}, []bool{false}},
	} {
		var buf bytes.Buffer
		if err := Export(context.Background(), dir, &buf, ExportOptions{Prefix: tc.prefix}); err != nil {
			t.Fatal(err)
		}
		var s Sample
		if err := json.Unmarshal(buf.Bytes(), &s); err != nil {
			t.Fatalf("%s: %v in %s", tc.prefix, err, buf.Bytes())
		}
		var steps []int64
		var marked []bool
		for _, st := range s.ToolSteps {
			steps, marked = append(steps, st.Step), append(marked, st.Prefix)
		}
		if s.Kind != KindToolTrajectory || s.ParentEpisodeID != "ep" || s.BranchStep == nil || *s.BranchStep != 1 || s.ForkGroupID != "ep.b1" || !cmp.Equal(steps, tc.steps) || !cmp.Equal(marked, tc.marked) {
			t.Errorf("%s: %s parent %q branch %d steps %v prefix %v; want a tool trajectory of parent ep, branch 1, steps %v prefix %v",
				tc.prefix, s.Kind, s.ParentEpisodeID, deref(s.BranchStep), steps, marked, tc.steps, tc.marked)
		}
	}
	var buf bytes.Buffer
	if err := Export(context.Background(), dir, &buf, ExportOptions{Format: FormatATIF}); err != nil {
		t.Fatal(err)
	}
	var at struct {
		Extra map[string]any `json:"extra"`
	}
	if err := json.Unmarshal(buf.Bytes(), &at); err != nil {
		t.Fatal(err)
	}
	if at.Extra["parent_episode_id"] != "ep" || at.Extra["branch_step"] != float64(1) {
		t.Errorf("ATIF extra %v; want parent_episode_id ep, branch_step 1", at.Extra)
	}
	if err := Export(context.Background(), dir, &buf, ExportOptions{Prefix: "twice"}); err == nil {
		t.Error("prefix mode twice accepted")
	}
}

func deref[T any](p *T) (v T) {
	if p != nil {
		v = *p
	}
	return v
}

// TestForkFields: a root's samples have no fork fields; a fork's, even
// one before any call (step 0), name the parent, the step and the group
// of the siblings forked there, in JSON and in Parquet.
func TestForkFields(t *testing.T) {
	forkAt := func(step int) []Event {
		evs := tokenEpisode(t)
		start := mustEvent(t, TypeEpisodeStart, 0, 0, EpisodeStart{TaskID: "task", Model: "m",
			Fork: &ForkOrigin{ParentEpisodeID: "ep", BranchStep: step}})
		evs[0].Data = start.Data
		for i := range evs {
			evs[i].EpisodeID = fmt.Sprintf("ep.b%d-ab12-1", step)
		}
		return evs
	}
	tests := []struct {
		name string
		evs  []Event
		want string // the fork fields of the sample's JSON
	}{
		{"root", tokenEpisode(t), `{}`},
		{"fork at step 0", forkAt(0), `{"branch_step":0,"fork_group_id":"ep.b0","parent_episode_id":"ep"}`},
		{"fork at step 1", forkAt(1), `{"branch_step":1,"fork_group_id":"ep.b1","parent_episode_id":"ep"}`},
	}
	for _, tc := range tests {
		for _, format := range []string{FormatMessages, FormatParquet} {
			lines := exported(t, tc.evs, ExportOptions{Format: format})
			var s Sample
			if err := json.Unmarshal([]byte(lines[0]), &s); len(lines) != 1 || err != nil {
				t.Fatalf("%s, %s: %d samples, %v", tc.name, format, len(lines), err)
			}
			b, _ := json.Marshal(struct {
				ParentEpisodeID string `json:"parent_episode_id,omitempty"`
				BranchStep      *int64 `json:"branch_step,omitempty"`
				ForkGroupID     string `json:"fork_group_id,omitempty"`
			}{s.ParentEpisodeID, s.BranchStep, s.ForkGroupID})
			var got, want map[string]any
			json.Unmarshal(b, &got)
			json.Unmarshal([]byte(tc.want), &want)
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s, %s: fork fields (-want +got):\n%s", tc.name, format, d)
			}
		}
	}
}
