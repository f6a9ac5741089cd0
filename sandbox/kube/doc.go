// Package kube runs sandboxes as Kubernetes pods, through client-go.
//
// A sandbox is one pod in the backend's namespace: an init container copies
// rollcage-agent out of the agent image into an emptyDir, and the task
// image's container runs it as PID 1 in --stdio mode, mounted read-only.
// The host speaks the agent protocol over the pod's attach stream (stdin
// and stdout; nothing listens inside the pod, so the sandbox user has no
// socket to reach). The agent runs as root with only the capabilities it
// needs to switch to the sandbox user (uid 1000), which keeps none;
// privilege escalation is off, no service account token is mounted, no
// service links are injected, and a NetworkPolicy denies the namespace's
// sandbox pods all traffic in and out (enforced by the cluster's network
// plugin; the cluster of scripts/kube-up.sh gives pods loopback only).
// In proxy mode the agent's egress relay (127.0.0.1:3128 in the pod) dials
// an abstract socket the agent listens on and tunnels, over the attach
// stream, to the episode's proxy socket on the host (agent.Client.Tunnel).
//
// Pods carry owner labels. Each Backend renews a coordination.k8s.io Lease
// of its own; Reap (run by New, and by `rollcage gc --backend kubernetes`)
// deletes the pods of owners whose Lease expired or is gone. The agent's
// own lease ends a pod whose host stopped talking to it. Warm pools are
// pods created ahead per image, configured and relabelled at hand-out;
// MaxCreating bounds the pods starting at once (admission) and MaxAlive
// those alive.
//
// What the API cannot do per pod: Limits.Pids is the kubelet's podPidsLimit
// (node-wide), Limits.DiskBytes is an ephemeral-storage limit (the kubelet
// evicts the pod after the writes landed, it does not answer ENOSPC; the
// next call fails with sandbox.ErrDiskLimit), and Snapshot and Fork return
// sandbox.ErrUnsupported.
package kube
