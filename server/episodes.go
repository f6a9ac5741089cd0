package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// The episode path for other front ends (the E2B-compatible API): the
// same sessions, tokens, calls, grading and closing as the HTTP API, so
// an episode started there is listed, streamed and exported like any.

var (
	// ErrShuttingDown: the gateway began Shutdown and starts nothing.
	ErrShuttingDown = errors.New("server: gateway shutting down")
	// ErrUnknownEpisode: no live episode has that id.
	ErrUnknownEpisode = errors.New("server: unknown episode")
	errClosedUngraded = errors.New("server: episode closed without grading")
)

// Opened is an episode started through Open.
type Opened struct {
	ID string
	// Token is the episode's bearer token (acts on this episode only, in
	// the HTTP API too).
	Token    string
	Deadline time.Time
}

// open starts an episode of t and registers its session.
func (s *Server) open(ctx context.Context, t task.Task, hidden fs.FS, meta harness.EpisodeMeta) (*session, error) {
	t0 := time.Now()
	ep, err := s.cfg.Runner.Start(ctx, t, hidden, meta)
	s.metrics.startLatency.Observe(time.Since(t0).Seconds())
	if err != nil {
		s.metrics.startFailures.Inc()
		s.log.Warn("episode start failed", "task_id", t.ID, "err", err)
		return nil, err
	}
	se, err := s.register(ctx, ep, t.ID, meta.GroupID, nil)
	if err != nil {
		return nil, err
	}
	s.log.Info("episode created", "episode_id", se.id, "task_id", t.ID, "group_id", meta.GroupID)
	return se, nil
}

// register gives a started episode its session and token. A fork child
// takes calls, its parent's request ids (the calls of the prefix they
// share). During Shutdown it closes the episode and returns
// ErrShuttingDown.
func (s *Server) register(ctx context.Context, ep started, taskID, groupID string, calls *requests) (*session, error) {
	tok := tokenPrefix + s.instance + randomHex(tokenRandomLen/2)
	se := &session{id: ep.ID(), taskID: taskID, groupID: groupID, task: ep.Task(), deadline: ep.Deadline(), ep: ep, token: tok, tokHash: sha256.Sum256([]byte(tok)),
		limiter: s.newLimiter(), created: time.Now(), state: StateRunning, ended: make(chan struct{})}
	if calls != nil {
		se.reqs.inherit(calls)
	}
	se.touch(se.created)
	se.mcp = s.newMCPHandler(se)
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = ep.Close(context.WithoutCancel(ctx))
		return nil, ErrShuttingDown
	}
	s.episodes[se.id] = se
	s.byToken[se.tokHash] = se
	s.mu.Unlock()
	s.metrics.transition("", StateRunning)
	return se, nil
}

// Task returns the loaded task of that id, or of that benchmark
// instance id (Task.InstanceID) when one task alone carries it.
func (s *Server) Task(id string) (task.Task, bool) {
	t, _, ok := s.lookupTask(id)
	return t, ok
}

// lookupTask is Task; when id is no task id and the instance id of
// more than one task, it returns those tasks' ids, sorted.
func (s *Server) lookupTask(id string) (task.Task, []string, bool) {
	if t, ok := s.tasks[id]; ok {
		return t, nil, true
	}
	ids := s.byInstance[id]
	if len(ids) == 1 {
		return s.tasks[ids[0]], nil, true
	}
	return task.Task{}, slices.Sorted(slices.Values(ids)), false
}

// Tasks returns the loaded tasks (in no order).
func (s *Server) Tasks() []task.Task {
	out := make([]task.Task, 0, len(s.tasks))
	for _, t := range s.tasks {
		out = append(out, t)
	}
	return out
}

