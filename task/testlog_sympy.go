package task

import (
	"regexp"
	"strings"
)

var (
	// sympyLineRE is a verbose result line of bin/test: the test function
	// and one outcome code.
	sympyLineRE = regexp.MustCompile(`^(test\S*)\s+(ok|F|E|f|X|s|T|w)(?:\s.*)?$`)
	// sympyHeaderRE heads a failure's or error's traceback:
	// "____ sympy/core/tests/test_basic.py:test_foo ____".
	sympyHeaderRE = regexp.MustCompile(`^_+ (\S+\.py:\S+) _+$`)
)

var sympyStatus = map[string]Status{
	"ok": StatusPassed,
	"F":  StatusFailed,
	"E":  StatusError,
	"f":  StatusXFailed,
	"X":  StatusXPassed,
	"s":  StatusSkipped,
	"w":  StatusSkipped, // slow test, not run
	"T":  StatusFailed,  // timed out
}

// parseSympyLog reads sympy's bin/test --verbose output. Tests are named
// by their function alone ("test_foo"), as SWE-bench's ids for sympy are;
// the failure report's headers add "path.py:test_foo" ids.
func parseSympyLog(log []byte) map[string]Status {
	m := map[string]Status{}
	for _, line := range logLines(log) {
		line = strings.TrimSpace(line)
		if sm := sympyLineRE.FindStringSubmatch(line); sm != nil {
			recordStatus(m, sm[1], sympyStatus[sm[2]])
			continue
		}
		if sm := sympyHeaderRE.FindStringSubmatch(line); sm != nil {
			recordStatus(m, sm[1], StatusFailed)
		}
	}
	return m
}
