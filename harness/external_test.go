package harness

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// TestFinishExternal: a reward decided outside ends the episode graded
// with that reward, without the hidden tests (they never enter a
// sandbox), and the first ending stands.
func TestFinishExternal(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		x    External
	}{
		{"resolved", External{Reward: 1, Resolved: true, Source: "slime"}},
		{"partial", External{Reward: 0.5}},
		{"zero", External{Reward: 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			be := &fake.Backend{}
			st, ep := startFake(ctx, t, be)
			if _, err := ep.Call(ctx, toolcall.Call{Tool: toolcall.Bash, Args: json.RawMessage(`{"command":"ls"}`)}); err != nil {
				t.Fatal(err)
			}
			o, err := ep.FinishExternal(ctx, tc.x)
			if err != nil {
				t.Fatal(err)
			}
			if o.Reason != ReasonExternal || o.FailureClass != "" || o.Reward != tc.x.Reward || o.Resolved != tc.x.Resolved ||
				o.Label != LabelClean || o.CleanResolution != tc.x.Resolved || o.Steps != 1 {
				t.Errorf("outcome %+v; want graded by %+v, clean, 1 step", o, tc.x)
			}
			var grades []trajectory.Grade
			var end trajectory.EpisodeEnd
			for _, ev := range events(t, st, ep.ID()) {
				switch ev.Type {
				case trajectory.TypeGrade:
					var g trajectory.Grade
					json.Unmarshal(ev.Data, &g)
					grades = append(grades, g)
				case trajectory.TypeEpisodeEnd:
					json.Unmarshal(ev.Data, &end)
				}
			}
			want := []trajectory.Grade{{Reward: tc.x.Reward, Rule: trajectory.RuleExternal, Source: tc.x.Source}}
			if diff := cmp.Diff(want, grades); diff != "" {
				t.Errorf("grade events (-want +got):\n%s", diff)
			}
			if end.Reason != ReasonExternal || end.Reward != tc.x.Reward || end.Resolved != tc.x.Resolved || end.FailureClass != "" {
				t.Errorf("episode_end %+v", end)
			}
			if be.Created()[0].CopiedIn() {
				t.Error("hidden tests were copied in for an external reward")
			}
			again, err := ep.FinishExternal(ctx, External{Reward: 1 - tc.x.Reward})
			if err != nil || again.Reward != o.Reward {
				t.Errorf("second FinishExternal: %+v, %v; want the first outcome", again, err)
			}
			if f, err := ep.Finish(ctx, ReasonSubmit); err != nil || f.Reason != ReasonExternal {
				t.Errorf("Finish after FinishExternal: %+v, %v; want the first outcome", f, err)
			}
		})
	}
}

func TestExternalValidate(t *testing.T) {
	tests := []struct {
		reward float64
		ok     bool
	}{
		{0, true}, {1, true}, {0.5, true},
		{-0.01, false}, {1.01, false}, {math.NaN(), false}, {math.Inf(1), false}, {math.Inf(-1), false},
	}
	for _, tc := range tests {
		if err := (External{Reward: tc.reward}).Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate(%v): %v, want ok %v", tc.reward, err, tc.ok)
		}
	}
}
