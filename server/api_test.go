package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/harness/harnesstest"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

func TestEpisodeFlow(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, nil)
	cr := e.create()
	if cr.Token == "" || cr.EpisodeID == "" || !strings.HasSuffix(cr.MCPURL, "/v1/episodes/"+cr.EpisodeID+"/mcp") {
		t.Fatalf("create response: %+v", cr)
	}
	if len(cr.Tools) != 6 || cr.Instruction != fakeTask.Instruction {
		t.Errorf("create: %d tools, instruction %q", len(cr.Tools), cr.Instruction)
	}
	path := "/v1/episodes/" + cr.EpisodeID

	var clean CallResponse
	if code, _ := e.do("POST", path+"/calls", cr.Token, toolcall.Call{Tool: "bash", Args: []byte(`{"command":"echo hello"}`), RequestID: "c1"}, &clean); code != 200 {
		t.Fatalf("clean call: status %d", code)
	}
	if clean.Output != "hello\n" || clean.Dummy || clean.Decision.Hack || clean.Decision.Action != decision.Allow || clean.Step != 1 {
		t.Errorf("clean call: %+v", clean)
	}

	var hack CallResponse
	if code, _ := e.do("POST", path+"/calls", cr.Token, toolcall.Call{Tool: "bash", Args: []byte(`{"command":"cat /opt/grader/tests/test_hidden.py"}`)}, &hack); code != 200 {
		t.Fatalf("hacked call: status %d", code)
	}
	if !hack.Dummy || !hack.Decision.Hack || hack.Decision.Action != decision.Block || strings.Contains(hack.Output, "canary") {
		t.Errorf("hacked call: want a blocked dummy, got %+v", hack)
	}

	var info EpisodeInfo
	e.do("GET", path, cr.Token, nil, &info)
	if info.State != StateRunning || info.Events < 7 {
		t.Errorf("state while running: %+v", info)
	}

	var o struct {
		Resolved bool   `json:"resolved"`
		Hacked   bool   `json:"hacked"`
		Steps    int    `json:"steps"`
		Reason   string `json:"reason"`
	}
	if code, _ := e.do("POST", path+"/submit", cr.Token, `{"message":"done"}`, &o); code != 200 {
		t.Fatalf("submit: status %d", code)
	}
	if !o.Resolved || !o.Hacked || o.Steps != 3 || o.Reason != "submit" {
		t.Errorf("outcome: %+v", o)
	}
	// Submit is idempotent; calls after it are refused.
	var again struct{ Steps int }
	if code, _ := e.do("POST", path+"/submit", cr.Token, nil, &again); code != 200 || again.Steps != 3 {
		t.Errorf("second submit: %d %+v", code, again)
	}
	var ae apiError
	if code, _ := e.do("POST", path+"/calls", cr.Token, toolcall.Call{Tool: "bash", Args: []byte(`{"command":"ls"}`)}, &ae); code != http.StatusConflict || !strings.Contains(ae.Error, "create a new episode") {
		t.Errorf("call after submit: %d %+v", code, ae)
	}
	e.do("GET", path, cr.Token, nil, &info)
	if info.State != StateFinished || info.Outcome == nil {
		t.Errorf("state after submit: %+v", info)
	}

	// The trajectory as JSONL, whole and from an offset.
	req, _ := http.NewRequest("GET", e.http.URL+path+"/trajectory?from=1", nil)
	req.Header.Set("Authorization", "Bearer "+cr.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	want := eventTypes(e.events(cr.EpisodeID))[1:]
	var got []string
	for _, l := range lines {
		var ev trajectory.Event
		if err := jsonUnmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("trajectory line %q: %v", l, err)
		}
		got = append(got, ev.Type)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trajectory from=1 (-store +api):\n%s", diff)
	}
	if want[len(want)-1] != trajectory.TypeEpisodeEnd {
		t.Errorf("last event %s, want episode_end", want[len(want)-1])
	}

	// The metrics saw it all.
	resp, err = http.Get(e.http.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, s := range []string{
		`rollcage_tool_calls_total{action="allow",tool="bash"} 1`,
		`rollcage_tool_calls_total{action="block",tool="bash"} 1`,
		`rollcage_episodes{state="finished"} 1`,
		`rollcage_blocked_calls_total{category="protected_access"} 1`,
		`rollcage_episode_start_seconds_count 1`,
	} {
		if !strings.Contains(string(m), s) {
			t.Errorf("metrics lack %s", s)
		}
	}
	if !strings.Contains(string(m), `rollcage_flags_total{category="protected_access"`) {
		t.Errorf("metrics lack protected_access flags")
	}
}

