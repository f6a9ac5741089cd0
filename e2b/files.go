package e2b

import (
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/toolcall"
)

// MaxUpload bounds one POST /files body, and each file it holds (a gzip
// body unpacked).
const MaxUpload = 32 << 20

type writtenEntry struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
}

// Bounds of a streamed download.
const (
	// downloadQueue is how many chunks of a read (32 KiB each at most
	// from the agent) wait for a slow client before the sandbox's
	// stream waits for it.
	downloadQueue = 32
	// downloadStall is how long a client may take to accept one chunk
	// before the read is given up (the sandbox's stream waits meanwhile).
	downloadStall = 30 * time.Second
	// maxReadError bounds what of a failed read's stderr is kept for the
	// error message.
	maxReadError = 4 << 10
)

// handleDownload answers GET /files?path= with a read_file call that
// streams (harness.Episode.Start): the file's bytes as they are, of any
// size, chunk by chunk as the sandbox reads them, never held whole here.
// A missing file is a 404 the SDK reads as not found. The status goes
// out with the first byte: a read that fails after it (a protected line
// the monitor withholds, the read's time limit, a client that stalls)
// breaks the connection before the end of the body, so the client gets
// an error, never a cut or changed file. A sandbox that does not stream
// gets the whole read_file call, up to the monitor's output bound.
func (s *Server) handleDownload(w http.ResponseWriter, r *http.Request) {
	b := sandboxOf(r.Context())
	p := r.URL.Query().Get("path")
	if p == "" {
		apiError(w, http.StatusBadRequest, "path is empty: give ?path= of the file to read")
		return
	}
	raw, err := marshalArgs(toolcall.ReadFileArgs{Path: p})
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	q := &chunkQueue{ch: make(chan sandbox.Output, downloadQueue), gone: make(chan struct{})}
	defer q.close()
	run, err := s.cfg.Episodes.Start(r.Context(), b.id, toolcall.Call{Tool: toolcall.ReadFile, Args: raw, Session: session}, false, q.put)
	if errors.Is(err, sandbox.ErrUnsupported) {
		s.downloadWhole(w, r, b, p)
		return
	}
	if err != nil {
		apiError(w, http.StatusBadGateway, callError(b, err).Error())
		return
	}
	if run.Process() == nil { // blocked, or bad arguments: nothing ran
		res, err := run.Wait(r.Context())
		if err != nil {
			apiError(w, http.StatusBadGateway, callError(b, err).Error())
			return
		}
		s.answerRead(w, p, res)
		return
	}
	kill := func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
		defer cancel()
		if err := run.Process().Signal(ctx, syscall.SIGKILL); err != nil {
			s.log.Warn("killing a download", "sandbox", b.id, "path", p, "err", err)
		}
	}
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{})
	var stderr []byte
	sent := false // the status and part of the body went out
	write := func(o sandbox.Output) bool {
		if o.Stream == sandbox.Stderr {
			stderr = append(stderr, o.Data[:min(len(o.Data), maxReadError-len(stderr))]...)
			return true
		}
		if !sent {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.WriteHeader(http.StatusOK)
			sent = true
		}
		_ = rc.SetWriteDeadline(time.Now().Add(downloadStall))
		_, err := w.Write(o.Data)
		return err == nil
	}
	for done := false; !done; {
		select {
		case o := <-q.ch:
			if !write(o) {
				q.close()
				kill()
				panic(http.ErrAbortHandler) // the client is gone or stalled
			}
		case <-r.Context().Done():
			q.close()
			kill()
			return
		case <-run.Done():
			// Every chunk was queued before the call ended.
			for drained := false; !drained; {
				select {
				case o := <-q.ch:
					if !write(o) {
						panic(http.ErrAbortHandler)
					}
				default:
					drained = true
				}
			}
			done = true
		}
	}
	res, err := run.Wait(r.Context())
	if err == nil {
		b.notify(res.Effects)
	}
	switch {
	case err != nil || run.Withheld() || res.Dummy || res.ExitCode != 0 || res.Exec == nil || res.Exec.Stopped != "":
		if sent {
			// Part of the file went out as a 200: only a broken body says
			// that the rest will not come.
			s.log.Warn("download broken off", "sandbox", b.id, "path", p, "withheld", run.Withheld(), "exit", res.ExitCode, "err", err)
			panic(http.ErrAbortHandler)
		}
	default:
		if !sent { // an empty file
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusOK)
		}
		return
	}
	switch {
	case err != nil:
		apiError(w, http.StatusBadGateway, callError(b, err).Error())
	case run.Withheld():
		apiError(w, http.StatusForbidden, fmt.Sprintf("file %s holds protected material (the hidden tests, the upstream fix or a later commit) that rollcage's monitor withholds", p))
	case res.Exec != nil && res.Exec.Stopped != "":
		apiError(w, http.StatusGatewayTimeout, fmt.Sprintf("reading %s was stopped after %s, the monitor's exec timeout: read it in parts with commands.run", p, res.Exec.Duration.Round(time.Second)))
	case res.Dummy:
		s.answerRead(w, p, res)
	default:
		res.Output = strings.TrimSpace(string(stderr))
		s.answerRead(w, p, res)
	}
}

