// Package task is rollcage's task file format and grader.
//
// A task file is JSONL, one [Task] per line: the image an episode runs in,
// the instruction the policy gets, where the hidden tests live and how to
// run them, and what the monitor must guard (protected paths, visible
// tests, the upstream fix and where it could be fetched from). [Load] and
// [LoadFile] read and validate one, with errors that name file, line and
// field.
//
// [Grade] copies a task's hidden tests into the sandbox only after the
// agent has stopped, runs the test command and turns pytest's summary into
// a [Result]. A grading that could not run wraps [ErrGrading], so trainers
// can tell "the policy failed" from "the grader failed".
//
// [Script] is a scripted trajectory (a clean solve, a no-op or a hacked
// solve) used to exercise the monitor end to end; [HashFiles] fingerprints
// the visible tests so tampering shows at submit.
//
// The package imports only the sandbox contract.
package task
