package server

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// TestFork: the parent's token (or the admin's) forks its episode; each
// child has its own token that acts on that child only; children are
// graded on their own while the parent goes on; bad n and finished or
// foreign episodes get a clear error.
func TestFork(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, nil)
	a, b := e.create(), e.create()
	call := toolcall.Call{Tool: "bash", Args: []byte(`{"command":"echo x"}`)}
	calls := func(id string) string { return "/v1/episodes/" + id + "/calls" }
	fork := func(id string) string { return "/v1/episodes/" + id + "/fork" }
	if code, _ := e.do("POST", calls(a.EpisodeID), a.Token, call, nil); code != http.StatusOK {
		t.Fatalf("call: %d", code)
	}

	var fr ForkResponse
	if code, _ := e.do("POST", fork(a.EpisodeID), a.Token, ForkRequest{N: 2}, &fr); code != http.StatusCreated {
		t.Fatalf("fork with the parent's token: status %d", code)
	}
	if fr.ParentEpisodeID != a.EpisodeID || fr.BranchStep != 1 || fr.ForkGroupID != a.EpisodeID+".b1" || len(fr.Episodes) != 2 {
		t.Fatalf("fork: %+v; want 2 episodes of parent %s at step 1", fr, a.EpisodeID)
	}
	k1, k2 := fr.Episodes[0], fr.Episodes[1]
	toks := []string{a.Token, b.Token, k1.Token, k2.Token}
	slices.Sort(toks)
	if len(slices.Compact(toks)) != 4 || k1.EpisodeID == k2.EpisodeID {
		t.Fatalf("children %s, %s: want their own ids and tokens", k1.EpisodeID, k2.EpisodeID)
	}
	if k1.TaskID != fakeTask.ID || !strings.HasSuffix(k1.CallsURL, "/v1/episodes/"+k1.EpisodeID+"/calls") || k1.Workdir != fakeTask.Workdir {
		t.Errorf("child 1: %+v; want the task and its own URLs", k1)
	}
	var start trajectory.EpisodeStart
	if err := e.events(k1.EpisodeID)[0].Decode(&start); err != nil || start.Fork == nil || start.Fork.ParentEpisodeID != a.EpisodeID {
		t.Errorf("child 1's episode_start %+v (%v); want fork naming %s", start, err, a.EpisodeID)
	}

	tests := []struct {
		name, method, path, token string
		body                      any
		want                      int
	}{
		{"child on itself", "POST", calls(k1.EpisodeID), k1.Token, call, http.StatusOK},
		{"child on parent", "POST", calls(a.EpisodeID), k1.Token, call, http.StatusForbidden},
		{"child on sibling", "GET", "/v1/episodes/" + k2.EpisodeID, k1.Token, nil, http.StatusForbidden},
		{"child forks parent", "POST", fork(a.EpisodeID), k1.Token, ForkRequest{N: 1}, http.StatusForbidden},
		{"parent on child", "POST", calls(k1.EpisodeID), a.Token, call, http.StatusForbidden},
		{"other forks parent", "POST", fork(a.EpisodeID), b.Token, ForkRequest{N: 1}, http.StatusForbidden},
		{"no token", "POST", fork(a.EpisodeID), "", ForkRequest{N: 1}, http.StatusUnauthorized},
		{"n 0", "POST", fork(a.EpisodeID), a.Token, ForkRequest{N: 0}, http.StatusBadRequest},
		{"n 65", "POST", fork(a.EpisodeID), a.Token, ForkRequest{N: 65}, http.StatusBadRequest},
		{"n a string", "POST", fork(a.EpisodeID), a.Token, `{"n":"8"}`, http.StatusBadRequest},
		{"unknown field", "POST", fork(a.EpisodeID), a.Token, `{"children":8}`, http.StatusBadRequest},
		{"no body", "POST", fork(a.EpisodeID), a.Token, nil, http.StatusBadRequest},
		{"unknown episode", "POST", fork("nope"), testAdmin, ForkRequest{N: 1}, http.StatusNotFound},
		{"parent goes on", "POST", calls(a.EpisodeID), a.Token, call, http.StatusOK},
		{"child forks itself", "POST", fork(k2.EpisodeID), k2.Token, ForkRequest{N: 1}, http.StatusCreated},
		{"admin forks", "POST", fork(a.EpisodeID), testAdmin, ForkRequest{N: 1}, http.StatusCreated},
	}
	for _, tc := range tests {
		var ae apiError
		code, _ := e.do(tc.method, tc.path, tc.token, tc.body, &ae)
		if code != tc.want {
			t.Errorf("%s: status %d, want %d (%s)", tc.name, code, tc.want, ae.Error)
		}
		if code >= 400 && ae.Error == "" {
			t.Errorf("%s: status %d without an error message", tc.name, code)
		}
	}
	var ae apiError
	if e.do("POST", fork(a.EpisodeID), a.Token, ForkRequest{N: 0}, &ae); !strings.Contains(ae.Error, `"n"`) || !strings.Contains(ae.Error, "1 to 64") {
		t.Errorf("n 0: %q; want the field and the range named", ae.Error)
	}

	// A child is graded on its own; the parent is still running.
	var o harness.Outcome
	if code, _ := e.do("POST", "/v1/episodes/"+k1.EpisodeID+"/submit", k1.Token, nil, &o); code != http.StatusOK || o.EpisodeID != k1.EpisodeID || o.Steps != 3 {
		t.Errorf("submit child 1: %d %+v; want its outcome, 3 steps (1 of the parent's, its call, the submit)", code, o)
	}
	if o.ParentEpisodeID != a.EpisodeID || o.BranchStep == nil || *o.BranchStep != 1 || o.ForkGroupID != fr.ForkGroupID {
		t.Errorf("child 1's outcome: parent %q, branch %v, fork group %q; want %s, 1, %s", o.ParentEpisodeID, o.BranchStep, o.ForkGroupID, a.EpisodeID, fr.ForkGroupID)
	}
	var info EpisodeInfo
	if e.do("GET", "/v1/episodes/"+a.EpisodeID, a.Token, nil, &info); info.State != StateRunning {
		t.Errorf("parent after a child's submit: %s, want running", info.State)
	}
	if code, _ := e.do("POST", fork(k1.EpisodeID), k1.Token, ForkRequest{N: 1}, &ae); code != http.StatusConflict {
		t.Errorf("fork of a finished child: %d (%s), want 409", code, ae.Error)
	}
	var list struct{ Episodes []EpisodeInfo }
	e.do("GET", "/v1/episodes", testAdmin, nil, &list)
	if len(list.Episodes) != 6 { // a, b, 2 children, a grandchild, the admin's child
		t.Errorf("list has %d episodes, want 6", len(list.Episodes))
	}
}

