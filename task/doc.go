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
// A task file may instead hold benchmark instances of the SWE-bench
// family (SWE-bench, SWE-Gym, SWE-smith; JSONL, or a .json array as the
// Hugging Face exports write it): [LoadWith] turns each into a Task whose
// hidden tests are the instance's test patch, whose reference fix never
// enters the sandbox, and which is graded by test id (FailToPass,
// PassToPass) with the test command the benchmark's harness runs for that
// repository. [Check] reports every problem of a file, one line each.
// [ParseTestLog] and [ParseJUnitXML] read per-id statuses from a test run's
// output, [StatusOf] matches an expected id as SWE-bench does, and
// [Task.ApplyTestPatchScript] puts a test patch in place for grading.
//
// A Harbor task directory (instruction.md, task.toml, environment/,
// tests/test.sh, optional solution/) or a dataset of them is read by
// [CheckHarborDir] and [LoadHarbor]: its image is built locally from its
// Dockerfile, its tests go in only at grading, and [ParseReward] reads the
// reward its test script writes.
//
// [Script] is a scripted trajectory (a clean solve, a no-op or a hacked
// solve) used to exercise the monitor end to end; [HashFiles] fingerprints
// the visible tests so tampering shows at submit.
//
// The package imports only the sandbox contract.
package task
