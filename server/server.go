package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

// Episode states reported by the API.
const (
	StateRunning   = "running"   // taking calls
	StateFinishing = "finishing" // submitted: grading
	StateFinished  = "finished"  // graded; the outcome is known
	StateClosed    = "closed"    // closed without grading (DELETE, idle, shutdown)
	// StateUnfinished and StateRecorded describe episodes known only from
	// the store (another gateway's, or one before a restart).
	StateUnfinished = "unfinished"
	StateRecorded   = "recorded"
)

// Server is the gateway. It is an http.Handler; Serve runs it on a
// listener, Shutdown stops it without losing a call.
type Server struct {
	cfg   Config
	log   *slog.Logger
	tasks map[string]task.Task
	// byInstance maps a benchmark instance id to the ids of the tasks
	// that carry it, where it differs from the task id (a Harbor task's
	// name), so creates may name either.
	byInstance map[string][]string
	hub        *trajectory.Hub
	mux        *http.ServeMux
	metrics    *metrics
	admin      session // the admin token's rate limiter lives here
	// instance names this run of the gateway in the tokens it issues,
	// so a token from before a restart is told apart from a wrong one.
	instance string

	mu       sync.Mutex
	episodes map[string]*session // guarded by mu; by episode id
	byToken  map[[32]byte]*session
	groups   map[string]*group // guarded by mu; by group id
	closing  bool              // guarded by mu; Shutdown began
	inflight sync.WaitGroup    // requests being served (streams excluded); Add under mu

	httpSrv  atomic.Pointer[http.Server]
	stopReap chan struct{}
	reapDone chan struct{}
	shutOnce sync.Once
	shutErr  error
}

// session is one episode as the gateway keeps it.
type session struct {
	id      string
	taskID  string
	groupID string
	task    task.Task // the episode's, as it started
	// deadline is when the episode's wall-time limit ends the agent's part.
	deadline time.Time
	ep       episode
	token    string
	tokHash  [32]byte
	limiter  *rate.Limiter
	created  time.Time
	mcp      http.Handler
	lastUse  atomic.Int64 // unix nanos
	// holdUntil keeps the idle reaper off until then (unix nanos; Hold).
	holdUntil atomic.Int64

	reqs requests // calls by request id
	// tokensRefused says why the policy server refused the token-id
	// fields; once set, the proxy no longer adds them.
	tokensRefused atomic.Pointer[string]

	// ended is closed once the episode has ended (graded or closed).
	ended   chan struct{}
	endOnce sync.Once

	mu      sync.Mutex // guards the fields below
	state   string
	outcome *harness.Outcome
}

func (s *session) markEnded() { s.endOnce.Do(func() { close(s.ended) }) }

func (s *session) touch(now time.Time) { s.lastUse.Store(now.UnixNano()) }

func (s *session) getState() (string, *harness.Outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state, s.outcome
}

// New returns a Server for cfg. It starts the idle-episode reaper, which
// Shutdown stops.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	hub, err := trajectory.NewHub(cfg.Store, trajectory.HubConfig{Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if cfg.AdminToken == "" {
		cfg.AdminToken = "rca_" + randomHex(24)
	}
	s := &Server{
		cfg: cfg, log: cfg.Logger, hub: hub, instance: randomHex(tokenInstanceLen / 2),
		tasks:    map[string]task.Task{},
		episodes: map[string]*session{},
		byToken:  map[[32]byte]*session{},
		groups:   map[string]*group{},
		stopReap: make(chan struct{}),
		reapDone: make(chan struct{}),
	}
	s.admin.limiter = s.newLimiter()
	s.byInstance = map[string][]string{}
	for _, t := range cfg.Tasks {
		s.tasks[t.ID] = t
		if t.InstanceID != "" && t.InstanceID != t.ID {
			s.byInstance[t.InstanceID] = append(s.byInstance[t.InstanceID], t.ID)
		}
	}
	s.metrics = newMetrics(s)
	if err := s.recoverStore(context.Background()); err != nil {
		hub.Close()
		return nil, err
	}
	s.routes()
	go s.reapLoop()
	return s, nil
}

