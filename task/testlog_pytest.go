package task

import (
	"regexp"
	"strings"
)

// pytestStatus maps the words pytest prints for an outcome to a Status.
var pytestStatus = map[string]Status{
	"PASSED":  StatusPassed,
	"FAILED":  StatusFailed,
	"ERROR":   StatusError,
	"SKIPPED": StatusSkipped,
	"XFAIL":   StatusXFailed,
	"XPASS":   StatusXPassed,
}

var (
	// skipCountRE is the "[N]" of "SKIPPED [N] path:line: reason", pytest's
	// summary of N skips, which names no test.
	skipCountRE = regexp.MustCompile(`^\[\d+\]$`)
	// xdistRE is the worker and progress pytest-xdist puts before a
	// verbose line's status: "[gw0] [ 50%] PASSED id".
	xdistRE = regexp.MustCompile(`^\[gw\d+\]\s+(?:\[\s*\d+%\]\s+)?`)
)

// parsePytestLog reads pytest's -rA short test summary ("STATUS id",
// "STATUS id - message") and its verbose lines ("id STATUS [ 10%]", "id
// SKIPPED (reason) [ 50%]", old pytest's "id PASSED", pytest-xdist's
// "[gw0] [ 50%] PASSED id"). A verbose line counts only when its id has
// "::", so "____ ERROR at setup of x ____" or a test's own output
// ("converted PASSED") names no test.
func parsePytestLog(log []byte) map[string]Status {
	m := map[string]Status{}
	for _, line := range logLines(log) {
		line = strings.TrimRight(line, " \t\r")
		if strings.HasPrefix(line, "[gw") {
			line = xdistRE.ReplaceAllString(line, "")
		}
		word, rest, _ := strings.Cut(line, " ")
		if st, ok := pytestStatus[word]; ok {
			rest = strings.TrimLeft(rest, " ")
			if first, _, _ := strings.Cut(rest, " "); st == StatusSkipped && skipCountRE.MatchString(first) {
				continue
			}
			recordStatus(m, pytestIDPrefix(rest), st)
			continue
		}
		id := pytestIDPrefix(line)
		word, _, _ = strings.Cut(strings.TrimLeft(line[len(id):], " "), " ")
		if st, ok := pytestStatus[word]; ok && strings.Contains(id, "::") {
			recordStatus(m, id, st)
		}
	}
	return m
}

// pytestIDPrefix is the node id at the start of what follows a summary
// line's status word: up to the first space outside the id's parameter
// brackets, so "id - message" (pytest's failure message, XFAIL reason) and
// old pytest's "id reason" lose their text, and "test[a b] - msg" keeps
// its parameter.
func pytestIDPrefix(s string) string { return cutOutsideBrackets(s, " ") }

// cutMessage cuts the " - message" pytest appends to a summary line's
// test id. A " - " inside the id's parameter brackets is part of the id.
func cutMessage(s string) string { return cutOutsideBrackets(s, " - ") }

// cutOutsideBrackets returns s up to the first sep that is not inside
// square brackets, or all of s.
func cutOutsideBrackets(s, sep string) string {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			if depth > 0 {
				depth--
			}
		default:
			if depth == 0 && strings.HasPrefix(s[i:], sep) {
				return s[:i]
			}
		}
	}
	return s
}
