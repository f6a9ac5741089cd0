package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rollcage/rollcage/sandbox"
)

// canaryWatcher plants canary files and reports opens of them to the calls
// in flight. inotify cannot say who opened a file, so an open is reported
// to every call running at that moment.
//
// To be sure every open that happened before a call ended is counted, a
// drain opens a private marker file and waits until the reader has seen that
// event: inotify queues events in order, so everything before it has been
// handled.
type canaryWatcher struct {
	log    *slog.Logger
	f      *os.File // inotify instance, read through the runtime poller
	fd     int      // f's descriptor; f.Fd() would make f blocking
	dir    string   // private dir of the marker file
	marker string

	drainMu sync.Mutex // one drain at a time, so marker events cannot merge

	mu       sync.Mutex
	wds      map[int32]string    // guarded by mu; watch descriptor → canary path
	markerWd int32               // guarded by mu
	subs     map[*canarySub]bool // guarded by mu
	seen     uint64              // guarded by mu; marker events read
	seenCh   chan struct{}       // guarded by mu; closed and renewed on each marker event
	readErr  error               // guarded by mu
	paths    map[string]int32    // guarded by mu; canary path → wd
}

// canarySub collects the canary opens during one call.
type canarySub struct {
	opens []string
	seen  map[string]bool
}

func newCanaryWatcher(log *slog.Logger) (*canaryWatcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("canary: inotify: %w", err)
	}
	dir, err := os.MkdirTemp("", "rollcage-canary-")
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("canary: marker dir: %w", err)
	}
	w := &canaryWatcher{
		log:    log,
		f:      os.NewFile(uintptr(fd), "inotify"),
		fd:     fd,
		dir:    dir,
		marker: filepath.Join(dir, "marker"),
		wds:    make(map[int32]string),
		paths:  make(map[string]int32),
		subs:   make(map[*canarySub]bool),
		seenCh: make(chan struct{}),
	}
	if err := os.WriteFile(w.marker, nil, 0o600); err != nil {
		w.close()
		return nil, fmt.Errorf("canary: marker: %w", err)
	}
	wd, err := unix.InotifyAddWatch(fd, w.marker, unix.IN_OPEN)
	if err != nil {
		w.close()
		return nil, fmt.Errorf("canary: watch marker: %w", err)
	}
	w.markerWd = int32(wd)
	go w.read()
	return w, nil
}

func (w *canaryWatcher) close() {
	w.f.Close()
	os.RemoveAll(w.dir)
}

// plant writes the canaries (root-owned, 0644, parents created) and watches
// them. Writing happens before the watch exists, so planting is not an open.
func (w *canaryWatcher) plant(canaries []sandbox.Canary) error {
	fd := w.fd
	for _, c := range canaries {
		if !filepath.IsAbs(c.Path) {
			return badRequest("canary path %q is not absolute; give a path like /etc/secret.key", c.Path)
		}
		path := filepath.Clean(c.Path)
		w.mu.Lock()
		if wd, ok := w.paths[path]; ok {
			unix.InotifyRmWatch(fd, uint32(wd))
			delete(w.wds, wd)
			delete(w.paths, path)
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
		w.wds[int32(wd)] = path
		w.paths[path] = int32(wd)
		w.mu.Unlock()
	}
	return nil
}

func (w *canaryWatcher) read() {
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			w.mu.Lock()
			w.readErr = err
			close(w.seenCh)
			w.seenCh = make(chan struct{})
			w.mu.Unlock()
			if !errors.Is(err, os.ErrClosed) {
				w.log.Error("canary watcher stopped", "err", err)
			}
			return
		}
		w.mu.Lock()
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if ev.Wd == w.markerWd {
				w.seen++
				close(w.seenCh)
				w.seenCh = make(chan struct{})
				continue
			}
			path, ok := w.wds[ev.Wd]
			if !ok || ev.Mask&(unix.IN_OPEN|unix.IN_ACCESS) == 0 {
				continue
			}
			w.log.Info("canary opened", "path", path, "calls_in_flight", len(w.subs))
			for s := range w.subs {
				if !s.seen[path] {
					s.seen[path] = true
					s.opens = append(s.opens, path)
				}
			}
		}
		w.mu.Unlock()
	}
}

// active reports whether any canary is planted; without one, calls skip
// the subscribe/drain round trip.
func (w *canaryWatcher) active() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.wds) > 0
}

func (w *canaryWatcher) subscribe() *canarySub {
	s := &canarySub{seen: make(map[string]bool)}
	w.mu.Lock()
	w.subs[s] = true
	w.mu.Unlock()
	return s
}

// drain waits until every event queued so far has been read, unsubscribes
// s and returns the canaries opened during its call.
func (w *canaryWatcher) drain(s *canarySub) []string {
	w.drainMu.Lock()
	defer w.drainMu.Unlock()
	w.mu.Lock()
	before := w.seen
	w.mu.Unlock()
	if f, err := os.Open(w.marker); err == nil {
		f.Close()
	}
	timeout := time.NewTimer(2 * time.Second) // never hang a call on a broken watcher
	defer timeout.Stop()
	for {
		w.mu.Lock()
		done := w.seen > before || w.readErr != nil
		ch := w.seenCh
		if done {
			delete(w.subs, s)
			opens := s.opens
			w.mu.Unlock()
			return opens
		}
		w.mu.Unlock()
		select {
		case <-ch:
		case <-timeout.C:
			w.log.Warn("canary drain timed out; opens may be missing")
			w.mu.Lock()
			delete(w.subs, s)
			opens := s.opens
			w.mu.Unlock()
			return opens
		}
	}
}