// recoverTimeout bounds New's recovery of the store.
const recoverTimeout = 2 * time.Minute

// recoverStore ends the episodes a previous gateway left unfinished in
// the store (it crashed or was killed: its tokens are gone, so nobody can
// finish them): each gets an episode_end (reason abandoned, class
// infrastructure), which puts it on the finished feed, and its sandboxes
// are removed. Nothing else writes to the store yet.
func (s *Server) recoverStore(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	eps, err := s.cfg.Store.Episodes(ctx)
	if err != nil {
		return fmt.Errorf("server: recover: %w", err)
	}
	var errs []error
	for _, fi := range eps {
		if fi.Finished {
			continue
		}
		ended, err := harness.AbandonStored(ctx, s.cfg.Store, fi.ID, "gateway restart")
		switch {
		case errors.Is(err, trajectory.ErrCorrupt):
			// One bad log must not keep the gateway down: it stays
			// unfinished, and says so; its sandboxes still go.
			s.log.Warn("cannot end a corrupt log the previous gateway left: repair or remove it", "episode_id", fi.ID, "file", s.cfg.Store.File(fi.ID), "err", err)
		case err != nil:
			errs = append(errs, err)
			continue
		case ended:
			s.metrics.abandoned.Inc()
			s.log.Info("ended an episode the previous gateway left unfinished", "episode_id", fi.ID)
		}
		if s.cfg.Sandboxes != nil {
			if _, err := s.cfg.Sandboxes.RemoveEpisode(ctx, fi.ID); err != nil {
				// The sandbox is the backend's to reap later; the episode
				// has ended either way.
				s.log.Warn("removing an abandoned episode's sandboxes", "episode_id", fi.ID, "err", err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("server: recover: %w", err)
	}
	return nil
}

// AdminToken is the admin bearer token (generated when Config had none).
func (s *Server) AdminToken() string { return s.cfg.AdminToken }

func (s *Server) newLimiter() *rate.Limiter {
	if s.cfg.Rate < 0 {
		return rate.NewLimiter(rate.Inf, 0)
	}
	return rate.NewLimiter(rate.Limit(s.cfg.Rate), s.cfg.Burst)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The mux would answer a path with a '.', '..' or empty segment with
	// an HTML redirect to its clean form: a client's bad id, not a move.
	if !CleanPath(r.URL.Path) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("path %q has an empty, '.' or '..' segment: ids are letters, digits, '.', '-' and '_', starting with a letter or digit (see /openapi.yaml)", r.URL.Path))
		return
	}
	s.mux.ServeHTTP(&jsonErrors{ResponseWriter: w}, r)
}

// CleanPath reports whether p is what http.ServeMux serves without
// redirecting: rooted, with no empty, '.' or '..' segment (a trailing
// slash aside).
func CleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np == p
}

// Serve accepts connections on ln until Shutdown. It returns
// http.ErrServerClosed after a Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	if !s.httpSrv.CompareAndSwap(nil, hs) {
		return errors.New("server: Serve called twice: one Server serves one listener")
	}
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return http.ErrServerClosed
	}
	return hs.Serve(ln)
}

// Shutdown stops the gateway without losing work: it stops accepting
// connections and requests, waits for the requests in flight (tool calls
// complete and are recorded), closes every open episode (its trajectory
// flushed and closed) and ends the streams. When ctx ends first, the
// episodes are closed anyway (calls still running fail) and ctx's error
// is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutOnce.Do(func() { s.shutErr = s.shutdown(ctx) })
	return s.shutErr
}

