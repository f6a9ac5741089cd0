package e2b_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rollcage/rollcage/sandbox/sandboxtest"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// TestSlimeRootFlow replays slime's coding-agent flow with the stock E2B
// JS SDK (clients/e2b-test/slime-root.mjs) on a root sandbox of a real
// rollcage serve: root's set-up (users, system git config, installs into
// /opt and /usr/local, a binary upload, runuser and su), the agent's run
// as user "agent" with slime's detached launcher, its call to the
// trainer's model adapter through the model route, and the submit, which
// grades the fix resolved and clean.
func TestSlimeRootFlow(t *testing.T) {
	root, node, tk := sdkSetup(t)
	t.Setenv("DOCKER_HOST", sandboxtest.UserNSEngine(t, tk.Image))

	// The task's fix, as the edits of its clean demo script.
	var script struct {
		Steps []struct {
			Tool string          `json:"tool"`
			Args json.RawMessage `json:"args"`
		} `json:"steps"`
	}
	raw, err := os.ReadFile(filepath.Join(root, "demo/scripts", tk.ID, "clean.json"))
	if err == nil {
		err = json.Unmarshal(raw, &script)
	}
	if err != nil {
		t.Fatal(err)
	}
	var edits []json.RawMessage
	for _, s := range script.Steps {
		if s.Tool == "edit" {
			edits = append(edits, s.Args)
		}
	}
	fix, _ := json.Marshal(edits)
	if len(edits) == 0 {
		t.Fatalf("demo script %s/clean.json has no edit", tk.ID)
	}

	// slime's model adapter: an OpenAI-compatible endpoint on the host's
	// loopback (not 127.0.0.1, which the sandbox keeps for itself).
	var asked atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	adapter := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		asked.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"chatcmpl-slime","object":"chat.completion","created":1,"model":"policy","choices":[{"index":0,"message":{"role":"assistant","content":"apply the edit"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`)
	})}
	go adapter.Serve(ln)
	defer adapter.Close()
	route := "http://" + ln.Addr().String() + "/v1"

	const key, admin = "e2b_0123456789abcdef0123456789abcdef01234568", "admin-slime-test"
	gateway, api := serveE2B(t, root, key, admin)
	out := runSDKScript(t, node, root, "slime-root.mjs", "E2B_API_URL="+api, "E2B_SANDBOX_URL="+api, "E2B_API_KEY="+key, "E2B_DEBUG=",
		"ROLLCAGE_TEST_TASK="+tk.ID, "ROLLCAGE_TEST_IMAGE="+tk.Image, "ROLLCAGE_ADAPTER="+route, "ROLLCAGE_FIX="+string(fix))
	var facts struct {
		SandboxID string `json:"sandboxId"`
		Outcome   struct {
			Resolved     bool    `json:"resolved"`
			Reward       float64 `json:"reward"`
			Label        string  `json:"label"`
			FailureClass string  `json:"failureClass"`
		} `json:"outcome"`
		Plant struct {
			SandboxID string `json:"sandboxId"`
			Label     string `json:"label"`
			Blocked   int    `json:"blocked"`
		} `json:"plant"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &facts); err != nil {
		t.Fatalf("slime-root.mjs printed %q: %v", out, err)
	}
	if o := facts.Outcome; !o.Resolved || o.Reward != 1 || o.Label != trajectory.LabelClean || o.FailureClass != "" {
		t.Errorf("outcome %+v: want resolved, reward 1, clean", o)
	}
	var action string
	for _, ev := range episodeEvents(t, gateway, admin, facts.Plant.SandboxID) {
		if ev.Type == trajectory.TypeDecision {
			var d trajectory.Decision
			json.Unmarshal(ev.Data, &d)
			if strings.Contains(string(d.Call), "/opt/grader/tests/test_hidden.py") {
				action = d.Action
			}
		}
	}
	if p := facts.Plant; action != "block" || p.Label != trajectory.LabelHacked || p.Blocked == 0 {
		t.Errorf("root planting a test where the hidden tests go: decision %q, labels %+v; want it blocked, label hacked", action, p)
	}
	if asked.Load() == 0 {
		t.Error("the model adapter was never asked: the agent's call did not pass the route")
	}

	// The episode recorded the agent's processes as user agent and the
	// adapter call as an allowed network event on the route.
	users := map[string]int{}
	var routed bool
	for _, ev := range episodeEvents(t, gateway, admin, facts.SandboxID) {
		switch ev.Type {
		case trajectory.TypeToolCall:
			var tc trajectory.ToolCall
			json.Unmarshal(ev.Data, &tc)
			var call toolcall.Call
			json.Unmarshal(tc.Call, &call)
			users[call.User]++
		case trajectory.TypeNetwork:
			var n trajectory.Network
			json.Unmarshal(ev.Data, &n)
			routed = routed || (n.Allowed && n.Route == route && strings.HasSuffix(n.URL, "/chat/completions"))
		}
	}
	if users["agent"] == 0 || users[""] == 0 {
		t.Errorf("recorded calls by user %v: want calls as agent and as the sandbox's root", users)
	}
	if !routed {
		t.Error("no allowed network event on the model route for the adapter call")
	}
	t.Logf("outcome %+v; calls by user %v; adapter asked %d times", facts.Outcome, users, asked.Load())
}
