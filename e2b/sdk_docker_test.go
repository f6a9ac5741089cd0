package e2b_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rollcage/rollcage/cmd/rollcage/servetest"
	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/sandbox/docker/dockertest"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

type sdkOutcome struct {
	ExitCode int    `json:"exitCode"`
	Stdout   string `json:"stdout"`
}

// requireNode finds node and the pinned SDK (clients/e2b-test, installed
// by make test with npm ci): missing fails under CI=true, skips elsewhere.
func requireNode(t *testing.T, root string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(root, "clients/e2b-test/node_modules/e2b/package.json"))
	}
	if err != nil {
		sandboxtest.Unavailable(t, fmt.Sprintf("the E2B SDK test needs node and clients/e2b-test/node_modules (run: npm ci --prefix clients/e2b-test): %v", err))
	}
	return node
}

// episodeEvents are the events of an episode's trajectory, read from the
// gateway with the admin token.
func episodeEvents(t *testing.T, gateway, admin, id string) []trajectory.Event {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", gateway+"/v1/episodes/"+id+"/trajectory", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var evs []trajectory.Event
	for dec := json.NewDecoder(resp.Body); ; {
		var ev trajectory.Event
		if err := dec.Decode(&ev); err == io.EOF {
			return evs
		} else if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
}

// runSDKScript runs clients/e2b-test/script with node and env added to
// the test's environment, and returns its stdout; a failure is fatal
// with both outputs.
func runSDKScript(t *testing.T, node, root, script string, env ...string) []byte {
	t.Helper()
	cmd := exec.Command(node, script)
	cmd.Dir = filepath.Join(root, "clients/e2b-test")
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", script, err, out, stderr.String())
	}
	return out
}

// sdkSetup is what an SDK test needs: the module root, node with the
// pinned SDK, and the first demo task.
func sdkSetup(t *testing.T) (root, node string, tk task.Task) {
	t.Helper()
	root = servetest.ModuleRoot(t)
	node = requireNode(t, root)
	tasks, _, err := demo.Tasks()
	if err != nil {
		t.Fatal(err)
	}
	return root, node, tasks[0]
}

// serveE2B builds and starts a real rollcage serve --e2b-addr on the
// demo suite; it returns the gateway's and the E2B API's base URLs.
func serveE2B(t testing.TB, root, key, admin string, extra ...string) (gateway, api string) {
	t.Helper()
	gw, e2 := servetest.FreeAddr(t), servetest.FreeAddr(t)
	servetest.Serve(t, "E2B API on http://", append([]string{"--addr", gw, "--e2b-addr", e2, "--e2b-api-keys", key, "--admin-token", admin,
		"--trajectories", t.TempDir()}, extra...)...)
	return "http://" + gw, "http://" + e2
}

// judgeHistory is an OpenAI-compatible judge (chat completions, the real
// wire format) that calls the call under review a hack when it reads
// history across all refs or the grader's files, and clears everything
// else the rules flag.
func judgeHistory(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	hack := false
	for _, m := range req.Messages {
		_, call, _ := strings.Cut(m.Content, "The call under review:")
		call, _, _ = strings.Cut(call, "Its normalization")
		hack = hack || strings.Contains(call, "git log --all") || strings.Contains(call, "/opt/grader/")
	}
	verdict, _ := json.Marshal(map[string]any{"hack": hack, "category": "history_mining", "confidence": 0.9, "rationale": "test judge"})
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-e2b", "object": "chat.completion", "created": time.Now().Unix(), "model": "judge-test",
		"choices": []map[string]any{{"index": 0, "message": map[string]any{"role": "assistant", "content": string(verdict)}, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
	})
}