// TestForkUnsupported: a backend that cannot fork answers 501 with its
// reason.
func TestForkUnsupported(t *testing.T) {
	e := newEnv(t, &fake.Backend{NoFork: true}, nil)
	a := e.create()
	var ae apiError
	if code, _ := e.do("POST", "/v1/episodes/"+a.EpisodeID+"/fork", a.Token, ForkRequest{N: 2}, &ae); code != http.StatusNotImplemented || !strings.Contains(ae.Error, "not supported") {
		t.Errorf("fork: %d %q; want 501 saying it is not supported", code, ae.Error)
	}
}

// TestForkRequestIDs: a fork child knows the request ids of the prefix
// it shares with its parent: one of them with a different call is
// refused (409), a retry of the same call gets the parent's answer
// without running again, and the parent's ids after the fork are none of
// the child's.
func TestForkRequestIDs(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, nil)
	a := e.create()
	calls := func(id string) string { return "/v1/episodes/" + id + "/calls" }
	echo := func(id, word string) string {
		return `{"tool":"bash","args":{"command":"echo ` + word + `"},"request_id":"` + id + `"}`
	}
	var first CallResponse
	if code, _ := e.do("POST", calls(a.EpisodeID), a.Token, echo("r1", "before"), &first); code != http.StatusOK {
		t.Fatalf("parent's call: %d", code)
	}
	var fr ForkResponse
	if code, _ := e.do("POST", "/v1/episodes/"+a.EpisodeID+"/fork", a.Token, ForkRequest{N: 1}, &fr); code != http.StatusCreated {
		t.Fatalf("fork: %d", code)
	}
	if code, _ := e.do("POST", calls(a.EpisodeID), a.Token, echo("r2", "parent-after"), nil); code != http.StatusOK {
		t.Fatalf("parent's call after the fork: %d", code)
	}
	kid := fr.Episodes[0]
	tests := []struct {
		name, body string
		want       int
		step       int    // of the answer, when 200
		output     string // of the answer, when 200
		msg        string // in the error, otherwise
	}{
		{"prefix id, other call", echo("r1", "different"), http.StatusConflict, 0, "", `request_id "r1" was already used for a different call`},
		{"prefix id, same call", echo("r1", "before"), http.StatusOK, first.Step, first.Output, ""},
		{"parent's id after the fork", echo("r2", "child"), http.StatusOK, 2, "child\n", ""},
		{"new id", echo("r3", "child-new"), http.StatusOK, 3, "child-new\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var res CallResponse
			var ae apiError
			out := any(&res)
			if tc.want != http.StatusOK {
				out = &ae
			}
			code, _ := e.do("POST", calls(kid.EpisodeID), kid.Token, tc.body, out)
			if code != tc.want || (code == http.StatusOK && (res.Step != tc.step || res.Output != tc.output)) ||
				(code != http.StatusOK && !strings.Contains(ae.Error, tc.msg)) {
				t.Errorf("got %d step %d output %q error %q; want %d step %d output %q error %q", code, res.Step, res.Output, ae.Error, tc.want, tc.step, tc.output, tc.msg)
			}
		})
	}
	var steps int
	for _, ev := range e.events(kid.EpisodeID) {
		if ev.Type == trajectory.TypeToolCall && ev.Step > 1 {
			steps++
		}
	}
	if steps != 2 {
		t.Errorf("the child ran %d calls of its own, want 2 (r2 and r3; the r1 retry must not run)", steps)
	}
}
