package audit

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	json "github.com/go-json-experiment/json/v1"
	"golang.org/x/sync/semaphore"

	"github.com/rollcage/rollcage/trajectory"
)

// ErrUnknownFormat: a file's content is none of the formats the audit
// reads.
var ErrUnknownFormat = errors.New("not a trajectory in a known format")

// FileError is a file (or a line of one) that could not be read; the
// audit skips it and goes on.
type FileError struct {
	Path string `json:"path"`
	Line int    `json:"line,omitempty"`
	Err  string `json:"error"`
}

func (e FileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Err)
}

// MaxValue bounds what one episode is read from: one JSON value (a file
// holding one object or array, or one line of a JSONL file), or the
// lines of an episode written one message or one event per line. Reading
// holds an episode's input and what is decoded of it, so a larger one is
// refused, not read; the largest file of the real corpus is 4 MB.
const MaxValue = 64 << 20

// maxHeld bounds the bytes of input of the episodes read and not yet
// replayed (consumed, for Read): with the value being read on each
// reading goroutine, what the reading holds at once.
const maxHeld = MaxValue

// NotRegular says why the audit will not read what fi describes (a named
// pipe would block the read, a device never ends); nil for a regular
// file or a directory.
func NotRegular(fi fs.FileInfo) error {
	m := fi.Mode()
	var kind string
	switch {
	case m.IsRegular(), m.IsDir():
		return nil
	case m&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		kind = "a character device"
	case m&fs.ModeDevice != 0:
		kind = "a block device"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	default:
		kind = "not a regular file (" + m.Type().String() + ")"
	}
	return fmt.Errorf("%s, not a trajectory file: give regular files or directories", kind)
}

// Read reads every trajectory under paths (files or directories, walked
// recursively). Files it cannot read are returned as FileErrors, never
// as a failure of the whole read. The order is paths', then file names'.
func Read(paths ...string) ([]Trace, []FileError) {
	b := ReadAsync(paths...)
	defer b.Stop()
	eps := make([][]Trace, len(b.units))
	errs := make([][]FileError, len(b.units))
	for r := range b.results {
		if r.ep != nil {
			eps[r.unit] = append(eps[r.unit], *r.ep)
		}
		errs[r.unit] = append(errs[r.unit], r.errs...)
		r.release()
	}
	return slices.Concat(eps...), slices.Concat(errs...)
}

// Batch is trajectory files being read in the background (ReadAsync);
// Auditor.AuditBatch replays each episode as soon as it is read. The
// larger files are read first, so that the last file read or replayed
// is a small one and no CPU waits long for it at the end; results keep
// Read's order.
//
// Its memory is bounded whatever the input: each episode read holds its
// input's size (at most MaxValue) of maxHeld until it is released
// (replayed), and a reading goroutine waits for room before it passes
// an episode on.
type Batch struct {
	units   []unit
	results chan result
	held    *semaphore.Weighted
	stop    chan struct{}
	cancel  context.CancelFunc // the readers' context, with stop
	once    sync.Once
}

// unit is what one path of the walk contributes, in Read's order: a file
// to read, or an error met before reading it.
type unit struct {
	path string
	size int64
	err  *FileError
}

// result is an episode of a unit read, in the unit's order, or the
// errors of a unit.
type result struct {
	unit   int
	ep     *Trace
	errs   []FileError
	weight int64 // of held, to release
	held   *semaphore.Weighted
}

// release gives the episode's share of held memory back.
func (r result) release() {
	if r.weight > 0 {
		r.held.Release(r.weight)
	}
}

// ReadAsync lists the trajectory files under paths, as Read does, and
// reads them on GOMAXPROCS goroutines in the background, at most
// readAhead episodes per goroutine and maxHeld bytes of input ahead of
// their consumer, which releases each result. Stop it if its results are
// not all consumed.
func ReadAsync(paths ...string) *Batch {
	ctx, cancel := context.WithCancel(context.Background())
	b := &Batch{units: listUnits(paths), stop: make(chan struct{}), held: semaphore.NewWeighted(maxHeld), cancel: cancel}
	order := make([]int, len(b.units))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return b.units[order[i]].size > b.units[order[j]].size })
	workers := max(1, min(runtime.GOMAXPROCS(0), len(b.units)))
	b.results = make(chan result, workers*readAhead)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if !b.readUnit(ctx, i) {
					return
				}
			}
		})
	}
	go func() {
		defer func() {
			close(next)
			wg.Wait()
			close(b.results)
		}()
		for _, i := range order {
			select {
			case next <- i:
			case <-b.stop:
				return
			}
		}
	}()
	return b
}

