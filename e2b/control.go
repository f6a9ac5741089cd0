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
	m.HandleFunc("POST /sandboxes/{id}/rollcage/reward", s.withKey(s.handleReward))
	m.HandleFunc("GET /sandboxes/{id}/rollcage/labels", s.withKey(s.handleLabels))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, fmt.Sprintf("no E2B route %s %s in rollcage: it serves create, connect, list, info, timeout, kill, rollcage/submit, rollcage/reward and rollcage/labels", r.Method, r.URL.Path))
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

// modelRoutes splits metadata[MetaModelRoute] at commas; nil when unset.
func modelRoutes(md map[string]string) []string {
	v, ok := md[MetaModelRoute]
	if !ok {
		return nil
	}
	routes := strings.Split(v, ",")
	for i, r := range routes {
		routes[i] = strings.TrimSpace(r)
	}
	return routes
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
	routes := modelRoutes(req.Metadata)
	if err := harness.CheckModelRoutes(routes); err != nil {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("metadata %q: %v", MetaModelRoute, err))
		return
	}
	user := req.Metadata[MetaUser]
	if err := harness.CheckSandboxUser(user); err != nil {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("metadata %q: %v", MetaUser, err))
		return
	}
	id := "i" + randomHex(10)
	template := req.TemplateID
	if template == "" {
		template = "base"
	}
	// No labels: a sandbox spec with labels cannot take a warm container.
	op, err := s.cfg.Episodes.Open(r.Context(), t, harness.EpisodeMeta{ID: id, ModelRoutes: routes, SandboxUser: user})
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
	meta := maps.Clone(b.metadata)
	if _, o, err := s.cfg.Episodes.Standing(b.id); err == nil {
		if meta == nil {
			meta = map[string]string{}
		}
		meta[MetaLabel] = o.Label
	}
	j := sandboxJSON{SandboxID: b.id, TemplateID: b.template, Alias: b.taskID, ClientID: b.client, EnvdVersion: EnvdVersion,
		Metadata: meta, StartedAt: &started, EndAt: &end, State: "running", CPUCount: 1, MemoryMB: 2048}
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
		s.endedOrNotFound(w, client, id)
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

// endedOrNotFound answers a request for a sandbox that is not running:
// 409 when it was client's and has ended (killed, timed out, rewarded),
// else 404.
func (s *Server) endedOrNotFound(w http.ResponseWriter, client, id string) {
	s.mu.Lock()
	g, ok := s.ended[id]
	s.mu.Unlock()
	if !ok || g.client != client {
		s.notFound(w, id)
		return
	}
	apiError(w, http.StatusConflict, fmt.Sprintf("sandbox %s has ended (killed, timed out or already graded): its episode takes one submit or one reward, before kill; GET /sandboxes/%s/rollcage/labels reads its outcome", id, id))
}

// rewardRequest is the body of POST /sandboxes/{id}/rollcage/reward.
type rewardRequest struct {
	Reward   *float64 `json:"reward"`
	Resolved *bool    `json:"resolved"`
	Source   string   `json:"source"`
}

// maxSourceLen bounds a reward's source (a grader's name).
const maxSourceLen = 200

const rewardUsage = `send JSON {"reward": a number in [0, 1], "resolved": optional bool (default reward >= 1), "source": optional name of the grader}`

