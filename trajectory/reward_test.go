package trajectory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

func ptr[T any](v T) *T { return &v }

// withEnd is an episode's events with its episode_end replaced by end.
func withEnd(t *testing.T, evs []Event, end EpisodeEnd) []Event {
	t.Helper()
	out := append([]Event(nil), evs...)
	last := &out[len(out)-1]
	if last.Type != TypeEpisodeEnd {
		t.Fatalf("last event is %s, want episode_end", last.Type)
	}
	b, err := json.Marshal(end)
	if err != nil {
		t.Fatal(err)
	}
	last.Data = b
	return out
}

// exported is what an Exporter with opts writes for evs, one JSON sample
// per line (a Parquet row marshalled as a Sample).
func exported(t *testing.T, evs []Event, opts ExportOptions) []string {
	t.Helper()
	var buf bytes.Buffer
	x, err := NewExporter(&buf, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Episode(evs); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if opts.Format != FormatParquet {
		return strings.Split(strings.TrimSpace(buf.String()), "\n")
	}
	rows, err := parquet.Read[Sample](bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range rows {
		b, _ := json.Marshal(r)
		lines = append(lines, string(b))
	}
	return lines
}

// TestTrainingReward: every exported sample carries the raw reward and a
// training reward decided by the policy, for clean, hacked, unconfirmed,
// infrastructure-failed and forked episodes, on every sample of the
// episode (each turn's too).
func TestTrainingReward(t *testing.T) {
	var (
		resolved    = EpisodeEnd{Resolved: true, Reward: 1, Label: LabelClean, Reason: "submit"}
		unresolved  = EpisodeEnd{Reward: 0, Label: LabelClean, Reason: "submit"}
		hacked      = EpisodeEnd{Resolved: true, Reward: 1, Hacked: true, Label: LabelHacked, Reason: "submit"}
		hackFailed  = EpisodeEnd{Reward: 0, Hacked: true, Label: LabelHacked, Reason: "submit"}
		unconfirmed = EpisodeEnd{Resolved: true, Reward: 1, Label: LabelUnconfirmed, Reason: "submit"}
		abandoned   = EpisodeEnd{Reward: 0, Label: LabelClean, FailureClass: FailureInfrastructure, Reason: "abandoned"}
	)
	episodes := []struct {
		name string
		evs  []Event
	}{
		{"clean resolved", withEnd(t, tokenEpisode(t), resolved)},
		{"clean unresolved", withEnd(t, tokenEpisode(t), unresolved)},
		{"hacked resolution", withEnd(t, tokenEpisode(t), hacked)},
		{"hacked, unresolved", withEnd(t, tokenEpisode(t), hackFailed)},
		{"unconfirmed resolution", withEnd(t, tokenEpisode(t), unconfirmed)},
		{"abandoned", withEnd(t, tokenEpisode(t), abandoned)},
		{"fork, clean resolved", withEnd(t, forkedEpisode(t), resolved)},
		{"fork, hacked resolution", withEnd(t, forkedEpisode(t), hacked)},
		{"fork, unconfirmed resolution", withEnd(t, forkedEpisode(t), unconfirmed)},
	}
	null := "null"
	policies := []struct {
		name   string
		policy RewardPolicy
		want   []string // training_reward per episode above, as JSON
	}{
		{"default", RewardPolicy{}, []string{"1", "0", "0", "0", null, null, "1", "0", null}},
		{"mask", RewardPolicy{Unconfirmed: UnconfirmedMask}, []string{"1", "0", "0", "0", null, null, "1", "0", null}},
		{"penalty", RewardPolicy{Hacked: -1}, []string{"1", "0", "-1", "-1", null, null, "1", "-1", null}},
		{"unconfirmed zero", RewardPolicy{Unconfirmed: UnconfirmedZero}, []string{"1", "0", "0", "0", "0", null, "1", "0", "0"}},
		{"unconfirmed raw", RewardPolicy{Hacked: -0.5, Unconfirmed: UnconfirmedRaw}, []string{"1", "0", "-0.5", "-0.5", "1", null, "1", "-0.5", "1"}},
	}
	for _, p := range policies {
		for i, e := range episodes {
			for _, o := range []ExportOptions{
				{Granularity: GranularitySegment}, {Granularity: GranularityTurn},
				{Granularity: GranularityTurn, Prefix: PrefixOnce}, {Granularity: GranularityTurn, Format: FormatParquet},
			} {
				o.Reward = p.policy
				t.Run(fmt.Sprintf("%s/%s/%s/%s/%s", p.name, e.name, o.Granularity, o.Prefix, o.Format), func(t *testing.T) {
					lines := exported(t, e.evs, o)
					want := map[string]int{GranularitySegment: 1, GranularityTurn: 2}[o.Granularity]
					if o.Prefix == PrefixOnce && strings.HasPrefix(e.name, "fork") {
						want = 1 // the child's own turn; the parent's is the parent's
					}
					if len(lines) != want {
						t.Fatalf("%d samples, want %d", len(lines), want)
					}
					for _, line := range lines {
						var s struct {
							Reward         *float64        `json:"reward"`
							TrainingReward json.RawMessage `json:"training_reward"`
						}
						if err := json.Unmarshal([]byte(line), &s); err != nil {
							t.Fatal(err)
						}
						var end EpisodeEnd
						if err := e.evs[len(e.evs)-1].Decode(&end); err != nil {
							t.Fatal(err)
						}
						if s.Reward == nil || *s.Reward != end.Reward {
							t.Errorf("reward %v, want the raw %v beside the training reward", s.Reward, end.Reward)
						}
						if string(s.TrainingReward) != p.want[i] {
							t.Errorf("training_reward %s, want %s", s.TrainingReward, p.want[i])
						}
					}
				})
			}
		}
	}
	// ATIF carries it in each trajectory's extra.
	for _, p := range policies {
		for i, e := range episodes {
			var buf bytes.Buffer
			x, err := NewExporter(&buf, ExportOptions{Format: FormatATIF, Reward: p.policy})
			if err != nil {
				t.Fatal(err)
			}
			if err := x.Episode(e.evs); err != nil {
				t.Fatal(err)
			}
			var tr struct {
				Extra struct {
					TrainingReward json.RawMessage `json:"training_reward"`
				} `json:"extra"`
			}
			if err := json.Unmarshal(bytes.SplitN(buf.Bytes(), []byte("\n"), 2)[0], &tr); err != nil {
				t.Fatal(err)
			}
			if string(tr.Extra.TrainingReward) != p.want[i] {
				t.Errorf("%s/%s/atif: training_reward %s, want %s", p.name, e.name, tr.Extra.TrainingReward, p.want[i])
			}
		}
	}
	if _, err := NewExporter(&bytes.Buffer{}, ExportOptions{Reward: RewardPolicy{Unconfirmed: "drop"}}); err == nil || !strings.Contains(err.Error(), `use "mask", "zero" or "raw"`) {
		t.Errorf("Unconfirmed drop: %v, want an error naming the choices", err)
	}
}