func TestCallSubmitTool(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, nil)
	cr := e.create()
	var res CallResponse
	if code, _ := e.do("POST", "/v1/episodes/"+cr.EpisodeID+"/calls", cr.Token, toolcall.Call{Tool: "submit"}, &res); code != 200 {
		t.Fatalf("submit call: %d", code)
	}
	if !res.Submitted || res.Outcome == nil || !res.Outcome.Resolved {
		t.Errorf("submit call: %+v", res)
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, nil)
	a, b := e.create(), e.create()
	call := toolcall.Call{Tool: "bash", Args: []byte(`{"command":"echo x"}`)}
	tests := []struct {
		name, method, path, token string
		body                      any
		want                      int
	}{
		{"A on B calls", "POST", "/v1/episodes/" + b.EpisodeID + "/calls", a.Token, call, http.StatusForbidden},
		{"A on B get", "GET", "/v1/episodes/" + b.EpisodeID, a.Token, nil, http.StatusForbidden},
		{"A on B trajectory", "GET", "/v1/episodes/" + b.EpisodeID + "/trajectory", a.Token, nil, http.StatusForbidden},
		{"A on B delete", "DELETE", "/v1/episodes/" + b.EpisodeID, a.Token, nil, http.StatusForbidden},
		{"A on B mcp", "POST", "/v1/episodes/" + b.EpisodeID + "/mcp", a.Token, `{}`, http.StatusForbidden},
		{"A lists", "GET", "/v1/episodes", a.Token, nil, http.StatusForbidden},
		{"A creates", "POST", "/v1/episodes", a.Token, CreateRequest{TaskID: fakeTask.ID}, http.StatusForbidden},
		{"no token", "POST", "/v1/episodes/" + a.EpisodeID + "/calls", "", call, http.StatusUnauthorized},
		{"wrong token", "POST", "/v1/episodes/" + a.EpisodeID + "/calls", a.Token + "x", call, http.StatusUnauthorized},
		{"A on A", "POST", "/v1/episodes/" + a.EpisodeID + "/calls", a.Token, call, http.StatusOK},
		{"admin on B", "POST", "/v1/episodes/" + b.EpisodeID + "/calls", testAdmin, call, http.StatusOK},
		{"admin lists", "GET", "/v1/episodes", testAdmin, nil, http.StatusOK},
		{"unknown episode", "GET", "/v1/episodes/nope", testAdmin, nil, http.StatusNotFound},
		{"unknown route", "GET", "/v2/x", testAdmin, nil, http.StatusNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ae apiError
			code, _ := e.do(tc.method, tc.path, tc.token, tc.body, &ae)
			if code != tc.want {
				t.Errorf("status %d, want %d (%s)", code, tc.want, ae.Error)
			}
			if code >= 400 && ae.Error == "" {
				t.Errorf("status %d without an error message", code)
			}
		})
	}
	var list struct{ Episodes []EpisodeInfo }
	e.do("GET", "/v1/episodes", testAdmin, nil, &list)
	if len(list.Episodes) != 2 {
		t.Errorf("list: %+v", list)
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, func(c *Config) { c.MaxBodyBytes = 1 << 10 })
	cr := e.create()
	calls := "/v1/episodes/" + cr.EpisodeID + "/calls"
	tests := []struct {
		name, path, body string
		want             int
		msg              string
	}{
		{"oversized", calls, `{"tool":"write_file","args":{"path":"a","content":"` + strings.Repeat("x", 2000) + `"}}`, 413, "request body over 1024 bytes"},
		{"malformed", calls, `{"tool":"bash",`, 400, "malformed JSON"},
		{"syntax", calls, `{"tool":"bash" "args":{}}`, 400, "malformed JSON at byte"},
		{"unknown field", calls, `{"tool":"bash","argz":{}}`, 400, `field "argz": unknown field`},
		{"wrong type", calls, `{"tool":7}`, 400, `field "tool": must be a string, not number`},
		{"not an object", calls, `[1]`, 400, "body must be a JSON object"},
		{"trailing", calls, `{"tool":"bash"} {}`, 400, "trailing data"},
		{"empty", calls, ``, 400, "empty body"},
		{"no tool", calls, `{"args":{}}`, 400, `field "tool": missing`},
		{"unknown task", "/v1/episodes", `{"task_id":"nope"}`, 400, `unknown task "nope": loaded tasks are fake-task`},
		{"no task", "/v1/episodes", `{}`, 400, `field "task_id": missing`},
		{"bad inline task", "/v1/episodes", `{"task":{"id":"x"}}`, 400, `field "task": field "image"`},
		{"bad episode id", "/v1/episodes", `{"task_id":"fake-task","episode_id":"../x"}`, 400, `field "episode_id"`},
		{"bad model route", "/v1/episodes", `{"task_id":"fake-task","model_routes":["ftp://adapter/v1"]}`, 400, `field "model_routes": model route "ftp://adapter/v1": scheme "ftp": give an http:// or https:// URL`},
		{"model route with credentials", "/v1/episodes", `{"task_id":"fake-task","model_routes":["http://u:p@adapter:8000/v1"]}`, 400, `without user:password@`},
		{"model route on the sandbox's loopback", "/v1/groups", `{"task_id":"fake-task","n":2,"model_routes":["http://localhost:8000/v1"]}`, 400, `field "model_routes": model route http://localhost:8000/v1: localhost is the sandbox's own loopback`},
		{"taken episode id", "/v1/episodes", `{"task_id":"fake-task","episode_id":"` + cr.EpisodeID + `"}`, 409, "exists"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ae apiError
			code, _ := e.do("POST", tc.path, testAdmin, tc.body, &ae)
			if code != tc.want || !strings.Contains(ae.Error, tc.msg) {
				t.Errorf("got %d %q, want %d containing %q", code, ae.Error, tc.want, tc.msg)
			}
			if strings.Contains(ae.Error, "\n") {
				t.Errorf("error is not one line: %q", ae.Error)
			}
		})
	}
}

