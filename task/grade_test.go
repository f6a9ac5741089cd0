package task

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/fake"
)

func TestParseSummary(t *testing.T) {
	tests := []struct {
		file   string
		want   Summary
		wantOK bool
	}{
		{"pass_q.txt", Summary{Passed: 2}, true},
		{"pass_full.txt", Summary{Passed: 2}, true},
		{"mixed_q.txt", Summary{Passed: 3, Failed: 1, Skipped: 1, XFailed: 1}, true},
		{"mixed_full.txt", Summary{Passed: 3, Failed: 1, Skipped: 1, XFailed: 1}, true},
		{"mixed_color.txt", Summary{Passed: 3, Failed: 1, Skipped: 1, XFailed: 1}, true},
		{"report_all_q.txt", Summary{Passed: 5, Failed: 1, Skipped: 1, XFailed: 1}, true},
		{"collection_error_q.txt", Summary{Errors: 1}, true},
		{"no_tests_q.txt", Summary{NoTests: true}, true},
		{"deselected_q.txt", Summary{Deselected: 2, NoTests: true}, true},
		{"long_run_q.txt", Summary{Passed: 2}, true},
		{"not_pytest.txt", Summary{}, false},
	}
	for _, tc := range tests {
		data, err := os.ReadFile(filepath.Join("testdata", "pytest", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		got, ok := ParseSummary(string(data))
		if ok != tc.wantOK {
			t.Errorf("%s: ok = %t, want %t", tc.file, ok, tc.wantOK)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: summary (-want +got):\n%s", tc.file, diff)
		}
	}
}

// fakeSandbox is a fake.Sandbox whose commands exec answers, recording
// the requests, and whose CopyIn records the tar headers (the fake keeps
// only contents) or fails with copyErr.
type fakeSandbox struct {
	*fake.Sandbox

	mu      sync.Mutex
	copyErr error
	copyDir string
	copied  map[string]*tar.Header
	content map[string]string
	reqs    []sandbox.ExecRequest // guarded by mu
}

// newFakeSandbox returns a fakeSandbox whose commands exec answers.
func newFakeSandbox(exec func(req sandbox.ExecRequest) (sandbox.ExecResult, error)) *fakeSandbox {
	f := &fakeSandbox{}
	f.Sandbox = fake.New(sandbox.Spec{EpisodeID: "grade"}, func(_ context.Context, _ *fake.Sandbox, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		f.mu.Lock()
		f.reqs = append(f.reqs, req)
		f.mu.Unlock()
		if exec == nil {
			panic("fakeSandbox: a command ran in a test that runs none")
		}
		return exec(req)
	})
	return f
}

func (f *fakeSandbox) CopyIn(ctx context.Context, dir string, r io.Reader) error {
	if f.copyErr != nil {
		return f.copyErr
	}
	f.copyDir = dir
	f.copied = map[string]*tar.Header{}
	f.content = map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		data, _ := io.ReadAll(tr)
		f.copied[h.Name] = h
		f.content[h.Name] = string(data)
	}
}

func pytestOutput(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "pytest", file))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

var hiddenFS = fstest.MapFS{
	"hidden/t1/test_hidden.py":     {Data: []byte("def test_x(): pass\n")},
	"hidden/t1/data/expected.json": {Data: []byte("{}")},
	"hidden/empty/.keep":           {Mode: fs.ModeDir},
}

