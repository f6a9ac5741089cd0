package task

import "strings"

// djangoStatus maps what Django's verbose runner prints after " ... " to
// a Status.
func djangoStatus(s string) (Status, bool) {
	s = strings.TrimSpace(s)
	switch {
	case s == "ok" || s == "OK":
		return StatusPassed, true
	case s == "FAIL":
		return StatusFailed, true
	case s == "ERROR":
		return StatusError, true
	case s == "skipped" || strings.HasPrefix(s, "skipped "):
		return StatusSkipped, true
	case s == "expected failure":
		return StatusXFailed, true
	case s == "unexpected success":
		return StatusXPassed, true
	}
	return "", false
}

// parseDjangoLog reads Django's runtests.py --verbosity 2 output: one
// "name (module.Class) ... ok" line per test (a test with a docstring is
// named by the docstring's first line, as SWE-bench's ids are), the status
// on a line of its own when the test printed something after " ... ", and
// the "FAIL: name" / "ERROR: name" headers of the failure report.
func parseDjangoLog(log []byte) map[string]Status {
	m := map[string]Status{}
	pending := "" // a test whose " ... " line had no status yet
	for _, line := range logLines(log) {
		line = strings.TrimSpace(line)
		if i := strings.LastIndex(line, " ... "); i >= 0 {
			name := djangoName(line[:i])
			if st, ok := djangoStatus(line[i+len(" ... "):]); ok {
				recordStatus(m, name, st)
				pending = ""
			} else {
				pending = djangoName(line[:strings.Index(line, " ... ")])
			}
			continue
		}
		if pending != "" {
			if st, ok := djangoStatus(line); ok {
				recordStatus(m, pending, st)
				pending = ""
				continue
			}
		}
		for _, h := range []struct {
			prefix string
			st     Status
		}{{"FAIL: ", StatusFailed}, {"ERROR: ", StatusError}} {
			if name, ok := strings.CutPrefix(line, h.prefix); ok {
				recordStatus(m, strings.TrimSpace(name), h.st)
			}
		}
	}
	return m
}

// djangoName drops the migration progress ("Applying app.0002_x...") that
// Django sometimes prints on the same line before a test's name.
func djangoName(s string) string {
	if strings.HasPrefix(s, "Applying ") {
		if _, after, ok := strings.Cut(s, "..."); ok {
			s = after
		}
	}
	return strings.TrimSpace(s)
}
