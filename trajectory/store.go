package trajectory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Sentinel errors, wrapped with an operation prefix; match with errors.Is.
var (
	// ErrClosed: the Log or Store was closed.
	ErrClosed = errors.New("trajectory closed")
	// ErrFinished: the episode's log already holds its episode_end event.
	ErrFinished = errors.New("episode finished")
	// ErrNotFound: no log for that episode.
	ErrNotFound = errors.New("episode not found")
	// ErrCorrupt: a log line in the middle of a file does not parse or is
	// out of order (a torn last line is not corruption; it is ignored).
	ErrCorrupt = errors.New("trajectory log corrupt")
	// ErrBadEvent: the event cannot be appended (no type, another episode).
	ErrBadEvent = errors.New("bad event")
)

// DefaultSyncInterval is how often a Log fsyncs when Config.SyncInterval is
// zero.
const DefaultSyncInterval = time.Second

// SyncAlways as Config.SyncInterval fsyncs after every event.
const SyncAlways time.Duration = -1

// finishedName is the finished feed's log, beside the episodes' logs. Its
// leading underscore keeps it out of the episode namespace.
const finishedName = "_finished"

// verdictsName is the verdict log (TypeVerdict events of every episode),
// beside the episodes' logs; created by the first RecordVerdict.
const verdictsName = "_verdicts"

// isFeed: the log holds events of many episodes (the finished feed, the
// verdict log), not one episode's.
func isFeed(id string) bool { return id == finishedName || id == verdictsName }

// Config configures a Store.
type Config struct {
	// Dir holds the logs; it is created if missing. Required.
	Dir string
	// SyncInterval bounds what a machine crash can lose: every Log fsyncs
	// at most this long after a write. Zero means DefaultSyncInterval (1s);
	// SyncAlways (negative) fsyncs after every event. Episode end and Close
	// always fsync.
	SyncInterval time.Duration
	// Logger receives recovery notes (torn tails dropped). Nil: discard.
	Logger *slog.Logger
}

// Validate reports a Config that cannot work.
func (c Config) Validate() error {
	if c.Dir == "" {
		return errors.New("trajectory config: Dir is empty: set it to the directory that holds the episode logs")
	}
	return nil
}

func (c Config) syncInterval() time.Duration {
	switch {
	case c.SyncInterval == 0:
		return DefaultSyncInterval
	case c.SyncInterval < 0:
		return 0
	}
	return c.SyncInterval
}

// Store is a directory of episode logs plus the finished feed's index. It
// is safe for concurrent use.
type Store struct {
	dir      string
	cfg      Config
	log      *slog.Logger
	finished *Log
	lock     *os.File // the directory's lock file, held until Close

	vmu      sync.Mutex // held while a verdict is checked and recorded
	verdicts *Log       // guarded by vmu; nil until the first RecordVerdict

	mu        sync.Mutex
	open      map[string]*Log // guarded by mu
	listeners []func(stream string)
	closed    bool // guarded by mu
}

// OpenStore opens (or creates) the store in cfg.Dir. It drops torn last
// lines left by a crash and adds to the finished feed any finished episode
// the crash kept out of it.
//
// One Store owns a directory at a time: OpenStore locks it until Close
// (or the process's death), and refuses a directory another Store holds,
// in this process or another, with a *LockedError naming the holder.
func OpenStore(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("trajectory: open store: %w", err)
	}
	lock, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	s, err := recoverStore(ctx, cfg)
	if err != nil {
		lock.Close()
		return nil, err
	}
	s.lock = lock
	return s, nil
}

