package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rollcage/rollcage/harness/harnesstest"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// bearerTransport adds the episode token to every MCP request, as an MCP
// client configured with a URL and a token does.
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func mcpSession(t *testing.T, url, token string) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "v0"}, nil)
	return c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: bearerTransport{token, http.DefaultTransport}},
		MaxRetries: -1,
	}, nil)
}

// mcpConnect connects an MCP client to the episode cr, failing the test
// when it cannot; the session closes with the test.
func mcpConnect(t *testing.T, cr CreateResponse) *mcp.ClientSession {
	t.Helper()
	cs, err := mcpSession(t, cr.MCPURL, cr.Token)
	if err != nil {
		t.Fatalf("mcp connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func resultText(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range r.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			t.Fatalf("content %T, want text", c)
		}
		b.WriteString(tc.Text)
	}
	return b.String()
}

// TestMCP drives an episode with the go-sdk's MCP client: tools listed with
// schemas, a clean call, a hack answered with dummy output, submit.
func TestMCP(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, nil)
	cr := e.create()
	ctx := context.Background()
	cs := mcpConnect(t, cr)

	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
		if tl.InputSchema == nil {
			t.Errorf("tool %s has no schema", tl.Name)
		}
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"bash", "edit", "execute_bash", "list_dir", "read_file", "str_replace_editor", "submit", "write_file"}, names); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}

	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo via mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, r); got != "via mcp\n" || r.IsError {
		t.Errorf("bash: %q (error %v)", got, r.IsError)
	}
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/opt/grader/tests/test_hidden.py"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, r); strings.Contains(got, "canary") {
		t.Errorf("hack reached the agent: %q", got)
	}
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "submit", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, r); !strings.Contains(got, "Submitted") {
		t.Errorf("submit: %q", got)
	}
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo late"}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsError || !strings.Contains(resultText(t, r), "ended") {
		t.Errorf("call after submit: %q error=%v", resultText(t, r), r.IsError)
	}

	var info EpisodeInfo
	e.do("GET", "/v1/episodes/"+cr.EpisodeID, cr.Token, nil, &info)
	if info.State != StateFinished || info.Outcome == nil || !info.Outcome.Hacked || info.Outcome.Steps != 3 {
		t.Errorf("after MCP episode: %+v outcome %+v", info, info.Outcome)
	}
	var decisions []bool
	for _, d := range harnesstest.Payloads[trajectory.Decision](t, e.events(cr.EpisodeID), trajectory.TypeDecision) {
		decisions = append(decisions, d.Blocked)
	}
	if diff := cmp.Diff([]bool{false, true, false}, decisions); diff != "" {
		t.Errorf("recorded blocked decisions (-want +got):\n%s", diff)
	}

	// Another episode's token gets nowhere.
	other := e.create()
	if _, err := mcpSession(t, cr.MCPURL, other.Token); err == nil {
		t.Error("MCP connect with another episode's token succeeded")
	}
}

// TestToolsAgree: the tools an episode's creation lists and those MCP's
// tools/list offers are monitor's registry, schemas byte for byte as
// JSON values (the built-in loop's are checked in harness).
func TestToolsAgree(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, nil)
	cr := e.create()
	asJSON := func(v any) any {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var out any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	type tool struct {
		Name, Description string
		Schema            any
	}
	var want []tool
	for _, tl := range toolcall.Tools() {
		want = append(want, tool{tl.Name, tl.Description, asJSON(tl.Schema)})
	}
	var created []tool
	for _, tl := range cr.Tools {
		if tl.Type != "function" {
			t.Errorf("tool %s has type %q, want function", tl.Function.Name, tl.Type)
		}
		created = append(created, tool{tl.Function.Name, tl.Function.Description, asJSON(tl.Function.Parameters)})
	}
	if d := cmp.Diff(want, created); d != "" {
		t.Errorf("create response's tools differ from the registry (-want +got):\n%s", d)
	}

	cs := mcpConnect(t, cr)
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var listed []tool
	for _, tl := range lt.Tools {
		listed = append(listed, tool{tl.Name, tl.Description, asJSON(tl.InputSchema)})
	}
	for _, tl := range toolcall.ForeignTools() {
		want = append(want, tool{tl.Name, tl.Description, asJSON(tl.Schema)})
	}
	byName := cmpopts.SortSlices(func(a, b tool) bool { return a.Name < b.Name })
	if d := cmp.Diff(want, listed, byName); d != "" {
		t.Errorf("MCP tools/list differs from the registry (-want +got):\n%s", d)
	}
}
