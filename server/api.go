package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// CreateRequest is the body of POST /v1/episodes: exactly one of TaskID
// (a task the gateway loaded) or Task (an inline task line).
type CreateRequest struct {
	TaskID string     `json:"task_id,omitempty"`
	Task   *task.Task `json:"task,omitempty"`
	// EpisodeID names the episode (and its trajectory); generated if empty.
	EpisodeID string            `json:"episode_id,omitempty"`
	Attempt   int               `json:"attempt,omitempty"`
	Model     string            `json:"model,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	// ModelRoutes are URLs of the trainer's model adapter the episode's
	// sandbox may reach through the egress proxy (harness.EpisodeMeta).
	ModelRoutes []string `json:"model_routes,omitempty"`
	// SandboxUser "root" makes the episode's sandbox a root sandbox
	// (harness.EpisodeMeta.SandboxUser); empty: the gateway's default.
	SandboxUser string `json:"sandbox_user,omitempty"`
}

// CreateResponse answers POST /v1/episodes.
type CreateResponse struct {
	EpisodeID string `json:"episode_id"`
	// Token is the episode's bearer token: it acts on this episode only.
	Token       string    `json:"token"`
	TaskID      string    `json:"task_id"`
	GroupID     string    `json:"group_id,omitempty"`
	Instruction string    `json:"instruction"`
	Workdir     string    `json:"workdir"`
	Deadline    time.Time `json:"deadline"`
	// Tools are the tools the policy may call, in OpenAI's function format.
	Tools     []Tool `json:"tools"`
	CallsURL  string `json:"calls_url"`
	SubmitURL string `json:"submit_url"`
	MCPURL    string `json:"mcp_url"`
	// ChatURL is the recording proxy's base URL for OpenAI SDKs (their
	// base_url; POST …/chat/completions, …/completions, GET …/models);
	// AnthropicURL the one for Anthropic SDKs (they add /v1/messages).
	// The token is the API key.
	ChatURL       string `json:"chat_url"`
	AnthropicURL  string `json:"anthropic_url"`
	StreamURL     string `json:"stream_url"`
	TrajectoryURL string `json:"trajectory_url"`
}

// CallResponse answers POST /v1/episodes/{id}/calls.
type CallResponse struct {
	Step int `json:"step"`
	// Output is what the model should be shown: the real output, or dummy
	// output when the call was blocked (Dummy).
	Output   string `json:"output"`
	ExitCode int    `json:"exit_code"`
	Dummy    bool   `json:"dummy,omitempty"`
	// Decision is the monitor's, for the trainer; never show it to the
	// model.
	Decision decision.Decision `json:"decision"`
	Timings  decision.Timings  `json:"timings"`
	// Submitted: the call was submit; the episode was graded and Outcome
	// is its result.
	Submitted bool             `json:"submitted,omitempty"`
	Outcome   *harness.Outcome `json:"outcome,omitempty"`
}

// SubmitRequest is the optional body of POST /v1/episodes/{id}/submit.
type SubmitRequest struct {
	Message string `json:"message,omitempty"`
}

// EpisodeInfo answers GET /v1/episodes/{id} and is an item of the list.
type EpisodeInfo struct {
	EpisodeID string           `json:"episode_id"`
	TaskID    string           `json:"task_id,omitempty"`
	GroupID   string           `json:"group_id,omitempty"`
	State     string           `json:"state"`
	Created   *time.Time       `json:"created,omitempty"`
	LastUsed  *time.Time       `json:"last_used,omitempty"`
	Steps     int              `json:"steps,omitempty"`
	Events    int64            `json:"events"`
	Outcome   *harness.Outcome `json:"outcome,omitempty"`
}

// apiError is every error body.
type apiError struct {
	Error string `json:"error"`
	// Limit names the episode limit reached (max_steps, wall_time,
	// max_tokens) on a 409 from /calls.
	Limit string `json:"limit,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"server: encode response: `+strings.ReplaceAll(err.Error(), `"`, `'`)+`"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, apiError{Error: msg})
}