func recoverStore(ctx context.Context, cfg Config) (*Store, error) {
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	s := &Store{dir: cfg.Dir, cfg: cfg, log: lg, open: map[string]*Log{}}
	names, err := s.names()
	if err != nil {
		return nil, err
	}
	for _, id := range names {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("trajectory: open store: %w", err)
		}
		if err := s.fixTail(id); err != nil {
			return nil, err
		}
	}
	// The finished feed is rare and small: fsync every item.
	s.finished, err = s.openLog(finishedName, 0)
	if err != nil {
		return nil, err
	}
	if err := s.reconcile(ctx, names); err != nil {
		s.finished.Close()
		return nil, err
	}
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`)

// ValidID reports whether id can name an episode log: letters, digits, dot,
// dash and underscore, not starting with a punctuation mark.
func ValidID(id string) error {
	if !idRE.MatchString(id) {
		return fmt.Errorf("trajectory: episode id %q: use 1-200 letters, digits, '.', '-', '_', starting with a letter or digit", id)
	}
	return nil
}

func (s *Store) path(id string) string { return filepath.Join(s.dir, id+".jsonl") }

// File is the path of the episode's log, for messages that name it.
func (s *Store) File(episodeID string) string { return s.path(episodeID) }

// names lists the episode ids with a log file, sorted. A FIFO, socket or
// device named like a log is no log (opening a FIFO would block): it is
// left out, with a warning.
func (s *Store) names() ([]string, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("trajectory: list %s: %w", s.dir, err)
	}
	var ids []string
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok || e.IsDir() || ValidID(id) != nil {
			continue
		}
		if e.Type()&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice|fs.ModeIrregular) != 0 {
			s.log.Warn("skipping a file named like a log that is not a regular file", "file", filepath.Join(s.dir, e.Name()), "type", e.Type().String())
			continue
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// Log opens the episode's log for appending, creating it if needed. While
// it is open, every call returns the same *Log; the episode's owner closes
// it. A finished episode's log opens, but Append returns ErrFinished.
func (s *Store) Log(episodeID string) (*Log, error) {
	if err := ValidID(episodeID); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("trajectory: open log %s: %w", episodeID, ErrClosed)
	}
	if l, ok := s.open[episodeID]; ok {
		return l, nil
	}
	l, err := s.openLog(episodeID, s.cfg.syncInterval())
	if err != nil {
		return nil, err
	}
	s.open[episodeID] = l
	return l, nil
}

// DiscardEmpty removes the log of an episode that recorded no event: one
// a crash left between the log's creation and its first event (a
// gateway killed while sandboxes were being created). It reports whether
// it removed it; a log holding an event, or open, is left alone.
func (s *Store) DiscardEmpty(episodeID string) (bool, error) {
	if err := ValidID(episodeID); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, fmt.Errorf("trajectory: discard %s: %w", episodeID, ErrClosed)
	}
	if _, open := s.open[episodeID]; open {
		return false, nil
	}
	n, _, err := countLines(s.path(episodeID))
	if errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("trajectory: discard %s: %w", episodeID, ErrNotFound)
	}
	if err != nil || n > 0 {
		return false, err
	}
	if err := os.Remove(s.path(episodeID)); err != nil {
		return false, fmt.Errorf("trajectory: discard %s: %w", episodeID, err)
	}
	return true, nil
}

func (s *Store) forget(l *Log) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[l.id] == l {
		delete(s.open, l.id)
	}
}

// EpisodeInfo describes one episode's log.
type EpisodeInfo struct {
	ID       string    `json:"id"`
	Events   int64     `json:"events"` // the next offset
	Finished bool      `json:"finished"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

