package docker

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/system"

	"github.com/rollcage/rollcage/agent"
	"github.com/rollcage/rollcage/sandbox"
)

// remapBase is where an engine that remaps users puts container root on
// the host: container uid u is host uid UID+u.
type remapBase struct{ UID, GID int }

// userRemap reads the engine's remapping from docker info: "name=userns"
// among its security options, and its root directory, which such an
// engine names after the base ("/var/lib/docker/100000.100000").
func userRemap(info system.Info) *remapBase {
	if !slices.ContainsFunc(info.SecurityOptions, func(o string) bool { return strings.Contains(o, "name=userns") }) {
		return nil
	}
	us, gs, ok := strings.Cut(filepath.Base(info.DockerRootDir), ".")
	uid, err1 := strconv.Atoi(us)
	gid, err2 := strconv.Atoi(gs)
	if !ok || err1 != nil || err2 != nil || uid <= 0 || gid <= 0 {
		return nil
	}
	return &remapBase{UID: uid, GID: gid}
}

// own hands the host paths the agent must reach to the agent's host uid:
// the run directory (mode 0700, where it makes its socket) and the
// egress proxy's socket. Without a remapping the agent is host root and
// nothing changes.
func (r *remapBase) own(runDir string, spec sandbox.Spec, root bool) error {
	if r == nil {
		return nil
	}
	uid, gid := r.UID, r.GID
	if root {
		uid, gid = uid+agent.NestUID, gid+agent.NestUID
	}
	for _, p := range []string{runDir, spec.ProxySocket} {
		if p == "" {
			continue
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return fmt.Errorf("hand %s to the agent's host uid %d (the engine remaps users; rollcage must run as root): %w", p, uid, err)
		}
	}
	return nil
}
