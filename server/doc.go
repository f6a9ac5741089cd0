// Package server is rollcage's gateway for external harnesses: trainers
// that already have an agent loop create an episode over HTTP, send every
// tool call (or their model calls, or both) through it, and get back what
// the model should see, while rollcage sandboxes, monitors, judges and
// records.
//
// It is a thin layer over an episode (the small interfaces in episode.go,
// which *harness.Episode implements). A tool call goes server → harness →
// monitor → (rules, judge) → sandbox: the gateway hands it to the harness
// as it came (harness.Checked), which has the monitor map foreign tool
// names and refuse arguments that cannot run (a 400 here) before the call
// is numbered. The gateway does not import the monitor (TestLayering):
// what it answers with is in packages decision and toolcall, the tool
// list comes from toolcall.Tools. Over it: the HTTP JSON API under /v1,
// an MCP endpoint per episode (streamable HTTP) for MCP-capable agents, an
// OpenAI-compatible recording proxy that forwards chat completions to the
// policy server and records each turn with its token ids and logprobs,
// WebSocket streams of the trajectories (trajectory.Hub), Prometheus
// metrics and the OpenAPI description (openapi.yaml, embedded).
//
// Every request is authenticated: an episode's token (returned when it is
// created) acts on that episode only; the admin token acts on all and
// lists and streams everything. Sandboxes have no network, so nothing in
// a sandbox can reach the gateway.
package server
