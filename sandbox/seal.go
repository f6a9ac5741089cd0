package sandbox

import (
	"context"
	"time"
)

// Sealer is a backend that derives sealed task images (the Docker
// backend is one): Seal returns the image whose repository holds nothing
// beyond the base commit, and the output of the probe run before
// sealing. It caches the result by content (source image id, its seal
// script, Probe and ProbeArgs), so a task image is sealed once.
type Sealer interface {
	Seal(ctx context.Context, spec SealSpec) (Sealed, error)
}

// SealSpec asks a Sealer for the sealed image of a task image: a derived
// image whose repository (the one holding Workdir) has nothing beyond the
// base commit.
type SealSpec struct {
	Image   string `json:"image"`
	Workdir string `json:"workdir,omitempty"` // default /workspace
	// Base is the commit to keep; empty: the image's HEAD.
	Base string `json:"base,omitempty"`
	// Probe is a POSIX shell script run in the unsealed image, before
	// sealing, with ProbeArgs as $1, $2, …; its standard output is kept
	// outside the image (Sealed.Facts), where no sandbox can read it.
	Probe     string   `json:"probe,omitempty"`
	ProbeArgs []string `json:"probe_args,omitempty"`
	// Remove are absolute paths deleted from the sealed image (after the
	// probe): files of the task image no sandbox may see, such as hidden
	// tests an image keeps beside the repository. Deleted in the image's
	// own layer, they are gone for every process of a sandbox started
	// from it, which holds no means to reach the layers below.
	Remove []string `json:"remove,omitempty"`
}

// Sealed is a sealed image and what the probe found before sealing.
type Sealed struct {
	Image  string `json:"image"`  // reference of the sealed image
	Source string `json:"source"` // id of the image it was derived from
	Facts  string `json:"facts"`  // the probe's standard output
	// Cached: the sealed image was already present.
	Cached bool `json:"cached"`
	// Took is how long sealing took (zero when cached).
	Took time.Duration `json:"took,omitempty"`
	// Log is what the seal script reported (objects before and after).
	Log string `json:"log,omitempty"`
}