// Open starts an episode of t as POST /v1/episodes does. A task the
// gateway loaded has its hidden tests in Config.Hidden; an ad-hoc one
// (no hidden tests) cannot be graded.
func (s *Server) Open(ctx context.Context, t task.Task, meta harness.EpisodeMeta) (Opened, error) {
	if !s.enter() {
		return Opened{}, ErrShuttingDown
	}
	defer s.inflight.Done()
	var hidden fs.FS
	if t.HiddenTests != "" {
		hidden = s.cfg.Hidden
	}
	se, err := s.open(ctx, t, hidden, meta)
	if err != nil {
		return Opened{}, err
	}
	return Opened{ID: se.id, Token: se.token, Deadline: se.deadline}, nil
}

func (s *Server) live(id string) (*session, error) {
	s.mu.Lock()
	se := s.episodes[id]
	s.mu.Unlock()
	if se == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownEpisode, id)
	}
	se.touch(time.Now())
	return se, nil
}

// Authorize reports whether token is episode id's own token.
func (s *Server) Authorize(id, token string) bool {
	se, err := s.live(id)
	return err == nil && subtle.ConstantTimeCompare([]byte(token), []byte(se.token)) == 1
}

// Call takes one tool call through episode id as POST /calls does (a
// submit grades it and returns the outcome). Errors are the episode's
// (harness.ErrFinished, a limit), ErrUnknownEpisode or infrastructure.
func (s *Server) Call(ctx context.Context, id string, call toolcall.Call) (decision.CallResult, *harness.Outcome, error) {
	if !s.enter() {
		return decision.CallResult{}, nil, ErrShuttingDown
	}
	defer s.inflight.Done()
	se, err := s.live(id)
	if err != nil {
		return decision.CallResult{}, nil, err
	}
	return s.call(ctx, se, call)
}

// Start starts a streamed bash call in episode id (harness.Episode.Start):
// decided before it starts, recorded when it ends, other calls running
// beside it.
func (s *Server) Start(ctx context.Context, id string, call toolcall.Call, stdin bool, out func(sandbox.Output)) (*harness.Running, error) {
	if !s.enter() {
		return nil, ErrShuttingDown
	}
	defer s.inflight.Done()
	se, err := s.live(id)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	r, err := se.ep.Start(ctx, call, stdin, out)
	if err != nil {
		s.metrics.observeCall(call.Tool, decision.CallResult{}, err, time.Since(t0))
		return nil, err
	}
	go func() {
		res, err := r.Wait(context.WithoutCancel(ctx))
		s.metrics.observeCall(call.Tool, res, err, time.Since(t0))
	}()
	return r, nil
}

// Submit grades episode id as POST /submit does and returns its outcome
// (the same one on every later call).
func (s *Server) Submit(ctx context.Context, id, message string) (harness.Outcome, error) {
	if !s.enter() {
		return harness.Outcome{}, ErrShuttingDown
	}
	defer s.inflight.Done()
	se, err := s.live(id)
	if err != nil {
		return harness.Outcome{}, err
	}
	o, err := s.submit(ctx, se, message)
	if errors.Is(err, errClosedUngraded) {
		return harness.Outcome{}, fmt.Errorf("server: episode %s: %w", id, harness.ErrFinished)
	}
	if err != nil {
		return harness.Outcome{}, err
	}
	return *o, nil
}

// Reward ends episode id with a reward decided outside rollcage
// (harness.Episode.FinishExternal) and returns its outcome. An episode
// that is no longer running (graded, being graded, closed) answers
// harness.ErrFinished; a reward out of range, the error of
// harness.External.Validate.
func (s *Server) Reward(ctx context.Context, id string, x harness.External) (harness.Outcome, error) {
	if err := x.Validate(); err != nil {
		return harness.Outcome{}, err
	}
	if !s.enter() {
		return harness.Outcome{}, ErrShuttingDown
	}
	defer s.inflight.Done()
	se, err := s.live(id)
	if err != nil {
		return harness.Outcome{}, err
	}
	return s.end(ctx, se, true, func(ctx context.Context) (harness.Outcome, error) { return se.ep.FinishExternal(ctx, x) })
}

