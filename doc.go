// Package rollcage is a sandboxed rollout runtime for reinforcement
// learning on LLM coding agents, with an online anti-cheating monitor.
//
// The code lives in the packages below this one; see docs/architecture.md
// for the data flow and the package table, which layering_test.go
// enforces:
//
//	sandbox      the contract: Backend, Sandbox, Spec, Exec request/result
//	sandbox/...  backends (docker) and the conformance suite
//	agent        the in-container agent and its host client
//	task, demo   task files, grading, the embedded demo suite
//	rules        the OPA engine and the default Rego bundle
//	judge        the LLM judge
//	monitor      tool calls, normalization, decisions, dummy output, egress
//	trajectory   events, durable logs, streams, training export
//	harness      episodes, the agent loop, replay, compaction, batch runs
//	audit        offline audits of trajectories from any framework
//	server       the gateway: HTTP/WS API, MCP, recording proxy, metrics
package rollcage