// readUnit reads unit i, passing each episode on as it is read; false
// when the batch was stopped.
func (b *Batch) readUnit(ctx context.Context, i int) bool {
	send := func(r result) bool {
		select {
		case b.results <- r:
			return true
		case <-b.stop:
			r.release()
			return false
		}
	}
	u := b.units[i]
	if u.err != nil {
		return send(result{unit: i, errs: []FileError{*u.err}})
	}
	errs := readFile(u.path, func(ep Trace, size int64) error {
		w := min(max(size, 1), maxHeld)
		if b.held.Acquire(ctx, w) != nil {
			return errStop
		}
		if !send(result{unit: i, ep: &ep, weight: w, held: b.held}) {
			return errStop
		}
		return nil
	})
	select {
	case <-b.stop:
		return false
	default:
	}
	return send(result{unit: i, errs: errs})
}

// readAhead is how many episodes per reading goroutine a Batch holds
// read and not yet consumed (within maxHeld). `rollcage audit` compiles
// its policy (about 0.1 CPU-s, on one goroutine) while the first files
// are read: with one file per goroutine the readers were done with
// theirs a third of the way into the compile, and one CPU sat idle for
// the rest (ROLLCAGE_TRACE). Four keep them busy through it, the largest
// files being read first.
const readAhead = 4

// Stop ends the background reading; results not yet consumed are dropped.
func (b *Batch) Stop() {
	b.once.Do(func() {
		close(b.stop)
		b.cancel()
	})
}

// listUnits walks paths into units in Read's order: paths', then file
// names' within a directory, a directory's walk errors before its files.
func listUnits(paths []string) []unit {
	var us []unit
	fail := func(fe FileError) { us = append(us, unit{err: &fe}) }
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			fail(FileError{Path: p, Err: oneLine(err) + "; give an existing file or directory"})
			continue
		}
		if err := NotRegular(fi); err != nil {
			fail(FileError{Path: p, Err: err.Error()})
			continue
		}
		if !fi.IsDir() {
			us = append(us, unit{path: p, size: fi.Size()})
			continue
		}
		var files []unit
		werr := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				fail(FileError{Path: path, Err: oneLine(err)})
				return nil
			}
			name := d.Name()
			if path != p && strings.HasPrefix(name, ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() || skipName(name) {
				return nil
			}
			if !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
				fail(FileError{Path: path, Err: NotRegular(modeInfo{d}).Error()})
				return nil
			}
			var size int64
			if fi, err := d.Info(); err == nil {
				size = fi.Size() // only an order: ReadFile reports errors
			}
			files = append(files, unit{path: path, size: size})
			return nil
		})
		if werr != nil {
			fail(FileError{Path: p, Err: oneLine(werr)})
		}
		sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
		us = append(us, files...)
	}
	return us
}

// skipName: files in a directory that are known not to be trajectories
// (the Store's finished feed, reports, images).
func skipName(name string) bool {
	if name == "_finished.jsonl" {
		return true
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".html", ".png", ".jpg", ".svg", ".css", ".js", ".md", ".txt", ".log", ".gz", ".zip", ".parquet":
		return true
	}
	return false
}

// modeInfo is a DirEntry's type as the fs.FileInfo NotRegular takes,
// without the stat d.Info would make.
type modeInfo struct{ fs.DirEntry }

func (m modeInfo) Mode() fs.FileMode  { return m.Type() }
func (m modeInfo) Size() int64        { return 0 }
func (m modeInfo) ModTime() time.Time { return time.Time{} }
func (m modeInfo) Sys() any           { return nil }

// ReadFile reads one file, detecting its format by content. Only a
// regular file is read, and it is never held whole: see Parse.
func ReadFile(path string) ([]Trace, []FileError) {
	var eps []Trace
	errs := readFile(path, func(ep Trace, _ int64) error {
		eps = append(eps, ep)
		return nil
	})
	return eps, errs
}

