// Package hostside holds what the container backends (sandbox/docker,
// sandbox/containerd) do the same way on the host: the owner identity the
// reaper judges leftovers by, run directory names, the disk watchdog over a
// writable layer, and the dump and replay of shell sessions a fork carries.
package hostside