// decodeBody decodes one JSON object from a request body bounded by limit,
// rejecting unknown fields and trailing data. The error is written; false
// means the handler should return. An empty body is allowed when
// optional.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any, optional bool) bool {
	body := http.MaxBytesReader(w, r.Body, limit)
	data, err := io.ReadAll(body)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes: send less (split large files into several writes)", mbe.Limit))
		return false
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "reading request body: "+err.Error())
		return false
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if optional {
			return true
		}
		writeError(w, http.StatusBadRequest, "empty body: send a JSON object (see /openapi.yaml)")
		return false
	}
	if msg := decodeStrict(data, v); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return false
	}
	return true
}

// decodeStrict returns "" or a one-line message naming the bad field.
func decodeStrict(data []byte, v any) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			return "trailing data after the JSON object: send one object per request"
		}
		return ""
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at byte %d: %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return fmt.Sprintf("body must be a JSON object, not %s", typ.Value)
		}
		return fmt.Sprintf("field %q: must be %s, not %s", field, jsonKind(typ.Type.String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: unexpected end of body"
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Sprintf("field %s: unknown field (see /openapi.yaml for the schema)", f)
	}
	return "malformed JSON: " + strings.TrimPrefix(err.Error(), "json: ")
}

func jsonKind(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case goType == "json.RawMessage":
		return "a JSON value"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map["), strings.Contains(goType, "."):
		return "an object"
	}
	return goType
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /healthz", s.handleHealth)
	m.Handle("GET /metrics", s.metrics.handler())
	m.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		w.Write(OpenAPI)
	})
	m.HandleFunc("POST /v1/episodes", s.withAuth(true, false, s.handleCreate))
	m.HandleFunc("GET /v1/episodes", s.withAuth(true, false, s.handleList))
	m.HandleFunc("POST /v1/groups", s.withAuth(true, false, s.handleCreateGroup))
	m.HandleFunc("GET /v1/groups/{id}", s.withAuth(true, true, s.handleGetGroup))
	m.HandleFunc("GET /v1/episodes/{id}", s.withAuth(false, false, s.handleGet))
	m.HandleFunc("DELETE /v1/episodes/{id}", s.withAuth(false, false, s.handleDelete))
	m.HandleFunc("POST /v1/episodes/{id}/calls", s.withAuth(false, false, s.handleCall))
	m.HandleFunc("POST /v1/episodes/{id}/submit", s.withAuth(false, false, s.handleSubmit))
	m.HandleFunc("POST /v1/episodes/{id}/fork", s.withAuth(false, false, s.handleFork))
	m.HandleFunc("GET /v1/episodes/{id}/trajectory", s.withAuth(false, false, s.handleTrajectory))
	m.HandleFunc("GET /v1/episodes/{id}/samples", s.withAuth(false, false, s.handleSamples))
	m.HandleFunc("POST /v1/episodes/{id}/verdicts", s.withAuth(true, false, s.handleVerdict))
	m.HandleFunc("GET /v1/episodes/{id}/stream", s.withAuth(false, true, s.handleStream))
	m.HandleFunc("GET /v1/stream/finished", s.withAuth(true, true, func(w http.ResponseWriter, r *http.Request, _ caller) {
		s.hub.ServeFinished(w, r)
	}))
	m.HandleFunc("/v1/episodes/{id}/mcp", s.withAuth(false, false, s.handleMCP))
	s.proxyRoutes(m)
	s.mountDashboard(m)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// The catch-all matches every method, so the mux never answers 405
		// itself: find the methods this path does take.
		var allow []string
		for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			if method == r.Method {
				continue
			}
			if _, pat := m.Handler(&http.Request{Method: method, URL: r.URL, Host: r.Host}); pat != "/" && pat != "" {
				allow = append(allow, method)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s: use %s (see /openapi.yaml)", r.Method, r.URL.Path, strings.Join(allow, " or ")))
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s %s: see /openapi.yaml", r.Method, r.URL.Path))
	})
	s.mux = m
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	closing, n := s.closing, len(s.episodes)
	s.mu.Unlock()
	if closing {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "shutting down"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "episodes": n})
}

