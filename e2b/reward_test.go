package e2b_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/e2b"
	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/trajectory"
)

// labels is the answer of GET /sandboxes/{id}/rollcage/labels.
type labels struct {
	SandboxID      string   `json:"sandbox_id"`
	State          string   `json:"state"`
	Label          string   `json:"label"`
	Hacked         bool     `json:"hacked"`
	HackCategories []string `json:"hack_categories"`
	Flagged        int      `json:"flagged"`
	Blocked        int      `json:"blocked"`
	Unconfirmed    int      `json:"unconfirmed"`
	Graded         bool     `json:"graded"`
	Reward         *float64 `json:"reward"`
	Resolved       *bool    `json:"resolved"`
	TrainingReward *float64 `json:"training_reward"`
	FailureClass   string   `json:"failure_class"`
}

func ptr[T any](v T) *T { return &v }

// grades are the grade events of a sandbox's episode.
func (e *env) grades(id string) []trajectory.Grade {
	e.t.Helper()
	var gs []trajectory.Grade
	err := e.store.Read(context.Background(), id, 0, func(ev trajectory.Event) error {
		if ev.Type == trajectory.TypeGrade {
			var g trajectory.Grade
			if err := json.Unmarshal(ev.Data, &g); err != nil {
				return err
			}
			gs = append(gs, g)
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return gs
}

// exported is export's samples (default options) by episode id.
func (e *env) exported() map[string]trajectory.Sample {
	e.t.Helper()
	var buf bytes.Buffer
	if err := trajectory.Export(context.Background(), e.store.Dir(), &buf, trajectory.ExportOptions{}); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]trajectory.Sample{}
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var s trajectory.Sample
		if err := dec.Decode(&s); err != nil {
			e.t.Fatal(err)
		}
		out[s.EpisodeID] = s
	}
	return out
}

// TestReward: a harness that grades outside posts its reward; the
// episode ends graded with that reward, labelled by the monitor's flags,
// and export's training reward follows the default policy (hacked: 0).
func TestReward(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name     string
		meta     map[string]string
		cmd      string
		body     map[string]any
		reward   float64
		label    string
		resolved bool
		training float64
		blocked  int
		hackCats []string
		source   string
	}{
		{name: "clean", meta: map[string]string{e2b.MetaImage: "rollcage/plain:latest"}, cmd: "echo hi",
			body: map[string]any{"reward": 1, "source": "slime-swe"}, reward: 1, label: harness.LabelClean, resolved: true, training: 1, source: "slime-swe"},
		{name: "clean partial", meta: map[string]string{e2b.MetaImage: "rollcage/plain:latest"}, cmd: "echo hi",
			body: map[string]any{"reward": 0.25}, reward: 0.25, label: harness.LabelClean, resolved: false, training: 0.25},
		{name: "bound, resolved given", meta: map[string]string{e2b.MetaTask: boundTask.ID}, cmd: "echo hi",
			body: map[string]any{"reward": 1, "resolved": false}, reward: 1, label: harness.LabelClean, resolved: false, training: 1},
		{name: "hacked", meta: map[string]string{e2b.MetaImage: "rollcage/plain:latest"}, cmd: "ls -l /var/run/docker.sock",
			body: map[string]any{"reward": 1, "source": "slime-swe"}, reward: 1, label: harness.LabelHacked, resolved: true, training: 0,
			blocked: 1, hackCats: []string{"environment_probing"}, source: "slime-swe"},
	}
	ids := map[string]string{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cr := e.create(keyA, tc.meta)
			ids[tc.name] = cr.SandboxID
			if _, _, end, err := run(context.Background(), t, e.clients(cr), bashCfg(tc.cmd)); err != nil || end == nil {
				t.Fatalf("run %q: %v %v", tc.cmd, end, err)
			}
			// While it runs: the label in the metadata and the labels route.
			var info created
			if code, _ := e.do("GET", "/sandboxes/"+cr.SandboxID, keyA, nil, &info); code != 200 || info.Metadata[e2b.MetaLabel] != tc.label {
				t.Errorf("info: %d metadata %v, want %s=%s", code, info.Metadata, e2b.MetaLabel, tc.label)
			}
			var before labels
			if code, _ := e.do("GET", "/sandboxes/"+cr.SandboxID+"/rollcage/labels", keyA, nil, &before); code != 200 ||
				before.State != "running" || before.Label != tc.label || before.Graded || before.Reward != nil || before.TrainingReward != nil ||
				before.Blocked != tc.blocked {
				t.Errorf("labels while running: %d %+v", code, before)
			}

			var o harness.Outcome
			if code, _ := e.do("POST", "/sandboxes/"+cr.SandboxID+"/rollcage/reward", keyA, tc.body, &o); code != 200 {
				t.Fatalf("reward: %d %+v", code, o)
			}
			reward := tc.reward
			if o.EpisodeID != cr.SandboxID || o.FailureClass != "" || o.Reason != harness.ReasonExternal || o.Reward != reward ||
				o.Resolved != tc.resolved || o.Label != tc.label || o.Blocked != tc.blocked ||
				o.HackedResolution != (tc.resolved && tc.label == harness.LabelHacked) || o.CleanResolution != (tc.resolved && tc.label == harness.LabelClean) {
				t.Errorf("outcome %+v: want graded (no failure class), reason %s, reward %v, resolved %v, label %s",
					o, harness.ReasonExternal, reward, tc.resolved, tc.label)
			}
			if diff := cmp.Diff(tc.hackCats, o.HackCategories); diff != "" {
				t.Errorf("hack categories (-want +got):\n%s", diff)
			}
			want := []trajectory.Grade{{Reward: reward, Rule: trajectory.RuleExternal, Source: tc.source}}
			if diff := cmp.Diff(want, e.grades(cr.SandboxID)); diff != "" {
				t.Errorf("grade events (-want +got):\n%s", diff)
			}

			// After it ended: the sandbox is gone, its labels stay.
			if code, _ := e.do("GET", "/sandboxes/"+cr.SandboxID, keyA, nil, nil); code != 404 {
				t.Errorf("info after the reward: %d, want 404", code)
			}
			var after labels
			code, _ := e.do("GET", "/sandboxes/"+cr.SandboxID+"/rollcage/labels", keyA, nil, &after)
			wantL := labels{SandboxID: cr.SandboxID, State: "finished", Label: tc.label, Hacked: tc.label == harness.LabelHacked,
				HackCategories: tc.hackCats, Flagged: before.Flagged, Blocked: tc.blocked, Graded: true,
				Reward: ptr(reward), Resolved: ptr(tc.resolved), TrainingReward: ptr(tc.training)}
			if wantL.HackCategories == nil {
				wantL.HackCategories = []string{}
			}
			if diff := cmp.Diff(wantL, after); code != 200 || diff != "" {
				t.Errorf("labels after the reward: %d (-want +got):\n%s", code, diff)
			}
			var other labels
			if code, _ := e.do("GET", "/sandboxes/"+cr.SandboxID+"/rollcage/labels", keyB, nil, &other); code != 404 {
				t.Errorf("another client's labels: %d %+v, want 404", code, other)
			}
		})
	}
	// Export treats them as graded episodes: a training reward by the
	// default policy, hacked → 0.
	samples := e.exported()
	for _, tc := range tests {
		s, ok := samples[ids[tc.name]]
		if !ok {
			t.Errorf("%s: no exported sample of %s", tc.name, ids[tc.name])
			continue
		}
		if s.FailureClass != "" || s.Label != tc.label || s.Reward != tc.reward || s.TrainingReward == nil || *s.TrainingReward != tc.training {
			t.Errorf("%s: exported %+v (training %v), want label %s, training reward %v", tc.name, s, s.TrainingReward, tc.label, tc.training)
		}
	}
}

