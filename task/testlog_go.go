package task

import (
	"encoding/json"
	"regexp"
	"strings"
)

// goTextRE is go test -v's result line for a test or subtest.
var goTextRE = regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (.+) \((.+)\)$`)

var goStatus = map[string]Status{
	"pass": StatusPassed, "PASS": StatusPassed,
	"fail": StatusFailed, "FAIL": StatusFailed,
	"skip": StatusSkipped, "SKIP": StatusSkipped,
}

// parseGoTestLog reads go test -json events (ids are the Test field,
// "TestName/subtest"). A log without any such event is read as go test
// -v output, as SWE-bench's parser reads it; in a -json log the text of
// output events is never read, so a test cannot print another's result.
func parseGoTestLog(log []byte) map[string]Status {
	m := map[string]Status{}
	lines := logLines(log)
	sawJSON := false
	for _, line := range lines {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var ev struct{ Action, Test string }
		if json.Unmarshal([]byte(line), &ev) != nil || ev.Action == "" {
			continue
		}
		sawJSON = true
		if st, ok := goStatus[ev.Action]; ok && ev.Test != "" {
			recordStatus(m, ev.Test, st)
		}
	}
	if sawJSON {
		return m
	}
	for _, line := range lines {
		if sm := goTextRE.FindStringSubmatch(strings.TrimSpace(line)); sm != nil {
			recordStatus(m, sm[2], goStatus[sm[1]])
		}
	}
	return m
}
