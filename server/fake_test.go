package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

// fakeBackend hands out in-memory sandboxes that answer instantly: a file
// map and an echo shell. The real harness and monitor run on top of it;
// the Docker-backed tests cover the real sandbox.
type fakeBackend struct {
	// exec answers agent commands; nil: echo.
	exec func(ctx context.Context, req sandbox.ExecRequest) sandbox.ExecResult
	// noFork: Fork fails with sandbox.ErrUnsupported.
	noFork bool
}

var _ sandbox.Backend = (*fakeBackend)(nil)

func (b *fakeBackend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	sb := &fakeSandbox{b: b, spec: spec, files: map[string]string{}}
	for _, c := range spec.Canaries {
		sb.files[c.Path] = c.Content
	}
	return sb, nil
}

type fakeSandbox struct {
	b    *fakeBackend
	spec sandbox.Spec

	mu     sync.Mutex
	files  map[string]string // guarded by mu
	closed bool              // guarded by mu
}

var _ sandbox.Sandbox = (*fakeSandbox)(nil)

func (s *fakeSandbox) ID() string { return "fake-" + s.spec.EpisodeID }

func (s *fakeSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return sandbox.ExecResult{}, fmt.Errorf("fake exec: %w", sandbox.ErrClosed)
	}
	switch req.Session {
	case "rollcage-probe", "rollcage-hash", "rollcage-tools":
		return sandbox.ExecResult{Shell: "bash"}, nil
	case "rollcage-submit":
		s.mu.Lock()
		defer s.mu.Unlock()
		return fakeSubmit(s.files, req), nil
	case "rollcage-grade":
		return sandbox.ExecResult{Output: "...\n3 passed in 0.05s\n", Shell: "bash"}, nil
	}
	if s.b.exec != nil {
		return s.b.exec(ctx, req), nil
	}
	out, _ := strings.CutPrefix(req.Command, "echo ")
	return sandbox.ExecResult{Output: out + "\n", Shell: "bash", Cwd: "/workspace"}, nil
}

func (s *fakeSandbox) ReadFile(ctx context.Context, p string, max int64) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.files[p]
	if !ok {
		return nil, false, fmt.Errorf("fake read %s: %w", p, sandbox.ErrNotFound)
	}
	return []byte(c), false, nil
}

func (s *fakeSandbox) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[p] = string(data)
	return nil
}

func (s *fakeSandbox) CopyIn(ctx context.Context, dir string, tar io.Reader) error { return nil }

func (s *fakeSandbox) CopyOut(ctx context.Context, p string) (io.ReadCloser, error) {
	return nil, fmt.Errorf("fake copy out: %w", sandbox.ErrNotFound)
}

// Fork gives n sandboxes with copies of the files, unless the backend
// says it cannot fork.
func (s *fakeSandbox) Fork(ctx context.Context, n int) (sandbox.ForkResult, error) {
	if s.b.noFork {
		return sandbox.ForkResult{}, fmt.Errorf("fake fork: %w", sandbox.ErrUnsupported)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var res sandbox.ForkResult
	for k := 1; k <= n; k++ {
		spec := s.spec
		spec.EpisodeID = fmt.Sprintf("%s.fork%d", s.spec.EpisodeID, k)
		res.Children = append(res.Children, &fakeSandbox{b: s.b, spec: spec, files: maps.Clone(s.files)})
	}
	return res, nil
}

func (s *fakeSandbox) Snapshot(ctx context.Context, ref string) (string, error) {
	return "", fmt.Errorf("fake snapshot: %w", sandbox.ErrNotFound)
}

func (s *fakeSandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

var fakeTask = task.Task{
	ID: "fake-task", Image: "rollcage/fake:latest", Instruction: "Make wrap() keep long words intact.",
	Workdir: "/workspace", HiddenTests: "hidden/fake", BaseCommit: "27c933441964fa76e99fdda251c8ba9b0c0ca8e9", HiddenTestsDest: "/opt/grader/tests",
	TestCommand: "python -m pytest -q /opt/grader/tests", ProtectedPaths: []string{"/opt/grader/**"},
}

var fakeHidden = fstest.MapFS{
	"hidden/fake/test_hidden.py": {Data: []byte("from textkit import wrap\n\ndef test_long_word():\n    assert wrap('x' * 30, 10) == ['x' * 30]\n")},
}

var (
	rulesOnce sync.Once
	rulesEng  *rules.Engine
	rulesErr  error
)

const testAdmin = "admin-secret"

// env is a gateway over the real harness, monitor (default rules, no
// judge) and store, with a sandbox backend of the test's choosing.
type env struct {
	t     testing.TB
	srv   *Server
	http  *httptest.Server
	store *trajectory.Store
}

// testMonitor is a monitor with the default rules and no judge.
func testMonitor(t testing.TB) *monitor.Pipeline {
	t.Helper()
	rulesOnce.Do(func() { rulesEng, rulesErr = rules.New(context.Background(), rules.Config{}) })
	if rulesErr != nil {
		t.Fatal(rulesErr)
	}
	mon, err := monitor.New(monitor.Config{Rules: rulesEng})
	if err != nil {
		t.Fatal(err)
	}
	return mon
}

func newEnv(t testing.TB, b sandbox.Backend, tweak func(*Config)) *env {
	t.Helper()
	mon := testMonitor(t)
	st, err := trajectory.OpenStore(context.Background(), trajectory.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
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
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		hs.Close()
	})
	return &env{t: t, srv: srv, http: hs, store: st}
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
	req, err := http.NewRequest(method, e.http.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.http.Client().Do(req)
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
	var evs []trajectory.Event
	if err := e.store.Read(context.Background(), id, 0, func(ev trajectory.Event) error {
		evs = append(evs, ev)
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return evs
}

func eventTypes(evs []trajectory.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// fakeSubmit answers grading's submit session: the kill, an empty diff
// taken, the import-surface query, the apply.
func fakeSubmit(files map[string]string, req sandbox.ExecRequest) sandbox.ExecResult {
	switch {
	case strings.Contains(req.Command, "rollcage-kill-left"):
		return sandbox.ExecResult{Output: "rollcage-kill-left 0\n", Shell: "bash"}
	case strings.Contains(req.Command, "read-tree"):
		for _, f := range []string{"diff", "files", "tree", "config"} {
			files["/tmp/rollcage-submit/"+f] = ""
		}
		return sandbox.ExecResult{Output: "ok\n", Shell: "bash"}
	}
	return sandbox.ExecResult{Shell: "bash"}
}
