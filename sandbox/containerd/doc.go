// Package containerd runs sandboxes as containerd containers, through
// containerd's own client, in a namespace of rollcage's own ("rollcage" by
// default) on the containerd the machine has: $CONTAINERD_ADDRESS, else
// /run/containerd/containerd.sock, else the one a Docker engine runs
// (/var/run/docker/containerd/containerd.sock).
//
// The contract is Docker's (sandbox/docker): the agent is PID 1 as root
// with six capabilities and runs every command as uid 1000 with none,
// no-new-privileges, Docker's default seccomp profile, a network namespace
// of its own with only loopback in it (brought up from the host before the
// agent starts), memory, swap, CPU and pids limits in the container's
// cgroup, and the disk limit as the host-side watchdog over the overlay
// snapshot's upper directory. The agent binary is bind-mounted read-only
// and speaks on a unix socket in the per-sandbox host directory.
//
// Images come from the local build: an image missing from the namespace
// is imported from the Docker engine's store (docker save) and unpacked
// into the snapshotter, and re-imported when Docker's copy was rebuilt;
// nothing is pulled. Fork commits the parent's writable layer, copied
// while the parent is frozen, as a snapshot the children are prepared
// from, so each child costs an overlay mount, not a copy.
package containerd
