package trajectory

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"
)

// Log is one episode's JSONL file, appended to as events come. It is safe
// for concurrent use.
type Log struct {
	store *Store
	id    string
	path  string
	every time.Duration // fsync interval; 0: every event

	mu          sync.Mutex
	f           *os.File     // guarded by mu
	buf         bytes.Buffer // guarded by mu; reused encode buffer
	next        int64        // guarded by mu; the next offset
	finished    bool         // guarded by mu
	closed      bool         // guarded by mu
	err         error        // guarded by mu; a failed write poisons the log
	syncPending bool         // guarded by mu
	timer       *time.Timer
	seg         segTracker // guarded by mu
}

// openLog opens id's file, scanning it to find the next offset. Any
// unparsable or out-of-order line and everything after it is cut: only a
// crash leaves such a tail.
func (s *Store) openLog(id string, every time.Duration) (*Log, error) {
	p := s.path(id)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("trajectory: open log %s: %w", id, err)
	}
	l := &Log{store: s, id: id, path: p, every: every, f: f}

	r := bufio.NewReaderSize(f, 256<<10)
	var good int64
	var last string
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			break // a partial last line (if any) is dropped below
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("trajectory: open log %s: %w", id, err)
		}
		var h header
		if json.Unmarshal(line, &h) != nil || h.Offset != l.next || h.Type == "" {
			break
		}
		if !isFeed(id) {
			l.seg.observe(Event{Offset: h.Offset, Segment: h.Segment, Type: h.Type})
		}
		good += int64(len(line))
		l.next++
		last = h.Type
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("trajectory: open log %s: %w", id, err)
	}
	if fi.Size() != good {
		s.log.Warn("cutting unreadable tail of log", "episode_id", id, "offset", l.next, "bytes", fi.Size()-good)
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, fmt.Errorf("trajectory: open log %s: cut torn tail: %w", id, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, fmt.Errorf("trajectory: open log %s: %w", id, err)
		}
	}
	l.finished = !isFeed(id) && last == TypeEpisodeEnd
	return l, nil
}

// ID is the episode's id.
func (l *Log) ID() string { return l.id }

func (l *Log) state() (next int64, finished bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next, l.finished
}

// Append writes ev and returns its offset. It sets Offset (always) and Time
// (when zero) and the EpisodeID (when empty). The event is in the OS's
// hands when Append returns, so readers see it and a process crash cannot
// lose it; an episode_end event is also fsynced and finishes the log.
func (l *Log) Append(ev Event) (int64, error) {
	off, items, err := l.append(ev)
	if err != nil {
		return 0, err
	}
	// Outside the lock: listeners and the finished feed never hold up other
	// appenders of this log.
	l.store.notify(l.id)
	if len(items) > 0 {
		if err := l.store.publish(items); err != nil {
			return off, err
		}
	}
	return off, nil
}

func (l *Log) append(ev Event) (int64, []Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return 0, nil, fmt.Errorf("trajectory: append to %s: %w", l.id, ErrClosed)
	case l.finished:
		return 0, nil, fmt.Errorf("trajectory: append to %s: %w", l.id, ErrFinished)
	case l.err != nil:
		return 0, nil, fmt.Errorf("trajectory: append to %s: earlier write failed: %w", l.id, l.err)
	case ev.Type == "":
		return 0, nil, fmt.Errorf("trajectory: append to %s: %w: empty type", l.id, ErrBadEvent)
	}
	if ev.EpisodeID == "" {
		ev.EpisodeID = l.id
	} else if ev.EpisodeID != l.id && !isFeed(l.id) {
		return 0, nil, fmt.Errorf("trajectory: append to %s: %w: event of episode %q", l.id, ErrBadEvent, ev.EpisodeID)
	}
	ev.Offset = l.next
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	if err := encodeEvent(&l.buf, &ev); err != nil {
		return 0, nil, fmt.Errorf("trajectory: append to %s: %w: %v", l.id, ErrBadEvent, err)
	}
	// One write per event, newline included: a reader or a crash sees a
	// prefix of the line at worst, never a mix of two.
	if _, err := l.f.Write(l.buf.Bytes()); err != nil {
		l.err = err
		return 0, nil, fmt.Errorf("trajectory: append to %s: %w", l.id, err)
	}
	l.next++
	var items []Event
	if !isFeed(l.id) {
		items = l.seg.observe(ev)
	}
	if ev.Type == TypeEpisodeEnd && !isFeed(l.id) {
		l.finished = true
		if err := l.f.Sync(); err != nil {
			l.err = err
			return 0, nil, fmt.Errorf("trajectory: append to %s: sync: %w", l.id, err)
		}
		return ev.Offset, items, nil
	}
	if l.every <= 0 {
		if err := l.f.Sync(); err != nil {
			l.err = err
			return 0, nil, fmt.Errorf("trajectory: append to %s: sync: %w", l.id, err)
		}
	} else if !l.syncPending {
		l.syncPending = true
		if l.timer == nil {
			l.timer = time.AfterFunc(l.every, l.syncTick)
		} else {
			l.timer.Reset(l.every)
		}
	}
	return ev.Offset, items, nil
}

// syncTick fsyncs without holding mu, so appends go on meanwhile.
func (l *Log) syncTick() {
	l.mu.Lock()
	l.syncPending = false
	f, closed := l.f, l.closed
	l.mu.Unlock()
	if closed {
		return
	}
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
		l.store.log.Warn("fsync failed", "episode_id", l.id, "err", err)
	}
}

