// Package docker is the Docker implementation of sandbox.Backend: every
// sandbox is one container whose PID 1 is rollcage-agent, reached over a
// unix socket in a per-episode host directory bind-mounted at
// /.rollcage/run.
//
// The container runs without network (NetworkMode none; proxy mode adds only
// a relay the agent serves on 127.0.0.1), with all capabilities dropped but
// the few the agent needs to switch to the unprivileged sandbox user
// (uid 1000), no-new-privileges, memory, CPU and pids limits, and never the
// Docker socket. Commands run as uid 1000 with no capabilities, so the
// sandboxed code can neither open the agent's socket nor escape the limits.
//
// The Backend adds what a fleet of short-lived episodes needs on top of
// plain create/start: admission control (a bound on containers being
// created at once, separate from the bound on containers alive), a warm
// pool per image, and a reaper that removes the containers and host
// directories of rollcage processes that died without cleaning up (owner
// pid plus process start time are recorded as labels, so a reused pid is
// not mistaken for the owner).
package docker
