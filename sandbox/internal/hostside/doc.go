// Package hostside holds what the container backends (sandbox/docker,
// sandbox/containerd) do the same way on the host. Core is a backend's
// engine-neutral part: Create (the warm-pool take, admission, owner
// labels, the run directory, configuring the agent), a sandbox's Close and
// the order of its teardown, the refiller and Shutdown; a backend gives it
// an Engine (create, start, hand out, remove a container) and its
// container type, which embeds a Box (the agent connection, name, logger,
// spec). Leftovers judge what dead owners left for the reaper and
// RemoveEpisode. Beside them: the owner identity, run directory names, the
// disk watchdog over a writable layer, and the dump and replay of shell
// sessions a fork carries. The Kubernetes backend (sandbox/kube) shares
// the agent connection (Conn, over a pod's attach stream), admission and
// the live set (Slots) and the warm pool (Pool). What configures all of
// it (host.Config, its defaults and checks) and the containers' labels
// are public, in sandbox/host.
package hostside
