package e2b

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/server"
	"github.com/rollcage/rollcage/task"
)

// createRequest is the body of POST /v2/sandboxes (fields rollcage does
// not use, such as autoPause and network, are ignored).
type createRequest struct {
	TemplateID string            `json:"templateID"`
	Metadata   map[string]string `json:"metadata"`
	EnvVars    map[string]string `json:"envVars"`
	Timeout    *int              `json:"timeout"` // seconds
}

// sandboxJSON is E2B's Sandbox and SandboxDetail (ListedSandbox omits
// the token and domain).
type sandboxJSON struct {
	SandboxID       string            `json:"sandboxID"`
	TemplateID      string            `json:"templateID"`
	Alias           string            `json:"alias,omitempty"`
	ClientID        string            `json:"clientID"`
	EnvdVersion     string            `json:"envdVersion"`
	EnvdAccessToken string            `json:"envdAccessToken,omitempty"`
	Domain          *string           `json:"domain,omitempty"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	StartedAt       *time.Time        `json:"startedAt,omitempty"`
	EndAt           *time.Time        `json:"endAt,omitempty"`
	State           string            `json:"state,omitempty"`
	CPUCount        int               `json:"cpuCount,omitempty"`
	MemoryMB        int               `json:"memoryMB,omitempty"`
	DiskSizeMB      int               `json:"diskSizeMB,omitempty"`
}

// apiError writes E2B's error body; the SDK reads its code (404 in the
// body is what makes kill return false and connect raise not-found).
func apiError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]any{"code": code, "message": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"code":500,"message":"e2b: encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
}

type controlFunc func(w http.ResponseWriter, r *http.Request, client string)

func (s *Server) withKey(h controlFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := s.client(r)
		if !ok {
			apiError(w, http.StatusUnauthorized, "missing or unknown API key: send X-API-KEY (set E2B_API_KEY to a key rollcage serve printed or was given)")
			return
		}
		h(w, r, c)
	}
}

func (s *Server) routeControl() {
	m := http.NewServeMux()
	for _, p := range []string{"POST /v2/sandboxes", "POST /sandboxes"} {
		m.HandleFunc(p, s.withKey(s.handleCreate))
	}
	for _, p := range []string{"GET /v2/sandboxes", "GET /sandboxes"} {
		m.HandleFunc(p, s.withKey(s.handleList))
	}
	m.HandleFunc("GET /sandboxes/{id}", s.withKey(s.handleInfo))
	m.HandleFunc("DELETE /sandboxes/{id}", s.withKey(s.handleKill))
	m.HandleFunc("POST /sandboxes/{id}/timeout", s.withKey(s.handleTimeout))
	for _, p := range []string{"POST /v2/sandboxes/{id}/connect", "POST /sandboxes/{id}/connect", "POST /sandboxes/{id}/resume"} {
		m.HandleFunc(p, s.withKey(s.handleConnect))
	}
	m.HandleFunc("POST /sandboxes/{id}/pause", s.withKey(func(w http.ResponseWriter, r *http.Request, _ string) {
		apiError(w, http.StatusNotImplemented, "rollcage does not pause sandboxes: keep it running (setTimeout) or kill it and create a new one")
	}))
	m.HandleFunc("POST /sandboxes/{id}/rollcage/submit", s.withKey(s.handleSubmit))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, fmt.Sprintf("no E2B route %s %s in rollcage: it serves create, connect, list, info, timeout, kill and rollcage/submit", r.Method, r.URL.Path))
	})
	s.control = m
}

func (s *Server) notFound(w http.ResponseWriter, id string) {
	apiError(w, http.StatusNotFound, fmt.Sprintf("sandbox %q not found (killed, timed out, or another API key's)", id))
}

// sandboxFor is the live sandbox of the request's path that client may
// act on, or nil once it answered 404.
func (s *Server) sandboxFor(w http.ResponseWriter, r *http.Request, client string) *sbx {
	b := s.lookup(client, r.PathValue("id"))
	if b == nil {
		s.notFound(w, r.PathValue("id"))
	}
	return b
}

func (s *Server) imageOf(req createRequest) string {
	if v := req.Metadata[MetaImage]; v != "" {
		return v
	}
	for _, k := range s.cfg.ImageKeys {
		if v := req.Metadata[k]; v != "" {
			return v
		}
	}
	return ""
}

var nonID = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// resolve picks the task a create runs: a loaded task named by
// metadata["rollcage/task"] or the template (bound: gradeable), else the
// image (metadata, or a template that is no task), taking a loaded
// task's facts when one runs that image, else an ad-hoc unsealed task of
// the image with no hidden tests.
func (s *Server) resolve(req createRequest) (t task.Task, bound bool, msg string) {
	if id := req.Metadata[MetaTask]; id != "" {
		t, ok := s.cfg.Episodes.Task(id)
		if !ok {
			return task.Task{}, false, fmt.Sprintf("metadata %q: unknown task %q: loaded tasks are %s", MetaTask, id, s.taskIDs())
		}
		return t, true, ""
	}
	if t, ok := s.cfg.Episodes.Task(req.TemplateID); ok {
		return t, true, ""
	}
	img := s.imageOf(req)
	if img == "" && req.TemplateID != "" && req.TemplateID != "base" {
		img = req.TemplateID
	}
	if img == "" {
		return task.Task{}, false, fmt.Sprintf("no image: set metadata[%q] to a local image (or metadata[%q] to one of: %s), or pass a task id as the template", MetaImage, MetaTask, s.taskIDs())
	}
	ts := s.cfg.Episodes.Tasks()
	slices.SortFunc(ts, func(a, b task.Task) int { return strings.Compare(a.ID, b.ID) })
	for _, t := range ts {
		if t.Image == img || strings.TrimSuffix(t.Image, ":latest") == img {
			return t, false, ""
		}
	}
	no := false
	return task.Task{ID: "e2b-" + strings.Trim(nonID.ReplaceAllString(img, "-"), "-"), Image: img, Seal: &no,
		Workdir: task.DefaultWorkdir}, false, ""
}

func (s *Server) taskIDs() string {
	var ids []string
	for _, t := range s.cfg.Episodes.Tasks() {
		ids = append(ids, t.ID)
	}
	slices.Sort(ids)
	if len(ids) == 0 {
		return "(none loaded)"
	}
	return strings.Join(ids, ", ")
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request, client string) {
	var req createRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil && len(body) > 0 {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		apiError(w, http.StatusBadRequest, "malformed create body: send JSON {templateID, metadata, envVars, timeout}: "+err.Error())
		return
	}
	timeout, asked := DefaultTimeout, req.Timeout != nil
	if asked {
		if *req.Timeout <= 0 {
			apiError(w, http.StatusBadRequest, fmt.Sprintf("timeout %d: give the sandbox's lifetime in seconds, > 0", *req.Timeout))
			return
		}
		timeout = time.Duration(*req.Timeout) * time.Second
	}
	t, bound, msg := s.resolve(req)
	if msg != "" {
		apiError(w, http.StatusBadRequest, msg)
		return
	}
	id := "i" + randomHex(10)
	template := req.TemplateID
	if template == "" {
		template = "base"
	}
	// No labels: a sandbox spec with labels cannot take a warm container.
	op, err := s.cfg.Episodes.Open(r.Context(), t, harness.EpisodeMeta{ID: id})
	if errors.Is(err, server.ErrShuttingDown) {
		apiError(w, http.StatusServiceUnavailable, "rollcage is shutting down: retry against another instance")
		return
	}
	if errors.Is(err, sandbox.ErrImageMissing) {
		// The image the request chose is not there: the client's to fix.
		apiError(w, http.StatusBadRequest, server.MissingImage(t.Image, fmt.Sprintf("set metadata[%q] to one that is", MetaImage), err))
		return
	}
	if err != nil {
		apiError(w, http.StatusBadGateway, "starting the sandbox failed: "+err.Error())
		return
	}
	now := time.Now()
	if msg := overWall(op.Deadline, now.Add(timeout)); asked && msg != "" {
		if err := s.cfg.Episodes.Close(context.WithoutCancel(r.Context()), op.ID, "e2b create: "+msg); err != nil {
			s.log.Warn("closing a refused sandbox", "sandbox_id", op.ID, "err", err)
		}
		apiError(w, http.StatusBadRequest, msg)
		return
	}
	b := &sbx{id: op.ID, client: client, template: template, taskID: t.ID, bound: bound, image: t.Image,
		metadata: maps.Clone(req.Metadata), envs: maps.Clone(req.EnvVars), token: op.Token, started: now,
		deadline: op.Deadline, procs: map[uint32]*proc{}, tags: map[string]bool{}, watchers: map[string]*watcher{},
		workdir: cmp.Or(t.Workdir, task.DefaultWorkdir)}
	s.setEnd(b, now.Add(timeout), false)
	s.mu.Lock()
	s.sandboxes[b.id] = b
	s.mu.Unlock()
	s.log.Info("e2b sandbox created", "sandbox_id", b.id, "task_id", t.ID, "image", t.Image, "bound", bound, "client", client)
	writeJSON(w, http.StatusCreated, s.describe(b, true))
}

func (s *Server) describe(b *sbx, secret bool) sandboxJSON {
	started, end := b.started, b.end()
	j := sandboxJSON{SandboxID: b.id, TemplateID: b.template, Alias: b.taskID, ClientID: b.client, EnvdVersion: EnvdVersion,
		Metadata: b.metadata, StartedAt: &started, EndAt: &end, State: "running", CPUCount: 1, MemoryMB: 2048}
	if secret {
		j.EnvdAccessToken = b.token
		if s.cfg.Domain != "" {
			d := s.cfg.Domain
			j.Domain = &d
		}
	}
	return j
}

func (s *Server) handleInfo(w http.ResponseWriter, r *http.Request, client string) {
	b := s.sandboxFor(w, r, client)
	if b == nil {
		return
	}
	writeJSON(w, http.StatusOK, s.describe(b, true))
}

func (s *Server) handleConnect(w http.ResponseWriter, r *http.Request, client string) {
	b := s.sandboxFor(w, r, client)
	if b == nil {
		return
	}
	var req struct {
		Timeout *int `json:"timeout"`
	}
	if body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16)); len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			apiError(w, http.StatusBadRequest, "malformed connect body: send JSON {timeout}: "+err.Error())
			return
		}
	}
	if req.Timeout != nil && *req.Timeout > 0 {
		// Connecting extends the lifetime, never shortens it (E2B's rule).
		end := time.Now().Add(time.Duration(*req.Timeout) * time.Second)
		if msg := overWall(b.deadline, end); msg != "" {
			apiError(w, http.StatusBadRequest, msg)
			return
		}
		s.setEnd(b, end, true)
	}
	writeJSON(w, http.StatusOK, s.describe(b, true))
}

func (s *Server) handleTimeout(w http.ResponseWriter, r *http.Request, client string) {
	b := s.sandboxFor(w, r, client)
	if b == nil {
		return
	}
	var req struct {
		Timeout int `json:"timeout"`
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err := json.Unmarshal(body, &req); err != nil || req.Timeout <= 0 {
		apiError(w, http.StatusBadRequest, "timeout: send JSON {\"timeout\": seconds > 0}")
		return
	}
	end := time.Now().Add(time.Duration(req.Timeout) * time.Second)
	if msg := overWall(b.deadline, end); msg != "" {
		apiError(w, http.StatusBadRequest, msg)
		return
	}
	s.setEnd(b, end, false)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleKill(w http.ResponseWriter, r *http.Request, client string) {
	b := s.sandboxFor(w, r, client)
	if b == nil {
		return
	}
	if err := s.kill(r.Context(), b, "e2b kill"); err != nil {
		apiError(w, http.StatusBadGateway, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleList answers GET /v2/sandboxes: the client's running sandboxes,
// filtered by metadata (k=v&k2=v2, URL-encoded as one parameter) and
// paginated by limit and nextToken (the next page's first id, sent in
// X-Next-Token).
func (s *Server) handleList(w http.ResponseWriter, r *http.Request, client string) {
	q := r.URL.Query()
	want, err := url.ParseQuery(q.Get("metadata"))
	if err != nil {
		apiError(w, http.StatusBadRequest, "metadata: give URL-encoded key=value pairs joined by &: "+err.Error())
		return
	}
	if st := q.Get("state"); st != "" && !slices.Contains(strings.Split(st, ","), "running") {
		writeJSON(w, http.StatusOK, []sandboxJSON{}) // nothing is ever paused
		return
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit <= 0 {
			apiError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: give a number > 0", v))
			return
		}
	}
	s.mu.Lock()
	all := make([]*sbx, 0, len(s.sandboxes))
	for _, b := range s.sandboxes {
		all = append(all, b)
	}
	s.mu.Unlock()
	slices.SortFunc(all, func(a, b *sbx) int { return strings.Compare(a.id, b.id) })
	out := []sandboxJSON{}
	next := q.Get("nextToken")
	for _, b := range all {
		if b.id < next || s.lookup(client, b.id) == nil || !matches(b.metadata, want) {
			continue
		}
		if len(out) == limit {
			w.Header().Set("X-Next-Token", b.id)
			break
		}
		out = append(out, s.describe(b, false))
	}
	writeJSON(w, http.StatusOK, out)
}

func matches(have map[string]string, want url.Values) bool {
	for k := range want {
		if have[k] != want.Get(k) {
			return false
		}
	}
	return true
}

// handleSubmit grades a task-bound sandbox (rollcage's extension) and
// answers its outcome; grading ends the episode, so the sandbox is gone
// afterwards (kill answers 404, as for any ended sandbox).
func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request, client string) {
	id := r.PathValue("id")
	s.mu.Lock()
	b := s.sandboxes[id]
	s.mu.Unlock()
	if b == nil || b.client != client {
		s.notFound(w, id)
		return
	}
	if !b.bound {
		apiError(w, http.StatusConflict, fmt.Sprintf("sandbox %s runs image %s with no task: create it with metadata[%q] set to a task id to grade it", id, b.image, MetaTask))
		return
	}
	var req struct {
		Message string `json:"message"`
	}
	if body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16)); len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			apiError(w, http.StatusBadRequest, "malformed submit body: send JSON {message} or nothing: "+err.Error())
			return
		}
	}
	o, err := s.cfg.Episodes.Submit(r.Context(), id, req.Message)
	if errors.Is(err, harness.ErrFinished) || errors.Is(err, server.ErrUnknownEpisode) {
		apiError(w, http.StatusConflict, fmt.Sprintf("sandbox %s was closed without grading: create a new one", id))
		return
	}
	if err != nil {
		apiError(w, http.StatusBadGateway, "grading failed: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, o)
}
