package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rollcage/rollcage/cmd/rollcage/servetest"
	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/e2b/envd/process"
	"github.com/rollcage/rollcage/e2b/envd/process/processconnect"
	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/sandbox/docker/dockertest"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// lockedBuffer is a bytes.Buffer one goroutine writes while another reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer // guarded by mu
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serveInProcess runs rollcage serve args... in this process until the
// test ends, and waits until its stdout holds ready.
func serveInProcess(t *testing.T, ready string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, append([]string{"serve"}, args...), &stdout, &stderr) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("rollcage serve logs:\n%s", servetest.ClipTail(stderr.String(), 8000))
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(stdout.String(), ready) {
		select {
		case code := <-done:
			t.Fatalf("rollcage serve exited %d before serving:\n%s%s", code, stdout.String(), stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("rollcage serve did not come up:\n%s", stderr.String())
		}
	}
}

// apiClient speaks the gateway's HTTP API and the E2B API of one
// rollcage serve.
type apiClient struct {
	gateway, e2b  string
	admin, e2bKey string
}

// do sends body as JSON with auth (an E2B key or a bearer token) and
// decodes the JSON answer into out; it returns the status and the body.
func (c *apiClient) do(t *testing.T, method, u, auth string, body, out any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if strings.HasPrefix(auth, "e2b_") {
		req.Header.Set("X-API-KEY", auth)
	} else {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, u, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode, data
}

// playREST plays s through the gateway's HTTP API on a new episode of
// the task named by taskID (a task or instance id): each step a POST
// /calls, the submit among them; it returns the graded outcome.
func (c *apiClient) playREST(t *testing.T, taskID string, s task.Script) harness.Outcome {
	t.Helper()
	var cr struct {
		EpisodeID string `json:"episode_id"`
		Token     string `json:"token"`
	}
	if code, body := c.do(t, "POST", c.gateway+"/v1/episodes", c.admin, map[string]string{"task_id": taskID}, &cr); code != http.StatusCreated {
		t.Fatalf("create %s: %d %s", taskID, code, body)
	}
	for i, st := range s.Steps {
		var res struct {
			Submitted bool             `json:"submitted"`
			Outcome   *harness.Outcome `json:"outcome"`
		}
		if code, body := c.do(t, "POST", c.gateway+"/v1/episodes/"+cr.EpisodeID+"/calls", cr.Token, toolcall.Call{Tool: st.Tool, Args: st.Args}, &res); code != http.StatusOK {
			t.Fatalf("%s step %d (%s): %d %s", s.Name, i+1, st.Tool, code, body)
		}
		if res.Submitted {
			if res.Outcome == nil {
				t.Fatalf("%s: submitted without an outcome", s.Name)
			}
			return *res.Outcome
		}
	}
	t.Fatalf("%s: the script ends without a submit", s.Name)
	return harness.Outcome{}
}

// e2bLabels is the answer of GET /sandboxes/{id}/rollcage/labels.
type e2bLabels struct {
	State          string   `json:"state"`
	Label          string   `json:"label"`
	Hacked         bool     `json:"hacked"`
	Graded         bool     `json:"graded"`
	Reward         *float64 `json:"reward"`
	Resolved       *bool    `json:"resolved"`
	TrainingReward *float64 `json:"training_reward"`
}

// playE2B plays s through the E2B API as an E2B harness does, on a new
// sandbox whose template is template and whose metadata is md: bash
// steps as envd processes, write_file and read_file as envd file uploads
// and downloads, an edit as a download and an upload, submit as
// rollcage's submit extension. It returns the outcome and the labels the
// sandbox answers after.
func (c *apiClient) playE2B(t *testing.T, template string, md map[string]string, workdir string, s task.Script) (harness.Outcome, e2bLabels) {
	t.Helper()
	var sb struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	if code, body := c.do(t, "POST", c.e2b+"/v2/sandboxes", c.e2bKey, map[string]any{"templateID": template, "metadata": md, "timeout": 600}, &sb); code != http.StatusCreated {
		t.Fatalf("create %s %v: %d %s", template, md, code, body)
	}
	hc := &http.Client{Transport: envdHeaders{sb.SandboxID, sb.EnvdAccessToken}}
	proc := processconnect.NewProcessClient(hc, c.e2b)
	abs := func(p string) string {
		if path.IsAbs(p) {
			return p
		}
		return path.Join(workdir, p)
	}
	download := func(p string) string {
		resp, err := hc.Get(c.e2b + "/files?path=" + url.QueryEscape(abs(p)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: read %s: %d %s", s.Name, p, resp.StatusCode, b)
		}
		return string(b)
	}
	upload := func(p, content string) {
		resp, err := hc.Post(c.e2b+"/files?path="+url.QueryEscape(abs(p)), "application/octet-stream", strings.NewReader(content))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: write %s: %d %s", s.Name, p, resp.StatusCode, b)
		}
	}
	for i, st := range s.Steps {
		switch st.Tool {
		case toolcall.Bash:
			var a toolcall.BashArgs
			if err := json.Unmarshal(st.Args, &a); err != nil {
				t.Fatal(err)
			}
			stream, err := proc.Start(context.Background(), connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", a.Command}}}))
			if err != nil {
				t.Fatalf("%s step %d: %v", s.Name, i+1, err)
			}
			for stream.Receive() {
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("%s step %d: %v", s.Name, i+1, err)
			}
			stream.Close()
		case toolcall.WriteFile:
			var a toolcall.WriteFileArgs
			if err := json.Unmarshal(st.Args, &a); err != nil {
				t.Fatal(err)
			}
			upload(a.Path, a.Content)
		case toolcall.ReadFile:
			var a toolcall.ReadFileArgs
			if err := json.Unmarshal(st.Args, &a); err != nil {
				t.Fatal(err)
			}
			download(a.Path)
		case toolcall.Edit:
			var a toolcall.EditArgs
			if err := json.Unmarshal(st.Args, &a); err != nil {
				t.Fatal(err)
			}
			old := download(a.Path)
			if !strings.Contains(old, a.Old) {
				t.Fatalf("%s step %d: %s does not hold the text to replace", s.Name, i+1, a.Path)
			}
			upload(a.Path, strings.Replace(old, a.Old, a.New, 1))
		case toolcall.Submit:
			var o harness.Outcome
			if code, body := c.do(t, "POST", c.e2b+"/sandboxes/"+sb.SandboxID+"/rollcage/submit", c.e2bKey, nil, &o); code != http.StatusOK {
				t.Fatalf("%s: submit: %d %s", s.Name, code, body)
			}
			var l e2bLabels
			if code, body := c.do(t, "GET", c.e2b+"/sandboxes/"+sb.SandboxID+"/rollcage/labels", c.e2bKey, nil, &l); code != http.StatusOK {
				t.Fatalf("%s: labels: %d %s", s.Name, code, body)
			}
			return o, l
		default:
			t.Fatalf("%s step %d: no E2B form of tool %s in this test", s.Name, i+1, st.Tool)
		}
	}
	t.Fatalf("%s: the script ends without a submit", s.Name)
	return harness.Outcome{}, e2bLabels{}
}

// envdHeaders routes every envd request to one sandbox, as the SDKs do
// with E2B_SANDBOX_URL set.
type envdHeaders struct{ id, token string }

func (h envdHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("E2b-Sandbox-Id", h.id)
	r.Header.Set("X-Access-Token", h.token)
	r.SetBasicAuth("user", "")
	return http.DefaultTransport.RoundTrip(r)
}

// TestInstancesThroughAPIsInDocker writes two demo tasks as SWE-bench
// instances (swebench-demo), serves them with rollcage serve --tasks
// instances.jsonl, and plays the demo's clean, no-op and hack scripts on
// them through the gateway's HTTP API (created by task_id, the instance
// id) and through the E2B API (the instance id as the template, or as
// metadata rollcage/task), each graded by test id in a fresh container
// as SWE-bench grades it: the clean solve resolves cleanly, the no-op
// earns 0, a hack is labelled and trains as 0.
func TestInstancesThroughAPIsInDocker(t *testing.T) {
	dockertest.Backend(t) // fails under CI without an engine; builds the agent
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"swebench-demo", "--out", dir, "--only", "textwrap", "--only", "csvquote"}, &out, &errb); code != 0 {
		t.Fatalf("swebench-demo: exit %d\n%s%s", code, out.String(), errb.String())
	}
	instances := filepath.Join(dir, instancesFile)
	demoTasks, _, err := demo.Tasks()
	if err != nil {
		t.Fatal(err)
	}
	instanceOf := map[string]string{}
	for _, dt := range demoTasks {
		instanceOf[dt.ID] = demo.InstanceID(dt)
	}
	scripts, err := demo.Scripts()
	if err != nil {
		t.Fatal(err)
	}
	script := func(taskID, name string) task.Script {
		for _, s := range scripts {
			if s.Task == taskID && s.Name == name {
				var b bytes.Buffer
				if err := json.NewEncoder(&b).Encode(s); err != nil {
					t.Fatal(err)
				}
				// The demo's scripts name the demo image's workdir.
				var moved task.Script
				if err := json.Unmarshal(bytes.ReplaceAll(b.Bytes(), []byte("/workspace"), []byte(task.InstanceWorkdir)), &moved); err != nil {
					t.Fatal(err)
				}
				return moved
			}
		}
		t.Fatalf("no demo script %s/%s", taskID, name)
		return task.Script{}
	}

	const key, admin = "e2b_0123456789abcdef0123456789abcdef0123abcd", "admin-instances-test"
	gw, e2 := servetest.FreeAddr(t), servetest.FreeAddr(t)
	serveInProcess(t, "E2B API on http://", "--addr", gw, "--e2b-addr", e2, "--e2b-api-keys", key, "--admin-token", admin,
		"--tasks", instances, "--trajectories", t.TempDir())
	c := &apiClient{gateway: "http://" + gw, e2b: "http://" + e2, admin: admin, e2bKey: key}

	plays := []struct {
		task, script, api string
	}{
		{"textwrap", "clean", "rest"},
		{"textwrap", "noop", "rest"},
		{"textwrap", "history-show-fix", "rest"},
		{"csvquote", "tamper-conftest-hook", "rest"},
		{"textwrap", "clean", "e2b-template"},
		{"textwrap", "history-show-fix", "e2b-metadata"},
		{"csvquote", "clean", "e2b-metadata"},
		{"csvquote", "noop", "e2b-template"},
		{"csvquote", "tamper-conftest-hook", "e2b-template"},
	}
	for _, p := range plays {
		name := p.task + "/" + p.script + "/" + p.api
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, id := script(p.task, p.script), instanceOf[p.task]
			var o harness.Outcome
			var l *e2bLabels
			switch p.api {
			case "rest":
				o = c.playREST(t, id, s)
			case "e2b-template":
				o1, l1 := c.playE2B(t, id, nil, task.InstanceWorkdir, s)
				o, l = o1, &l1
			case "e2b-metadata":
				o1, l1 := c.playE2B(t, "base", map[string]string{"rollcage/task": id}, task.InstanceWorkdir, s)
				o, l = o1, &l1
			}
			t.Logf("reward %v, resolved %v, label %s %v, flagged %d, blocked %d", o.Reward, o.Resolved, o.Label, o.HackCategories, o.Flagged, o.Blocked)
			switch {
			case o.TaskID != id || o.InstanceID != id:
				t.Errorf("task %q, instance %q; want the instance %q", o.TaskID, o.InstanceID, id)
			case o.FailureClass != "":
				t.Errorf("failure class %q (%s); want a graded episode", o.FailureClass, o.Error)
			case s.Kind == task.KindClean && (!o.CleanResolution || o.Reward != 1 || o.Label != trajectory.LabelClean):
				t.Errorf("reward %v, label %s, clean resolution %v; want 1, clean", o.Reward, o.Label, o.CleanResolution)
			case s.Kind == task.KindNoop && (o.Resolved || o.Reward != 0 || o.Label != trajectory.LabelClean):
				t.Errorf("reward %v, label %s; want 0, clean", o.Reward, o.Label)
			case s.Kind == task.KindHack && (o.Label == trajectory.LabelClean || o.CleanResolution):
				t.Errorf("label %s, clean resolution %v; want the hack labelled", o.Label, o.CleanResolution)
			}
			if l == nil {
				return
			}
			var want float64
			if s.Kind == task.KindClean {
				want = 1
			}
			masked := l.TrainingReward == nil && s.Kind == task.KindHack && l.Label == trajectory.LabelUnconfirmed
			if !l.Graded || l.Label != o.Label || l.Reward == nil || *l.Reward != o.Reward || !masked && (l.TrainingReward == nil || *l.TrainingReward != want) {
				b, _ := json.Marshal(l)
				t.Errorf("labels %s; want graded with the outcome's label and reward, training reward %v (or masked, for an unconfirmed hack)", b, want)
			}
		})
	}
}
