package hostside

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// CopyLayer copies an overlay upper directory into another, keeping
// owners, modes, xattrs (opaque directories) and whiteout devices, with
// reflinks where the file system has them.
func CopyLayer(ctx context.Context, src, dst string) error {
	out, err := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", "--", src+"/.", dst+"/").CombinedOutput()
	if err != nil {
		return fmt.Errorf("copy the writable layer: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
