package harness

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

// fakeBackend hands out fakeSandboxes: an in-memory file map and a shell
// whose answers are scripted by exec. It lets the loop be tested without
// Docker; the Docker-backed tests cover the real thing.
type fakeBackend struct {
	// exec answers agent commands; nil: echo-like default.
	exec func(req sandbox.ExecRequest) sandbox.ExecResult
	// passed decides the grade: the hidden tests pass when true.
	passed func(sb *fakeSandbox) bool
	// createErr, when set, fails every Create.
	createErr error
	// submitted is the change the episode submits: the diff and its
	// name-status list (NUL-separated, as git writes it). Empty: none.
	submitted struct{ diff, files string }

	mu      sync.Mutex
	created []*fakeSandbox
}

var _ sandbox.Backend = (*fakeBackend)(nil)

func (b *fakeBackend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if b.createErr != nil {
		return nil, b.createErr
	}
	sb := &fakeSandbox{b: b, spec: spec, files: map[string]string{}}
	for _, c := range spec.Canaries {
		sb.files[c.Path] = c.Content
	}
	b.mu.Lock()
	b.created = append(b.created, sb)
	b.mu.Unlock()
	return sb, nil
}

type fakeSandbox struct {
	b    *fakeBackend
	spec sandbox.Spec

	mu     sync.Mutex
	files  map[string]string // guarded by mu
	closed bool              // guarded by mu
	execs  []string          // agent commands run; guarded by mu
	graded bool              // hidden tests copied in; guarded by mu
}

var _ sandbox.Sandbox = (*fakeSandbox)(nil)

func (s *fakeSandbox) ID() string { return "fake-" + s.spec.EpisodeID }

func (s *fakeSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sandbox.ExecResult{}, fmt.Errorf("fake exec: %w", sandbox.ErrClosed)
	}
	switch req.Session {
	case "rollcage-probe", "rollcage-hash", "rollcage-tools":
		return sandbox.ExecResult{Shell: "bash"}, nil
	case "rollcage-submit":
		return fakeSubmit(s.files, req, s.b.submitted.diff, s.b.submitted.files), nil
	case "rollcage-grade":
		if s.b.passed != nil && !s.b.passed(s) {
			return sandbox.ExecResult{Output: "F\n1 failed, 2 passed in 0.05s\n", ExitCode: 1, Shell: "bash"}, nil
		}
		return sandbox.ExecResult{Output: "...\n3 passed in 0.05s\n", Shell: "bash"}, nil
	}
	s.execs = append(s.execs, req.Command)
	if s.b.exec != nil {
		return s.b.exec(req), nil
	}
	out, _ := strings.CutPrefix(req.Command, "echo ")
	return sandbox.ExecResult{Output: out + "\n", Shell: "bash", Cwd: "/workspace"}, nil
}

func (s *fakeSandbox) ReadFile(ctx context.Context, p string, max int64) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false, sandbox.ErrClosed
	}
	c, ok := s.files[p]
	if !ok {
		return nil, false, fmt.Errorf("fake read %s: %w", p, sandbox.ErrNotFound)
	}
	return []byte(c), false, nil
}

func (s *fakeSandbox) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sandbox.ErrClosed
	}
	s.files[p] = string(data)
	return nil
}

func (s *fakeSandbox) CopyIn(ctx context.Context, dir string, tar io.Reader) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sandbox.ErrClosed
	}
	s.graded = true
	return nil
}

func (s *fakeSandbox) CopyOut(ctx context.Context, p string) (io.ReadCloser, error) {
	return nil, fmt.Errorf("fake copy out: %w", sandbox.ErrNotFound)
}