// parseReward reads a reward body, or says what is wrong with it.
func parseReward(r io.Reader) (harness.External, string) {
	var req rewardRequest
	dec := json.NewDecoder(io.LimitReader(r, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return harness.External{}, fmt.Sprintf("malformed reward body: %s: %v", rewardUsage, err)
	}
	if dec.More() {
		return harness.External{}, "malformed reward body: one JSON object only: " + rewardUsage
	}
	if req.Reward == nil {
		return harness.External{}, "reward: missing: " + rewardUsage
	}
	x := harness.External{Reward: *req.Reward, Resolved: *req.Reward >= 1, Source: req.Source}
	if req.Resolved != nil {
		x.Resolved = *req.Resolved
	}
	if err := x.Validate(); err != nil {
		return harness.External{}, fmt.Sprintf("reward %v is outside [0, 1]: %s", *req.Reward, rewardUsage)
	}
	if len(req.Source) > maxSourceLen {
		return harness.External{}, fmt.Sprintf("source: %d bytes, over the limit of %d: name the grader in fewer", len(req.Source), maxSourceLen)
	}
	return x, ""
}

// handleReward ends a sandbox's episode with a reward its client decided
// (rollcage's extension, for a harness that grades outside, such as
// slime): graded, labelled by the monitor, exported like any graded
// episode. The sandbox is gone afterwards. A bound sandbox takes either
// this or submit; an unbound one only this.
func (s *Server) handleReward(w http.ResponseWriter, r *http.Request, client string) {
	id := r.PathValue("id")
	b := s.lookup(client, id)
	if b == nil {
		s.endedOrNotFound(w, client, id)
		return
	}
	x, msg := parseReward(r.Body)
	if msg != "" {
		apiError(w, http.StatusBadRequest, msg)
		return
	}
	o, err := s.cfg.Episodes.Reward(r.Context(), id, x)
	if errors.Is(err, harness.ErrFinished) || errors.Is(err, server.ErrUnknownEpisode) {
		s.forget(b)
		s.endedOrNotFound(w, client, id)
		return
	}
	if errors.Is(err, server.ErrShuttingDown) {
		apiError(w, http.StatusServiceUnavailable, "rollcage is shutting down: the sandbox was not rewarded")
		return
	}
	if err != nil {
		apiError(w, http.StatusBadGateway, "ending the episode failed: "+err.Error())
		return
	}
	s.forget(b)
	s.log.Info("e2b sandbox rewarded", "sandbox_id", id, "reward", x.Reward, "resolved", x.Resolved, "source", x.Source, "label", o.Label)
	writeJSON(w, http.StatusOK, o)
}

// labelsJSON is the answer of GET /sandboxes/{id}/rollcage/labels.
type labelsJSON struct {
	SandboxID string `json:"sandbox_id"`
	// State is the episode's: running, finishing, finished or closed.
	State          string   `json:"state"`
	Label          string   `json:"label"`
	Hacked         bool     `json:"hacked"`
	HackCategories []string `json:"hack_categories"`
	Flagged        int      `json:"flagged"`
	Blocked        int      `json:"blocked"`
	Unconfirmed    int      `json:"unconfirmed"`
	// Graded: the episode ended graded (submit or reward); Reward,
	// Resolved and TrainingReward are null until then.
	Graded   bool     `json:"graded"`
	Reward   *float64 `json:"reward"`
	Resolved *bool    `json:"resolved"`
	// TrainingReward is export's by the default reward policy (hacked:
	// 0; infrastructure, grading or unconfirmed: null, masked).
	TrainingReward *float64 `json:"training_reward"`
	FailureClass   string   `json:"failure_class,omitempty"`
	Reason         string   `json:"reason,omitempty"`
}

// handleLabels answers a sandbox's labels as the monitor's flags stand
// while it runs and, for Config.Retention after it ended, as export says
// them (Episodes.Exported): a judge's verdict recorded after the end
// changes them as it changes every later export.
func (s *Server) handleLabels(w http.ResponseWriter, r *http.Request, client string) {
	id := r.PathValue("id")
	s.mu.Lock()
	b, g := s.sandboxes[id], s.ended[id]
	s.mu.Unlock()
	if (b == nil || b.client != client) && g.client != client {
		s.notFound(w, id)
		return
	}
	st, o, err := s.cfg.Episodes.Standing(id)
	if errors.Is(err, server.ErrUnknownEpisode) {
		apiError(w, http.StatusNotFound, fmt.Sprintf("sandbox %s: the gateway no longer holds its episode: read it from rollcage's store (GET /v1/episodes/%s with the admin token, or rollcage export)", id, id))
		return
	}
	if err != nil {
		apiError(w, http.StatusBadGateway, "reading the labels failed: "+err.Error())
		return
	}
	l := labelsJSON{SandboxID: id, State: st, Label: o.Label, Hacked: o.Hacked, HackCategories: o.HackCategories,
		Flagged: o.Flagged, Blocked: o.Blocked, Unconfirmed: o.Unconfirmed, FailureClass: o.FailureClass, Reason: o.Reason}
	if st == server.StateFinished {
		l.Graded, l.Reward, l.Resolved, l.TrainingReward = true, &o.Reward, &o.Resolved, o.TrainingReward()
	}
	if st == server.StateFinished || st == server.StateClosed {
		// Ended: what export says, late verdicts (recorded after the end)
		// included, over the counts the episode ended with.
		x, ok, err := s.cfg.Episodes.Exported(r.Context(), id)
		if err != nil {
			apiError(w, http.StatusBadGateway, "reading the labels failed: "+err.Error())
			return
		}
		if ok {
			l.Label, l.Hacked, l.HackCategories, l.FailureClass = x.Label, x.Hacked, x.HackCategories, x.FailureClass
			l.Blocked, l.Unconfirmed = x.Blocked, x.Unconfirmed
			if l.Graded {
				l.Reward, l.Resolved, l.TrainingReward = &x.Reward, &x.Resolved, x.TrainingReward()
			}
		}
	}
	if l.HackCategories == nil {
		l.HackCategories = []string{}
	}
	writeJSON(w, http.StatusOK, l)
}
