package audit

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	json "github.com/go-json-experiment/json/v1"

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

// maxFile bounds one trajectory file read into memory.
const maxFile = 512 << 20

// MaxValue bounds one JSON value the audit decodes: a file holding one
// object or array, or one line of a JSONL file. Decoding holds several
// times a value's size, so a larger one is refused, not read; the
// largest file of the real corpus is 4 MB.
const MaxValue = 64 << 20

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
	res := make([]unitResult, len(b.units))
	for r := range b.results {
		res[r.unit] = r
	}
	var eps []Trace
	var errs []FileError
	for _, r := range res {
		eps, errs = append(eps, r.eps...), append(errs, r.errs...)
	}
	return eps, errs
}

// Batch is trajectory files being read in the background (ReadAsync);
// Auditor.AuditBatch replays each file's episodes as soon as it is read.
// The larger files are read first, so that the last file read or replayed
// is a small one and no CPU waits long for it at the end; results keep
// Read's order.
type Batch struct {
	units   []unit
	results chan unitResult
	stop    chan struct{}
	once    sync.Once
}

// unit is what one path of the walk contributes, in Read's order: a file
// to read, or an error met before reading it.
type unit struct {
	path string
	size int64
	err  *FileError
}

// unitResult is a unit read.
type unitResult struct {
	unit int
	eps  []Trace
	errs []FileError
}

// ReadAsync lists the trajectory files under paths, as Read does, and
// reads them on GOMAXPROCS goroutines in the background, at most
// readAhead files per goroutine ahead of their consumer. Stop it if its
// results are not all consumed.
func ReadAsync(paths ...string) *Batch {
	b := &Batch{units: listUnits(paths), stop: make(chan struct{})}
	order := make([]int, len(b.units))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return b.units[order[i]].size > b.units[order[j]].size })
	workers := max(1, min(runtime.GOMAXPROCS(0), len(b.units)))
	b.results = make(chan unitResult, workers*readAhead)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				r := unitResult{unit: i}
				if u := b.units[i]; u.err != nil {
					r.errs = []FileError{*u.err}
				} else {
					r.eps, r.errs = ReadFile(u.path)
				}
				select {
				case b.results <- r:
				case <-b.stop:
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

// readAhead is how many files per reading goroutine a Batch holds read
// and not yet consumed. `rollcage audit` compiles its policy (about 0.1
// CPU-s, on one goroutine) while the first files are read: with one file
// per goroutine the readers were done with theirs a third of the way into
// the compile, and one CPU sat idle for the rest (ROLLCAGE_TRACE). Four
// keep them busy through it, the largest files being read first.
const readAhead = 4

// Stop ends the background reading; results not yet consumed are dropped.
func (b *Batch) Stop() { b.once.Do(func() { close(b.stop) }) }

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
// regular file is read, and at most maxFile bytes of it.
func ReadFile(path string) ([]Trace, []FileError) {
	data, err := readRegular(path)
	if err != nil {
		return nil, []FileError{{Path: path, Err: oneLine(err)}}
	}
	return Parse(path, data)
}

// readRegular reads a regular file of at most maxFile bytes. It opens
// without blocking (a FIFO with no writer would block a plain open) and
// checks what it opened before reading a byte.
func readRegular(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := NotRegular(fi); err != nil || fi.IsDir() {
		return nil, cmp.Or(err, errors.New("a directory"))
	}
	if fi.Size() > maxFile {
		return nil, fmt.Errorf("file is %d bytes, over the %d MiB limit of one file; split it", fi.Size(), maxFile>>20)
	}
	// It may grow while it is read: no more than the limit is held.
	data := make([]byte, 0, fi.Size()+1)
	data, err = readAll(io.LimitReader(f, maxFile+1), data)
	if err != nil {
		return nil, err
	}
	if len(data) > maxFile {
		return nil, fmt.Errorf("file grew past the %d MiB limit of one file while it was read; split it", maxFile>>20)
	}
	return data, nil
}

// readAll is io.ReadAll into buf's spare capacity.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// Parse reads trajectories from data; name is used in sources and
// errors.
//
// The readers decode with go-json-experiment's v1 package: encoding/json's
// semantics (names matched case-insensitively, invalid UTF-8 replaced,
// the last of duplicate names kept) on the v2 decoder, which reads these
// long trajectories in about half the CPU time (BenchmarkAuditReal/read).
// A file holding one object is read in one pass with jsondec's scanner
// (parseFast: the members no reader needs skipped, not decoded) and split
// into raw members only when that pass does not read it.
//
// One JSON value (the whole of a file holding one, or a line of JSONL)
// over MaxValue bytes is an error naming the limit.
func Parse(name string, data []byte) ([]Trace, []FileError) {
	return parse(name, data, MaxValue)
}

func parse(name string, data []byte, maxValue int) ([]Trace, []FileError) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, []FileError{{Path: name, Err: "empty file"}}
	}
	base := strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	if len(trimmed) > maxValue {
		// Too large for one value: only JSONL whose lines each fit is
		// read (parseLines checks each line).
		first, _, _ := bytes.Cut(trimmed, []byte{'\n'})
		if trimmed[0] != '{' || len(first) > maxValue || !json.Valid(bytes.TrimSpace(first)) {
			return nil, []FileError{{Path: name, Err: overValue(len(trimmed), maxValue) + "; split it (JSONL: one episode or event per line)"}}
		}
		return parseLines(base, name, trimmed, maxValue)
	}
	switch trimmed[0] {
	case '[':
		msgs, err := decodeMessages(trimmed, "JSON array")
		var ep Trace
		if err == nil {
			ep, err = parseMessages(base, name, msgs, nil)
		}
		if err != nil {
			return nil, []FileError{{Path: name, Err: oneLine(err)}}
		}
		return []Trace{ep}, nil
	case '{':
		if ep, ok := parseFast(base, name, trimmed); ok {
			return []Trace{ep}, nil
		}
		return parseRaw(base, name, trimmed)
	}
	return nil, []FileError{{Path: name, Err: ErrUnknownFormat.Error() + ": it is not JSON or JSONL"}}
}