// answerRead answers a read_file call's result that is the whole answer:
// an error by its message, or the output as the file (a blocked read's
// dummy output: what the policy is shown, made up).
func (s *Server) answerRead(w http.ResponseWriter, p string, res decision.CallResult) {
	if res.ExitCode != 0 {
		switch msg := res.Output; {
		case strings.HasSuffix(msg, "No such file or directory"):
			apiError(w, http.StatusNotFound, fmt.Sprintf("file %s not found", p))
		case strings.HasSuffix(msg, "Permission denied"):
			apiError(w, http.StatusUnauthorized, msg)
		default:
			apiError(w, http.StatusBadRequest, msg)
		}
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(res.Output)))
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, res.Output)
}

// downloadWhole is handleDownload on a sandbox that does not stream: one
// read_file call. A file the monitor would show changed (cut at its
// output bound, or with bytes that are not UTF-8 shown as \xNN) is an
// error saying so, never a changed file.
func (s *Server) downloadWhole(w http.ResponseWriter, r *http.Request, b *sbx, p string) {
	res, err := s.call(r.Context(), b, toolcall.ReadFile, toolcall.ReadFileArgs{Path: p}, "")
	if err != nil {
		apiError(w, http.StatusBadGateway, err.Error())
		return
	}
	switch {
	case res.ExitCode != 0 || res.Dummy:
	case res.Cut > 0:
		apiError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("file %s is over %d bytes, the most files.read returns from a sandbox that does not stream (the monitor's output bound): read it in parts with commands.run, e.g. \"tail -c +%d FILE | head -c %d\"", p, res.Cut, res.Cut+1, res.Cut))
		return
	case res.Escaped:
		apiError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("file %s is not UTF-8 text, and a sandbox that does not stream returns text only through rollcage's monitor: read it as base64 with commands.run(\"base64 -w0 FILE\")", p))
		return
	}
	s.answerRead(w, p, res)
}

// chunkQueue hands a streamed read's chunks from the sandbox's stream to
// the handler. put waits while the queue is full (the sandbox's stream
// then waits for the client: memory stays bounded) and drops what comes
// once the handler is gone.
type chunkQueue struct {
	ch   chan sandbox.Output
	gone chan struct{}
	once sync.Once
}

func (q *chunkQueue) put(o sandbox.Output) {
	select {
	case q.ch <- o:
	case <-q.gone:
	}
}

func (q *chunkQueue) close() { q.once.Do(func() { close(q.gone) }) }

// handleUpload answers POST /files: multipart (one or more "file" parts,
// each named by its filename when ?path= is absent) or a raw
// octet-stream body, each file a write_file call: its text, or any other
// bytes as base64 (encoding "base64"), written as they came. A body sent
// with Content-Encoding gzip is unpacked first, as envd does.
func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request) {
	b := sandboxOf(r.Context())
	r.Body = http.MaxBytesReader(w, r.Body, MaxUpload)
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip": // the SDKs' write(…, {gzip: true}): the file is what it unpacks to
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			apiError(w, http.StatusBadRequest, "Content-Encoding is gzip but the body is not gzip: "+err.Error())
			return
		}
		r.Body = struct {
			io.Reader
			io.Closer
		}{zr, r.Body}
	default:
		apiError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Encoding %q: send the body as it is, or gzip", enc))
		return
	}
	qpath := r.URL.Query().Get("path")
	type upload struct {
		path string
		args toolcall.WriteFileArgs
	}
	var ups []upload
	read := func(p string, body io.Reader) error {
		data, err := io.ReadAll(io.LimitReader(body, MaxUpload+1))
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) || len(data) > MaxUpload { // sent, or unpacked from gzip
			return fmt.Errorf("upload over %d bytes: split it into smaller files", MaxUpload)
		}
		if err != nil {
			return fmt.Errorf("reading the upload: %w", err)
		}
		if p == "" {
			return errors.New("no path: give ?path= or the target path as the part's filename")
		}
		args := toolcall.WriteFileArgs{Path: p, Content: string(data)}
		if !utf8.Valid(data) { // bytes, not text: write_file takes them as base64
			args.Content, args.Encoding = base64.StdEncoding.EncodeToString(data), toolcall.EncodingBase64
		}
		ups = append(ups, upload{p, args})
		return nil
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var err error
	if mt == "multipart/form-data" {
		mr, merr := r.MultipartReader()
		if merr != nil {
			apiError(w, http.StatusBadRequest, "malformed multipart body: "+merr.Error())
			return
		}
		for {
			part, perr := mr.NextPart()
			if perr == io.EOF {
				break
			}
			if perr != nil {
				err = fmt.Errorf("malformed multipart body: %w", perr)
				break
			}
			if part.FormName() != "file" {
				continue
			}
			p := qpath
			if p == "" {
				// The filename is the target path; Part.FileName would
				// keep only its base name.
				_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
				p = params["filename"]
			}
			if err = read(p, part); err != nil {
				break
			}
		}
	} else {
		err = read(qpath, r.Body)
	}
	if err == nil && len(ups) == 0 {
		err = errors.New("no file in the body: send a multipart \"file\" part or an octet-stream")
	}
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	out := make([]writtenEntry, 0, len(ups))
	for _, u := range ups {
		res, err := s.callAs(r.Context(), b, r.URL.Query().Get("username"), toolcall.WriteFile, u.args, "")
		if err != nil {
			apiError(w, http.StatusBadGateway, err.Error())
			return
		}
		if res.ExitCode != 0 {
			code := http.StatusBadRequest
			if strings.Contains(res.Output, "No space") {
				code = http.StatusInsufficientStorage
			}
			apiError(w, code, res.Output)
			return
		}
		out = append(out, writtenEntry{Name: path.Base(u.path), Type: "file", Path: u.path})
	}
	writeJSON(w, http.StatusOK, out)
}
