// Package fake is an in-memory sandbox.Backend for tests of the layers
// above the sandbox (monitor, harness, gateway): files in a map, a shell
// whose answers a test scripts, rollcage's own sessions (probe, hashing,
// submission, grading) answered as a clean repository would. What it
// records (commands run, files written, hidden tests copied in) lets a
// test prove what reached the sandbox. It passes the conformance suite
// (sandboxtest.Run with Options.NoProcesses: the cases needing a shell or
// a kernel skip); the Docker backend covers the real thing. This is
// net/http/httptest's role for the sandbox contract.
package fake
