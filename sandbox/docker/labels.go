package docker

import "github.com/rollcage/rollcage/sandbox/internal/hostside"

// Labels every rollcage container carries (the same on every backend).
const (
	LabelManaged    = hostside.LabelManaged
	LabelEpisode    = hostside.LabelEpisode
	LabelPool       = hostside.LabelPool
	LabelOwnerPID   = hostside.LabelOwnerPID
	LabelOwnerStart = hostside.LabelOwnerStart
	// LabelRunDir names the host directory of the container, so the reaper
	// removes exactly the one it belongs to.
	LabelRunDir = hostside.LabelRunDir
)
