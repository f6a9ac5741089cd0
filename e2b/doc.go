// Package e2b serves the E2B sandbox API, so harnesses written against
// the stock E2B SDKs (slime's coding-agent RL example, AgentENV, Harbor's
// E2B environment) run on rollcage by changing their environment: the
// control plane (create, connect, list, info, timeout, kill) and, for
// every sandbox, the in-sandbox daemon's API (envd: the process and
// filesystem Connect-RPC services in JSON and binary protobuf, /files,
// /health), all on one listener.
//
// An E2B sandbox is a rollcage episode, started through the gateway
// (server.Server) like one of POST /v1/episodes: it has a trajectory, a
// stream, a dashboard entry and is exported like any. Every process start
// is a bash tool call through the monitor (rules, judge, dummy output on
// a block), file reads and writes are read_file and write_file calls
// (reads streamed: any bytes, any size), and
// the filesystem RPCs are bash calls whose output is parsed. The API key
// names a client, which sees its own sandboxes only; a sandbox's envd
// access token is its episode's token and acts on that sandbox only.
//
// Processes are streamed (sandbox.Streamer through the gateway's Start):
// the monitor decides before a process starts, its stdout and stderr come
// apart as they are written (each line checked against the protected
// material first), processes of one sandbox run side by side, stdin after
// start passes the rules, signals reach the real process group, and a
// process is recorded as its step when it ends, whether or not a stream
// still follows it. Directory watches report the file effects the
// monitor sees under the workspace, per call at its end.
//
// rollcage's extensions end a sandbox graded: rollcage/submit grades a
// task-bound one with its hidden tests; rollcage/reward takes the reward
// of a harness that grades outside (slime), recorded as an external
// grade. rollcage/labels answers the monitor's label and counts, and the
// training reward once graded, while the sandbox runs and for
// Config.Retention after.
//
// What E2B offers and rollcage does not: processes run as the sandbox's
// non-root user whatever user the SDK names (root is mapped to it, not
// refused); PTYs, pause and resume answer "not supported". See
// docs/e2b.md.
package e2b