// readFile reads one file, giving each episode to emit as soon as it is
// read, with the bytes of input it was read from; emit's error ends the
// reading. It opens without blocking (a FIFO with no writer would block
// a plain open) and checks what it opened before reading a byte.
func readFile(path string, emit func(Trace, int64) error) []FileError {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return []FileError{{Path: path, Err: oneLine(err)}}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err == nil {
		if err = NotRegular(fi); err == nil && fi.IsDir() {
			err = errors.New("a directory")
		}
	}
	if err != nil {
		return []FileError{{Path: path, Err: oneLine(err)}}
	}
	return parse(path, f, MaxValue, emit)
}

// Parse reads trajectories from data; name is used in sources and
// errors. It reads as ReadFile reads a file.
//
// The input is read token by token with jsontext, one episode at a time:
// a file holding one JSON object or array is decoded as it is read (the
// members no format needs skipped, a message list or SWE-agent's steps
// decoded element by element), JSONL line by line, each episode given
// on as soon as its last line is read. What one episode is read from
// (one JSON value, or the lines of an episode written one message or
// one event per line) over MaxValue bytes is an error naming the limit.
func Parse(name string, data []byte) ([]Trace, []FileError) {
	var eps []Trace
	errs := parse(name, bytes.NewReader(data), MaxValue, func(ep Trace, _ int64) error {
		eps = append(eps, ep)
		return nil
	})
	return eps, errs
}

// errStop: emit asks the reading to end (the batch was stopped).
var errStop = errors.New("reading stopped")

// fileReader is one file being read.
type fileReader struct {
	name, base string
	br         *bufio.Reader
	maxValue   int
	emit       func(Trace, int64) error
	errs       []FileError
	dec        *jsontext.Decoder // reused line after line
	line       []byte            // the current line; reused
	lineNo     int               // the current line's number
	firstNo    int               // the first line's that is not blank
}

func (p *fileReader) fail(line int, msg string) {
	p.errs = append(p.errs, FileError{Path: p.name, Line: line, Err: msg})
}

func parse(name string, r io.Reader, maxValue int, emit func(Trace, int64) error) []FileError {
	p := &fileReader{name: name, base: strings.TrimSuffix(filepath.Base(name), filepath.Ext(name)),
		br: bufio.NewReaderSize(r, 64<<10), maxValue: maxValue, emit: emit,
		dec: jsontext.NewDecoder(eofReader{}, decodeOpts)}
	c, err := p.skipSpace()
	if err != nil {
		if errors.Is(err, io.EOF) {
			p.fail(0, "empty file")
		} else {
			p.fail(0, oneLine(err))
		}
		return p.errs
	}
	if c != '{' && c != '[' {
		p.fail(0, ErrUnknownFormat.Error()+": it is not JSON or JSONL")
		return p.errs
	}
	first, n, over, err := p.readLine()
	switch {
	case err != nil:
		p.fail(0, oneLine(err))
		return p.errs
	case over:
		p.fail(0, overValue(n, maxValue)+"; split it (JSONL: one episode or event per line)")
		return p.errs
	}
	held := bytes.Clone(first) // held while the next line is read, and read again if it is no one value
	top, derr := p.decodeLine(first)
	switch {
	case errors.Is(derr, io.ErrUnexpectedEOF):
		// the value goes on past its first line: one value, pretty-printed
		p.stream(io.MultiReader(bytes.NewReader(held), strings.NewReader("\n"), p.br))
		return p.errs
	case derr != nil && (held[0] != '{' || notObject(held) != ""):
		// more than one value on the first line, or not JSON
		p.fail(0, ErrUnknownFormat.Error()+": not one JSON value, nor JSONL: "+cmp.Or(notObject(held), oneLine(derr)))
		return p.errs
	}
	// one object (which a format may fail to read: derr) or array
	p.firstNo, first = p.lineNo, held
	next, n, over, err := p.nextLine()
	switch {
	case errors.Is(err, io.EOF) && derr != nil:
		p.fail(0, oneLine(derr))
	case errors.Is(err, io.EOF):
		p.single(top, first, len(first))
	case err != nil:
		p.fail(0, oneLine(err))
	default:
		p.lines(lineOf{no: p.firstNo, text: first, top: &top, err: derr}, lineOf{no: p.lineNo, text: next, n: n, over: over})
	}
	return p.errs
}

// skipSpace skips whitespace and returns the byte after it, unread.
func (p *fileReader) skipSpace() (byte, error) {
	for {
		c, err := p.br.ReadByte()
		if err != nil {
			return 0, err
		}
		switch c {
		case '\n':
			p.lineNo++
		case ' ', '\t', '\r':
		default:
			return c, p.br.UnreadByte()
		}
	}
}