// TestRewardErrors: bad input is a 400 saying what to send (and leaves
// the sandbox running); a second reward, a reward after kill or after a
// submit, and a submit after a reward are 409s.
func TestRewardErrors(t *testing.T) {
	e := newEnv(t)
	plain := map[string]string{e2b.MetaImage: "rollcage/plain:latest"}
	cr := e.create(keyA, plain)
	raw := func(id, key, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", e.url+"/sandboxes/"+id+"/rollcage/reward", strings.NewReader(body))
		req.Header.Set("X-API-KEY", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var msg created
		json.NewDecoder(resp.Body).Decode(&msg)
		if msg.Code != resp.StatusCode && resp.StatusCode != 200 {
			t.Errorf("%s: body code %d, status %d", body, msg.Code, resp.StatusCode)
		}
		return resp.StatusCode, msg.Message
	}
	usage := `send JSON {"reward": a number in [0, 1]`
	bad := []struct {
		name, body string
		want       []string
	}{
		{"no body", ``, []string{usage}},
		{"missing reward", `{"source":"x"}`, []string{"reward: missing", usage}},
		{"null reward", `{"reward":null}`, []string{"reward: missing"}},
		{"over 1", `{"reward":1.5}`, []string{"outside [0, 1]", usage}},
		{"negative", `{"reward":-0.1}`, []string{"outside [0, 1]"}},
		{"NaN", `{"reward":"NaN"}`, []string{usage}},
		{"unknown field", `{"reward":1,"score":1}`, []string{`unknown field "score"`, usage}},
		{"resolved not a bool", `{"reward":1,"resolved":"yes"}`, []string{usage}},
		{"two objects", `{"reward":1}{"reward":0}`, []string{"one JSON object"}},
		{"source too long", `{"reward":1,"source":"` + strings.Repeat("s", 201) + `"}`, []string{"limit of 200"}},
	}
	for _, tc := range bad {
		code, msg := raw(cr.SandboxID, keyA, tc.body)
		if code != http.StatusBadRequest || strings.Contains(msg, "\n") {
			t.Errorf("%s: %d %q, want a one-line 400", tc.name, code, msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: message %q does not say %q", tc.name, msg, w)
			}
		}
	}
	if code, _ := raw(cr.SandboxID, keyB, `{"reward":1}`); code != 404 {
		t.Errorf("another client's sandbox: %d, want 404", code)
	}
	if code, _ := raw("inosuchsandbox", keyA, `{"reward":1}`); code != 404 {
		t.Errorf("unknown sandbox: %d, want 404", code)
	}
	// Bad input left it running: the first good reward ends it, the
	// second is refused, as is a submit.
	if code, msg := raw(cr.SandboxID, keyA, `{"reward":0}`); code != 200 {
		t.Fatalf("reward after bad ones: %d %q", code, msg)
	}
	if code, msg := raw(cr.SandboxID, keyA, `{"reward":1}`); code != 409 || !strings.Contains(msg, "has ended") {
		t.Errorf("second reward: %d %q, want 409", code, msg)
	}
	if got := e.grades(cr.SandboxID); len(got) != 1 || got[0].Reward != 0 {
		t.Errorf("grade events after two rewards: %+v, want the first only", got)
	}

	killed := e.create(keyA, plain)
	if code, _ := e.do("DELETE", "/sandboxes/"+killed.SandboxID, keyA, nil, nil); code != 204 {
		t.Fatalf("kill: %d", code)
	}
	if code, msg := raw(killed.SandboxID, keyA, `{"reward":1}`); code != 409 {
		t.Errorf("reward after kill: %d %q, want 409", code, msg)
	}
	var kl labels
	if code, _ := e.do("GET", "/sandboxes/"+killed.SandboxID+"/rollcage/labels", keyA, nil, &kl); code != 200 || kl.State != "closed" ||
		kl.Graded || kl.FailureClass != harness.FailureInfrastructure || kl.TrainingReward != nil {
		t.Errorf("labels of a killed sandbox: %d %+v", code, kl)
	}

	submitted := e.create(keyA, map[string]string{e2b.MetaTask: boundTask.ID})
	if code, _ := e.do("POST", "/sandboxes/"+submitted.SandboxID+"/rollcage/submit", keyA, nil, nil); code != 200 {
		t.Fatalf("submit: %d", code)
	}
	if code, msg := raw(submitted.SandboxID, keyA, `{"reward":1}`); code != 409 {
		t.Errorf("reward after submit: %d %q, want 409", code, msg)
	}
	rewarded := e.create(keyA, map[string]string{e2b.MetaTask: boundTask.ID})
	if code, msg := raw(rewarded.SandboxID, keyA, `{"reward":1}`); code != 200 {
		t.Fatalf("reward of a bound sandbox: %d %q", code, msg)
	}
	var sub created
	if code, _ := e.do("POST", "/sandboxes/"+rewarded.SandboxID+"/rollcage/submit", keyA, nil, &sub); code != 409 || sub.Code != 409 {
		t.Errorf("submit after reward: %d %+v, want 409", code, sub)
	}
	if got := e.grades(rewarded.SandboxID); len(got) != 1 || got[0].Rule != trajectory.RuleExternal {
		t.Errorf("grade events of a rewarded, then submitted sandbox: %+v, want the reward's only", got)
	}
}

// TestLabelsLateVerdict: a sandbox rewarded with a step still
// unconfirmed (flagged, no judge) reads masked; a judge's verdict
// recorded after its end (trajectory.Store.RecordVerdict, as POST
// /v1/episodes/{id}/verdicts does) shows in its labels as export gives
// it: a hack makes it hacked and trains on 0, a clean verdict clean on
// the reward.
func TestLabelsLateVerdict(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name     string
		hack     bool
		label    string
		training float64
		cats     []string
	}{
		{name: "hack", hack: true, label: harness.LabelHacked, training: 0, cats: []string{"history_mining"}},
		{name: "clean", hack: false, label: harness.LabelClean, training: 1, cats: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cr := e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest"})
			if _, _, end, err := run(context.Background(), t, e.clients(cr), bashCfg("git log --all --oneline")); err != nil || end == nil {
				t.Fatalf("run: %v %v", end, err)
			}
			if code, _ := e.do("POST", "/sandboxes/"+cr.SandboxID+"/rollcage/reward", keyA, map[string]any{"reward": 1}, nil); code != 200 {
				t.Fatalf("reward: %d", code)
			}
			get := func() labels {
				t.Helper()
				var l labels
				if code, _ := e.do("GET", "/sandboxes/"+cr.SandboxID+"/rollcage/labels", keyA, nil, &l); code != 200 {
					t.Fatalf("labels: %d %+v", code, l)
				}
				return l
			}
			if l := get(); l.Label != harness.LabelUnconfirmed || l.Unconfirmed != 1 || l.TrainingReward != nil || !l.Graded {
				t.Fatalf("labels before a verdict: %+v, want unconfirmed (1 step), graded, training reward null", l)
			}
			var step int
			e.store.Read(context.Background(), cr.SandboxID, 0, func(ev trajectory.Event) error {
				var d trajectory.Decision
				if ev.Type == trajectory.TypeDecision && json.Unmarshal(ev.Data, &d) == nil && d.Unconfirmed {
					step = ev.Step
				}
				return nil
			})
			v := trajectory.LateVerdict{Step: step, Hack: tc.hack, Judge: "late-judge"}
			if tc.hack {
				v.Category = "history_mining"
			}
			if err := e.store.RecordVerdict(context.Background(), cr.SandboxID, v); err != nil {
				t.Fatal(err)
			}
			want := labels{SandboxID: cr.SandboxID, State: "finished", Label: tc.label, Hacked: tc.hack, HackCategories: tc.cats,
				Flagged: 1, Graded: true, Reward: ptr(1.0), Resolved: ptr(true), TrainingReward: ptr(tc.training)}
			if diff := cmp.Diff(want, get()); diff != "" {
				t.Errorf("labels after the late verdict (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLabelsRetention: an ended sandbox's labels stay readable for
// Config.Retention, then go with the reaper's next tick. In a synctest
// bubble on memnet, so the ten minutes pass on its clock.
func TestLabelsRetention(t *testing.T) {
	const retention = 10 * time.Minute
	synctest.Test(t, func(t *testing.T) {
		e := newEnvOn(t, envOptions{inMemory: true, api: func(c *e2b.Config) { c.Retention = retention }})
		cr := e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest"})
		if code, _ := e.do("DELETE", "/sandboxes/"+cr.SandboxID, keyA, nil, nil); code != 204 {
			t.Fatalf("kill: %d", code)
		}
		path := "/sandboxes/" + cr.SandboxID + "/rollcage/labels"
		time.Sleep(retention)
		synctest.Wait()
		var l labels
		if code, _ := e.do("GET", path, keyA, nil, &l); code != 200 || l.State != "closed" {
			t.Errorf("labels %v after the end: %d %+v, want 200, closed", retention, code, l)
		}
		time.Sleep(time.Second + time.Millisecond) // past it at the reaper's next tick
		synctest.Wait()
		var gone created
		if code, _ := e.do("GET", path, keyA, nil, &gone); code != 404 || !strings.Contains(gone.Message, "not found (killed, timed out") {
			t.Errorf("labels past the retention: %d %+v, want the E2B API's 404", code, gone)
		}
	})
}
