// Package sandboxtest is the conformance suite every sandbox.Backend
// passes: one set of tests, run by each backend's own tests with a factory
// for that backend (the way containerd runs one suite over every
// snapshotter).
//
// The suite checks the contract of package sandbox as seen from outside:
// persistent sessions, timeouts that kill whole process groups, capped and
// escaped output, idempotent retries, resource limits, the unprivileged
// sandbox user, isolation of the agent and the network, file transfer,
// canaries, snapshots and Close. It needs an image with bash, coreutils,
// procps and python3 (rollcage/base has them). A backend that runs no
// processes (sandbox/fake) says so with Options.NoProcesses and runs the
// cases of the API alone.
//
// RequireDocker is the helper Docker-backed tests call first: it fails the
// test under CI=true when no engine answers and skips it otherwise.
// GoldenJSON is the golden-file check of the backends' container, OCI and
// pod specs; Logger, VerboseLogger and CloseAtCleanup are the rest of what
// their tests share.
package sandboxtest
