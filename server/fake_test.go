package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/harness/harnesstest"
	"github.com/rollcage/rollcage/internal/memnet"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

// fakeTask is a task whose hidden tests, fakeHidden, are graded out of
// the policy's reach.
var fakeTask, fakeHidden = harnesstest.FakeTask("/opt/grader/tests", "/opt/grader/**"), harnesstest.FakeHidden

const testAdmin = "admin-secret"

// env is a gateway over the real harness, monitor (default rules, no
// judge) and store, with a sandbox backend of the test's choosing.
type env struct {
	t      testing.TB
	srv    *Server
	http   *httptest.Server // nil in a bubble (newBubbleEnv)
	url    string           // the gateway's base URL
	client *http.Client     // reaches url
	store  *trajectory.Store
}

// testMonitor is a monitor with the default rules and no judge.
func testMonitor(t testing.TB) *monitor.Pipeline { return harnesstest.Monitor(t, monitor.Config{}) }

func newEnv(t testing.TB, b sandbox.Backend, tweak func(*Config)) *env {
	t.Helper()
	return newEnvOn(t, false, b, tweak)
}

// newBubbleEnv is newEnv on memnet instead of loopback, for a test inside
// a synctest bubble: the gateway's timers run on the bubble's clock.
func newBubbleEnv(t testing.TB, b sandbox.Backend, tweak func(*Config)) *env {
	t.Helper()
	return newEnvOn(t, true, b, tweak)
}

func newEnvOn(t testing.TB, inMemory bool, b sandbox.Backend, tweak func(*Config)) *env {
	t.Helper()
	mon, st := testMonitor(t), harnesstest.Store(t)
	r, err := harness.NewRunner(harness.Config{Backend: b, Monitor: mon, Store: st, Limits: harness.Limits{MaxSteps: 1 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Runner: r, Store: st, Tasks: []task.Task{fakeTask}, Hidden: fakeHidden, AdminToken: testAdmin}
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var e *env
	if inMemory {
		ms := memnet.NewServer(t, srv)
		e = &env{t: t, srv: srv, url: ms.URL, client: ms.Client, store: st}
	} else {
		hs := httptest.NewServer(srv)
		t.Cleanup(hs.Close)
		e = loopbackEnv(t, srv, hs, st)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return e
}

// loopbackEnv is the env of a gateway srv served by hs.
func loopbackEnv(t testing.TB, srv *Server, hs *httptest.Server, st *trajectory.Store) *env {
	return &env{t: t, srv: srv, http: hs, url: hs.URL, client: hs.Client(), store: st}
}

// do sends a JSON request and decodes a JSON answer into out (if not nil).
func (e *env) do(method, path, token string, body any, out any) (int, http.Header) {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = strings.NewReader(string(data))
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s %s: %d %s: decode: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode, resp.Header
}

// create starts an episode of the fake task.
func (e *env) create() CreateResponse {
	e.t.Helper()
	var cr CreateResponse
	if code, _ := e.do("POST", "/v1/episodes", testAdmin, CreateRequest{TaskID: fakeTask.ID}, &cr); code != http.StatusCreated {
		e.t.Fatalf("create: status %d", code)
	}
	return cr
}

func (e *env) events(id string) []trajectory.Event {
	e.t.Helper()
	return harnesstest.Events(e.t, e.store, id)
}

func eventTypes(evs []trajectory.Event) []string { return harnesstest.Types(evs) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