// baseURL is the gateway's address as the client sees it.
func (s *Server) baseURL(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return strings.TrimRight(s.cfg.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func (s *Server) resolveTask(req CreateRequest) (task.Task, string) {
	switch {
	case req.TaskID != "" && req.Task != nil:
		return task.Task{}, `fields "task_id" and "task": give one, not both`
	case req.TaskID != "":
		t, same, ok := s.lookupTask(req.TaskID)
		if len(same) > 0 {
			return task.Task{}, fmt.Sprintf("field \"task_id\": %q is the instance id of tasks %s: give one of their task ids", req.TaskID, strings.Join(same, ", "))
		}
		if !ok {
			ids := make([]string, 0, len(s.tasks))
			for id := range s.tasks {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			return task.Task{}, fmt.Sprintf("field \"task_id\": unknown task %q: loaded tasks are %s", req.TaskID, strings.Join(ids, ", "))
		}
		return t, ""
	case req.Task != nil:
		t := *req.Task
		if err := t.Validate(); err != nil {
			return task.Task{}, "field \"task\": " + err.Error()
		}
		if t.Workdir == "" {
			t.Workdir = task.DefaultWorkdir
		}
		if t.HiddenTestsDest == "" {
			t.HiddenTestsDest = task.DefaultHiddenTestsDest
		}
		if s.cfg.Hidden == nil {
			return task.Task{}, "field \"task\": this gateway has no task directory for hidden tests: start it with --tasks FILE"
		}
		if _, err := fs.Stat(s.cfg.Hidden, t.HiddenTests); err != nil {
			return task.Task{}, fmt.Sprintf("field \"task.hidden_tests\": %q not found in the gateway's task directory: put the hidden tests beside the --tasks file", t.HiddenTests)
		}
		return t, ""
	}
	return task.Task{}, `field "task_id": missing: give "task_id" of a loaded task or an inline "task"`
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request, _ caller) {
	var req CreateRequest
	if !decodeBody(w, r, s.cfg.MaxBodyBytes, &req, false) {
		return
	}
	t, msg := s.resolveTask(req)
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if err := harness.CheckSandboxUser(req.SandboxUser); err != nil {
		writeError(w, http.StatusBadRequest, "field \"sandbox_user\": "+err.Error())
		return
	}
	if err := harness.CheckModelRoutes(req.ModelRoutes); err != nil {
		writeError(w, http.StatusBadRequest, "field \"model_routes\": "+err.Error())
		return
	}
	if req.EpisodeID != "" {
		if err := trajectory.ValidID(req.EpisodeID); err != nil {
			writeError(w, http.StatusBadRequest, "field \"episode_id\": "+err.Error())
			return
		}
		if _, err := s.cfg.Store.Info(req.EpisodeID); !errors.Is(err, trajectory.ErrNotFound) {
			writeError(w, http.StatusConflict, fmt.Sprintf("field \"episode_id\": episode %q exists: pick a new id or leave it empty", req.EpisodeID))
			return
		}
	}
	cr, code, msg := s.createEpisode(r.Context(), t, harness.EpisodeMeta{
		ID: req.EpisodeID, Attempt: req.Attempt, Model: req.Model, Labels: req.Labels, ModelRoutes: req.ModelRoutes, SandboxUser: req.SandboxUser}, s.baseURL(r))
	if msg != "" {
		writeError(w, code, msg)
		return
	}
	writeJSON(w, http.StatusCreated, cr)
}

// MissingImage is the client error for a create whose image the sandbox
// host does not have (sandbox.ErrImageMissing): it names the image, how
// to build it, and other, the alternative the API offers.
func MissingImage(image, other string, err error) string {
	return fmt.Sprintf("image %s is not on the sandbox host: build or load it there (docker build -t %s DIR, or 'make images' for rollcage's own), or %s: %v", image, image, other, err)
}

// createEpisode starts an episode of t and registers its session. On
// failure it returns the status and message to answer with.
func (s *Server) createEpisode(ctx context.Context, t task.Task, meta harness.EpisodeMeta, base string) (CreateResponse, int, string) {
	se, err := s.open(ctx, t, s.cfg.Hidden, meta)
	if errors.Is(err, ErrShuttingDown) {
		return CreateResponse{}, http.StatusServiceUnavailable, "gateway shutting down: retry against another instance"
	}
	if err != nil {
		if errors.Is(err, sandbox.ErrImageMissing) {
			// Retrying will not help: the image must be built first.
			return CreateResponse{}, http.StatusBadRequest, MissingImage(t.Image, "use a task whose image is", err)
		}
		return CreateResponse{}, http.StatusBadGateway, "starting the episode failed (sandbox or recording): " + err.Error()
	}
	return created(se, t, base), 0, ""
}

// created is what a client needs of a new episode: its token and URLs.
func created(se *session, t task.Task, base string) CreateResponse {
	epBase := base + "/v1/episodes/" + se.id
	return CreateResponse{
		EpisodeID: se.id, Token: se.token, TaskID: t.ID, GroupID: se.groupID, Instruction: t.Instruction, Workdir: t.Workdir,
		Deadline: se.deadline, Tools: Tools(),
		CallsURL: epBase + "/calls", SubmitURL: epBase + "/submit", MCPURL: epBase + "/mcp", ChatURL: epBase + "/v1", AnthropicURL: epBase,
		StreamURL: strings.Replace(epBase, "http", "ws", 1) + "/stream", TrajectoryURL: epBase + "/trajectory",
	}
}

// call takes one tool call through the episode; a submit finishes it.
// A call refused for its arguments (opts holding harness.Checked) is not
// counted in the metrics: it never became a call.
func (s *Server) call(ctx context.Context, se *session, call toolcall.Call, opts ...harness.CallOption) (decision.CallResult, *harness.Outcome, error) {
	t0 := time.Now()
	res, err := se.ep.Call(ctx, call, opts...)
	if !errors.As(err, new(*toolcall.ArgsError)) {
		s.metrics.observeCall(cmp.Or(res.Call.Tool, call.Tool), res, err, time.Since(t0))
	}
	if err != nil {
		return res, nil, err
	}
	if !res.Submit {
		return res, nil, nil
	}
	o, err := s.finish(ctx, se, harness.ReasonSubmit)
	if err != nil {
		return res, nil, err
	}
	return res, &o, nil
}

// finish grades the episode once; later calls return the same outcome.
func (s *Server) finish(ctx context.Context, se *session, reason string) (harness.Outcome, error) {
	return s.end(ctx, se, false, func(ctx context.Context) (harness.Outcome, error) { return se.ep.Finish(ctx, reason) })
}

// end ends the episode once by fn; later calls return the same outcome,
// or harness.ErrFinished when first is set (the caller must be the one
// that ends it).
func (s *Server) end(ctx context.Context, se *session, first bool, fn func(context.Context) (harness.Outcome, error)) (harness.Outcome, error) {
	se.mu.Lock()
	switch {
	case se.state == StateClosed || (first && se.state != StateRunning):
		st := se.state
		se.mu.Unlock()
		return harness.Outcome{}, fmt.Errorf("server: episode %s is %s: %w", se.id, st, harness.ErrFinished)
	case se.state == StateRunning:
		se.state = StateFinishing
		se.mu.Unlock()
		s.metrics.transition(StateRunning, StateFinishing)
	default:
		se.mu.Unlock()
	}
	o, err := fn(ctx)
	se.mu.Lock()
	if se.outcome == nil {
		se.outcome = &o
		se.state = StateFinished
		se.mu.Unlock()
		s.metrics.transition(StateFinishing, StateFinished)
		s.metrics.observeOutcome(o)
		se.markEnded()
	} else {
		o = *se.outcome
		se.mu.Unlock()
	}
	return o, err
}

// callError answers a failed call.
func (s *Server) callError(w http.ResponseWriter, se *session, err error) {
	st, _ := se.getState()
	switch {
	case errors.Is(err, harness.ErrFinished):
		writeError(w, http.StatusConflict, fmt.Sprintf("episode %s is %s and takes no more calls: create a new episode", se.id, st))
	case harness.LimitReason(err) != "":
		writeJSON(w, http.StatusConflict, apiError{Limit: harness.LimitReason(err),
			Error: fmt.Sprintf("episode %s reached its %s limit; the call did not run: POST /v1/episodes/%s/submit to grade it", se.id, harness.LimitReason(err), se.id)})
	case errors.Is(err, context.Canceled):
		writeError(w, 499, "request cancelled")
	default:
		s.log.Warn("call failed", "episode_id", se.id, "err", err)
		writeError(w, http.StatusBadGateway, "infrastructure fault (sandbox or recording): "+err.Error()+": submit or delete the episode")
	}
}

func (s *Server) handleCall(w http.ResponseWriter, r *http.Request, c caller) {
	se, ok := s.episodeFor(w, r, c)
	if !ok {
		return
	}
	var call toolcall.Call
	if !decodeBody(w, r, s.cfg.MaxBodyBytes, &call, false) {
		return
	}
	if call.Tool == "" {
		writeError(w, http.StatusBadRequest, `field "tool": missing: name the tool (bash, read_file, write_file, edit, list_dir, submit)`)
		return
	}
	if call.EpisodeID != "" && call.EpisodeID != se.id {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("field \"episode_id\": %q is not this episode (%s): leave it empty", call.EpisodeID, se.id))
		return
	}
	if call.User != "" {
		writeError(w, http.StatusBadRequest, `field "user": a call runs as the sandbox's own user here; per-process users are E2B's (a root sandbox's processes): leave it empty`)
		return
	}
	resp, code, err := s.runCall(r.Context(), se, call)
	if code != 0 {
		writeError(w, code, err.Error())
		return
	}
	if err != nil {
		s.callError(w, se, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request, c caller) {
	se, ok := s.episodeFor(w, r, c)
	if !ok {
		return
	}
	var req SubmitRequest
	if !decodeBody(w, r, s.cfg.MaxBodyBytes, &req, true) {
		return
	}
	o, err := s.submit(r.Context(), se, req.Message)
	if errors.Is(err, errClosedUngraded) {
		writeError(w, http.StatusConflict, fmt.Sprintf("episode %s was closed without grading: create a new episode", se.id))
		return
	}
	if err != nil {
		s.callError(w, se, err)
		return
	}
	writeJSON(w, http.StatusOK, o)
}

// submit grades the episode through a submit call (recorded as the
// policy's), or returns the outcome it already has.
func (s *Server) submit(ctx context.Context, se *session, message string) (*harness.Outcome, error) {
	if st, o := se.getState(); o != nil {
		return o, nil
	} else if st == StateClosed {
		return nil, errClosedUngraded
	}
	// The submit goes through the monitor like any call, so it is recorded
	// as the policy's; a limit reached ends the episode with that reason.
	args, _ := json.Marshal(toolcall.SubmitArgs{Message: message})
	_, o, err := s.call(ctx, se, toolcall.Call{Tool: toolcall.Submit, Args: args})
	if reason := harness.LimitReason(err); reason != "" {
		var out harness.Outcome
		out, err = s.finish(ctx, se, reason)
		o = &out
	}
	if errors.Is(err, harness.ErrFinished) {
		if _, prev := se.getState(); prev != nil {
			o, err = prev, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if o == nil { // the monitor did not take it as a submit
		out, ferr := s.finish(ctx, se, harness.ReasonSubmit)
		if ferr != nil {
			return nil, ferr
		}
		o = &out
	}
	return o, nil
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request, c caller) {
	se, ok := s.episodeFor(w, r, c)
	if !ok {
		return
	}
	if err := s.closeEpisode(r.Context(), se, "deleted"); err != nil {
		writeError(w, http.StatusBadGateway, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, s.info(se))
}

func (s *Server) info(se *session) EpisodeInfo {
	st, o := se.getState()
	created := se.created
	last := time.Unix(0, se.lastUse.Load())
	in := EpisodeInfo{EpisodeID: se.id, TaskID: se.taskID, GroupID: se.groupID, State: st, Created: &created, LastUsed: &last, Outcome: o}
	if fi, err := s.cfg.Store.Info(se.id); err == nil {
		in.Events = fi.Events
	}
	if o != nil {
		in.Steps = o.Steps
	}
	return in
}

func storedInfo(fi trajectory.EpisodeInfo) EpisodeInfo {
	st := StateUnfinished
	if fi.Finished {
		st = StateRecorded
	}
	return EpisodeInfo{EpisodeID: fi.ID, State: st, Events: fi.Events}
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request, c caller) {
	id := r.PathValue("id")
	s.mu.Lock()
	_, live := s.episodes[id]
	s.mu.Unlock()
	if !live && c.admin {
		// Known only to the store: another run's episode.
		fi, err := s.cfg.Store.Info(id)
		if err != nil {
			writeError(w, http.StatusNotFound, fmt.Sprintf("episode %q not found: GET /v1/episodes lists them", id))
			return
		}
		writeJSON(w, http.StatusOK, storedInfo(fi))
		return
	}
	se, ok := s.episodeFor(w, r, c)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.info(se))
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, _ caller) {
	s.mu.Lock()
	live := make([]*session, 0, len(s.episodes))
	for _, se := range s.episodes {
		live = append(live, se)
	}
	s.mu.Unlock()
	out := make([]EpisodeInfo, 0, len(live))
	seen := map[string]bool{}
	for _, se := range live {
		out = append(out, s.info(se))
		seen[se.id] = true
	}
	if r.URL.Query().Get("all") != "" {
		stored, err := s.cfg.Store.Episodes(r.Context())
		if err != nil {
			writeError(w, http.StatusInternalServerError, "listing the store: "+err.Error())
			return
		}
		for _, fi := range stored {
			if !seen[fi.ID] {
				out = append(out, storedInfo(fi))
			}
		}
	}
	if st := r.URL.Query().Get("state"); st != "" {
		out = slices.DeleteFunc(out, func(e EpisodeInfo) bool { return e.State != st })
	}
	slices.SortFunc(out, func(a, b EpisodeInfo) int { return strings.Compare(a.EpisodeID, b.EpisodeID) })
	writeJSON(w, http.StatusOK, map[string]any{"episodes": out})
}

// allowedEpisode checks a path's episode against the caller for endpoints
// that also serve stored episodes (admin).
func (s *Server) allowedEpisode(w http.ResponseWriter, r *http.Request, c caller) (string, bool) {
	id := r.PathValue("id")
	if c.admin {
		return id, true
	}
	se, ok := s.episodeFor(w, r, c)
	if !ok {
		return "", false
	}
	return se.id, true
}

func (s *Server) handleTrajectory(w http.ResponseWriter, r *http.Request, c caller) {
	id, ok := s.allowedEpisode(w, r, c)
	if !ok {
		return
	}
	from := int64(0)
	if v := r.URL.Query().Get("from"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("bad from=%q: give the first offset wanted, a number >= 0", v))
			return
		}
		from = n
	}
	if _, err := s.cfg.Store.Info(id); err != nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("episode %q has no trajectory: GET /v1/episodes?all=1 lists them", id))
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	err := s.cfg.Store.Read(r.Context(), id, from, func(ev trajectory.Event) error { return enc.Encode(ev) })
	if err != nil {
		// Headers are out; the client sees a short body.
		s.log.Warn("streaming trajectory", "episode_id", id, "err", err)
	}
}

func (s *Server) handleStream(w http.ResponseWriter, r *http.Request, c caller) {
	id, ok := s.allowedEpisode(w, r, c)
	if !ok {
		return
	}
	s.hub.ServeEpisode(w, r, id)
}

// AuxiliaryLeftOutHeader, on a samples answer, is how many auxiliary
// model turns the samples leave out (ask with auxiliary=1 for them).
const AuxiliaryLeftOutHeader = "X-Rollcage-Auxiliary-Left-Out"

// handleSamples answers an ended episode's training data, what `rollcage
// export` writes for it, with the same options as query parameters:
// format (messages, the default, atif or parquet), granularity
// (segment, the default, or turn), prefix (a forked episode's shared
// prefix: mask, the default, or once), and the training-reward policy:
// hacked_reward (a number, default 0) and unconfirmed (mask, the
// default, zero or raw); auxiliary=1 adds the episode's auxiliary model
// calls as samples of their own (left out by default; the answer's
// AuxiliaryLeftOutHeader says how many were).
func (s *Server) handleSamples(w http.ResponseWriter, r *http.Request, c caller) {
	id, ok := s.allowedEpisode(w, r, c)
	if !ok {
		return
	}
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "format", "granularity", "prefix", "hacked_reward", "unconfirmed", "auxiliary":
		default:
			writeError(w, http.StatusBadRequest, fmt.Sprintf("unknown query parameter %q: use format (messages, atif, parquet), granularity (segment, turn), prefix (mask, once), hacked_reward (a number), unconfirmed (mask, zero, raw) and auxiliary (1 or 0)", k))
			return
		}
	}
	opts := trajectory.ExportOptions{Format: q.Get("format"), Granularity: q.Get("granularity"), Prefix: q.Get("prefix"),
		Reward: trajectory.RewardPolicy{Unconfirmed: q.Get("unconfirmed")}}
	if v := q.Get("hacked_reward"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("hacked_reward %q: give a number, e.g. 0 or -1", v))
			return
		}
		opts.Reward.Hacked = f
	}
	if v := q.Get("auxiliary"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("auxiliary %q: give 1 (export the auxiliary model calls too) or 0", v))
			return
		}
		opts.Auxiliary = b
	}
	fi, err := s.cfg.Store.Info(id)
	if err != nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("episode %q has no trajectory: GET /v1/episodes?all=1 lists them", id))
		return
	}
	if !fi.Finished {
		writeError(w, http.StatusConflict, fmt.Sprintf("episode %s has not ended: submit it (or wait for it) first; samples carry its reward", id))
		return
	}
	evs, err := s.exportEvents(r.Context(), id)
	if errors.Is(err, trajectory.ErrCorrupt) {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("episode %s has no samples: its log %s is corrupt (%v); other episodes are unaffected", id, filepath.Base(s.cfg.Store.File(id)), err))
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	left := 0
	opts.LeftOut = func(_ string, n int) { left += n }
	var buf bytes.Buffer
	x, err := trajectory.NewExporter(&buf, opts)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	err = x.Episode(evs)
	if err == nil {
		err = x.Close()
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "building samples: "+err.Error())
		return
	}
	ct := "application/x-ndjson"
	if opts.Format == trajectory.FormatParquet {
		ct = "application/vnd.apache.parquet"
	}
	w.Header().Set("Content-Type", ct)
	if left > 0 {
		w.Header().Set(AuxiliaryLeftOutHeader, strconv.Itoa(left))
	}
	w.Write(buf.Bytes())
}
