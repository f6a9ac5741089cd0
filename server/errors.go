package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
)

// jsonErrors makes every error answer JSON ({"error"}), including those
// written by code that is not ours (the mux's 404/405, the MCP SDK's and
// the WebSocket upgrader's http.Error text): a plain-text error body is
// replaced by its JSON form.
type jsonErrors struct {
	http.ResponseWriter
	plain bool // a plain-text error is being replaced
	drop  bool // replaced: the rest of the plain body is dropped
	wrote bool
}

func (j *jsonErrors) WriteHeader(code int) {
	if j.wrote {
		return
	}
	j.wrote = true
	h := j.Header()
	if code >= 400 && strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
		j.plain = true
		h.Del("X-Content-Type-Options")
		h.Del("Content-Length")
		h.Set("Content-Type", "application/json")
	}
	j.ResponseWriter.WriteHeader(code)
}

func (j *jsonErrors) Write(b []byte) (int, error) {
	if !j.wrote {
		j.WriteHeader(http.StatusOK)
	}
	if j.drop {
		return len(b), nil
	}
	if !j.plain {
		return j.ResponseWriter.Write(b)
	}
	msg := strings.TrimSpace(string(b))
	if allow := j.Header().Get("Allow"); allow != "" {
		msg = "method not allowed on this path: use " + allow + " (see /openapi.yaml)"
	}
	data, _ := json.Marshal(apiError{Error: msg})
	if _, err := j.ResponseWriter.Write(append(data, '\n')); err != nil {
		return 0, err
	}
	j.plain = false
	j.drop = true
	return len(b), nil
}

func (j *jsonErrors) Flush() {
	if f, ok := j.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (j *jsonErrors) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := j.ResponseWriter.(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, errors.New("server: connection cannot be hijacked")
}

func (j *jsonErrors) Unwrap() http.ResponseWriter { return j.ResponseWriter }
