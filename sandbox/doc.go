// Package sandbox is the contract between rollcage and the isolated
// environments its episodes run in: a Backend creates a Sandbox from a Spec,
// and a Sandbox runs commands in persistent shell sessions, moves files in
// and out and closes. What only some can do (fork, snapshot, stream, seal)
// is an interface of its own, checked for at run time.
//
// The package holds only interfaces, data types and sentinel errors; it
// imports none of rollcage's other packages. Backends live in
// subpackages (sandbox/docker, later sandbox/containerd and sandbox/kube)
// and all of them pass the conformance suite in sandbox/sandboxtest.
//
// The in-container side is rollcage-agent (package agent): a backend only
// decides how a byte stream to the agent is obtained; everything that
// happens inside the sandbox is the agent's.
package sandbox
