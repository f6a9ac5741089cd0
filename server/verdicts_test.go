package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// TestLateVerdictRoute: a step that ran unconfirmed (flagged, no judge)
// leaves the episode's samples masked; the admin's late verdict on it
// decides them (clean: the raw reward). A policy's own token, a running
// episode, a step that was not unconfirmed and a second verdict are
// refused with what to do.
func TestLateVerdictRoute(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, nil)
	cr := e.create()
	path := "/v1/episodes/" + cr.EpisodeID
	var res map[string]any
	if code, _ := e.do("POST", path+"/calls", cr.Token, toolcall.Call{Tool: "bash", Args: []byte(`{"command":"git log --all --oneline"}`)}, &res); code != 200 {
		t.Fatalf("call: %d %v", code, res)
	}
	if code, _ := e.do("POST", path+"/calls", cr.Token, toolcall.Call{Tool: "bash", Args: []byte(`{"command":"ls"}`)}, &res); code != 200 {
		t.Fatalf("call: %d %v", code, res)
	}
	post := func(token, id string, body string) (int, string) {
		var out map[string]any
		code, _ := e.do("POST", "/v1/episodes/"+id+"/verdicts", token, body, &out)
		msg, _ := out["error"].(string)
		return code, msg
	}
	if code, msg := post(testAdmin, cr.EpisodeID, `{"step":1}`); code != http.StatusConflict || !strings.Contains(msg, "has not ended") {
		t.Errorf("verdict on a running episode: %d %q, want 409", code, msg)
	}
	if code, _ := e.do("POST", path+"/submit", cr.Token, nil, nil); code != 200 {
		t.Fatalf("submit: %d", code)
	}
	label := func() (string, string) {
		s := e.samples(path, cr.Token)[0]
		tr, _ := json.Marshal(s.TrainingReward)
		return s.Label, string(tr)
	}
	if l, tr := label(); l != trajectory.LabelUnconfirmed || tr != "null" {
		t.Fatalf("before a verdict: label %s training_reward %s, want unconfirmed, null (is step 1 still unconfirmed?)", l, tr)
	}
	refused := []struct {
		name, token, id, body string
		code                  int
		msg                   string
	}{
		{"the policy's token", cr.Token, cr.EpisodeID, `{"step":1}`, http.StatusForbidden, "admin only"},
		{"a step not flagged", testAdmin, cr.EpisodeID, `{"step":2}`, http.StatusBadRequest, "did not run unconfirmed"},
		{"step 0", testAdmin, cr.EpisodeID, `{"step":0}`, http.StatusBadRequest, `field "step"`},
		{"unknown field", testAdmin, cr.EpisodeID, `{"step":1,"verdict":"ok"}`, http.StatusBadRequest, "verdict"},
		{"unknown episode", testAdmin, "nope", `{"step":1}`, http.StatusNotFound, "no trajectory"},
	}
	for _, tc := range refused {
		if code, msg := post(tc.token, tc.id, tc.body); code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: %d %q, want %d saying %q", tc.name, code, msg, tc.code, tc.msg)
		}
	}
	if code, msg := post(testAdmin, cr.EpisodeID, `{"step":1,"hack":false,"judge":"reviewer","rationale":"its own history"}`); code != http.StatusCreated {
		t.Fatalf("verdict: %d %q", code, msg)
	}
	if code, msg := post(testAdmin, cr.EpisodeID, `{"step":1,"hack":true}`); code != http.StatusConflict || !strings.Contains(msg, "first stands") {
		t.Errorf("second verdict: %d %q, want 409", code, msg)
	}
	if l, tr := label(); l != trajectory.LabelClean || tr == "null" {
		t.Errorf("after a clean verdict: label %s training_reward %s, want clean and the raw reward", l, tr)
	}
}