// TestUncleanPath: a path with a '.', '..' or empty segment (an id of
// "..") is a 400 with a JSON error, never the mux's HTML redirect.
func TestUncleanPath(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, nil)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/episodes/.."},
		{"POST", "/v1/episodes/../calls"},
		{"POST", "/v1/episodes/%2e%2e/calls"},
		{"GET", "/v1/episodes/./x"},
		{"POST", "/v1/episodes//calls"},
		{"DELETE", "/v1/groups/.."},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, e.http.URL+tc.path, strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+testAdmin)
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var ae apiError
			b, _ := io.ReadAll(resp.Body)
			derr := jsonUnmarshal(b, &ae)
			if resp.StatusCode != http.StatusBadRequest || derr != nil || !strings.Contains(ae.Error, "has an empty, '.' or '..' segment") {
				t.Errorf("%d %s (Location %q), error %q (%v); want 400 with a JSON error", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Location"), ae.Error, derr)
			}
		})
	}
}

// TestCreateMissingImage: a task whose image the sandbox host does not
// have is a client error naming the image and how to build it, not 502.
func TestCreateMissingImage(t *testing.T) {
	missing := fmt.Errorf("docker: create ep: image %s not found locally: %w", fakeTask.Image, sandbox.ErrImageMissing)
	e := newEnv(t, &fake.Backend{CreateErr: missing}, nil)
	var ae apiError
	code, _ := e.do("POST", "/v1/episodes", testAdmin, CreateRequest{TaskID: fakeTask.ID}, &ae)
	want := "image " + fakeTask.Image + " is not on the sandbox host: build or load it there (docker build -t " + fakeTask.Image + " DIR"
	if code != http.StatusBadRequest || !strings.HasPrefix(ae.Error, want) {
		t.Errorf("got %d %q, want 400 starting %q", code, ae.Error, want)
	}
}

