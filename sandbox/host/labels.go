package host

// Labels every container of the container backends carries (the
// Kubernetes backend's pods carry kube's). The owner labels let the
// reaper tell a dead owner from a live one whose pid was reused.
const (
	LabelManaged    = "rollcage.managed" // "1"; "snapshot" on an image Snapshot made
	LabelEpisode    = "rollcage.episode" // the episode id; "" while warm
	LabelOwnerPID   = "rollcage.owner.pid"
	LabelOwnerStart = "rollcage.owner.start"
	LabelOwnerBoot  = "rollcage.owner.boot"
	LabelOwnerPidNS = "rollcage.owner.pidns"
	LabelPool       = "rollcage.pool" // "1" while the container waits in the warm pool
	// LabelRunDir names the host directory of the container, so the reaper
	// removes exactly the one it belongs to.
	LabelRunDir = "rollcage.rundir"
)

// QuotaEngineHost is the DOCKER_HOST of the engine scripts/rollcage-engine.sh
// starts (make quota-engine), whose disk limits the kernel enforces.
const QuotaEngineHost = "unix:///run/rollcage-engine/docker.sock"

// QuotaEngineContainerd is the socket of the containerd that the quota
// engine's dockerd runs, whose btrfs snapshotter sits on the same
// filesystem with quotas (the containerd backend with Snapshotter
// "btrfs").
const QuotaEngineContainerd = "/run/rollcage-engine/exec/containerd/containerd.sock"