// readLine reads the next line (after the one before it: lineNo is its
// number, from 1), trimmed. A line over the value limit is not held: over
// says so and n is its length. At the end of the input it returns io.EOF.
func (p *fileReader) readLine() (line []byte, n int, over bool, err error) {
	p.line = p.line[:0]
	p.lineNo++
	for {
		frag, err := p.br.ReadSlice('\n')
		n += len(frag)
		if !over {
			if len(p.line)+len(frag) > p.maxValue+2 { // the limit, a \r and the \n
				over = true
				p.line = p.line[:0]
			} else {
				p.line = append(p.line, frag...)
			}
		}
		switch {
		case err == nil:
			n-- // the newline
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if n == 0 {
				return nil, 0, false, io.EOF
			}
		default:
			return nil, 0, false, err
		}
		if over {
			return nil, n, true, nil
		}
		line = bytes.TrimSpace(p.line)
		if len(line) > p.maxValue {
			return nil, len(line), true, nil
		}
		return line, n, false, nil
	}
}

// nextLine is the next line that is not blank.
func (p *fileReader) nextLine() (line []byte, n int, over bool, err error) {
	for {
		line, n, over, err = p.readLine()
		if err != nil || over || len(line) > 0 {
			return line, n, over, err
		}
	}
}

// top is one JSON value read whole: an object, or an array of messages.
type top struct {
	obj     object
	msgs    []message
	isArray bool
	bad     int // an array's first element that is no message (-1: none)
}

// decodeLine reads line, which must hold one JSON value; io.ErrUnexpectedEOF
// says the value goes on past it. The decoder reads line in place (a
// bytes.Buffer is not copied) and marks what it has read: line is not
// to be read again.
func (p *fileReader) decodeLine(line []byte) (top, error) {
	p.dec.Reset(bytes.NewBuffer(line), decodeOpts)
	t, err := readTop(p.dec)
	if err != nil {
		return t, err
	}
	if _, err := p.dec.ReadToken(); err != io.EOF {
		return t, errors.New("more than one JSON value on a line")
	}
	return t, nil
}

// readTop reads the object or message array dec is at.
func readTop(dec *jsontext.Decoder) (top, error) {
	t := top{bad: -1}
	var err error
	if dec.PeekKind() == '[' {
		t.isArray = true
		t.msgs, err = readList(dec, func(i int, m *message) {
			if m.Role == "" && t.bad < 0 {
				t.bad = i
			}
		})
		return t, err
	}
	t.obj, err = readObject(dec)
	return t, err
}

// stream reads one pretty-printed value from r as it comes, holding no
// more than the value limit of it.
func (p *fileReader) stream(r io.Reader) {
	lr := &valueLimit{r: r, n: int64(p.maxValue)}
	dec := jsontext.NewDecoder(lr, decodeOpts)
	t, err := readTop(dec)
	if err == nil {
		if _, err = dec.ReadToken(); err == io.EOF {
			err = nil
		} else if err == nil {
			err = errors.New("more than one JSON value, not one per line: give one object or array per file, or JSONL")
		}
	}
	switch {
	case errors.Is(err, errValueLimit):
		p.fail(0, overValue(p.maxValue+spanAfter(lr.r), p.maxValue)+"; split it (JSONL: one episode or event per line)")
	case errors.Is(err, errStop):
	case err != nil:
		p.fail(0, oneLine(err))
	default:
		p.single(t, nil, int(dec.InputOffset()))
	}
}

// errValueLimit: a value went on past the limit.
var errValueLimit = errors.New("over the limit of one value")

// valueLimit reads from r at most n bytes more, then fails.
type valueLimit struct {
	r io.Reader
	n int64
}

