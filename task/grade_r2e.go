package task

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// gradeStatuses grades a task with ExpectedStatus (R2E-Gym's) in sb, a
// fresh sandbox from the task image with the submission applied: the
// test command runs under the grading kit; the tests' statuses are the
// kit's when pytest ran under it (integrity watched), else R2E-Gym's
// parse of the log (integrity unavailable: the log is the solution's to
// write). Reward 1 when exactly the expected tests are reported (passed,
// failed or error; skipped and xfailed ones are not in R2E-Gym's parse),
// each with its expected status, as _calculate_reward_r2e rewards, and
// nothing was forged.
func gradeStatuses(ctx context.Context, sb sandbox.Sandbox, t Task, w Watch, res Result, start time.Time, fail func(error) (Result, error)) (Result, error) {
	res.Rule = RewardStatuses
	r, err := watchedRun(ctx, sb, t, nil, w.limit(), w.Home)
	if err != nil {
		return fail(err)
	}
	res.ExitCode = r.Exec.ExitCode
	res.Output = solutionWritten(r.Exec.Output)
	got := map[string]Status{}
	switch {
	case r.Hello:
		if !r.End && !r.Forged && (r.Exec.ExitCode != 0 || r.Exec.Stopped != "") {
			return fail(fmt.Errorf("%w: exit %d%s before pytest finished its session", ErrRunCut, r.Exec.ExitCode, stoppedWord(r.Exec.Stopped)))
		}
		for id, s := range readWatched(t, r, &res, true, w.Changed) {
			if s == StatusPassed || s == StatusFailed || s == StatusError {
				got[r2eName(id)] = s
			}
		}
	case r.Exec.Stopped != "":
		return fail(fmt.Errorf("%w: exit %d%s", ErrRunCut, r.Exec.ExitCode, stoppedWord(r.Exec.Stopped)))
	default:
		res.Integrity = IntegrityUnavailable
		got = ParseR2ELog(r.Exec.Output)
	}
	res.Statuses = map[string]Status{}
	match := len(got) == len(t.ExpectedStatus)
	for id, want := range t.ExpectedStatus {
		s, ok := got[id]
		if !ok {
			s = StatusMissing
		}
		res.Statuses[id] = s
		if s == r2eStatus(want) {
			res.Matched++
		} else {
			match = false
		}
	}
	var extra []string
	for _, id := range slices.Sorted(maps.Keys(got)) {
		if _, ok := t.ExpectedStatus[id]; !ok {
			extra = append(extra, id+" "+string(got[id]))
		}
	}
	if len(extra) > 0 {
		res.Findings = append(res.Findings, Finding{Rule: "grade.unexpected_tests", Category: catEvaluator, Severity: severitySuspicious, File: "(test run)",
			Reason:   fmt.Sprintf("the run reported %d tests the instance does not expect (reward 0, as R2E-Gym's)", len(extra)),
			Evidence: strings.Join(extra[:min(len(extra), 5)], "; ")})
	}
	res.count()
	for _, f := range res.Findings {
		if f.Severity == severityCertain {
			res.Tampered = true
		}
	}
	if match && !res.Tampered {
		res.Reward = 1
	}
	res.Completed = true
	res.Duration = time.Since(start)
	return res, nil
}
