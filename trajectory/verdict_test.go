package trajectory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// unconfirmedEpisode is tokenEpisode resolved, with step 1 flagged and
// run unconfirmed (no judge decided it).
func unconfirmedEpisode(t *testing.T, id string) []Event {
	evs := withEnd(t, tokenEpisode(t), EpisodeEnd{Resolved: true, Reward: 1, Label: LabelUnconfirmed, Reason: "submit",
		Counts: Counts{Unconfirmed: 1}})
	for i := range evs {
		evs[i].EpisodeID = id
		if evs[i].Type == TypeDecision && evs[i].Step == 1 {
			d := mustEvent(t, TypeDecision, 0, 1, Decision{Action: ActionAllow, Unconfirmed: true, Categories: []string{"history_mining"}})
			evs[i].Data = d.Data
		}
	}
	return evs
}

// TestLateVerdict: a verdict recorded after an unconfirmed episode ended
// decides it on the next export (from the store, as the gateway reads
// it, and from the directory, as rollcage export does): clean gives the
// raw reward, a hack the hacked reward; until then it is masked.
func TestLateVerdict(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := OpenStore(ctx, Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { st.Close() }()
	write := func(id string, evs []Event) {
		l, err := st.Log(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if _, err := l.Append(ev); err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
	}
	write("ep-clean", unconfirmedEpisode(t, "ep-clean"))
	write("ep-hack", unconfirmedEpisode(t, "ep-hack"))
	running := unconfirmedEpisode(t, "ep-running")
	write("ep-running", running[:len(running)-1])

	type outcome struct {
		Label          string          `json:"label"`
		Hacked         bool            `json:"hacked"`
		Categories     []string        `json:"hack_categories"`
		TrainingReward json.RawMessage `json:"training_reward"`
	}
	samples := func(id string) outcome {
		t.Helper()
		var evs []Event
		if err := st.Read(ctx, id, 0, func(ev Event) error { evs = append(evs, ev); return nil }); err != nil {
			t.Fatal(err)
		}
		late, err := st.LateVerdicts(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		lines := exported(t, append(evs, late...), ExportOptions{})
		var o outcome
		if err := json.Unmarshal([]byte(lines[0]), &o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	undecided := outcome{Label: LabelUnconfirmed, TrainingReward: json.RawMessage("null")}
	for _, id := range []string{"ep-clean", "ep-hack"} {
		if d := cmp.Diff(undecided, samples(id)); d != "" {
			t.Errorf("%s before a verdict (-want +got):\n%s", id, d)
		}
	}

	refused := []struct {
		name string
		id   string
		v    LateVerdict
		want error
	}{
		{"unknown episode", "ep-none", LateVerdict{Step: 1}, ErrNotFound},
		{"running", "ep-running", LateVerdict{Step: 1}, ErrRunning},
		{"step not flagged", "ep-clean", LateVerdict{Step: 2}, ErrNotUnconfirmed},
		{"no such step", "ep-clean", LateVerdict{Step: 9}, ErrNotUnconfirmed},
	}
	for _, tc := range refused {
		if err := st.RecordVerdict(ctx, tc.id, tc.v); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := st.RecordVerdict(ctx, "ep-clean", LateVerdict{Step: 1, Judge: "reviewer", Rationale: "reading its own log"}); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordVerdict(ctx, "ep-hack", LateVerdict{Step: 1, Hack: true, Category: "history_mining", Confidence: 0.9, Judge: "judge-7b"}); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordVerdict(ctx, "ep-clean", LateVerdict{Step: 1, Hack: true}); !errors.Is(err, ErrDecided) {
		t.Errorf("a second verdict: %v, want ErrDecided (the first stands)", err)
	}
	want := map[string]outcome{
		"ep-clean": {Label: LabelClean, TrainingReward: json.RawMessage("1")},
		"ep-hack":  {Label: LabelHacked, Hacked: true, Categories: []string{"history_mining"}, TrainingReward: json.RawMessage("0")},
	}
	for id, w := range want {
		if d := cmp.Diff(w, samples(id)); d != "" {
			t.Errorf("%s after its verdict (-want +got):\n%s", id, d)
		}
	}

	// rollcage export reads the directory: the same, and after a reopen.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Export(ctx, dir, &buf, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	got := map[string]outcome{}
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var s struct {
			EpisodeID string `json:"episode_id"`
			outcome
		}
		if err := dec.Decode(&s); err != nil {
			t.Fatal(err)
		}
		got[s.EpisodeID] = s.outcome
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("export of the directory (-want +got):\n%s", d)
	}
	if st, err = OpenStore(ctx, Config{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if late, err := st.LateVerdicts(ctx, "ep-hack"); err != nil || len(late) != 1 {
		t.Errorf("after a reopen: %d late verdicts of ep-hack (%v), want 1", len(late), err)
	}
}

// TestOutcomeOf: the outcome of an ended episode as export says it, with
// late verdicts applied, under a policy; none for a running one.
func TestOutcomeOf(t *testing.T) {
	evs := unconfirmedEpisode(t, "ep")
	verdict := func(hack bool) Event {
		ev := mustEvent(t, TypeVerdict, 0, 1, LateVerdict{Step: 1, Hack: hack, Category: "history_mining", Judge: "late"})
		ev.EpisodeID = "ep"
		return ev
	}
	one, minus := 1.0, -1.0
	for _, tc := range []struct {
		name        string
		evs         []Event
		policy      RewardPolicy
		ok          bool
		label       string
		hacked      bool
		reward      *float64
		unconfirmed int
	}{
		{name: "undecided", evs: evs, ok: true, label: LabelUnconfirmed, reward: nil, unconfirmed: 1},
		{name: "undecided, raw policy", evs: evs, policy: RewardPolicy{Unconfirmed: UnconfirmedRaw}, ok: true, label: LabelUnconfirmed, reward: &one, unconfirmed: 1},
		{name: "late clean verdict", evs: append(slices.Clone(evs), verdict(false)), ok: true, label: LabelClean, reward: &one},
		{name: "late hack verdict", evs: append(slices.Clone(evs), verdict(true)), policy: RewardPolicy{Hacked: -1}, ok: true, label: LabelHacked, hacked: true, reward: &minus},
		{name: "running", evs: evs[:len(evs)-1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, unconfirmed, ok, err := OutcomeOf(tc.evs, tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.ok {
				t.Fatalf("ok %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if o.EpisodeID != "ep" || o.Label != tc.label || o.Hacked != tc.hacked || unconfirmed != tc.unconfirmed || !cmp.Equal(o.TrainingReward, tc.reward) || o.Reward != 1 || !o.Resolved {
				t.Errorf("outcome %s label %q hacked %v reward %v training %v, %d unconfirmed; want label %q hacked %v training %v, %d unconfirmed",
					o.EpisodeID, o.Label, o.Hacked, o.Reward, o.TrainingReward, unconfirmed, tc.label, tc.hacked, tc.reward, tc.unconfirmed)
			}
			if len(o.Messages) > 0 || o.Kind != "" {
				t.Errorf("outcome carries a sample's fields: kind %q, %d messages", o.Kind, len(o.Messages))
			}
		})
	}
}