// Standing is episode id's state and its outcome so far: label, hack
// categories and counts while it runs (harness.Episode.Standing), the
// final outcome once it has ended (abandoned, for a closed one). Only
// episodes the gateway still holds are known (ErrUnknownEpisode).
func (s *Server) Standing(id string) (string, harness.Outcome, error) {
	se, err := s.live(id)
	if err != nil {
		return "", harness.Outcome{}, err
	}
	st, _ := se.getState()
	return st, se.ep.Standing(), nil
}

// Exported is what export says of ended episode id as a whole, from
// its log and the late verdicts on it (trajectory.OutcomeOf): a verdict
// recorded after the end shows here as in every later export. Only the
// fields export knows are set: the ids, Reward, Resolved, Hacked, Label
// and the resolution it makes, HackCategories, Blocked, Unconfirmed (the
// steps still undecided) and FailureClass, so TrainingReward is
// export's by the default policy. ok is false while the log has no end.
// It reads the store, so it answers for episodes the gateway no longer
// holds too.
func (s *Server) Exported(ctx context.Context, id string) (o harness.Outcome, ok bool, err error) {
	evs, err := s.exportEvents(ctx, id)
	if err != nil {
		return harness.Outcome{}, false, err
	}
	x, unconfirmed, ok, err := trajectory.OutcomeOf(evs, trajectory.RewardPolicy{})
	if err != nil {
		return harness.Outcome{}, false, fmt.Errorf("server: episode %s: %w", id, err)
	}
	if !ok {
		return harness.Outcome{}, false, nil
	}
	o = harness.Outcome{EpisodeID: x.EpisodeID, TaskID: x.TaskID, Attempt: int(x.Attempt), GroupID: x.GroupID,
		Reward: x.Reward, Resolved: x.Resolved, Hacked: x.Hacked, Label: x.Label, HackCategories: x.HackCategories,
		Blocked: len(x.BlockedSteps), Unconfirmed: unconfirmed, FailureClass: x.FailureClass}
	o.HackedResolution = o.Resolved && o.Label == harness.LabelHacked
	o.UnconfirmedResolution = o.Resolved && o.Label == harness.LabelUnconfirmed
	o.CleanResolution = o.Resolved && o.Label == harness.LabelClean
	return o, true, nil
}

// exportEvents are what export reads of episode id: its log's events,
// then the late verdicts on it.
func (s *Server) exportEvents(ctx context.Context, id string) ([]trajectory.Event, error) {
	var evs []trajectory.Event
	if err := s.cfg.Store.Read(ctx, id, 0, func(ev trajectory.Event) error { evs = append(evs, ev); return nil }); err != nil {
		return nil, fmt.Errorf("server: episode %s: reading the trajectory: %w", id, err)
	}
	late, err := s.cfg.Store.LateVerdicts(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("server: episode %s: reading the late verdicts: %w", id, err)
	}
	return append(evs, late...), nil
}

// Close closes episode id without grading (why is logged: "killed",
// "timeout"), as DELETE does. Closing an ended episode is a no-op.
func (s *Server) Close(ctx context.Context, id, why string) error {
	se, err := s.live(id)
	if err != nil {
		return err
	}
	return s.closeEpisode(ctx, se, why)
}

// Hold keeps the idle reaper off episode id until until, however idle
// it is: the E2B API holds its sandboxes for their timeout, which its
// client sets, instead of racing the reaper with touches. A later Hold
// replaces an earlier one; a zero until releases it.
func (s *Server) Hold(id string, until time.Time) error {
	se, err := s.live(id)
	if err != nil {
		return err
	}
	var n int64
	if !until.IsZero() {
		n = until.UnixNano()
	}
	se.holdUntil.Store(n)
	return nil
}

// State is episode id's state (StateRunning, ...) and outcome, if any.
func (s *Server) State(id string) (string, *harness.Outcome, error) {
	se, err := s.live(id)
	if err != nil {
		return "", nil, err
	}
	st, o := se.getState()
	return st, o, nil
}
