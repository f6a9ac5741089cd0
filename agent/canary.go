package agent

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/rollcage/rollcage/sandbox"
)

// plant writes the canaries (root-owned, 0644, parents created) and watches
// them for opens. Writing happens before the watch exists, so planting is
// not an open.
func (w *watcher) plant(canaries []sandbox.Canary) error {
	fd := w.fd
	for _, c := range canaries {
		if !filepath.IsAbs(c.Path) {
			return badRequest("canary path %q is not absolute; give a path like /etc/secret.key", c.Path)
		}
		path := filepath.Clean(c.Path)
		w.mu.Lock()
		if wd, ok := w.canaryWd[path]; ok {
			unix.InotifyRmWatch(fd, uint32(wd))
			delete(w.canaries, wd)
			delete(w.canaryWd, path)
		}
		w.mu.Unlock()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("canary %s: %w", path, err)
		}
		if err := os.WriteFile(path, []byte(c.Content), 0o644); err != nil {
			return fmt.Errorf("canary %s: %w", path, err)
		}
		if err := os.Chown(path, 0, 0); err != nil {
			return fmt.Errorf("canary %s: %w", path, err)
		}
		if err := os.Chmod(path, 0o644); err != nil {
			return fmt.Errorf("canary %s: %w", path, err)
		}
		wd, err := unix.InotifyAddWatch(fd, path, unix.IN_OPEN|unix.IN_ACCESS)
		if err != nil {
			return fmt.Errorf("canary %s: watch: %w", path, err)
		}
		w.mu.Lock()
		w.canaries[int32(wd)] = path
		w.canaryWd[path] = int32(wd)
		w.mu.Unlock()
	}
	return nil
}

// canaryEventLocked reports an open of a canary to every call in flight.
func (w *watcher) canaryEventLocked(path string, mask uint32) {
	if mask&(unix.IN_OPEN|unix.IN_ACCESS) == 0 {
		return
	}
	w.log.Info("canary opened", "path", path, "calls_in_flight", len(w.subs))
	for s := range w.subs {
		if !s.seenOpen[path] {
			s.seenOpen[path] = true
			s.opens = append(s.opens, path)
		}
	}
}
