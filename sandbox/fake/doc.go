// Package fake is the sandbox.Backend for tests of the layers above the
// sandbox (monitor, harness, gateway, E2B): files in a map, a shell
// whose answers a test scripts, rollcage's own sessions (probe, hashing,
// submission, grading) answered as a clean repository would. What it
// records (commands run, files written, hidden tests copied in) lets a
// test prove what reached the sandbox. This is net/http/httptest's role
// for the sandbox contract, and the one fake the tests use: a test
// overrides what is its own with Backend's hooks or by embedding
// *Sandbox.
//
// Beside the in-memory mode, a Backend with Dir keeps the files in a
// host directory, where Bash and BashStart run real bash, so the wire of
// the layers above can be driven end to end without an engine. Optional
// capabilities stay apart, as net/http's Flusher: a sandbox streams
// (sandbox.Streamer, a *Streamer) only when its Backend has Start.
// Script is a Start whose process writes on the clock and runs nothing,
// for tests of streaming timers in a testing/synctest bubble (whose clock
// stands still while a real process runs).
//
// Every mode passes the conformance suite (sandboxtest.Run with
// Options.NoProcesses: the cases needing an image's shell or a kernel
// skip); the Docker backend covers the real thing.
package fake
