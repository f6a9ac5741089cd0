package task

// Status is what a test run reported for one test id. Only StatusPassed
// counts toward a reward: a skipped, xfailed, xpassed, deselected,
// errored or missing id is not a pass.
type Status string

// Statuses of a test id.
const (
	StatusPassed  Status = "passed"
	StatusFailed  Status = "failed"
	StatusError   Status = "error"
	StatusSkipped Status = "skipped"
	StatusXFailed Status = "xfailed"
	StatusXPassed Status = "xpassed"
	StatusMissing Status = "missing" // expected, but the run reported nothing for it
)

// Frameworks a task may name for its test report (field "framework").
const (
	FrameworkPytest = "pytest" // pytest's -rA lines or junit XML
	FrameworkDjango = "django" // Django's runtests.py
	FrameworkSympy  = "sympy"  // sympy's bin/test
	FrameworkGo     = "go"     // go test -json
	FrameworkJest   = "jest"   // jest/vitest --json
)