// Episodes lists every episode, finished or not, sorted by id.
func (s *Store) Episodes(ctx context.Context) ([]EpisodeInfo, error) {
	ids, err := s.names()
	if err != nil {
		return nil, err
	}
	out := make([]EpisodeInfo, 0, len(ids))
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("trajectory: list episodes: %w", err)
		}
		info, err := s.Info(id)
		if errors.Is(err, ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// Info describes one episode's log.
func (s *Store) Info(episodeID string) (EpisodeInfo, error) {
	if err := ValidID(episodeID); err != nil {
		return EpisodeInfo{}, err
	}
	return s.info(episodeID)
}

func (s *Store) info(id string) (EpisodeInfo, error) {
	fi, err := os.Stat(s.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return EpisodeInfo{}, fmt.Errorf("trajectory: episode %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return EpisodeInfo{}, fmt.Errorf("trajectory: episode %s: %w", id, err)
	}
	info := EpisodeInfo{ID: id, Size: fi.Size(), Modified: fi.ModTime()}
	s.mu.Lock()
	l := s.open[id]
	s.mu.Unlock()
	if l == nil && id == finishedName {
		l = s.finished
	}
	if l != nil {
		info.Events, info.Finished = l.state()
		return info, nil
	}
	n, last, err := countLines(s.path(id))
	if err != nil {
		return EpisodeInfo{}, fmt.Errorf("trajectory: episode %s: %w", id, err)
	}
	info.Events = n
	info.Finished = lineType(last) == TypeEpisodeEnd
	return info, nil
}

// Read calls fn with the episode's events from offset from on, in order,
// up to the last complete one; a torn last line is not returned.
func (s *Store) Read(ctx context.Context, episodeID string, from int64, fn func(Event) error) error {
	if err := ValidID(episodeID); err != nil {
		return err
	}
	return s.read(ctx, episodeID, from, fn)
}

// ReadFinished calls fn with the finished feed's items (TypeSegmentEnd and
// TypeEpisodeEnd events) from offset from on.
func (s *Store) ReadFinished(ctx context.Context, from int64, fn func(Event) error) error {
	return s.read(ctx, finishedName, from, fn)
}

func (s *Store) read(ctx context.Context, id string, from int64, fn func(Event) error) error {
	t, err := openTail(s.path(id), from)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("trajectory: read %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("trajectory: read %s: %w", id, err)
	}
	defer t.Close()
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("trajectory: read %s: %w", id, err)
		}
		line, _, err := t.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if errors.Is(err, ErrCorrupt) && t.atEnd() {
			return nil // a bad last line is a torn write; OpenStore cuts it
		}
		if err != nil {
			return fmt.Errorf("trajectory: read %s: %w", id, err)
		}
		var ev Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("trajectory: read %s offset %d: %w: %v", id, t.next-1, ErrCorrupt, err)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}

// watch registers fn to be told, without blocking, that a stream (an
// episode id or finishedName) has new events. It returns the unregister
// function.
func (s *Store) watch(fn func(stream string)) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listeners = append(s.listeners, fn)
	i := len(s.listeners) - 1
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		// Copy on write: notify iterates a snapshot without the lock.
		ls := slices.Clone(s.listeners)
		ls[i] = nil
		s.listeners = ls
	}
}

func (s *Store) notify(stream string) {
	s.mu.Lock()
	ls := s.listeners
	s.mu.Unlock()
	for _, fn := range ls {
		if fn != nil {
			fn(stream)
		}
	}
}

// publish adds items to the finished feed.
func (s *Store) publish(items []Event) error {
	for _, it := range items {
		if _, err := s.finished.Append(it); err != nil {
			return fmt.Errorf("trajectory: finished feed: %w", err)
		}
	}
	return nil
}

// Close closes every open Log (fsyncing it) and the finished feed, and
// gives up the directory.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	logs := make([]*Log, 0, len(s.open))
	for _, l := range s.open {
		logs = append(logs, l)
	}
	s.mu.Unlock()
	var errs []error
	for _, l := range logs {
		errs = append(errs, l.Close())
	}
	errs = append(errs, s.finished.Close())
	s.vmu.Lock()
	if s.verdicts != nil {
		errs = append(errs, s.verdicts.Close())
	}
	s.vmu.Unlock()
	// The lock goes last: a new owner must find every log closed.
	errs = append(errs, s.lock.Close())
	return errors.Join(errs...)
}

