package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/trajectory"
)

// TestExportTrainingReward: rollcage export writes the raw reward and the
// training reward its flags decide, for a hacked and an unconfirmed
// resolution; an auxiliary turn of each is left out, with a note, unless
// --auxiliary.
func TestExportTrainingReward(t *testing.T) {
	dir := t.TempDir()
	for id, end := range map[string]trajectory.EpisodeEnd{
		"hacked":      {Resolved: true, Reward: 1, Hacked: true, Label: trajectory.LabelHacked, Reason: "submit"},
		"unconfirmed": {Resolved: true, Reward: 1, Label: trajectory.LabelUnconfirmed, Reason: "submit"},
		"clean":       {Resolved: true, Reward: 1, Label: trajectory.LabelClean, Reason: "submit"},
	} {
		var lines []byte
		for i, p := range []struct {
			typ string
			v   any
		}{
			{trajectory.TypeEpisodeStart, trajectory.EpisodeStart{TaskID: "task"}},
			{trajectory.TypeModelTurn, trajectory.ModelTurn{Request: []trajectory.Message{{Role: "user", Content: "fix it"}},
				Response: trajectory.Message{Role: "assistant", Content: "done"}}},
			{trajectory.TypeModelTurn, trajectory.ModelTurn{Request: []trajectory.Message{{Role: "user", Content: "name it"}},
				Response: trajectory.Message{Role: "assistant", Content: "a title"}, Auxiliary: "title"}},
			{trajectory.TypeEpisodeEnd, end},
		} {
			ev, err := trajectory.NewEvent(id, 0, 0, p.typ, p.v)
			if err != nil {
				t.Fatal(err)
			}
			ev.Offset = int64(i)
			b, _ := json.Marshal(ev)
			lines = append(append(lines, b...), '\n')
		}
		if err := os.WriteFile(filepath.Join(dir, id+".jsonl"), lines, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		flags   []string
		want    map[string]string // episode → training_reward JSON
		samples int
		note    string // on stderr
	}{
		{nil, map[string]string{"hacked": "0", "unconfirmed": "null", "clean": "1"}, 3,
			"left out 3 auxiliary model turns of 3 episodes (not the episodes' conversations): --auxiliary exports them"},
		{[]string{"--hacked-reward", "-1", "--unconfirmed", "zero"}, map[string]string{"hacked": "-1", "unconfirmed": "0", "clean": "1"}, 3, "left out 3"},
		{[]string{"--unconfirmed", "raw", "--auxiliary"}, map[string]string{"hacked": "0", "unconfirmed": "1", "clean": "1"}, 6, ""},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(context.Background(), append(append([]string{"export"}, tc.flags...), dir), &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			if !strings.Contains(errb.String(), tc.note) || (tc.note == "" && errb.Len() > 0) {
				t.Errorf("stderr %q, want %q", errb.String(), tc.note)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != tc.samples {
				t.Errorf("%d samples, want %d", len(lines), tc.samples)
			}
			got := map[string]string{}
			for _, line := range lines {
				var s struct {
					EpisodeID      string          `json:"episode_id"`
					Reward         float64         `json:"reward"`
					TrainingReward json.RawMessage `json:"training_reward"`
				}
				if err := json.Unmarshal([]byte(line), &s); err != nil {
					t.Fatal(err)
				}
				if s.Reward != 1 {
					t.Errorf("%s: reward %v, want the raw 1", s.EpisodeID, s.Reward)
				}
				got[s.EpisodeID] = string(s.TrainingReward)
			}
			for id, want := range tc.want {
				if got[id] != want {
					t.Errorf("%s: training_reward %s, want %s", id, got[id], want)
				}
			}
		})
	}
}
