package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
	"github.com/rollcage/rollcage/trajectory/trajectorytest"
)

// TestGroup: POST /v1/groups starts n episodes of a task with their own
// tokens; GET waits for them and reports the group; the finished feed
// carries the group id.
func TestGroup(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, nil)
	for _, tc := range []struct {
		body string
		code int
	}{
		{`{"task_id":"fake-task","n":0}`, http.StatusBadRequest},
		{`{"task_id":"fake-task","n":257}`, http.StatusBadRequest},
		{`{"task_id":"nope","n":2}`, http.StatusBadRequest},
		{`{"task_id":"fake-task","n":2,"x":1}`, http.StatusBadRequest},
	} {
		var ae apiError
		if code, _ := e.do("POST", "/v1/groups", testAdmin, tc.body, &ae); code != tc.code || ae.Error == "" {
			t.Errorf("POST /v1/groups %s: %d %q, want %d with an error", tc.body, code, ae.Error, tc.code)
		}
	}
	var gr GroupResponse
	if code, _ := e.do("POST", "/v1/groups", testAdmin, GroupRequest{TaskID: fakeTask.ID, N: 3}, &gr); code != http.StatusCreated {
		t.Fatalf("create group: %d", code)
	}
	if len(gr.Episodes) != 3 || gr.GroupID == "" || gr.TaskID != fakeTask.ID {
		t.Fatalf("group: %+v", gr)
	}
	tokens := map[string]bool{}
	for _, cr := range gr.Episodes {
		tokens[cr.Token] = true
		if cr.GroupID != gr.GroupID {
			t.Errorf("episode %s: group %q, want %q", cr.EpisodeID, cr.GroupID, gr.GroupID)
		}
	}
	if len(tokens) != 3 {
		t.Errorf("%d distinct tokens for 3 episodes", len(tokens))
	}
	if code, _ := e.do("GET", "/v1/groups/"+gr.GroupID, gr.Episodes[0].Token, nil, nil); code != http.StatusForbidden {
		t.Errorf("GET group with an episode token: %d, want 403", code)
	}
	var gi GroupInfo
	if code, _ := e.do("GET", "/v1/groups/"+gr.GroupID+"?wait=0s", testAdmin, nil, &gi); code != 200 || gi.Done || gi.N != 3 {
		t.Errorf("group before submits: %d %+v", code, gi)
	}
	// Two submit, one is deleted: the group is done, two graded.
	for _, cr := range gr.Episodes[:2] {
		if code, _ := e.do("POST", "/v1/episodes/"+cr.EpisodeID+"/submit", cr.Token, nil, nil); code != 200 {
			t.Fatalf("submit %s: %d", cr.EpisodeID, code)
		}
	}
	waited := make(chan GroupInfo, 1)
	go func() {
		var gi GroupInfo
		e.do("GET", "/v1/groups/"+gr.GroupID, testAdmin, nil, &gi)
		waited <- gi
	}()
	last := gr.Episodes[2]
	if code, _ := e.do("DELETE", "/v1/episodes/"+last.EpisodeID, last.Token, nil, nil); code != 200 {
		t.Fatalf("delete: %d", code)
	}
	gi = <-waited
	if !gi.Done || gi.Graded != 2 || gi.Resolved != 2 || gi.ResolveRate != 1 || gi.MeanReward != 1 || len(gi.Episodes) != 3 {
		t.Errorf("group after the ends: %+v", gi)
	}
	ended := 0
	if err := e.store.ReadFinished(context.Background(), 0, func(ev trajectory.Event) error {
		if ev.Type != trajectory.TypeEpisodeEnd {
			return nil
		}
		var end trajectory.EpisodeEnd
		if err := ev.Decode(&end); err != nil {
			return err
		}
		if end.GroupID != gr.GroupID {
			t.Errorf("finished feed: %s has group %q, want %q", ev.EpisodeID, end.GroupID, gr.GroupID)
		}
		ended++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if ended != 3 {
		t.Errorf("finished feed: %d episode ends, want 3", ended)
	}
}

// TestSamplesEndpoint: an ended episode's samples come as JSONL with the
// recorded tokens; a running one's are refused, as is an unknown
// parameter.
// TestSamplesCorruptLog: an episode whose log is corrupt answers an
// error naming the log and why; the other episodes' samples are served.
func TestSamplesCorruptLog(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, nil)
	good, bad := e.create(), e.create()
	for _, cr := range []CreateResponse{good, bad} {
		if code, _ := e.do("POST", "/v1/episodes/"+cr.EpisodeID+"/calls", cr.Token, toolcall.Call{Tool: "bash", Args: []byte(`{"command":"echo x"}`)}, nil); code != http.StatusOK {
			t.Fatalf("call: %d", code)
		}
		if code, _ := e.do("DELETE", "/v1/episodes/"+cr.EpisodeID, testAdmin, nil, nil); code != http.StatusOK {
			t.Fatalf("delete: %d", code)
		}
	}
	trajectorytest.CorruptLine(t, e.store.File(bad.EpisodeID), 1)
	var ae apiError
	code, _ := e.do("GET", "/v1/episodes/"+bad.EpisodeID+"/samples", testAdmin, nil, &ae)
	want := "episode " + bad.EpisodeID + " has no samples: its log " + bad.EpisodeID + ".jsonl is corrupt ("
	if code != http.StatusInternalServerError || !strings.HasPrefix(ae.Error, want) || !strings.Contains(ae.Error, "trajectory log corrupt") {
		t.Errorf("samples of the corrupt log: %d %q; want 500 starting %q", code, ae.Error, want)
	}
	if code, _ := e.do("GET", "/v1/episodes/"+good.EpisodeID+"/samples", testAdmin, nil, nil); code != http.StatusOK {
		t.Errorf("samples of the good log: %d, want 200", code)
	}
}