// fixTail drops a torn last line: bytes after the last newline are what a
// crash cut short, since every event is written whole with its newline.
func (s *Store) fixTail(id string) error {
	p := s.path(id)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("trajectory: recover %s: %w", id, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("trajectory: recover %s: %w", id, err)
	}
	end, err := lastNewline(f, fi.Size())
	if err != nil {
		return fmt.Errorf("trajectory: recover %s: %w", id, err)
	}
	if end == fi.Size() {
		return nil
	}
	s.log.Warn("dropping torn last line", "episode_id", id, "bytes", fi.Size()-end)
	if err := f.Truncate(end); err != nil {
		return fmt.Errorf("trajectory: recover %s: truncate torn tail: %w", id, err)
	}
	return f.Sync()
}

// lastNewline returns the position just after the file's last '\n' (0 when
// there is none), reading backwards.
func lastNewline(f *os.File, size int64) (int64, error) {
	buf := make([]byte, 64<<10)
	for end := size; end > 0; {
		start := max(0, end-int64(len(buf)))
		b := buf[:end-start]
		if _, err := f.ReadAt(b, start); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

// reconcile puts into the finished feed the finished episodes (and their
// segments) that a crash between an episode's end and its feed item left
// out.
func (s *Store) reconcile(ctx context.Context, ids []string) error {
	have := map[string]bool{}
	segs := map[string]map[int]bool{}
	err := s.ReadFinished(ctx, 0, func(ev Event) error {
		switch ev.Type {
		case TypeEpisodeEnd:
			have[ev.EpisodeID] = true
		case TypeSegmentEnd:
			if segs[ev.EpisodeID] == nil {
				segs[ev.EpisodeID] = map[int]bool{}
			}
			segs[ev.EpisodeID][ev.Segment] = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range ids {
		if id == finishedName || have[id] {
			continue
		}
		last, err := lastLine(s.path(id))
		if err != nil {
			return fmt.Errorf("trajectory: recover %s: %w", id, err)
		}
		if lineType(last) != TypeEpisodeEnd {
			continue
		}
		var tr segTracker
		var items []Event
		err = s.Read(ctx, id, 0, func(ev Event) error {
			items = append(items, tr.observe(ev)...)
			return nil
		})
		if errors.Is(err, ErrCorrupt) {
			// One bad log must not keep the store shut: it stays off
			// the feed, and says so.
			s.log.Warn("leaving a corrupt log off the finished feed", "episode_id", id, "file", s.path(id), "err", err)
			continue
		}
		if err != nil {
			return err
		}
		var missing []Event
		for _, it := range items {
			if it.Type == TypeSegmentEnd && segs[id][it.Segment] {
				continue
			}
			missing = append(missing, it)
		}
		s.log.Info("adding finished episode missing from the feed", "episode_id", id)
		if err := s.publish(missing); err != nil {
			return err
		}
	}
	return nil
}

func lastLine(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	end, err := lastNewline(f, fi.Size())
	if err != nil || end == 0 {
		return nil, err
	}
	start, err := lastNewline(f, end-1)
	if err != nil {
		return nil, err
	}
	b := make([]byte, end-1-start)
	_, err = f.ReadAt(b, start)
	return b, err
}

// countLines counts complete lines and returns the last one.
func countLines(path string) (int64, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	var n int64
	buf := make([]byte, 256<<10)
	for {
		k, err := f.Read(buf)
		n += int64(bytes.Count(buf[:k], []byte{'\n'}))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, nil, err
		}
	}
	last, err := lastLine(path)
	return n, last, err
}

// header is the part of an event a reader needs to route it.
type header struct {
	Offset    int64  `json:"offset"`
	EpisodeID string `json:"episode_id"`
	Segment   int    `json:"segment"`
	Type      string `json:"type"`
}

func lineType(line []byte) string {
	var h header
	if json.Unmarshal(line, &h) != nil {
		return ""
	}
	return h.Type
}