// Sync fsyncs the log now.
func (l *Log) Sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("trajectory: sync %s: %w", l.id, ErrClosed)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("trajectory: sync %s: %w", l.id, err)
	}
	return nil
}

// Close fsyncs and closes the log. Idempotent.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
	}
	err := l.f.Sync()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.mu.Unlock()
	l.store.forget(l)
	if err != nil {
		return fmt.Errorf("trajectory: close %s: %w", l.id, err)
	}
	return nil
}

// segTracker turns an episode's events into finished-feed items.
type segTracker struct {
	seg   int
	first int64
}

func (t *segTracker) observe(ev Event) []Event {
	switch ev.Type {
	case TypeCompaction:
		// The compaction event opens the new segment; the old one ended
		// just before it.
		end := t.item(ev, t.seg, ev.Offset-1, TypeCompaction)
		t.seg, t.first = ev.Segment, ev.Offset
		return []Event{end}
	case TypeEpisodeEnd:
		end := t.item(ev, t.seg, ev.Offset, TypeEpisodeEnd)
		done := Event{EpisodeID: ev.EpisodeID, Segment: ev.Segment, Step: ev.Step, Type: TypeEpisodeEnd, Time: ev.Time, Data: ev.Data}
		return []Event{end, done}
	}
	return nil
}

func (t *segTracker) item(ev Event, seg int, last int64, by string) Event {
	data, _ := json.Marshal(SegmentEnd{Segment: seg, First: t.first, Last: last, By: by})
	return Event{EpisodeID: ev.EpisodeID, Segment: seg, Step: ev.Step, Type: TypeSegmentEnd, Time: ev.Time, Data: data}
}

// tail reads a log's complete lines in order, from an offset on, and can
// go on reading as the file grows: at the end it returns io.EOF and keeps
// any partial line for the next call.
type tail struct {
	f       *os.File
	r       *bufio.Reader
	partial []byte
	skip    int64 // lines still to skip to reach the starting offset
	next    int64 // offset of the next line returned
}

func openTail(path string, from int64) (*tail, error) {
	if from < 0 {
		return nil, fmt.Errorf("offset %d: %w: offsets start at 0", from, ErrBadEvent)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &tail{f: f, r: bufio.NewReaderSize(f, 64<<10), skip: from, next: from}, nil
}

// Next returns the next complete line (without its newline) and its
// header, or io.EOF when none is complete yet. The line is valid until the
// next call.
func (t *tail) Next() ([]byte, header, error) {
	for {
		chunk, err := t.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			t.partial = append(t.partial, chunk...)
			continue
		}
		if errors.Is(err, io.EOF) {
			t.partial = append(t.partial, chunk...)
			return nil, header{}, io.EOF
		}
		if err != nil {
			return nil, header{}, err
		}
		line := chunk
		if len(t.partial) > 0 {
			t.partial = append(t.partial, chunk...)
			line = t.partial
			t.partial = t.partial[:0]
		}
		if t.skip > 0 {
			t.skip--
			continue
		}
		line = line[:len(line)-1]
		var h header
		if err := json.Unmarshal(line, &h); err != nil || h.Offset != t.next {
			return nil, header{}, fmt.Errorf("line for offset %d: %w (got offset %d, %v)", t.next, ErrCorrupt, h.Offset, err)
		}
		t.next++
		return line, h, nil
	}
}

// atEnd reports whether nothing follows the last line read.
func (t *tail) atEnd() bool {
	_, err := t.r.Peek(1)
	return errors.Is(err, io.EOF)
}

func (t *tail) Close() error { return t.f.Close() }

// encodeEvent writes ev's JSON line (with its newline) into buf. It is
// encoding/json's output for Event, written by hand because reflection and
// compacting Data took half the time of an append; Data is only validated,
// or compacted when it spans lines.
func encodeEvent(buf *bytes.Buffer, ev *Event) error {
	buf.Reset()
	b := buf.AvailableBuffer()
	b = append(b, `{"offset":`...)
	b = strconv.AppendInt(b, ev.Offset, 10)
	b = append(b, `,"episode_id":`...)
	b = appendString(b, ev.EpisodeID)
	b = append(b, `,"segment":`...)
	b = strconv.AppendInt(b, int64(ev.Segment), 10)
	b = append(b, `,"step":`...)
	b = strconv.AppendInt(b, int64(ev.Step), 10)
	b = append(b, `,"type":`...)
	b = appendString(b, ev.Type)
	b = append(b, `,"time":`...)
	tb, err := ev.Time.MarshalJSON()
	if err != nil {
		return err
	}
	b = append(b, tb...)
	buf.Write(b)
	if len(ev.Data) > 0 {
		buf.WriteString(`,"data":`)
		if bytes.IndexByte(ev.Data, '\n') >= 0 || bytes.IndexByte(ev.Data, '\r') >= 0 {
			if err := json.Compact(buf, ev.Data); err != nil {
				return err
			}
		} else {
			if !json.Valid(ev.Data) {
				return errors.New("data is not valid JSON")
			}
			buf.Write(ev.Data)
		}
	}
	buf.WriteString("}\n")
	return nil
}

// appendString appends s as a JSON string; plain ASCII (ids, types) is
// copied as is.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