func TestInlineTask(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, nil)
	inline := fakeTask
	inline.ID = "inline-task"
	var cr CreateResponse
	if code, _ := e.do("POST", "/v1/episodes", testAdmin, CreateRequest{Task: &inline, EpisodeID: "my-episode"}, &cr); code != 201 {
		t.Fatalf("create inline: %d", code)
	}
	if cr.EpisodeID != "my-episode" || cr.TaskID != "inline-task" {
		t.Errorf("inline: %+v", cr)
	}
}

// TestCreateModelRoutes: the create request's model routes reach the
// episode, which runs with the egress proxy and records them at start.
func TestCreateModelRoutes(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, nil)
	route := "http://adapter.internal:30000/v1"
	var cr CreateResponse
	if code, _ := e.do("POST", "/v1/episodes", testAdmin, CreateRequest{TaskID: "fake-task", ModelRoutes: []string{route}}, &cr); code != 201 {
		t.Fatalf("create with a model route: %d", code)
	}
	evs := e.events(cr.EpisodeID)
	if len(evs) == 0 || evs[0].Type != trajectory.TypeEpisodeStart {
		t.Fatalf("events %+v, want episode_start first", evs)
	}
	var st trajectory.EpisodeStart
	if err := evs[0].Decode(&st); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Network     string   `json:"network"`
		ModelRoutes []string `json:"model_routes"`
	}
	if err := json.Unmarshal(st.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Network != "proxy" || len(cfg.ModelRoutes) != 1 || cfg.ModelRoutes[0] != route {
		t.Errorf("episode_start config %s, want network proxy and route %s", st.Config, route)
	}
}

// TestRateLimit: a token has Burst requests at once, then one per
// 1/Rate; a refused request gets 429 with a Retry-After after which one
// goes through. In a synctest bubble on memnet, so the refill is timed
// on its clock.
func TestRateLimit(t *testing.T) {
	ms := time.Millisecond
	steps := []struct {
		at    time.Duration // since the first request
		want  int
		retry string // Retry-After of a 429
	}{
		{0, 200, ""}, {0, 200, ""}, {0, 200, ""}, // the burst
		{0, 429, "1"},
		{499 * ms, 429, "1"},
		{500 * ms, 200, ""}, // 2 per second: the next token
		{500 * ms, 429, "1"},
		{time.Second, 200, ""},
	}
	synctest.Test(t, func(t *testing.T) {
		e := newBubbleEnv(t, &fake.Backend{}, func(c *Config) { c.Rate, c.Burst = 2, 3 })
		start := time.Now()
		for i, st := range steps {
			time.Sleep(st.at - time.Since(start))
			code, h := e.do("GET", "/v1/episodes", testAdmin, nil, nil)
			if retry := h.Get("Retry-After"); code != st.want || (code == http.StatusTooManyRequests && retry != st.retry) {
				t.Errorf("request %d at %v: %d, Retry-After %q; want %d, %q", i, st.at, code, retry, st.want, st.retry)
			}
		}
	})
}

func TestDeleteAndReap(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, func(c *Config) { c.IdleTimeout = time.Hour })
	a, b := e.create(), e.create()
	var info EpisodeInfo
	if code, _ := e.do("DELETE", "/v1/episodes/"+a.EpisodeID, a.Token, nil, &info); code != 200 || info.State != StateClosed {
		t.Fatalf("delete: %d %+v", code, info)
	}
	var ae apiError
	if code, _ := e.do("POST", "/v1/episodes/"+a.EpisodeID+"/submit", a.Token, nil, &ae); code != http.StatusConflict {
		t.Errorf("submit after delete: %d %s", code, ae.Error)
	}
	if got := e.srv.reapIdle(time.Now()); len(got) != 0 {
		t.Errorf("reaped fresh episodes: %v", got)
	}
	got := e.srv.reapIdle(time.Now().Add(2 * time.Hour))
	if diff := cmp.Diff([]string{b.EpisodeID}, got); diff != "" {
		t.Errorf("reaped (-want +got):\n%s", diff)
	}
	// The next pass forgets ended episodes; the store still has them.
	e.srv.reapIdle(time.Now().Add(2 * time.Hour))
	if code, _ := e.do("GET", "/v1/episodes/"+b.EpisodeID, b.Token, nil, nil); code != http.StatusUnauthorized {
		t.Errorf("reaped episode's token still works: %d", code)
	}
	// closed without grading, its log still ends (abandoned), so the store
	// has it as recorded, not unfinished
	if code, _ := e.do("GET", "/v1/episodes/"+b.EpisodeID, testAdmin, &info, &info); code != 200 || info.State != StateRecorded {
		t.Errorf("admin get of a reaped episode: %d %+v; want state %s", code, info, StateRecorded)
	}
}