// parseRaw reads data starting with '{' split into raw members: one
// object for the whole file, or JSONL. It is the way every file went
// before parseFast, and what decides whatever parseFast does not read.
func parseRaw(base, name string, trimmed []byte) ([]Trace, []FileError) {
	// One JSON object for the whole file?
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &obj); err == nil {
		ep, err := parseObject(base, name, obj)
		if err == nil {
			return []Trace{ep}, nil
		}
		if !errors.Is(err, errOneEvent) {
			return nil, []FileError{{Path: name, Err: oneLine(err)}}
		}
	}
	// The whole is within the limit (parse), so every line is.
	return parseLines(base, name, trimmed, len(trimmed))
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

// parseObject reads a file holding one JSON object.
func parseObject(base, name string, obj map[string]json.RawMessage) (Trace, error) {
	switch {
	case has(obj, "trajectory"):
		return parseSWEAgent(base, name, obj, nil)
	case has(obj, "history") && has(obj, "instance_id"):
		return parseOpenHands(base, name, obj)
	case has(obj, "messages"):
		return parseMessageObject(base, name, obj, nil)
	case has(obj, "type") && has(obj, "episode_id"):
		return Trace{}, errOneEvent
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > 6 {
		keys = append(keys[:6], "…")
	}
	return Trace{}, fmt.Errorf("%w: a JSON object with keys %s; expected \"messages\" (OpenAI format, llm_completions), \"trajectory\" (SWE-agent) or \"history\" with \"instance_id\" (OpenHands output.jsonl)", ErrUnknownFormat, strings.Join(keys, ", "))
}

func has(obj map[string]json.RawMessage, k string) bool {
	v, ok := obj[k]
	return ok && len(v) > 0 && string(v) != "null"
}

// parseLines reads JSONL: rollcage events, one OpenAI episode per line,
// or one message per line (the whole file one episode).
func parseLines(base, name string, data []byte, maxValue int) ([]Trace, []FileError) {
	type line struct {
		n   int
		obj map[string]json.RawMessage
		raw []byte
	}
	var lines []line
	var errs []FileError
	// data is the whole file, already bounded by maxFile: lines are cut
	// from it in place
	for n, rest := 1, data; len(rest) > 0; n++ {
		b := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			b, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			continue
		}
		if len(b) > maxValue {
			errs = append(errs, FileError{Path: name, Line: n, Err: overValue(len(b), maxValue)})
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(b, &obj); err != nil {
			errs = append(errs, FileError{Path: name, Line: n, Err: "not a JSON object: " + oneLine(err)})
			continue
		}
		lines = append(lines, line{n, obj, b})
	}
	if len(lines) == 0 {
		if len(errs) > 1 {
			errs = []FileError{{Path: name, Err: fmt.Sprintf("%s: no line is a JSON object (first: line %d: %s)", ErrUnknownFormat, errs[0].Line, errs[0].Err)}}
		}
		return nil, errs
	}
	first := lines[0].obj
	switch {
	case has(first, "type") && has(first, "episode_id") && has(first, "offset"):
		var evs []trajectory.Event
		for _, l := range lines {
			var ev trajectory.Event
			if err := json.Unmarshal(l.raw, &ev); err != nil || ev.Type == "" {
				errs = append(errs, FileError{Path: name, Line: l.n, Err: "not a rollcage event"})
				continue
			}
			evs = append(evs, ev)
		}
		return append([]Trace(nil), fromEvents(name, evs)...), errs
	case has(first, "messages"), has(first, "history") && has(first, "instance_id"):
		var eps []Trace
		for _, l := range lines {
			ep, err := parseObject(fmt.Sprintf("%s-%d", base, l.n), fmt.Sprintf("%s:%d", name, l.n), l.obj)
			if err != nil {
				errs = append(errs, FileError{Path: name, Line: l.n, Err: oneLine(err)})
				continue
			}
			eps = append(eps, ep)
		}
		return eps, errs
	case has(first, "role"):
		raws := make([]json.RawMessage, len(lines))
		for i, l := range lines {
			raws[i] = l.raw
		}
		msgs, err := messagesOf(raws, 0)
		var ep Trace
		if err == nil {
			ep, err = parseMessages(base, name, msgs, nil)
		}
		if err != nil {
			return nil, append(errs, FileError{Path: name, Err: oneLine(err)})
		}
		return []Trace{ep}, errs
	}
	return nil, append(errs, FileError{Path: name, Err: ErrUnknownFormat.Error() + ": JSONL whose lines are neither rollcage events, episodes with \"messages\", OpenHands records (\"history\"), nor chat messages"})
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
