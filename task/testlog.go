package task

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// ParseTestLog reads the per-test statuses a test run printed, in the
// output format of framework (one of the Framework constants):
//
//   - FrameworkPytest: the short test summary of pytest -rA (lines
//     "PASSED id", "FAILED id - message", ...) and the verbose per-test
//     lines ("id PASSED [ 10%]", older pytest's "id PASSED"); junit XML
//     has its own reader, [ParseJUnitXML].
//   - FrameworkDjango: Django's runtests.py --verbosity 2 ("name (module.Class) ... ok").
//   - FrameworkSympy: sympy's bin/test --verbose ("test_name ok", "test_name F").
//   - FrameworkGo: go test -json events; without any, go test -v's
//     "--- PASS: TestName (0.00s)" lines.
//   - FrameworkJest: the JSON report of jest --json or vitest --reporter=json.
//
// Test ids are the ones SWE-bench's log parsers produce for the same
// output, which is what FAIL_TO_PASS and PASS_TO_PASS list; look an
// expected id up with [StatusOf], which also matches SWE-bench's truncated
// and rewritten ids. An id reported more than once keeps its worst status
// (a test that passed its call but errored in teardown is an error).
// ANSI colour codes are ignored. A log with no test results is an empty
// map, not an error; the error is for an unknown framework or a report
// that cannot be read at all.
func ParseTestLog(framework string, log []byte) (map[string]Status, error) {
	switch framework {
	case FrameworkPytest:
		return parsePytestLog(log), nil
	case FrameworkDjango:
		return parseDjangoLog(log), nil
	case FrameworkSympy:
		return parseSympyLog(log), nil
	case FrameworkGo:
		return parseGoTestLog(log), nil
	case FrameworkJest:
		return parseJestJSON(log)
	}
	return nil, fmt.Errorf("test log: unknown framework %q; use one of %s", framework, strings.Join(Frameworks(), ", "))
}

// Frameworks lists the frameworks ParseTestLog reads.
func Frameworks() []string {
	return []string{FrameworkPytest, FrameworkDjango, FrameworkSympy, FrameworkGo, FrameworkJest}
}

// statusRank orders statuses from best to worst, for an id reported more
// than once. Only a pass counts, so anything else outranks it.
var statusRank = map[Status]int{
	StatusPassed:  0,
	StatusXPassed: 1,
	StatusSkipped: 2,
	StatusXFailed: 3,
	StatusMissing: 4,
	StatusFailed:  5,
	StatusError:   6,
}

// recordStatus sets m[id] to st unless m already holds a worse status for it.
func recordStatus(m map[string]Status, id string, st Status) {
	if id == "" {
		return
	}
	if old, ok := m[id]; ok && statusRank[old] >= statusRank[st] {
		return
	}
	m[id] = st
}

var escapeSeqRE = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)

// logLines splits log into lines without their line ends, ANSI colour
// codes removed.
func logLines(log []byte) []string {
	if bytes.IndexByte(log, 0x1b) >= 0 {
		log = escapeSeqRE.ReplaceAll(log, nil)
	}
	s := strings.ReplaceAll(string(log), "\r\n", "\n")
	return strings.Split(s, "\n")
}

// StatusOf is the status of the expected test id in statuses, matched as
// SWE-bench's grading matches it: exactly; else, for a pytest id that
// SWE-bench's parsers cut or rewrote (a parametrized id cut at its first
// space, so it has more '[' than ']'; a parameter that is an absolute path
// shortened to its base name; matplotlib's MouseButton.LEFT written 1; a
// node id with an XFAIL reason or ERROR message kept after " - "), the
// reported ids that id stands for. Where it stands for several, the
// worst of their statuses is returned, so a cut id passes only if every
// test it could mean passed (SWE-bench takes the first when they agree on
// pass or fail). An id matched by nothing is StatusMissing.
func StatusOf(statuses map[string]Status, id string) Status {
	if st, ok := statuses[id]; ok {
		return st
	}
	found := false
	var worst Status
	take := func(st Status) {
		if !found || statusRank[st] > statusRank[worst] {
			worst = st
		}
		found = true
	}
	if strings.Contains(id, "[") {
		for k, st := range statuses {
			if pytestCompatID(k) == id {
				take(st)
			}
		}
	}
	if !found && strings.Count(id, "[") > strings.Count(id, "]") {
		for k, st := range statuses {
			if strings.HasPrefix(k, id) || strings.HasPrefix(pytestCompatID(k), id) {
				take(st)
			}
		}
	}
	if !found {
		// SWE-bench's later pytest parser keeps the " - reason" of an
		// XFAIL or ERROR line in the id.
		if short := strings.TrimSpace(cutMessage(id)); short != id && short != "" && strings.Contains(short, "::") {
			return StatusOf(statuses, short)
		}
		return StatusMissing
	}
	return worst
}

// optionRE splits a parametrized pytest id into its function and its
// parameters.
var optionRE = regexp.MustCompile(`^(.*?)\[(.*)\]`)

// pytestCompatID rewrites a pytest id the way SWE-bench's parsers for
// requests, pydicom, pylint and matplotlib record it: a parameter that is
// an absolute path becomes "/" and its base name, MouseButton.LEFT and
// RIGHT become 1 and 3. Other ids come back unchanged.
func pytestCompatID(id string) string {
	if strings.Contains(id, "MouseButton.") {
		id = strings.ReplaceAll(id, "MouseButton.LEFT", "1")
		id = strings.ReplaceAll(id, "MouseButton.RIGHT", "3")
	}
	m := optionRE.FindStringSubmatchIndex(id)
	if m == nil {
		return id
	}
	main, opt := id[m[2]:m[3]], id[m[4]:m[5]]
	if strings.HasPrefix(opt, "/") && !strings.HasPrefix(opt, "//") && !strings.Contains(opt, "*") {
		opt = "/" + opt[strings.LastIndexByte(opt, '/')+1:]
		return main + "[" + opt + "]" + id[m[1]:]
	}
	return id
}