// TestHoldKeepsReaperOff: a held episode outlives the idle timeout until
// its hold ends, whatever the reaper's timing; releasing the hold hands it
// back to the idle rule.
func TestHoldKeepsReaperOff(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, func(c *Config) { c.IdleTimeout = time.Hour })
	held, free := e.create(), e.create()
	now := time.Now()
	if err := e.srv.Hold(held.EpisodeID, now.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := e.srv.reapIdle(now.Add(2 * time.Hour)); !cmp.Equal([]string{free.EpisodeID}, got) {
		t.Errorf("reaped within the hold: %v, want only %s", got, free.EpisodeID)
	}
	if got := e.srv.reapIdle(now.Add(4 * time.Hour)); !cmp.Equal([]string{held.EpisodeID}, got) {
		t.Errorf("reaped after the hold: %v, want %s", got, held.EpisodeID)
	}
	if err := e.srv.Hold("ep-nope", now); !errors.Is(err, ErrUnknownEpisode) {
		t.Errorf("hold of an unknown episode: %v, want ErrUnknownEpisode", err)
	}
}

// TestShutdownInFlight: a call in flight when Shutdown begins completes,
// its answer reaches the client, its events are in the trajectory, and the
// episode is closed afterwards. In a synctest bubble on memnet, where
// synctest.Wait tells when Shutdown is waiting for the call.
func TestShutdownInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		b := &fake.Backend{Exec: func(ctx context.Context, _ *fake.Sandbox, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
			if req.Command == "slow" {
				close(entered)
				<-release
			}
			return sandbox.ExecResult{Output: "done " + req.Command + "\n", Shell: "bash"}, nil
		}}
		e := newBubbleEnv(t, b, nil)
		cr := e.create()
		type answer struct {
			code int
			res  CallResponse
		}
		got := make(chan answer)
		go func() {
			var a answer
			a.code, _ = e.do("POST", "/v1/episodes/"+cr.EpisodeID+"/calls", cr.Token, toolcall.Call{Tool: "bash", Args: []byte(`{"command":"slow"}`)}, &a.res)
			got <- a
		}()
		<-entered
		shut := make(chan error)
		go func() { shut <- e.srv.Shutdown(context.Background()) }()
		// New requests are refused once shutdown began (synctest.Wait: it is
		// waiting for the call in flight).
		synctest.Wait()
		if code, _ := e.do("GET", "/v1/episodes", testAdmin, nil, nil); code != http.StatusServiceUnavailable {
			t.Errorf("request during shutdown: %d, want 503", code)
		}
		close(release)
		a := <-got
		if err := <-shut; err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		if a.code != 200 || a.res.Output != "done slow\n" {
			t.Fatalf("in-flight call: %d %+v", a.code, a.res)
		}
		var outputs []string
		for _, to := range harnesstest.Payloads[trajectory.ToolOutput](t, e.events(cr.EpisodeID), trajectory.TypeToolOutput) {
			outputs = append(outputs, to.Output)
		}
		if diff := cmp.Diff([]string{"done slow\n"}, outputs); diff != "" {
			t.Errorf("recorded outputs (-want +got):\n%s", diff)
		}
		if st, _ := e.srv.episodes[cr.EpisodeID].getState(); st != StateClosed {
			t.Errorf("state after shutdown: %s", st)
		}
	})
}