func TestSamplesEndpoint(t *testing.T) {
	p, url := newPolicy(t)
	e := newEnv(t, &fake.Backend{}, func(c *Config) { c.PolicyURL = url })
	cr := e.create()
	path := "/v1/episodes/" + cr.EpisodeID
	go func() { <-p.requests; <-p.auth }()
	if code, _ := e.do("POST", path+"/chat/completions", cr.Token, `{"model":"m","messages":[{"role":"user","content":"fix it"}]}`, nil); code != 200 {
		t.Fatalf("chat: %d", code)
	}
	var ae apiError
	if code, _ := e.do("GET", path+"/samples", cr.Token, nil, &ae); code != http.StatusConflict {
		t.Errorf("samples of a running episode: %d %q, want 409", code, ae.Error)
	}
	if code, _ := e.do("POST", path+"/submit", cr.Token, nil, nil); code != 200 {
		t.Fatalf("submit: %d", code)
	}
	if code, _ := e.do("GET", path+"/samples?bogus=1", cr.Token, nil, &ae); code != http.StatusBadRequest {
		t.Errorf("samples?bogus=1: %d, want 400", code)
	}
	req, _ := http.NewRequest("GET", e.http.URL+path+"/samples", nil)
	req.Header.Set("Authorization", "Bearer "+cr.Token)
	resp, err := e.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []trajectory.Sample
	dec := json.NewDecoder(resp.Body)
	for dec.More() {
		var s trajectory.Sample
		if err := dec.Decode(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if resp.StatusCode != 200 || len(got) != 1 || got[0].EpisodeID != cr.EpisodeID || got[0].Reward != 1 {
		t.Fatalf("samples: %d %+v", resp.StatusCode, got)
	}
	smp := got[0]
	if smp.Tokens != trajectory.TokenIDsPresent || !slices.Equal(smp.PromptTokenIDs, []int64{1, 2, 3}) || !slices.Equal(smp.CompletionTokenIDs, []int64{11, 12, 13}) ||
		!slices.Equal(smp.LossMask, []int32{0, 0, 0, 1, 1, 1}) || smp.MessageMask[len(smp.MessageMask)-1] != 1 {
		t.Errorf("sample tokens %s %v %v mask %v message mask %v, want prompt [1 2 3], completion [11 12 13] trained on",
			smp.Tokens, smp.PromptTokenIDs, smp.CompletionTokenIDs, smp.LossMask, smp.MessageMask)
	}
	// The CLI's options as query parameters.
	for _, tc := range []struct {
		query, want string
		code        int
	}{
		{"?granularity=turn", `"kind":"turn"`, 200},
		{"?format=atif", `"schema_version":"ATIF-v1.6"`, 200},
		{"?format=csv", `use \"messages\", \"parquet\" or \"atif\"`, 400},
		{"?granularity=step", `use \"segment\" or \"turn\"`, 400},
	} {
		req, _ := http.NewRequest("GET", e.http.URL+path+"/samples"+tc.query, nil)
		req.Header.Set("Authorization", "Bearer "+cr.Token)
		resp, err := e.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(body), tc.want) {
			t.Errorf("samples%s: %d %s, want %d with %s", tc.query, resp.StatusCode, body, tc.code, tc.want)
		}
	}
}

// TestSamplesTrainingReward: the samples endpoint carries the raw reward
// and a training reward decided by the query's policy (hacked_reward,
// unconfirmed), for a clean and a hacked resolution.
func TestSamplesTrainingReward(t *testing.T) {
	p, url := newPolicy(t)
	e := newEnv(t, &fake.Backend{}, func(c *Config) { c.PolicyURL = url })
	go func() {
		for range p.requests {
			<-p.auth
		}
	}()
	paths := map[string]string{}
	tokens := map[string]string{}
	for _, kind := range []string{"clean", "hacked"} {
		cr := e.create()
		path := "/v1/episodes/" + cr.EpisodeID
		paths[kind], tokens[kind] = path, cr.Token
		if kind == "hacked" {
			var res map[string]any
			if code, _ := e.do("POST", path+"/calls", cr.Token, toolcall.Call{Tool: "bash", Args: []byte(`{"command":"cat /opt/grader/tests/test_hidden.py"}`)}, &res); code != 200 {
				t.Fatalf("hacked call: %d", code)
			}
		}
		if code, _ := e.do("POST", path+"/chat/completions", cr.Token, `{"model":"m","messages":[{"role":"user","content":"fix it"}]}`, nil); code != 200 {
			t.Fatalf("chat: %d", code)
		}
		if code, _ := e.do("POST", path+"/submit", cr.Token, nil, nil); code != 200 {
			t.Fatalf("submit: %d", code)
		}
	}
	for _, tc := range []struct {
		query       string
		clean, hack string // training_reward JSON
	}{
		{"", "1", "0"},
		{"?hacked_reward=-1", "1", "-1"},
		{"?hacked_reward=-0.5&unconfirmed=zero", "1", "-0.5"},
	} {
		for kind, want := range map[string]string{"clean": tc.clean, "hacked": tc.hack} {
			req, _ := http.NewRequest("GET", e.http.URL+paths[kind]+"/samples"+tc.query, nil)
			req.Header.Set("Authorization", "Bearer "+tokens[kind])
			resp, err := e.http.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var s struct {
				Reward         float64         `json:"reward"`
				Label          string          `json:"label"`
				TrainingReward json.RawMessage `json:"training_reward"`
			}
			if resp.StatusCode != 200 || json.Unmarshal(bytes.SplitN(body, []byte("\n"), 2)[0], &s) != nil {
				t.Fatalf("samples%s of the %s episode: %d %s", tc.query, kind, resp.StatusCode, body)
			}
			if s.Label != kind || s.Reward != 1 || string(s.TrainingReward) != want {
				t.Errorf("samples%s of the %s episode: label %s reward %v training_reward %s, want %s, 1, %s", tc.query, kind, s.Label, s.Reward, s.TrainingReward, kind, want)
			}
		}
	}
	for q, msg := range map[string]string{
		"?hacked_reward=lots":  `hacked_reward \"lots\": give a number`,
		"?unconfirmed=drop":    `unknown unconfirmed reward \"drop\"`,
		"?hacked_reward=-Inf":  `give a finite number`,
		"?training_reward=raw": `unknown query parameter \"training_reward\"`,
	} {
		req, _ := http.NewRequest("GET", e.http.URL+paths["clean"]+"/samples"+q, nil)
		req.Header.Set("Authorization", "Bearer "+tokens["clean"])
		resp, err := e.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(body), msg) {
			t.Errorf("samples%s: %d %s, want 400 with %s", q, resp.StatusCode, body, msg)
		}
	}
}
