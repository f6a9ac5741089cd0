package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rollcage/rollcage/harness/harnesstest"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// TestCallChecks: foreign tool names run as rollcage's tools; a retried request id answers the
// first run without a new step, a reused one with another call is 409;
// wrong methods and upgrade errors answer JSON; the bearer scheme is
// case-insensitive.
func TestCallChecks(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, nil)
	cr := e.create()
	path := "/v1/episodes/" + cr.EpisodeID
	var res CallResponse
	if code, _ := e.do("POST", path+"/calls", cr.Token, `{"tool":"execute_bash","args":{"command":"echo oh"},"request_id":"r1"}`, &res); code != 200 || res.Output != "oh\n" || res.Step != 1 {
		t.Fatalf("execute_bash: %d %+v", code, res)
	}
	var again CallResponse
	if code, _ := e.do("POST", path+"/calls", cr.Token, `{"tool":"execute_bash","args":{"command": "echo oh"},"request_id":"r1"}`, &again); code != 200 || again.Step != 1 || again.Output != "oh\n" {
		t.Errorf("retry of r1: %d %+v, want step 1 again", code, again)
	}
	var ae apiError
	if code, _ := e.do("POST", path+"/calls", cr.Token, `{"tool":"bash","args":{"command":"echo other"},"request_id":"r1"}`, &ae); code != http.StatusConflict || !strings.Contains(ae.Error, "r1") {
		t.Errorf("r1 reused for another call: %d %q, want 409", code, ae.Error)
	}
	if code, _ := e.do("POST", path+"/calls", cr.Token, `{"tool":"str_replace_editor","args":{"command":"create","path":"/workspace/n.txt","file_text":"x"}}`, &res); code != 200 || res.Step != 2 {
		t.Errorf("str_replace_editor create: %d %+v", code, res)
	}
	var calls []string
	for _, tc := range harnesstest.Payloads[trajectory.ToolCall](t, e.events(cr.EpisodeID), trajectory.TypeToolCall) {
		var c toolcall.Call
		json.Unmarshal(tc.Call, &c)
		calls = append(calls, c.Tool+"/"+tc.ToolCallID)
	}
	if strings.Join(calls, ",") != "bash/r1,write_file/" {
		t.Errorf("recorded calls %v, want [bash/r1 write_file/]", calls)
	}

	// Wrong method, upgrade errors: JSON. Lowercase scheme: accepted.
	req, _ := http.NewRequest("GET", e.http.URL+path+"/calls", nil)
	req.Header.Set("Authorization", "bearer "+cr.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ae = apiError{}
	json.NewDecoder(resp.Body).Decode(&ae)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(ae.Error, "POST") {
		t.Errorf("GET /calls: %d %q, want 405 in JSON naming POST", resp.StatusCode, ae.Error)
	}
	req, _ = http.NewRequest("GET", e.http.URL+path+"/stream", nil)
	req.Header.Set("Authorization", "BEARER "+cr.Token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ae = apiError{}
	derr := json.NewDecoder(resp.Body).Decode(&ae)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || derr != nil || ae.Error == "" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("stream without an upgrade: %d %q (%v), want 400 in JSON", resp.StatusCode, ae.Error, derr)
	}
}

// TestArgumentChecks: one table of bad arguments, each sent through
// /calls (a 400 naming the field) and MCP (an error result naming it),
// neither of which runs the call or numbers a step.
func TestArgumentChecks(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, nil)
	cr := e.create()
	cs := mcpConnect(t, cr)
	for _, tc := range []struct {
		tool, args, field string
	}{
		{"bash", `{}`, `"args.command"`},
		{"bash", `{"command":"  "}`, `"args.command"`},
		{"bash", `{"command":"ls","timeout_sec":-1}`, `"args.timeout_sec"`},
		{"bash", `{"command":"ls","timeout_sec":1e9}`, `"args.timeout_sec"`},
		{"execute_bash", `{}`, `"args.command"`},
	} {
		var ae apiError
		body := `{"tool":"` + tc.tool + `","args":` + tc.args + `}`
		if code, _ := e.do("POST", "/v1/episodes/"+cr.EpisodeID+"/calls", cr.Token, body, &ae); code != 400 || !strings.Contains(ae.Error, tc.field) {
			t.Errorf("/calls %s: %d %q, want 400 naming %s", body, code, ae.Error, tc.field)
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(tc.args), &args); err != nil {
			t.Fatal(err)
		}
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		if got := resultText(t, r); !r.IsError || !strings.Contains(got, tc.field) {
			t.Errorf("MCP %s %s: %q (error %v), want an error naming %s", tc.tool, tc.args, got, r.IsError, tc.field)
		}
	}
	for _, ev := range e.events(cr.EpisodeID) {
		if ev.Type == trajectory.TypeToolCall {
			t.Errorf("a call with bad arguments was recorded at step %d", ev.Step)
		}
	}
}

// TestMCPForeignAndIDs: MCP takes OpenHands' tool names and a call's
// _meta tool_call_id, which names the call in the trajectory and makes
// its retry idempotent.
func TestMCPForeignAndIDs(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, nil)
	cr := e.create()
	ctx := context.Background()
	cs := mcpConnect(t, cr)
	p := &mcp.CallToolParams{Name: "execute_bash", Arguments: map[string]any{"command": "echo via openhands"}, Meta: mcp.Meta{"tool_call_id": "toolu_7"}}
	for i := range 2 {
		r, err := cs.CallTool(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if got := resultText(t, r); got != "via openhands\n" || r.IsError {
			t.Errorf("execute_bash #%d: %q (error %v)", i, got, r.IsError)
		}
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo x"}, Meta: mcp.Meta{"tool_call_id": "toolu_7"}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsError || !strings.Contains(resultText(t, r), "toolu_7") {
		t.Errorf("reused tool_call_id: %q error=%v", resultText(t, r), r.IsError)
	}
	var ids []string
	for _, o := range harnesstest.Payloads[trajectory.ToolOutput](t, e.events(cr.EpisodeID), trajectory.TypeToolOutput) {
		ids = append(ids, o.ToolCallID)
	}
	if strings.Join(ids, ",") != "toolu_7" {
		t.Errorf("tool outputs recorded for %v, want one for toolu_7", ids)
	}
}
