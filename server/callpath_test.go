package server

import (
	"testing"

	"github.com/rollcage/rollcage/harness/harnesstest"
	"github.com/rollcage/rollcage/sandbox/fake"
)

// TestCallPath follows gateway calls to the episode's sandbox and holds
// each to server → harness → monitor, every package entered once: on
// each stack, and by one function from one place across all the places
// one call reaches the sandbox (execute, and the check reading back what
// it wrote). A foreign tool name, mapped on the way, takes the same path;
// what returns before the sandbox (the mapping and argument checks) does
// too: the gateway cannot import the monitor (TestLayering).
// TestLoopCallPath in package harness does the same for the built-in
// loop.
func TestCallPath(t *testing.T) {
	cp := &harnesstest.CallPath{}
	e := newEnv(t, harnesstest.ObserveBackend(&fake.Backend{}, cp), nil)
	cr := e.create()
	bodies := []string{
		`{"tool":"bash","args":{"command":"echo a"}}`,
		`{"tool":"execute_bash","args":{"command":"echo b > notes.txt"}}`,
		`{"tool":"str_replace_editor","args":{"command":"create","path":"/workspace/n.py","file_text":"x = 1\n"}}`,
		`{"tool":"edit","args":{"path":"/workspace/n.py","old":"x = 1","new":"x = 2"}}`,
	}
	for _, body := range bodies {
		cp.Begin()
		var res CallResponse
		if code, _ := e.do("POST", "/v1/episodes/"+cr.EpisodeID+"/calls", cr.Token, body, &res); code != 200 {
			t.Fatalf("%s: %d %+v", body, code, res)
		}
	}
	calls := cp.Calls()
	if len(calls) != len(bodies) {
		t.Fatalf("%d calls observed, want %d", len(calls), len(bodies))
	}
	for i, stacks := range calls {
		if len(stacks) == 0 {
			t.Errorf("call %d (%s) never reached the sandbox", i+1, bodies[i])
		}
		for _, p := range harnesstest.Check(stacks, []string{"server", "harness", "monitor"}) {
			t.Errorf("call %d (%s): %s", i+1, bodies[i], p)
		}
	}
}
