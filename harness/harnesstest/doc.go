// Package harnesstest holds what the tests of the harness and of the
// packages above it (the gateway, the E2B API) wire a real harness.Runner
// from: the default rules compiled once per test binary, a monitor over
// them (no judge unless the test gives one), a trajectory store in the
// test's temporary directory, reading an episode's events back, and a
// demo task on a Docker backend with its image there. It imports monitor,
// rules, trajectory and the sandbox test helpers but not harness, so the
// harness's own (internal) tests can use it too.
package harnesstest
