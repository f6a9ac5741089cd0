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
// By default (ShellMode persistent) each session has one long-lived bash in
// its own process group: a call writes the command to a file, tells the
// shell on its script pipe to source it (stdin from /dev/null or the
// request's Stdin, so neither an unclosed quote nor a stdin reader can eat
// the control stream), and reads the exit code and the session's state
// (exports, functions, cwd) from a control fd; a round trip costs well
// under a millisecond. A timeout, cancel or `exit` ends that shell (a
// timeout kills its whole group); the next call starts a fresh one restored
// to the last state captured, so the session survives. In per-call mode,
// and always with sh, each Exec runs in a fresh shell that restores the
// state first (~8 ms, the cost of starting bash). Output is
// interleaved, capped (head and tail kept), and escaped to valid UTF-8:
// bytes that are not valid UTF-8 become \xNN, while a literal backslash in
// the output is passed through unchanged, so the escaping is readable but
// not reversible.
package agent
