package task

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// jestReport is the part of jest's --json report (and vitest's
// jest-compatible --reporter=json) that names tests and their outcomes.
type jestReport struct {
	TestResults *[]struct {
		Name             string `json:"name"`
		AssertionResults []struct {
			AncestorTitles []string `json:"ancestorTitles"`
			Title          string   `json:"title"`
			FullName       string   `json:"fullName"`
			Status         string   `json:"status"`
		} `json:"assertionResults"`
	} `json:"testResults"`
}

var jestStatus = map[string]Status{
	"passed":   StatusPassed,
	"failed":   StatusFailed,
	"pending":  StatusSkipped,
	"skipped":  StatusSkipped,
	"todo":     StatusSkipped,
	"disabled": StatusSkipped,
}

// parseJestJSON reads the first JSON report in log (npm and the runner may
// print lines around it). Tests are named by fullName (the describe titles
// and the test title, space-separated). A status it does not know is an
// error status, never a pass. A log with no report is an empty map; one
// whose report cannot be decoded is an error.
func parseJestJSON(log []byte) (map[string]Status, error) {
	m := map[string]Status{}
	for off := 0; off < len(log); {
		i := bytes.IndexByte(log[off:], '{')
		if i < 0 {
			break
		}
		start := off + i
		off = start + 1
		var r jestReport
		dec := json.NewDecoder(bytes.NewReader(log[start:]))
		if dec.Decode(&r) != nil {
			continue
		}
		if r.TestResults == nil {
			off = start + int(dec.InputOffset())
			continue
		}
		for _, f := range *r.TestResults {
			for _, a := range f.AssertionResults {
				id := a.FullName
				if id == "" {
					id = strings.Join(append(append([]string{}, a.AncestorTitles...), a.Title), " ")
				}
				st, ok := jestStatus[a.Status]
				if !ok {
					st = StatusError
				}
				recordStatus(m, id, st)
			}
		}
		return m, nil
	}
	if bytes.Contains(log, []byte(`"testResults"`)) {
		return nil, errors.New(`jest report: the log holds "testResults" but no complete JSON report; was the output cut short?`)
	}
	return m, nil
}