func (l *valueLimit) Read(b []byte) (int, error) {
	if l.n <= 0 {
		return 0, errValueLimit
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	n, err := l.r.Read(b)
	l.n -= int64(n)
	return n, err
}

// spanAfter reads r to its end and returns how many bytes it held up to
// its last that is no whitespace.
func spanAfter(r io.Reader) int {
	buf := make([]byte, 64<<10)
	n, last := 0, 0
	for {
		m, err := r.Read(buf)
		for i := m - 1; i >= 0; i-- {
			if c := buf[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				last = n + i + 1
				break
			}
		}
		n += m
		if err != nil {
			return last
		}
	}
}

// single reads a file holding one value, t; raw is its text when it was
// read whole (nil: streamed), size its length.
func (p *fileReader) single(t top, raw []byte, size int) {
	if t.isArray {
		ep, err := messagesEpisode(p.base, p.name, t.msgs, t.bad)
		if err != nil {
			p.fail(0, oneLine(err))
			return
		}
		p.give(ep, size)
		return
	}
	ep, err := parseObject(p.base, p.name, t.obj)
	switch {
	case errors.Is(err, errOneEvent) && raw != nil:
		p.lines(lineOf{no: p.firstNo, text: raw})
	case errors.Is(err, errOneEvent):
		p.fail(0, "one rollcage event, pretty-printed: give events one per line (JSONL)")
	case err != nil:
		p.fail(0, oneLine(err))
	default:
		p.give(ep, size)
	}
}

// give passes ep on; an error of emit ends the reading.
func (p *fileReader) give(ep Trace, size int) bool {
	if err := p.emit(ep, int64(size)); err != nil {
		p.br.Reset(eofReader{})
		return false
	}
	return true
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// messagesEpisode is the episode of a message list whose element bad
// (-1: none) is no chat message with a role.
func messagesEpisode(base, name string, msgs []message, bad int) (Trace, error) {
	if bad >= 0 {
		return Trace{}, fmt.Errorf("message %d is not a chat message with a role", bad)
	}
	return parseMessages(base, name, msgs, nil)
}

func overValue(n, maxValue int) string {
	return fmt.Sprintf("a JSON value of %d bytes, over the %s limit of one value", n, byteSize(maxValue))
}

// byteSize is n in MiB when it is a whole number of them (the limits).
func byteSize(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d-byte", n)
}

// errOneEvent: the object is a single rollcage event; read it as JSONL.
var errOneEvent = errors.New("one event")

// parseObject reads an episode from one JSON object.
func parseObject(base, name string, o object) (Trace, error) {
	switch {
	case o.has("trajectory"):
		return parseSWEAgent(base, name, o.Rest, o.Trajectory)
	case o.has("history") && o.has("instance_id"):
		return parseOpenHands(base, name, o.Rest)
	case o.has("messages"):
		if o.badMessage >= 0 {
			return Trace{}, fmt.Errorf("message %d is not a chat message with a role", o.badMessage)
		}
		return parseMessageObject(base, name, o.Rest, o.Messages)
	case o.has("type") && o.has("episode_id"):
		return Trace{}, errOneEvent
	}
	keys := slices.Sorted(maps.Keys(o.names))
	if len(keys) > 6 {
		keys = append(keys[:6], "…")
	}
	return Trace{}, fmt.Errorf("%w: a JSON object with keys %s; expected \"messages\" (OpenAI format, llm_completions), \"trajectory\" (SWE-agent) or \"history\" with \"instance_id\" (OpenHands output.jsonl)", ErrUnknownFormat, strings.Join(keys, ", "))
}

func has(obj map[string]json.RawMessage, k string) bool {
	v, ok := obj[k]
	return ok && len(v) > 0 && string(v) != "null"
}

// lineOf is one line of JSONL: its number, its text, and its value when
// already decoded.
type lineOf struct {
	no   int
	text []byte
	top  *top
	n    int   // its length, when over
	over bool  // longer than the value limit: not held
	err  error // why top could not be read
}

// lines reads JSONL from the lines pending on: rollcage events, one
// OpenAI or OpenHands episode per line, or one message per line (the
// whole file one episode). The first line that is a JSON object decides
// which.
func (p *fileReader) lines(pending ...lineOf) {
	j := jsonl{start: len(p.errs), bad: -1}
	for {
		var l lineOf
		if len(pending) > 0 {
			l, pending = pending[0], pending[1:]
		} else {
			text, n, over, err := p.nextLine()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				p.fail(0, oneLine(err))
				return
			}
			l = lineOf{no: p.lineNo, text: text, n: n, over: over}
		}
		if !j.line(p, l) {
			return
		}
	}
	j.end(p)
}

// Kinds of JSONL.
const (
	linesUndecided = iota
	linesEvents
	linesEpisodes
	linesMessages
)

// jsonl is the state of a JSONL file's reading.
type jsonl struct {
	kind    int
	start   int // the file's errors before its lines
	objects int // lines that are JSON objects
	events  *eventEpisodes
	msgs    []message // linesMessages: the episode's so far
	bad     int       // linesMessages: the first that is no message (-1: none)
	held    int       // linesMessages: bytes of msgs' lines
}

// line reads one line; false ends the file's reading.
func (j *jsonl) line(p *fileReader, l lineOf) bool {
	switch {
	case l.over:
		p.fail(l.no, overValue(l.n, p.maxValue))
		return true
	case l.err != nil:
		p.fail(l.no, oneLine(l.err))
		return true
	}
	switch j.kind {
	case linesEvents:
		return j.event(p, l)
	case linesMessages:
		return j.message(p, l)
	}
	t := l.top
	if t == nil {
		tt, err := p.decodeLine(bytes.Clone(l.text)) // l.text is read again below
		if err != nil {
			p.fail(l.no, cmp.Or(notObject(l.text), oneLine(err)))
			return true
		}
		t = &tt
	}
	if t.isArray {
		p.fail(l.no, "not a JSON object: a JSON array")
		return true
	}
	j.objects++
	o := t.obj
	switch {
	case j.kind == linesEpisodes:
	case o.has("type") && o.has("episode_id") && o.has("offset"):
		j.kind, j.events = linesEvents, newEventEpisodes(p.name)
		j.objects--
		return j.event(p, l)
	case o.has("messages"), o.has("history") && o.has("instance_id"):
		j.kind = linesEpisodes
	case o.has("role"):
		j.kind = linesMessages
		j.objects--
		return j.message(p, l)
	default:
		p.fail(0, ErrUnknownFormat.Error()+": JSONL whose lines are neither rollcage events, episodes with \"messages\", OpenHands records (\"history\"), nor chat messages")
		return false
	}
	ep, err := parseObject(fmt.Sprintf("%s-%d", p.base, l.no), fmt.Sprintf("%s:%d", p.name, l.no), o)
	if err != nil {
		p.fail(l.no, oneLine(err))
		return true
	}
	return p.give(ep, len(l.text))
}

// notObject is the error of a line that is no JSON object, or "" when it
// is one.
func notObject(line []byte) string {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		return "not a JSON object: " + oneLine(err)
	}
	return ""
}

