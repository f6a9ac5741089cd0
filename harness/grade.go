package harness

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
)

// grade is what the harness keeps of task.Grade's result.
type grade struct {
	Resolved                        bool
	Reward                          float64
	Passed, Failed, Errors, Skipped int
	ExitCode                        int
	Summary                         string
	Duration                        time.Duration
}

// gradeTask runs the hidden tests. A sandbox that failed under grading is
// an infrastructure fault, not the grader's: the error then does not wrap
// task.ErrGrading.
func gradeTask(ctx context.Context, sb sandbox.Sandbox, t task.Task, hidden fs.FS) (grade, error) {
	r, err := task.Grade(ctx, sb, t, hidden)
	g := grade{Resolved: err == nil && r.Reward >= 1, Reward: r.Reward, Passed: r.Passed, Failed: r.Failed,
		Errors: r.Errors, Skipped: r.Skipped, ExitCode: r.ExitCode, Summary: lastLine(r.Output), Duration: r.Duration}
	if err != nil && isSandboxFault(err) {
		return g, infraError{err}
	}
	return g, err
}

// infraError hides task.ErrGrading from errors.Is: the grader was fine,
// the sandbox was not.
type infraError struct{ err error }

func (e infraError) Error() string { return e.err.Error() }

func isSandboxFault(err error) bool {
	for _, s := range []error{sandbox.ErrClosed, sandbox.ErrUnavailable, sandbox.ErrAgent, sandbox.ErrImageMissing} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func hashVisible(ctx context.Context, sb sandbox.Sandbox, t task.Task) (map[string]string, error) {
	return task.HashFiles(ctx, sb, workdirOf(t), t.VisibleTests)
}

func lastLine(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			return s[i+1:]
		}
	}
	return s
}