// Fork gives n sandboxes with copies of the files (the fake has no
// sessions to carry).
func (s *fakeSandbox) Fork(ctx context.Context, n int) (sandbox.ForkResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sandbox.ForkResult{}, fmt.Errorf("fake fork: %w", sandbox.ErrClosed)
	}
	var res sandbox.ForkResult
	for k := 1; k <= n; k++ {
		spec := s.spec
		spec.EpisodeID = fmt.Sprintf("%s.fork%d", s.spec.EpisodeID, k)
		c := &fakeSandbox{b: s.b, spec: spec, files: maps.Clone(s.files)}
		s.b.mu.Lock()
		s.b.created = append(s.b.created, c)
		s.b.mu.Unlock()
		res.Children = append(res.Children, c)
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

func (s *fakeSandbox) agentExecs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.execs...)
}

// fakeTask is a task whose hidden tests live in fakeHidden.
var fakeTask = task.Task{
	ID: "fake-task", Image: "rollcage/fake:latest", Instruction: "Make wrap() keep long words intact.",
	Workdir: "/workspace", HiddenTests: "hidden/fake", BaseCommit: "27c933441964fa76e99fdda251c8ba9b0c0ca8e9", HiddenTestsDest: "/workspace/tests/hidden",
	TestCommand: "python -m pytest -q tests/hidden", ProtectedPaths: []string{"/workspace/tests/hidden/**"},
}

var fakeHidden = fstest.MapFS{
	"hidden/fake/test_hidden.py": {Data: []byte("from textkit import wrap\n\ndef test_long_word():\n    assert wrap('x' * 30, 10) == ['x' * 30]\n")},
}

var (
	rulesOnce sync.Once
	rulesEng  *rules.Engine
	rulesErr  error
)

// testRunner returns a Runner over the backend, the default rules (no
// judge) and a store in a temporary directory.
func testRunner(t testing.TB, b sandbox.Backend, limits Limits) (*Runner, *trajectory.Store) {
	t.Helper()
	return newTestRunner(t, Config{Backend: b, Limits: limits})
}

// newTestRunner is testRunner for any Config: the default rules' monitor
// and a temporary store are filled in.
func newTestRunner(t testing.TB, cfg Config) (*Runner, *trajectory.Store) {
	t.Helper()
	rulesOnce.Do(func() { rulesEng, rulesErr = rules.New(context.Background(), rules.Config{}) })
	if rulesErr != nil {
		t.Fatal(rulesErr)
	}
	mon, err := monitor.New(monitor.Config{Rules: rulesEng})
	if err != nil {
		t.Fatal(err)
	}
	st, err := trajectory.OpenStore(context.Background(), trajectory.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg.Monitor, cfg.Store = mon, st
	r, err := NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r, st
}

// events reads an episode's log.
func events(t testing.TB, st *trajectory.Store, id string) []trajectory.Event {
	t.Helper()
	var evs []trajectory.Event
	if err := st.Read(context.Background(), id, 0, func(ev trajectory.Event) error {
		evs = append(evs, ev)
		return nil
	}); err != nil {
		t.Fatal(err)
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

// fakeSubmit answers grading's submit session: the kill, an empty diff
// taken, the import-surface query, the apply.
func fakeSubmit(files map[string]string, req sandbox.ExecRequest, diff, names string) sandbox.ExecResult {
	switch {
	case strings.Contains(req.Command, "rollcage-kill-left"):
		return sandbox.ExecResult{Output: "rollcage-kill-left 0\n", Shell: "bash"}
	case strings.Contains(req.Command, "read-tree"):
		for _, f := range []string{"tree", "config"} {
			files["/tmp/rollcage-submit/"+f] = ""
		}
		files["/tmp/rollcage-submit/diff"], files["/tmp/rollcage-submit/files"] = diff, names
		return sandbox.ExecResult{Output: "ok\n", Shell: "bash"}
	}
	return sandbox.ExecResult{Shell: "bash"}
}

// demoTask is the embedded demo task id and the demo's hidden tests.
func demoTask(t testing.TB, id string) (task.Task, fs.FS) {
	t.Helper()
	tasks, hidden, err := demo.Tasks()
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range tasks {
		if x.ID == id {
			return x, hidden
		}
	}
	t.Fatalf("no demo task %q", id)
	return task.Task{}, nil
}
