package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rollcage/rollcage/sandbox"
)

// watcher is the agent's one inotify instance: it reports opens of the
// canaries (canary.go) and file effects under the watched directories to
// the calls in flight. inotify cannot say which process did a thing, so an
// event is reported to every call running at that moment.
//
// To be sure every event that happened before a call ended is counted, a
// drain opens a private marker file and waits until the reader has seen that
// event: inotify queues events in order, so everything before it has been
// handled.
type watcher struct {
	log    *slog.Logger
	f      *os.File // inotify instance, read through the runtime poller
	fd     int      // f's descriptor; f.Fd() would make f blocking
	dir    string   // private dir of the marker file
	marker string

	drainMu sync.Mutex // one drain at a time, so marker events cannot merge

	mu       sync.Mutex
	markerWd int32              // guarded by mu
	subs     map[*watchSub]bool // guarded by mu
	seen     uint64             // guarded by mu; marker events read
	seenCh   chan struct{}      // guarded by mu; closed and renewed on each marker event
	readErr  error              // guarded by mu

	canaries map[int32]string // guarded by mu; watch descriptor → canary path
	canaryWd map[string]int32 // guarded by mu; canary path → wd

	effects effectState // guarded by mu
}

// watchSub collects what happened during one call.
type watchSub struct {
	policy bool // a call of the policy's (not a "rollcage-…" session): it gets effects

	opens    []string
	seenOpen map[string]bool

	effects   []sandbox.Effect
	seenEff   map[sandbox.Effect]bool
	truncated bool
}

func newWatcher(log *slog.Logger) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("watch: inotify: %w", err)
	}
	dir, err := os.MkdirTemp("", "rollcage-watch-")
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("watch: marker dir: %w", err)
	}
	w := &watcher{
		log:      log,
		f:        os.NewFile(uintptr(fd), "inotify"),
		fd:       fd,
		dir:      dir,
		marker:   filepath.Join(dir, "marker"),
		canaries: make(map[int32]string),
		canaryWd: make(map[string]int32),
		subs:     make(map[*watchSub]bool),
		seenCh:   make(chan struct{}),
	}
	w.effects.init()
	if err := os.WriteFile(w.marker, nil, 0o600); err != nil {
		w.close()
		return nil, fmt.Errorf("watch: marker: %w", err)
	}
	wd, err := unix.InotifyAddWatch(fd, w.marker, unix.IN_OPEN)
	if err != nil {
		w.close()
		return nil, fmt.Errorf("watch: watch marker: %w", err)
	}
	w.markerWd = int32(wd)
	go w.read()
	return w, nil
}

func (w *watcher) close() {
	w.f.Close()
	os.RemoveAll(w.dir)
}

func (w *watcher) read() {
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
				w.log.Error("watcher stopped", "err", err)
			}
			return
		}
		w.mu.Lock()
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := ""
			if ev.Len > 0 {
				raw := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				if i := strings.IndexByte(string(raw), 0); i >= 0 {
					raw = raw[:i]
				}
				name = string(raw)
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
			switch {
			case ev.Wd == w.markerWd:
				w.seen++
				close(w.seenCh)
				w.seenCh = make(chan struct{})
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				w.log.Warn("inotify queue overflowed; effects of the calls in flight are partly unknown")
				w.overflowLocked()
			default:
				if path, ok := w.canaries[ev.Wd]; ok {
					w.canaryEventLocked(path, ev.Mask)
					continue
				}
				w.effectEventLocked(ev.Wd, ev.Mask, name)
			}
		}
		w.mu.Unlock()
	}
}

// active reports whether anything is watched; without it, calls skip the
// subscribe/drain round trip.
func (w *watcher) active() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.canaries) > 0 || w.effects.on
}

// subscribe starts collecting for one call. A policy call arms the effect
// watch (effects with no call in flight are kept from then on) and takes
// the effects that happened while no policy call ran.
func (w *watcher) subscribe(policy bool) *watchSub {
	s := &watchSub{policy: policy, seenOpen: make(map[string]bool), seenEff: make(map[sandbox.Effect]bool)}
	w.mu.Lock()
	w.subs[s] = true
	if policy {
		w.effects.takePendingLocked(s)
	}
	w.mu.Unlock()
	return s
}

// drain waits until every event queued so far has been read and
// unsubscribes s; its fields are then the call's.
func (w *watcher) drain(s *watchSub) {
	ok := w.sync()
	w.mu.Lock()
	delete(w.subs, s)
	if !ok {
		s.truncated = true
	}
	w.mu.Unlock()
}

// sync waits until every event queued so far has been read. It reports
// false when the reader did not catch up in time (or stopped).
func (w *watcher) sync() bool {
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
		if w.seen > before || w.readErr != nil {
			ok := w.readErr == nil
			w.mu.Unlock()
			return ok
		}
		ch := w.seenCh
		w.mu.Unlock()
		select {
		case <-ch:
		case <-timeout.C:
			w.log.Warn("watch drain timed out; canary opens and effects may be missing")
			return false
		}
	}
}

func (w *watcher) overflowLocked() {
	for s := range w.subs {
		s.truncated = true
	}
	w.effects.pendingTruncated = true
}
