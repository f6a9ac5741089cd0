package task

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rollcage/rollcage/internal/golden"
)

type reportCase struct {
	Name       string            `json:"name"`
	InstanceID string            `json:"instance_id"`
	FailToPass []string          `json:"fail_to_pass"`
	PassToPass []string          `json:"pass_to_pass"`
	Statuses   map[string]Status `json:"statuses"`
}

// TestSWEBenchReport: with SWEBenchRules the report is byte for byte the
// one SWE-bench's own grading functions (get_eval_tests_report,
// get_resolution_status, get_eval_report's shape) wrote for the same
// statuses (CASE.swebench.json); with rollcage's rule it is the golden
// CASE.golden.json, where only a pass succeeds.
func TestSWEBenchReport(t *testing.T) {
	data, err := os.ReadFile("testdata/report/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []reportCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	resolved := map[string][2]bool{} // name: {SWE-bench rules, rollcage's}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			for _, sweRules := range []bool{true, false} {
				got, err := MarshalSWEBenchReport(SWEBenchReport(c.InstanceID, c.FailToPass, c.PassToPass, ReportRun{Ran: true, Statuses: c.Statuses, SWEBenchRules: sweRules}))
				if err != nil {
					t.Fatal(err)
				}
				var want []byte
				if sweRules {
					want, err = os.ReadFile(filepath.Join("testdata/report", c.Name+".swebench.json"))
					if err != nil {
						t.Fatal(err)
					}
				} else {
					want = golden.Read(t, filepath.Join("testdata/report", c.Name+".golden.json"), got, "go test ./task -run TestSWEBenchReport")
				}
				if diff := cmp.Diff(string(want), string(got)); diff != "" {
					t.Errorf("SWEBenchRules %v (-want +got):\n%s", sweRules, diff)
				}
				var r map[string]ReportEntry
				if err := json.Unmarshal(got, &r); err != nil {
					t.Fatal(err)
				}
				v := resolved[c.Name]
				v[map[bool]int{true: 0, false: 1}[sweRules]] = r[c.InstanceID].Resolved
				resolved[c.Name] = v
			}
		})
	}
	// XFAIL passes and a skipped PASS_TO_PASS test is kept only by
	// SWE-bench's rules.
	want := map[string][2]bool{"resolved": {true, true}, "unresolved": {false, false}, "xfail_skip": {false, false}, "xfail_skip_kept": {true, false}}
	if diff := cmp.Diff(want, resolved); diff != "" {
		t.Errorf("resolved (-want +got):\n%s", diff)
	}
}

func TestSWEBenchReportNoRun(t *testing.T) {
	tests := []struct {
		run  ReportRun
		want ReportEntry
	}{
		{ReportRun{NoPatch: true, InfraFailure: true}, ReportEntry{PatchIsNone: true}},
		{ReportRun{}, ReportEntry{PatchExists: true}},
		{ReportRun{InfraFailure: true}, ReportEntry{PatchExists: true, InfraFailure: true}},
	}
	for _, tc := range tests {
		got := SWEBenchReport("x__y-1", []string{"a"}, nil, tc.run)
		if diff := cmp.Diff(map[string]ReportEntry{"x__y-1": tc.want}, got); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", tc.run, diff)
		}
	}
}
