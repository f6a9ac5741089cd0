package task

import (
	"encoding/json"
)

// ReportEntry is one instance's entry of the report.json SWE-bench's
// harness writes per instance (swebench/harness/grading.py,
// get_eval_report), which its reporting and leaderboard tooling read.
type ReportEntry struct {
	PatchIsNone              bool         `json:"patch_is_None"`
	PatchExists              bool         `json:"patch_exists"`
	PatchSuccessfullyApplied bool         `json:"patch_successfully_applied"`
	Resolved                 bool         `json:"resolved"`
	InfraFailure             bool         `json:"infra_failure"`
	TestsStatus              *TestsStatus `json:"tests_status,omitempty"`
}

// TestsStatus sorts the expected test ids by outcome. FAIL_TO_FAIL and
// PASS_TO_FAIL are always empty, as SWE-bench writes them when it does
// not compute them.
type TestsStatus struct {
	FailToPass Outcomes `json:"FAIL_TO_PASS"`
	PassToPass Outcomes `json:"PASS_TO_PASS"`
	FailToFail Outcomes `json:"FAIL_TO_FAIL"`
	PassToFail Outcomes `json:"PASS_TO_FAIL"`
}

// Outcomes are the ids that succeeded and failed.
type Outcomes struct {
	Success []string `json:"success"`
	Failure []string `json:"failure"`
}

// ReportRun is what became of one submission.
type ReportRun struct {
	// NoPatch: there was no submission at all (SWE-bench's model_patch
	// None); the entry then says only that.
	NoPatch bool
	// Ran: the submission applied and the test run's output could be
	// read. When false the entry has no tests_status and is not resolved.
	Ran bool
	// InfraFailure: the run failed for a reason not the submission's.
	InfraFailure bool
	// Statuses are the per-id statuses the run reported (ParseTestLog).
	Statuses map[string]Status
	// SWEBenchRules grades ids as SWE-bench does: an expected failure
	// (XFAIL) counts as a pass and a skipped PASS_TO_PASS test as kept.
	// Without it, rollcage's rule: an id succeeds only when reported
	// passed.
	SWEBenchRules bool
}

// SWEBenchReport is the report.json of one instance, {instance id:
// entry}, for the expected ids failToPass and passToPass (matched with
// StatusOf). Resolved is true when every expected id succeeded. Marshal
// it with MarshalSWEBenchReport.
func SWEBenchReport(instanceID string, failToPass, passToPass []string, run ReportRun) map[string]ReportEntry {
	e := ReportEntry{PatchIsNone: run.NoPatch, PatchExists: !run.NoPatch, InfraFailure: run.InfraFailure}
	if run.NoPatch {
		e.PatchExists, e.InfraFailure = false, false
		return map[string]ReportEntry{instanceID: e}
	}
	if !run.Ran {
		return map[string]ReportEntry{instanceID: e}
	}
	e.PatchSuccessfullyApplied = true
	ts := &TestsStatus{
		FailToPass: sortOutcomes(failToPass, run, false),
		PassToPass: sortOutcomes(passToPass, run, true),
		FailToFail: Outcomes{Success: []string{}, Failure: []string{}},
		PassToFail: Outcomes{Success: []string{}, Failure: []string{}},
	}
	e.TestsStatus = ts
	// SWE-bench's rule: resolved when no expected id failed.
	e.Resolved = len(ts.FailToPass.Failure) == 0 && len(ts.PassToPass.Failure) == 0
	return map[string]ReportEntry{instanceID: e}
}

func sortOutcomes(ids []string, run ReportRun, kept bool) Outcomes {
	o := Outcomes{Success: []string{}, Failure: []string{}}
	for _, id := range ids {
		st := StatusOf(run.Statuses, id)
		ok := st == StatusPassed
		if run.SWEBenchRules {
			// SWE-bench's parsers never report an XPASS, so it is missing
			// there, which is a failure.
			ok = ok || st == StatusXFailed || (kept && st == StatusSkipped)
		}
		if ok {
			o.Success = append(o.Success, id)
		} else {
			o.Failure = append(o.Failure, id)
		}
	}
	return o
}

// MarshalSWEBenchReport writes a report as SWE-bench's harness does
// (indented by four spaces), ending in a newline.
func MarshalSWEBenchReport(r map[string]ReportEntry) ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "    ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
