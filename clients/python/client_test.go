package python_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rollcage/rollcage/cmd/rollcage/servetest"
	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/sandbox/docker/dockertest"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
	"github.com/rollcage/rollcage/task"
)

func TestMain(m *testing.M) { sandboxtest.Main(m) }

// requirePython finds python3: missing fails under CI=true, skips
// elsewhere.
func requirePython(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		sandboxtest.Unavailable(t, fmt.Sprintf("the Python client test needs python3 on PATH: %v", err))
	}
	return py
}

// scriptedModel is an OpenAI-compatible chat-completions server (the
// real wire format, vLLM's token-id extensions included) whose model
// plays a script: the k-th assistant turn of a conversation is step k as
// a tool call. Completion token ids are 1000+k and 2000+k. Like vLLM it
// returns token ids only when asked (return_token_ids) and logprobs only
// when asked (logprobs): the Python client asks for neither, so ids in
// the samples prove that the gateway asked.
func scriptedModel(t *testing.T, steps []task.Step) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
			Stream         bool `json:"stream"`
			ReturnTokenIDs bool `json:"return_token_ids"`
			Logprobs       bool `json:"logprobs"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || req.Stream {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"message":"the scripted model answers non-streamed chat completions","type":"invalid_request_error"}}`)
			return
		}
		k := 0
		for _, m := range req.Messages {
			if m.Role == "assistant" {
				k++
			}
		}
		msg := map[string]any{"role": "assistant", "content": "Done."}
		finish := "stop"
		if k < len(steps) {
			args := string(steps[k].Args)
			if args == "" || args == "null" {
				args = "{}"
			}
			msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{
				"id": fmt.Sprintf("call_%d", k), "type": "function",
				"function": map[string]any{"name": steps[k].Tool, "arguments": args}}}}
			finish = "tool_calls"
		}
		// Prompt ids extend the last turn's prompt and completion by the
		// tool output's (3000+j), as a chat template renders them.
		prompt := []int{1}
		for j := range k {
			prompt = append(prompt, 1000+j, 2000+j, 3000+j)
		}
		choice := map[string]any{"index": 0, "message": msg, "finish_reason": finish}
		resp := map[string]any{
			"id": fmt.Sprintf("chatcmpl-%d", k), "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
			"choices": []map[string]any{choice},
			"usage":   map[string]any{"prompt_tokens": len(prompt), "completion_tokens": 2, "total_tokens": len(prompt) + 2},
		}
		if req.ReturnTokenIDs {
			resp["prompt_token_ids"] = prompt
			choice["token_ids"] = []int{1000 + k, 2000 + k}
		}
		if req.Logprobs {
			choice["logprobs"] = map[string]any{"content": []map[string]any{
				{"token": "a", "logprob": -0.5, "bytes": nil, "top_logprobs": []any{}},
				{"token": "b", "logprob": -0.25, "bytes": nil, "top_logprobs": []any{}}}}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(resp)
	}))
}

// TestPythonClient runs the Python client's unittest suite (tests/) with
// the machine's python3 against a real rollcage serve and real Docker
// sandboxes, a scripted model behind the recording proxy.
func TestPythonClient(t *testing.T) {
	b := dockertest.Backend(t)
	py := requirePython(t)
	root := servetest.ModuleRoot(t)
	tasks, _, err := demo.Tasks()
	if err != nil {
		t.Fatal(err)
	}
	tk := tasks[0]
	sandboxtest.RequireImage(t, b, tk.Image)
	scripts, err := demo.Scripts()
	if err != nil {
		t.Fatal(err)
	}
	var steps []task.Step
	for _, s := range scripts {
		if s.Task == tk.ID && s.Kind == "clean" {
			// The fix and the submit, after one look around: a short
			// honest episode.
			steps = append(steps, s.Steps[0])
			for _, st := range s.Steps {
				if st.Tool == "edit" || st.Tool == "write_file" || st.Tool == "submit" {
					steps = append(steps, st)
				}
			}
			break
		}
	}
	if len(steps) < 3 {
		t.Fatalf("no clean demo script for %s to play", tk.ID)
	}
	model := scriptedModel(t, steps)
	defer model.Close()
	const admin = "admin-python-test"
	addr := servetest.FreeAddr(t)
	servetest.Serve(t, "listening on http://", "--addr", addr, "--admin-token", admin, "--trajectories", t.TempDir(),
		"--idle-timeout", "10m", "--policy-url", model.URL+"/v1")
	url := "http://" + addr

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "discover", "-s", "tests", "-v")
	cmd.Dir = filepath.Join(root, "clients", "python")
	cmd.Env = append(os.Environ(), "ROLLCAGE_URL="+url, "ROLLCAGE_ADMIN_TOKEN="+admin, "ROLLCAGE_TASK_ID="+tk.ID,
		"ROLLCAGE_MODEL=policy-test", "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("python3 -m unittest:\n%s", out)
	if err != nil {
		t.Fatalf("python unittest: %v", err)
	}
	if bytes.Contains(out, []byte("skipped")) || !bytes.Contains(out, []byte("\nOK")) {
		t.Fatalf("python unittest did not run every test")
	}
}
