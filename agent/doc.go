// Package agent is both ends of the rollcage agent protocol: the host-side
// Client that sandbox backends drive, and the in-container Server that
// cmd/rollcage-agent runs as PID 1 of every sandbox.
//
// The protocol is newline-delimited JSON over any byte stream (a unix
// socket bind-mounted out of the container, or an attach stream): requests
// carry an id and an op, responses echo the id, and several requests may be
// in flight at once, answered out of order. Keeping it transport-independent
// lets the Docker, containerd and Kubernetes backends share one agent.
//
// The Server runs each Exec in a fresh shell (bash, or sh on images without
// it) in its own process group, restoring the session's exported variables,
// functions and directory before the command and capturing them after, so a
// timeout can kill the whole group without losing the session. Output is
// interleaved, capped (head and tail kept), and escaped to valid UTF-8:
// bytes that are not valid UTF-8 become \xNN, while a literal backslash in
// the output is passed through unchanged, so the escaping is readable but
// not reversible.
package agent