func (s *Server) shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	close(s.stopReap)
	<-s.reapDone
	var errs []error
	httpDone := make(chan error, 1)
	if hs := s.httpSrv.Load(); hs != nil {
		go func() { httpDone <- hs.Shutdown(ctx) }()
	} else {
		httpDone <- nil
	}
	waited := make(chan struct{})
	go func() { s.inflight.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("server: shutdown: requests still in flight: %w", ctx.Err()))
	}
	s.mu.Lock()
	open := make([]*session, 0, len(s.episodes))
	for _, se := range s.episodes {
		open = append(open, se)
	}
	s.mu.Unlock()
	var g errgroup.Group
	g.SetLimit(8)
	for _, se := range open {
		g.Go(func() error { return s.closeEpisode(context.WithoutCancel(ctx), se, "shutdown") })
	}
	if err := g.Wait(); err != nil {
		errs = append(errs, err)
	}
	if err := s.hub.Close(); err != nil {
		errs = append(errs, err)
	}
	select {
	case err := <-httpDone:
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			errs = append(errs, err)
		}
	case <-ctx.Done():
	}
	s.log.Info("gateway stopped", "episodes_closed", len(open))
	return errors.Join(errs...)
}

// enter counts a request as in flight; false once Shutdown began.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.inflight.Add(1)
	return true
}

// closeEpisode closes a session's episode without grading, unless it has
// already ended.
func (s *Server) closeEpisode(ctx context.Context, se *session, why string) error {
	se.mu.Lock()
	if se.state != StateRunning {
		se.mu.Unlock()
		return nil
	}
	se.state = StateClosed
	se.mu.Unlock()
	s.metrics.transition(StateRunning, StateClosed)
	err := se.ep.Close(ctx)
	se.markEnded()
	s.log.Info("episode closed", "episode_id", se.id, "why", why)
	return err // the harness's error names the episode and the close
}

// reapLoop closes idle episodes until Shutdown.
func (s *Server) reapLoop() {
	defer close(s.reapDone)
	if s.cfg.IdleTimeout < 0 {
		<-s.stopReap
		return
	}
	every := min(max(s.cfg.IdleTimeout/4, time.Second), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stopReap:
			return
		case now := <-t.C:
			s.reapIdle(now)
		}
	}
}

// reapIdle closes the running episodes unused since now - IdleTimeout and
// forgets ended ones as old, so the registry stays bounded. It returns the
// ids closed.
func (s *Server) reapIdle(now time.Time) []string {
	if s.cfg.IdleTimeout < 0 {
		return nil
	}
	cutoff := now.Add(-s.cfg.IdleTimeout).UnixNano()
	var idle []*session
	s.mu.Lock()
	for id, se := range s.episodes {
		if se.lastUse.Load() >= cutoff || se.holdUntil.Load() > now.UnixNano() {
			continue
		}
		if st, _ := se.getState(); st == StateRunning {
			idle = append(idle, se)
		} else if st != StateFinishing {
			// Ended and idle: the store still has its trajectory.
			delete(s.episodes, id)
			delete(s.byToken, se.tokHash)
		}
	}
	s.forgetGroupsLocked()
	s.mu.Unlock()
	var ids []string
	for _, se := range idle {
		if err := s.closeEpisode(context.Background(), se, "idle"); err != nil {
			s.log.Warn("closing idle episode", "episode_id", se.id, "err", err)
		}
		ids = append(ids, se.id)
	}
	return ids
}

// Authentication.

// caller is who made a request: the admin, or one episode's session.
type caller struct {
	admin bool
	se    *session
}

// bearer is the request's token: "Authorization: Bearer <token>" (the
// scheme in any case), or X-Api-Key (Anthropic SDKs send their API key
// there), or for a WebSocket upgrade (browsers cannot set headers) the
// access_token query parameter.
func bearer(r *http.Request) string {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	if scheme, t, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(t)
	}
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return strings.TrimSpace(k)
	}
	// WebSocket clients in browsers cannot set headers.
	if r.Header.Get("Upgrade") != "" {
		return r.URL.Query().Get("access_token")
	}
	return ""
}

