package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
)

// gradeVerifier is gradeEpisode's branch for a task whose own verifier
// writes the reward (a Harbor task): in gsb, the fresh sandbox from the
// submitted state, the tests go in and the verifier runs with the grading
// kit watching any pytest it starts (task.GradeVerifier). The grade says
// the verifier ran inside the submitted filesystem. A verifier cut by its
// limit is the solution's failure: it ran on the solution's files.
func (e *Episode) gradeVerifier(ctx context.Context, gsb sandbox.Sandbox, surf task.Surface, g grade) (grade, error) {
	t0 := time.Now()
	w := task.Watch{Surface: surf, Home: "/nonexistent"} // the policy's own home came along in the snapshot
	r, err := task.GradeVerifier(ctx, gsb, e.task, e.hidden, w)
	g.Phases.TestsMS = time.Since(t0).Milliseconds()
	g.Findings = append(g.Findings, r.Findings...)
	g.VerifierInSubmission = true
	g.setResult(r, err)
	if errors.Is(err, task.ErrRunCut) {
		return g, policyError{fmt.Errorf("harness: episode %s: grade: %w; the verifier ran on the submitted files", e.id, err)}
	}
	return g, classify(err)
}

// takeSubmission is the repository's change against the base commit; a
// task graded by its own verifier on a snapshot whose files are no git
// repository (most Harbor tasks: no base commit was found at start) has
// no diff, and the snapshot alone is the submission.
func (e *Episode) takeSubmission(ctx context.Context) (task.Submission, error) {
	if e.task.RewardFile != "" && e.task.Mode() == task.GradeSnapshot && e.base == "" {
		return task.Submission{}, nil
	}
	return task.TakeSubmission(ctx, e.sb, e.task, e.base)
}