// event reads a line of rollcage events.
func (j *jsonl) event(p *fileReader, l lineOf) bool {
	var ev trajectory.Event
	if err := json.Unmarshal(l.text, &ev); err != nil || ev.Type == "" {
		p.fail(l.no, cmp.Or(notObject(l.text), "not a rollcage event"))
		return true
	}
	j.objects++
	if err := j.events.add(ev, len(l.text)); err != nil {
		p.fail(l.no, err.Error())
		return true
	}
	if j.events.held > p.maxValue {
		p.fail(0, fmt.Sprintf("rollcage events of unfinished episodes over the %s limit of one episode's records; give each episode its own file, as a trajectory Store does", byteSize(p.maxValue)))
		return false
	}
	for _, e := range j.events.finished() {
		if !p.give(e.ep, e.size) {
			return false
		}
	}
	return true
}

// message reads a line of chat messages, one episode for the file.
func (j *jsonl) message(p *fileReader, l lineOf) bool {
	var m message
	if err := json.Unmarshal(l.text, &m); err != nil || m.Role == "" {
		if e := notObject(l.text); e != "" {
			p.fail(l.no, e)
			return true
		}
		if j.bad < 0 {
			j.bad = j.objects
		}
	}
	j.objects++
	j.msgs = append(j.msgs, m)
	j.held += len(l.text)
	if j.held > p.maxValue {
		p.fail(0, fmt.Sprintf("chat messages of one episode, one per line, over the %s limit of one episode; split it", byteSize(p.maxValue)))
		return false
	}
	return true
}

// end finishes the file's lines.
func (j *jsonl) end(p *fileReader) {
	switch j.kind {
	case linesUndecided:
		if n := len(p.errs) - j.start; n > 1 {
			first := p.errs[j.start]
			p.errs = append(p.errs[:j.start], FileError{Path: p.name, Err: fmt.Sprintf("%s: no line is a JSON object (first: line %d: %s)", ErrUnknownFormat, first.Line, first.Err)})
		}
	case linesEvents:
		for _, e := range j.events.rest() {
			if !p.give(e.ep, e.size) {
				return
			}
		}
	case linesMessages:
		ep, err := messagesEpisode(p.base, p.name, j.msgs, j.bad)
		if err != nil {
			p.fail(0, oneLine(err))
			return
		}
		p.give(ep, j.held)
	}
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
