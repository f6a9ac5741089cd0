package e2b

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/rollcage/rollcage/toolcall"
)

// MaxUpload bounds one POST /files body.
const MaxUpload = 32 << 20

type writtenEntry struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
}

// handleDownload answers GET /files?path= with a read_file call: the
// file as the policy would see it, a 404 the SDK reads as not found. A
// file the monitor would show changed (cut at its output bound, or with
// bytes that are not UTF-8 shown as \xNN) is an error saying so, never
// a changed file.
func (s *Server) handleDownload(w http.ResponseWriter, r *http.Request) {
	b := sandboxOf(r.Context())
	p := r.URL.Query().Get("path")
	if p == "" {
		apiError(w, http.StatusBadRequest, "path is empty: give ?path= of the file to read")
		return
	}
	res, err := s.call(r.Context(), b, toolcall.ReadFile, toolcall.ReadFileArgs{Path: p}, "")
	if err != nil {
		apiError(w, http.StatusBadGateway, err.Error())
		return
	}
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
	switch {
	case res.Dummy: // what the policy is shown, made up
	case res.Cut > 0:
		apiError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("file %s is over %d bytes, the most files.read returns through rollcage's monitor (its output bound): read it in parts with commands.run, e.g. \"tail -c +%d FILE | head -c %d\"", p, res.Cut, res.Cut+1, res.Cut))
		return
	case res.Escaped:
		apiError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("file %s is not UTF-8 text, and files.read returns text only through rollcage's monitor: read it as base64 with commands.run(\"base64 -w0 FILE\")", p))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, res.Output)
}

// handleUpload answers POST /files: multipart (one or more "file" parts,
// each named by its filename when ?path= is absent) or a raw
// octet-stream body, each file a write_file call: its text, or any other
// bytes as base64 (encoding "base64"), written as they came.
func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request) {
	b := sandboxOf(r.Context())
	r.Body = http.MaxBytesReader(w, r.Body, MaxUpload)
	qpath := r.URL.Query().Get("path")
	type upload struct {
		path string
		args toolcall.WriteFileArgs
	}
	var ups []upload
	read := func(p string, body io.Reader) error {
		data, err := io.ReadAll(body)
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
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
		res, err := s.call(r.Context(), b, toolcall.WriteFile, u.args, "")
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