func TestGrade(t *testing.T) {
	tk := Task{ID: "t1", HiddenTests: "hidden/t1", TestCommand: "python3 -m pytest -q /opt/grader/tests"}
	tests := []struct {
		name      string
		out       string
		exit      int
		stopped   string
		execErr   error
		copyErr   error
		want      Result // Output, Duration, Err not compared
		wantGrade bool   // error wraps ErrGrading
	}{
		{name: "pass", out: pytestOutput(t, "pass_q.txt"), want: Result{Reward: 1, Passed: 2}},
		{name: "pass full output", out: pytestOutput(t, "pass_full.txt"), want: Result{Reward: 1, Passed: 2}},
		{name: "failures", out: pytestOutput(t, "mixed_q.txt"), exit: 1, want: Result{Passed: 3, Failed: 1, Skipped: 1, ExitCode: 1}},
		{name: "collection error is the policy's", out: pytestOutput(t, "collection_error_q.txt"), exit: 2, want: Result{Errors: 1, ExitCode: 2}},
		{name: "exit 0 without passes", out: "1 skipped in 0.01s\n", want: Result{Skipped: 1}},
		{name: "passes but nonzero exit", out: "3 passed in 0.01s\n", exit: 1, want: Result{Passed: 3, ExitCode: 1}},
		{name: "no tests ran", out: pytestOutput(t, "no_tests_q.txt"), exit: 5, want: Result{ExitCode: 5}, wantGrade: true},
		{name: "only deselected", out: pytestOutput(t, "deselected_q.txt"), exit: 5, want: Result{ExitCode: 5}, wantGrade: true},
		{name: "command not found", out: pytestOutput(t, "not_pytest.txt"), exit: 127, want: Result{ExitCode: 127}, wantGrade: true},
		{name: "no summary", out: "Segmentation fault\n", exit: 139, want: Result{ExitCode: 139}, wantGrade: true},
		{name: "timeout", out: "....", exit: -1, stopped: sandbox.StopTimeout, want: Result{ExitCode: -1}, wantGrade: true},
		{name: "exec fails", execErr: sandbox.ErrAgent, wantGrade: true},
		{name: "copy fails", copyErr: sandbox.ErrClosed, wantGrade: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb := newFakeSandbox(func(req sandbox.ExecRequest) (sandbox.ExecResult, error) {
				return sandbox.ExecResult{Output: tc.out, ExitCode: tc.exit, Stopped: tc.stopped}, tc.execErr
			})
			sb.copyErr = tc.copyErr
			got, err := Grade(t.Context(), sb, tk, hiddenFS)
			if gotGrade := errors.Is(err, ErrGrading); gotGrade != tc.wantGrade {
				t.Fatalf("Grade error = %v; wraps ErrGrading = %t, want %t", err, gotGrade, tc.wantGrade)
			}
			if !tc.wantGrade && err != nil {
				t.Fatalf("Grade: %v", err)
			}
			if tc.wantGrade != (got.Err != "") {
				t.Errorf("Result.Err = %q with error %v", got.Err, err)
			}
			for _, e := range []error{tc.execErr, tc.copyErr} {
				if e != nil && !errors.Is(err, e) {
					t.Errorf("error %v does not wrap %v", err, e)
				}
			}
			if diff := cmp.Diff(tc.want, got, cmpIgnoreResultNoise); diff != "" {
				t.Errorf("Result (-want +got):\n%s", diff)
			}
		})
	}
}

var cmpIgnoreResultNoise = cmp.Transformer("noise", func(r Result) Result {
	r.Output, r.Duration, r.Err = "", 0, ""
	return r
})

func TestGradeCopiesHiddenTestsAsRoot(t *testing.T) {
	sb := newFakeSandbox(func(req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{Output: "1 passed in 0.01s\n"}, nil
	})
	tk := Task{ID: "t1", HiddenTests: "hidden/t1", TestCommand: "python3 -m pytest -q /opt/grader/tests", Workdir: "/srv/my repo"}
	if _, err := Grade(t.Context(), sb, tk, hiddenFS); err != nil {
		t.Fatal(err)
	}
	if sb.copyDir != DefaultHiddenTestsDest {
		t.Errorf("copied to %q, want %q", sb.copyDir, DefaultHiddenTestsDest)
	}
	type entry struct {
		Mode     int64
		Uid, Gid int
		Content  string
	}
	got := map[string]entry{}
	for name, h := range sb.copied {
		got[name] = entry{h.Mode, h.Uid, h.Gid, sb.content[name]}
	}
	want := map[string]entry{
		"test_hidden.py":     {0o644, 0, 0, "def test_x(): pass\n"},
		"data/":              {0o755, 0, 0, ""},
		"data/expected.json": {0o644, 0, 0, "{}"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tar entries (-want +got):\n%s", diff)
	}
	req := sb.reqs[0]
	wantCmd := "cd '/srv/my repo' && exec /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/nonexistent LANG=C.UTF-8 /bin/bash --noprofile --norc -c 'python3 -m pytest -q /opt/grader/tests'"
	if req.Command != wantCmd || req.Session != gradeSession || req.Timeout != GradeTimeout {
		t.Errorf("exec request = %+v", req)
	}
}

func TestGradeEmptyHiddenDir(t *testing.T) {
	sb := newFakeSandbox(nil)
	_, err := Grade(t.Context(), sb, Task{ID: "t", HiddenTests: "hidden/empty", TestCommand: "x"}, hiddenFS)
	if !errors.Is(err, ErrGrading) || !strings.Contains(err.Error(), "no files") {
		t.Fatalf("Grade = %v, want ErrGrading about no files", err)
	}
}

func TestGradeCancelledIsNotGradingFailure(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	sb := newFakeSandbox(func(req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{}, ctx.Err()
	})
	_, err := Grade(ctx, sb, Task{ID: "t1", HiddenTests: "hidden/t1", TestCommand: "x"}, hiddenFS)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrGrading) {
		t.Fatalf("Grade = %v, want context.Canceled and not ErrGrading", err)
	}
}

func TestResultOutputIsTail(t *testing.T) {
	long := strings.Repeat("x", 3*resultOutputTail) + "\n2 passed in 0.01s\n"
	sb := newFakeSandbox(func(req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{Output: long}, nil
	})
	res, err := Grade(t.Context(), sb, Task{ID: "t1", HiddenTests: "hidden/t1", TestCommand: "x"}, hiddenFS)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Output) > resultOutputTail+len("…") || !strings.HasSuffix(res.Output, "2 passed in 0.01s\n") {
		t.Errorf("Output is %d bytes ending %q", len(res.Output), tail(res.Output, 30))
	}
}