// An episode token is tokenPrefix, the issuing gateway's instance
// (tokenInstanceLen hex digits) and 48 random hex digits.
const (
	tokenPrefix      = "rce_"
	tokenInstanceLen = 16
	tokenRandomLen   = 48
)

// tokenInstance returns the instance of the gateway that issued tok, if
// tok has an episode token's form.
func tokenInstance(tok string) (string, bool) {
	rest, ok := strings.CutPrefix(tok, tokenPrefix)
	if !ok || len(rest) != tokenInstanceLen+tokenRandomLen {
		return "", false
	}
	if _, err := hex.DecodeString(rest); err != nil {
		return "", false
	}
	return rest[:tokenInstanceLen], true
}

// authenticate finds the caller of a request, or answers 401 (410 for a
// token an earlier run of the gateway issued).
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (caller, bool) {
	tok := bearer(r)
	if tok == "" {
		writeError(w, http.StatusUnauthorized, "missing bearer token: send 'Authorization: Bearer <episode or admin token>'")
		return caller{}, false
	}
	if subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.AdminToken)) == 1 {
		return caller{admin: true}, true
	}
	// Looked up by hash, then compared in constant time: the map's timing
	// depends on the hash, not on the secret.
	h := sha256.Sum256([]byte(tok))
	s.mu.Lock()
	se := s.byToken[h]
	s.mu.Unlock()
	if se == nil || subtle.ConstantTimeCompare([]byte(tok), []byte(se.token)) != 1 {
		if inst, ok := tokenInstance(tok); ok && inst != s.instance {
			writeError(w, http.StatusGone, "episode ended by a gateway restart: this token is from an earlier run of the gateway, whose restart ended its episode (the trajectory is kept, ended as abandoned): create a new episode")
			return caller{}, false
		}
		writeError(w, http.StatusUnauthorized, "unknown token: use the token returned when the episode was created, or the admin token")
		return caller{}, false
	}
	return caller{se: se}, true
}

// limit takes one request from the caller's bucket, or answers 429.
func (s *Server) limit(w http.ResponseWriter, c caller) bool {
	l := s.admin.limiter
	if c.se != nil {
		l = c.se.limiter
	}
	res := l.Reserve()
	if d := res.Delay(); d > 0 || !res.OK() {
		res.Cancel()
		secs := int(d/time.Second) + 1
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		s.metrics.rateLimited.Inc()
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("rate limit of this token reached: retry after %ds", secs))
		return false
	}
	return true
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, c caller)

// withAuth wraps a handler with shutdown tracking, authentication and rate
// limiting. stream marks long-lived requests (WebSockets) that Shutdown
// ends instead of waiting for.
func (s *Server) withAuth(adminOnly, stream bool, h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !stream {
			if !s.enter() {
				writeError(w, http.StatusServiceUnavailable, "gateway shutting down: retry against another instance")
				return
			}
			defer s.inflight.Done()
		}
		c, ok := s.authenticate(w, r)
		if !ok || !s.limit(w, c) {
			return
		}
		if adminOnly && !c.admin {
			writeError(w, http.StatusForbidden, "admin only: use the admin token (--admin-token / ROLLCAGE_ADMIN_TOKEN)")
			return
		}
		h(w, r, c)
	}
}

// episodeFor resolves the {id} of a request for its caller: 404 for an
// unknown episode, 403 for another episode's token.
func (s *Server) episodeFor(w http.ResponseWriter, r *http.Request, c caller) (*session, bool) {
	id := r.PathValue("id")
	if c.se != nil && c.se.id != id {
		writeError(w, http.StatusForbidden, fmt.Sprintf("this token belongs to episode %s, not %s: use that episode's own token", c.se.id, id))
		return nil, false
	}
	s.mu.Lock()
	se := s.episodes[id]
	s.mu.Unlock()
	if se == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("episode %q not found: create one with POST /v1/episodes (GET /v1/episodes lists them)", id))
		return nil, false
	}
	se.touch(time.Now())
	return se, true
}