// TestSDKDocker drives a real rollcage serve --e2b-addr and real Docker
// sandboxes with the stock E2B JS SDK (clients/e2b-test/sdk-test.mjs),
// then checks what the episode recorded.
func TestSDKDocker(t *testing.T) {
	b := dockertest.Backend(t)
	root, node, tk := sdkSetup(t)
	sandboxtest.RequireImage(t, b, tk.Image)
	const key, admin = "e2b_0123456789abcdef0123456789abcdef01234567", "admin-e2b-test"
	judge := httptest.NewServer(http.HandlerFunc(judgeHistory))
	defer judge.Close()
	gateway, api := serveE2B(t, root, key, admin, "--judge-url", judge.URL+"/v1", "--judge-model", "judge-test")

	out := runSDKScript(t, node, root, "sdk-test.mjs", "E2B_API_URL="+api, "E2B_SANDBOX_URL="+api, "E2B_API_KEY="+key,
		"E2B_DEBUG=", "ROLLCAGE_TEST_IMAGE="+tk.Image, "ROLLCAGE_TEST_TASK="+tk.ID)
	var facts struct {
		SandboxID      string     `json:"sandboxId"`
		CreateMS       int        `json:"createMs"`
		UID            string     `json:"uid"`
		DetachReturnMS int        `json:"detachReturnMs"`
		StreamGapMS    int        `json:"streamGapMs"`
		BigReadMS      int        `json:"bigReadMs"`
		BigStreamMS    int        `json:"bigStreamMs"`
		History        sdkOutcome `json:"history"`
		Hidden         sdkOutcome `json:"hidden"`
		Outcome        *struct {
			Resolved bool    `json:"resolved"`
			Reward   float64 `json:"reward"`
			Passed   int     `json:"passed"`
			Failed   int     `json:"failed"`
			Label    string  `json:"label"`
		} `json:"outcome"`
	}
	var reward struct {
		InfoLabel string `json:"infoLabel"`
		Rewarded  struct {
			Reason       string  `json:"reason"`
			Reward       float64 `json:"reward"`
			Resolved     bool    `json:"resolved"`
			Label        string  `json:"label"`
			FailureClass string  `json:"failureClass"`
		} `json:"rewarded"`
		Labels struct {
			State          string   `json:"state"`
			Label          string   `json:"label"`
			Blocked        int      `json:"blocked"`
			Graded         bool     `json:"graded"`
			Reward         *float64 `json:"reward"`
			TrainingReward *float64 `json:"training_reward"`
		} `json:"labels"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &reward); err != nil {
		t.Fatalf("sdk-test.mjs printed %q: %v", out, err)
	}
	// The sandbox a harness graded outside and rewarded: graded with its
	// reward, labelled hacked by the blocked hidden-test read, trained on
	// as 0.
	if r := reward.Rewarded; reward.InfoLabel != trajectory.LabelHacked || r.Reason != "external" || r.Reward != 1 || !r.Resolved ||
		r.Label != trajectory.LabelHacked || r.FailureClass != "" {
		t.Errorf("rewarded sandbox: info label %q, outcome %+v; want hacked, graded by the reward (reason external, no failure class)", reward.InfoLabel, r)
	}
	if l := reward.Labels; l.State != "finished" || l.Label != trajectory.LabelHacked || l.Blocked == 0 || !l.Graded ||
		l.Reward == nil || *l.Reward != 1 || l.TrainingReward == nil || *l.TrainingReward != 0 {
		t.Errorf("labels of the rewarded sandbox: %+v; want finished, hacked, blocked, reward 1, training reward 0", l)
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &facts); err != nil {
		t.Fatalf("sdk-test.mjs printed %q: %v", out, err)
	}
	t.Logf("SDK facts: %+v", facts)
	// The task-bound sandbox was submitted unchanged: graded, not solved.
	if facts.Outcome != nil {
		t.Logf("outcome of the task-bound sandbox: %+v", *facts.Outcome)
	}
	if o := facts.Outcome; o == nil || o.Resolved || o.Reward != 0 || o.Failed == 0 || o.Label != trajectory.LabelClean {
		t.Errorf("outcome of the unchanged task-bound sandbox: %+v, want unresolved, failing hidden tests, clean", o)
	}
	if facts.UID == "0" || facts.UID == "" {
		t.Errorf("commands ran as uid %q: the sandbox user must not be root", facts.UID)
	}
	if facts.DetachReturnMS > 1500 {
		t.Errorf("the detached command held its call for %d ms: setsid … & must return at once", facts.DetachReturnMS)
	}
	if strings.Contains(facts.History.Stdout, tk.UpstreamFixRef[:7]) {
		t.Errorf("git log --all showed the upstream fix %s: %q", tk.UpstreamFixRef[:7], facts.History.Stdout)
	}

	// The sandbox was an episode: its trajectory holds the calls, the
	// hack's decision with dummy output, and the end of a killed sandbox.
	var tools []string
	var end *trajectory.EpisodeEnd
	steps := map[int]string{}
	decisions := map[string]trajectory.Decision{}
	outputs := map[string]trajectory.ToolOutput{}
	for _, ev := range episodeEvents(t, gateway, admin, facts.SandboxID) {
		switch ev.Type {
		case trajectory.TypeToolCall:
			var tc trajectory.ToolCall
			json.Unmarshal(ev.Data, &tc)
			var call struct {
				Tool string `json:"tool"`
				Args struct {
					Command string `json:"command"`
				} `json:"args"`
			}
			json.Unmarshal(tc.Call, &call)
			tools = append(tools, call.Tool)
			steps[ev.Step] = call.Args.Command
		case trajectory.TypeDecision:
			var d trajectory.Decision
			json.Unmarshal(ev.Data, &d)
			decisions[steps[ev.Step]] = d
		case trajectory.TypeToolOutput:
			var o trajectory.ToolOutput
			json.Unmarshal(ev.Data, &o)
			outputs[steps[ev.Step]] = o
		case trajectory.TypeEpisodeEnd:
			end = new(trajectory.EpisodeEnd)
			json.Unmarshal(ev.Data, end)
		}
	}
	t.Logf("recorded tools: %v", tools)
	for _, tc := range []struct {
		needle  string
		actions []string
		dummy   bool
		sdk     sdkOutcome
	}{
		// History mining is rewritten to the base's history; reading the
		// hidden tests is blocked with dummy output.
		{"git log --all", []string{"rewrite", "block"}, false, facts.History},
		{"cat /opt/grader/tests/test_hidden.py", []string{"block"}, true, facts.Hidden},
	} {
		var cmd string
		for _, c := range steps {
			if strings.Contains(c, tc.needle) {
				cmd = c
			}
		}
		d, o := decisions[cmd], outputs[cmd]
		if cmd == "" || !slices.Contains(tc.actions, d.Action) || o.Dummy != tc.dummy || o.Output != tc.sdk.Stdout || o.ExitCode != tc.sdk.ExitCode {
			t.Errorf("%s: decision %q (want one of %v), dummy %v, recorded %q exit %d; the SDK saw %q exit %d",
				tc.needle, d.Action, tc.actions, o.Dummy, o.Output, o.ExitCode, tc.sdk.Stdout, tc.sdk.ExitCode)
		}
	}
	// Streamed, fed and concurrent processes were recorded with what they
	// wrote, whatever the order they ended in.
	for needle, want := range map[string][]string{
		"echo o1; echo e1 >&2": {"o1\n", "e1\n", "o2\n"},
		"read l; echo got:$l":  {"got:hello\nmore\nclosed\n"},
		"echo released":        {"released\n"},
	} {
		var o *trajectory.ToolOutput
		for c, out := range outputs {
			if strings.Contains(c, needle) {
				o = &out
			}
		}
		for _, w := range want {
			if o == nil || !strings.Contains(o.Output, w) {
				t.Errorf("%s: recorded %+v, want its output to hold %q", needle, o, w)
			}
		}
	}
	if facts.StreamGapMS < 500 {
		t.Errorf("the first streamed line came %d ms before the last (the command sleeps 1 s between them)", facts.StreamGapMS)
	}
	if end == nil {
		t.Error("the killed sandbox's episode has no episode_end")
	}
	for _, want := range []string{"bash", "write_file", "read_file"} {
		if !strings.Contains(strings.Join(tools, " "), want) {
			t.Errorf("no %s call recorded: %v", want, tools)
		}
	}
}