// TestOpenAPI: the checked-in docs/openapi.yaml is the embedded one, it
// parses, and it documents every route.
func TestOpenAPI(t *testing.T) {
	docs, err := os.ReadFile(filepath.Join("..", "docs", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(docs, OpenAPI) {
		t.Fatal("docs/openapi.yaml differs from server/openapi.yaml: cp server/openapi.yaml docs/openapi.yaml")
	}
	var doc struct {
		OpenAPI string                    `yaml:"openapi"`
		Paths   map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	routes := []string{"GET /healthz", "GET /metrics", "GET /openapi.yaml", "POST /v1/episodes", "GET /v1/episodes",
		"GET /v1/episodes/{id}", "DELETE /v1/episodes/{id}", "POST /v1/episodes/{id}/calls", "POST /v1/episodes/{id}/submit", "POST /v1/episodes/{id}/fork",
		"GET /v1/episodes/{id}/trajectory", "GET /v1/episodes/{id}/stream", "GET /v1/stream/finished",
		"POST /v1/episodes/{id}/mcp", "POST /v1/episodes/{id}/chat/completions", "POST /v1/chat/completions",
		"POST /v1/groups", "GET /v1/groups/{id}", "GET /v1/episodes/{id}/samples", "POST /v1/episodes/{id}/verdicts",
		"POST /v1/episodes/{id}/v1/chat/completions", "POST /v1/episodes/{id}/v1/completions", "POST /v1/episodes/{id}/v1/messages",
		"GET /v1/episodes/{id}/v1/models", "POST /v1/completions", "POST /v1/messages", "GET /v1/models", "POST /sessions/{sid}/v1/chat/completions"}
	for _, r := range routes {
		method, path, _ := strings.Cut(r, " ")
		if _, ok := doc.Paths[path][strings.ToLower(method)]; !ok {
			t.Errorf("openapi.yaml does not document %s", r)
		}
	}
	e := newEnv(t, &fake.Backend{}, nil)
	resp, err := http.Get(e.http.URL + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	served, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(served, OpenAPI) {
		t.Error("/openapi.yaml serves something else")
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"empty", Config{}, "Config.Runner is nil"},
		{"bad policy url", Config{PolicyURL: "localhost:8000"}, "PolicyURL"},
		{"negative burst", Config{Burst: -1}, "Burst -1"},
	}
	for _, tc := range tests {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestCreateByInstanceID: a create names a loaded task by its task id or,
// where they differ (a Harbor task's name), by its benchmark instance id;
// an instance id two tasks carry is refused with their task ids.
func TestCreateByInstanceID(t *testing.T) {
	named := func(id, inst string) task.Task {
		tk := fakeTask
		tk.ID, tk.InstanceID = id, inst
		return tk
	}
	e := newEnv(t, &fake.Backend{}, func(c *Config) {
		c.Tasks = []task.Task{named("wrap-width", "demo/wrap-width"), named("a", "org/twice"), named("b", "org/twice"),
			named("django__django-1", "django__django-1")}
	})
	tests := []struct {
		taskID   string
		wantCode int
		want     string // the task created, or a part of the error
	}{
		{"wrap-width", 201, "wrap-width"},
		{"demo/wrap-width", 201, "wrap-width"},
		{"django__django-1", 201, "django__django-1"},
		{"org/twice", 400, `"org/twice" is the instance id of tasks a, b: give one of their task ids`},
		{"demo/nope", 400, `unknown task "demo/nope"`},
	}
	for _, tc := range tests {
		var cr CreateResponse
		var ae apiError
		code, _ := e.do("POST", "/v1/episodes", testAdmin, CreateRequest{TaskID: tc.taskID}, &cr)
		if code != 201 {
			e.do("POST", "/v1/episodes", testAdmin, CreateRequest{TaskID: tc.taskID}, &ae)
		}
		switch {
		case code != tc.wantCode:
			t.Errorf("task_id %q: status %d (%s), want %d", tc.taskID, code, ae.Error, tc.wantCode)
		case code == 201 && cr.TaskID != tc.want:
			t.Errorf("task_id %q: created a %q episode, want %q", tc.taskID, cr.TaskID, tc.want)
		case code != 201 && !strings.Contains(ae.Error, tc.want):
			t.Errorf("task_id %q: error %q, want it to say %q", tc.taskID, ae.Error, tc.want)
		}
	}
}
