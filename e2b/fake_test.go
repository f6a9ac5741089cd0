package e2b_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/fake"
)

// hostBackend hands out sandboxes that run commands in real bash on the
// host, in dir, and keep their files there (fake.Backend with Dir): enough
// to drive the E2B wire end to end through the real gateway, harness and
// monitor without Docker. Only commands the tests send run. The
// Docker-backed test with the real SDK covers real sandboxes.
func hostBackend(dir string) *fake.Backend {
	return &fake.Backend{Dir: dir, Exec: fake.Bash, Start: fake.BashStart, Check: missingImage}
}

// missingImages prefixes the images hostBackend does not have.
const missingImages = "missing/"

// missingImage fails a create of an image under missingImages as the
// Docker backend answers an image it does not have.
func missingImage(_ context.Context, spec sandbox.Spec) error {
	if strings.HasPrefix(spec.Image, missingImages) {
		return fmt.Errorf("host: create %s: image %s not found locally: %w", spec.EpisodeID, spec.Image, sandbox.ErrImageMissing)
	}
	return nil
}
