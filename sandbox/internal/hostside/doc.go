// Package hostside holds what the container backends (sandbox/docker,
// sandbox/containerd) do the same way on the host: the owner identity the
// reaper judges leftovers by, run directory names, the disk watchdog over a
// writable layer, and the dump and replay of shell sessions a fork carries.
// The Kubernetes backend (sandbox/kube) shares the engine-neutral part: the
// agent connection (Conn, over a pod's attach stream), admission and the
// live set (Slots) and the warm pool (Pool).
package hostside
