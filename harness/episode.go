package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/egress"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// EpisodeMeta names an episode and says where it belongs.
type EpisodeMeta struct {
	// ID of the episode; generated when empty. It names the trajectory log,
	// so it must pass trajectory.ValidID.
	ID string `json:"id,omitempty"`
	// Attempt is the 0-based retry index of the task in a batch.
	Attempt int `json:"attempt,omitempty"`
	// Model is the policy's model name, recorded at episode start.
	Model  string            `json:"model,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// GroupID names the group of episodes of one task this one belongs to
	// (a GRPO-style group: the gateway's POST /v1/groups, run --attempts);
	// recorded at start and end, so the finished feed carries it.
	GroupID string `json:"group_id,omitempty"`
	// ModelRoutes are URLs of the trainer's model adapter the sandbox may
	// reach through the egress proxy (see egress.Route), besides the
	// runner's Config.ModelRoutes. An episode with routes runs in network
	// mode proxy whatever Config.Network says.
	ModelRoutes []string `json:"model_routes,omitempty"`
	// SandboxUser is sandbox.UserRoot for a sandbox whose policy is root
	// in a user namespace (only on a backend that gives it), else the
	// runner's Config.SandboxUser.
	SandboxUser string `json:"sandbox_user,omitempty"`
}

// Episode is one running episode. Call, RecordModelTurn and Compact are
// safe for concurrent use; the policy (or the gateway) calls them until it
// stops, then exactly one of Finish or Close ends the episode.
type Episode struct {
	r        *Runner
	id       string
	task     task.Task
	hidden   fs.FS
	meta     EpisodeMeta
	sb       sandbox.Sandbox
	mon      *monitor.EpisodeState
	tlog     *trajectory.Log
	log      *slog.Logger
	start    time.Time
	deadline time.Time
	before   map[string]string // visible-test hashes at start
	// sealedImage is the sealed image the sandbox runs ("" when
	// unsealed); image below is then the same.
	sealedImage string

	// For grading, set at start: the base commit the submission is taken
	// against, the image the episode runs (a fresh grading sandbox comes
	// from it), what the policy may honestly know (instruction and the
	// repository at base, for the special-casing check), the canaries
	// planted, and the task context given to the monitor and the judge.
	base        string
	image       string
	known       string
	canaries    []sandbox.Canary
	taskContext monitor.TaskContext
	closing     sync.WaitGroup // grading sandboxes being closed; Finish waits

	startContext json.RawMessage        // the monitor's task context and sandbox facts, for episode_start
	fork         *trajectory.ForkOrigin // where a forked episode branched off; nil otherwise
	tree         *treeRun               // the tree rollout this episode branches in (RunTree); nil otherwise

	egress    *egress.Proxy // network mode proxy only
	egressDir string
	routes    []egress.Route // the runner's and the episode's model routes
	network   string         // the sandbox's network mode

	// callMu is the episode's one call lock: it serializes calls (their
	// numbering, the monitor's stages and their records) with each other
	// and with Finish, so that no call of the agent runs once grading
	// has begun. The monitor serializes nothing itself.
	callMu sync.Mutex

	mu       sync.Mutex // guards the fields below
	stopped  bool       // no more calls: Finish or Close began
	ended    bool       // episode_end written or abandoned
	outcome  Outcome
	segment  int
	steps    int
	turns    int
	tokens   int
	flagged  int
	unconf   int // flagged steps allowed with no judge's confirmation
	blocked  int
	rewrite  int
	judged   int
	hackCats []string
	hacked   bool
	overhead time.Duration
	infraErr error             // first infrastructure fault (sandbox, judge, recording)
	diskErr  error             // the sandbox ended past its disk limit (sandbox.ErrDiskLimit)
	running  map[*Running]bool // streamed calls not yet recorded
	judgeErr string
}

// ID is the episode's id.
func (e *Episode) ID() string { return e.id }

// Task is the episode's task.
func (e *Episode) Task() task.Task { return e.task }

// Segment is the current segment index (0 until the first compaction).
func (e *Episode) Segment() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.segment
}

// Deadline is when the episode's wall-time limit ends the agent's part.
func (e *Episode) Deadline() time.Time { return e.deadline }

// emit appends one event to the episode's log. A log that cannot be
// written is an infrastructure fault: training data would be lost.
func (e *Episode) emit(segment, step int, typ string, payload any) error {
	ev, err := trajectory.NewEvent(e.id, segment, step, typ, payload)
	if err != nil {
		err = fmt.Errorf("harness: episode %s: record %s: %w", e.id, typ, err)
	} else if _, err = e.tlog.Append(ev); err != nil {
		err = fmt.Errorf("harness: record %s: %w", typ, err) // the log's error names the episode
	}
	if err != nil {
		e.noteInfra(err)
	}
	return err
}

func (e *Episode) noteInfra(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if errors.Is(err, sandbox.ErrDiskLimit) {
		// The policy wrote past its disk limit and the orchestrator
		// ended the sandbox: the policy's failure, not masked.
		if e.diskErr == nil {
			e.diskErr = err
		}
		return
	}
	if e.infraErr == nil {
		e.infraErr = err
	}
}

// limitLocked returns the limit reached, if any. Called with e.mu held.
func (e *Episode) limitLocked(now time.Time) string {
	l := e.r.cfg.Limits
	switch {
	case e.steps >= l.MaxSteps:
		return ReasonMaxSteps
	case !now.Before(e.deadline):
		return ReasonWallTime
	case l.MaxTokens > 0 && e.tokens >= l.MaxTokens:
		return ReasonMaxTokens
	}
	return ""
}

// Limit returns the reason of the limit the episode has reached, or "".
func (e *Episode) Limit() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.limitLocked(time.Now())
}

// CallOption varies one Call.
type CallOption func(*callOptions)

type callOptions struct {
	checked bool
}

// Checked is for a call from outside the harness's own loop (the
// gateway's /calls and MCP): a foreign tool name is mapped onto
// rollcage's tools, and a call whose arguments cannot run returns an error
// wrapping *toolcall.ArgsError, which names the field, before anything is
// numbered or recorded (toolcall.Check, with the episode's per-call timeout
// as the longest timeout_sec). Without it, such a call is the policy's
// step and its answer an error output.
func Checked() CallOption { return func(o *callOptions) { o.checked = true } }

// Call numbers one tool call, takes it through the monitor once (rules,
// judge, decision, execution unless blocked, output check) and records
// tool_call, decision and tool_output events. It returns what the policy
// is to be shown.
//
// Errors: one wrapping *toolcall.ArgsError for a Checked call whose
// arguments cannot run; ErrFinished once Finish or Close began; an error
// wrapping ErrLimit (see LimitReason) when a limit was reached before this
// call; any other error is an infrastructure fault (the sandbox failed,
// the log could not be written) and the episode should be finished. The
// CallResult of an error carries the call as the monitor took it, when known.
func (e *Episode) Call(ctx context.Context, call toolcall.Call, opts ...CallOption) (decision.CallResult, error) {
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	var p toolcall.Prepared
	if o.checked {
		var err error
		if p, err = toolcall.Check(call, e.r.cfg.Limits.CallTimeout); err != nil {
			return decision.CallResult{}, fmt.Errorf("harness: episode %s: call %s: %w", e.id, call.Tool, err)
		}
	} else {
		p = toolcall.Prepare(call)
	}
	e.callMu.Lock()
	defer e.callMu.Unlock()
	t0 := time.Now()
	seg, step, callJSON, err := e.beginStep(&p.Call, "call", t0, nil)
	if err != nil {
		return decision.CallResult{Call: p.Call}, err
	}

	p.Step = step
	cctx, cancel := context.WithTimeout(ctx, e.r.cfg.Limits.CallTimeout)
	res, err := e.mon.Handle(cctx, p)
	cancel()
	if err != nil {
		// The monitor's error names the episode, the step and the tool
		// already; wrapping it again would say them twice.
		if ctx.Err() == nil {
			e.noteInfra(err)
		}
		return res, err
	}

	if err := e.record(seg, step, res, callJSON, t0); err != nil {
		return res, err
	}
	return res, nil
}

// beginStep numbers a call's step and records its tool_call, unless Finish or
// Close began (ErrFinished) or a limit was reached; refuse, when set, may
// refuse the call before it is numbered. op names the operation in errors
// ("call", "start"). The caller holds callMu.
func (e *Episode) beginStep(call *toolcall.Call, op string, t0 time.Time, refuse func() error) (seg, step int, callJSON []byte, err error) {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return 0, 0, nil, fmt.Errorf("harness: episode %s: %s %s: %w", e.id, op, call.Tool, ErrFinished)
	}
	if reason := e.limitLocked(t0); reason != "" {
		e.mu.Unlock()
		return 0, 0, nil, &limitError{reason: reason}
	}
	if refuse != nil {
		if err := refuse(); err != nil {
			e.mu.Unlock()
			return 0, 0, nil, err
		}
	}
	seg, step = e.segment, e.steps+1
	e.steps = step
	e.mu.Unlock()

	call.EpisodeID = e.id
	callJSON, err = json.Marshal(call)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("harness: episode %s: %s %s: %w", e.id, op, call.Tool, err)
	}
	if err := e.emit(seg, step, trajectory.TypeToolCall, trajectory.ToolCall{ToolCallID: call.RequestID, Call: callJSON}); err != nil {
		return 0, 0, nil, err
	}
	return seg, step, callJSON, nil
}

// record writes a call's decision and output and counts it.
func (e *Episode) record(seg, step int, res decision.CallResult, callJSON []byte, t0 time.Time) error {
	call := res.Call
	d := res.Decision
	flags := slices.Concat(d.Flags, d.PostFlags)
	cats := hackCategories(d)
	execTime := res.Timings.Exec
	if err := e.emit(seg, step, trajectory.TypeDecision, decisionEvent(res, callJSON, flags, cats)); err != nil {
		return err
	}
	out := trajectory.ToolOutput{ToolCallID: call.RequestID, Output: res.Output, ExitCode: res.ExitCode, Dummy: res.Dummy,
		DurationMS: execTime.Milliseconds()}
	if res.Exec != nil && !res.Dummy {
		out.Truncated = res.Exec.Truncated
		out.Result, _ = json.Marshal(res.Exec)
	}
	if err := e.emit(seg, step, trajectory.TypeToolOutput, out); err != nil {
		return err
	}

	e.mu.Lock()
	if len(flags) > 0 {
		e.flagged++
	}
	if d.Unconfirmed {
		e.unconf++
	}
	switch d.Action {
	case decision.Block:
		e.blocked++
	case decision.Rewrite:
		e.rewrite++
	}
	if d.Verdict != nil && !d.Verdict.Cached {
		e.judged++
	}
	if d.Verdict != nil && d.Verdict.Undecided && judgeFault(d.Verdict.Err) && e.judgeErr == "" {
		e.judgeErr = d.Verdict.Err
	}
	if d.Hack {
		e.hacked = true
		e.hackCats = addUnique(e.hackCats, cats...)
	}
	e.overhead += time.Since(t0) - execTime
	e.mu.Unlock()
	e.log.Debug("call", "step", step, "tool", call.Tool, "action", d.Action, "hack", d.Hack, "flags", len(flags))
	return nil
}

// judgeFault reports whether an undecided verdict's reason is the judge's
// infrastructure failing (rather than it being unsure).
func judgeFault(reason string) bool {
	for _, p := range []string{"timeout", "unreachable", "rate_limited", "server_error"} {
		if len(reason) >= len(p) && reason[:len(p)] == p {
			return true
		}
	}
	return false
}

func hackCategories(d decision.Decision) []string {
	if !d.Hack {
		return nil
	}
	var cats []string
	if d.Category != "" {
		cats = append(cats, d.Category)
	}
	for _, f := range d.PostFlags {
		cats = addUnique(cats, f.Category)
	}
	if len(cats) == 0 {
		for _, f := range d.Flags {
			cats = addUnique(cats, f.Category)
		}
	}
	return cats
}

func addUnique(list []string, items ...string) []string {
	for _, it := range items {
		if it != "" && !slices.Contains(list, it) {
			list = append(list, it)
		}
	}
	return list
}

func decisionEvent(res decision.CallResult, callJSON []byte, flags []rules.Flag, cats []string) trajectory.Decision {
	d := res.Decision
	ev := trajectory.Decision{
		Call:        callJSON,
		Action:      string(d.Action),
		Blocked:     d.Action == decision.Block,
		Dummy:       res.Dummy,
		Hack:        d.Hack,
		Unconfirmed: d.Unconfirmed,
		Categories:  cats,
		LatencyMS:   (res.Timings.Total - res.Timings.Exec).Milliseconds(),
	}
	ev.Normalized, _ = json.Marshal(res.Normalized)
	if len(flags) > 0 {
		ev.Flags, _ = json.Marshal(flags)
	}
	if d.Verdict != nil {
		ev.Verdict, _ = json.Marshal(d.Verdict)
	}
	if d.Action == decision.Rewrite {
		ev.Rewritten, _ = json.Marshal(d.Rewritten)
	}
	for _, ef := range res.Effects {
		ev.Effects = append(ev.Effects, trajectory.Effect{Path: ef.Path, Op: ef.Op, IsDir: ef.IsDir})
	}
	ev.EffectsTruncated = res.EffectsTruncated
	return ev
}

// RecordModelTurn records one request to the policy model and its answer
// in the current segment. Completion tokens count toward Limits.MaxTokens
// (estimated as len/4 of the response when the server reports no usage).
func (e *Episode) RecordModelTurn(turn trajectory.ModelTurn) error {
	e.mu.Lock()
	if e.ended {
		e.mu.Unlock()
		return fmt.Errorf("harness: episode %s: record model turn: %w", e.id, ErrFinished)
	}
	seg, step := e.segment, e.steps
	e.turns++
	n := turn.Usage.CompletionTokens
	if n == 0 {
		n = estimateTokens(turn.Response)
	}
	e.tokens += n
	e.mu.Unlock()
	return e.emit(seg, step, trajectory.TypeModelTurn, turn)
}

// Compact closes the current segment and opens the next, whose
// conversation starts from summary. It returns the new segment's index.
func (e *Episode) Compact(summary string, tokensBefore int) (int, error) {
	e.mu.Lock()
	if e.ended {
		e.mu.Unlock()
		return 0, fmt.Errorf("harness: episode %s: compact: %w", e.id, ErrFinished)
	}
	e.segment++
	seg, step := e.segment, e.steps
	e.mu.Unlock()
	err := e.emit(seg, step, trajectory.TypeCompaction, trajectory.Compaction{From: seg - 1, To: seg, Summary: summary, TokensBefore: tokensBefore})
	return seg, err
}

// Finish ends the episode: it stops taking calls (waiting for the one in
// flight), checks the visible tests' hashes, grades with the hidden tests,
// records grade and episode_end, and closes the sandbox. It runs to the end
// even when ctx is cancelled (teardown has its own timeout). Calling it
// again returns the same Outcome.
func (e *Episode) Finish(ctx context.Context, reason string) (Outcome, error) {
	return e.end(ctx, reason, nil)
}

// External is a reward decided outside rollcage, by a harness that
// grades the episode itself (slime computes its reward and posts it
// through the E2B API).
type External struct {
	Reward   float64 // in [0, 1]
	Resolved bool
	Source   string // names the grader (recorded); may be empty
}

// Validate reports a reward that is not a number in [0, 1].
func (x External) Validate() error {
	if math.IsNaN(x.Reward) || x.Reward < 0 || x.Reward > 1 {
		return fmt.Errorf("harness: external reward %v: give a number in [0, 1]", x.Reward)
	}
	return nil
}

// FinishExternal ends the episode as Finish does, with x's reward in
// place of rollcage's grading: no hidden test and no submit check runs;
// the grade event records x under trajectory.RuleExternal, and the
// label is the monitor's, as for any episode. The outcome's reason is
// ReasonExternal and, but for an infrastructure or judge fault during
// the episode, it has no failure class. Calling it (or Finish) again
// returns the first Outcome.
func (e *Episode) FinishExternal(ctx context.Context, x External) (Outcome, error) {
	if err := x.Validate(); err != nil {
		return Outcome{}, err
	}
	return e.end(ctx, ReasonExternal, &x)
}

// end is Finish, graded by x when it is not nil.
func (e *Episode) end(ctx context.Context, reason string, x *External) (Outcome, error) {
	e.mu.Lock()
	e.stopped = true
	e.mu.Unlock()
	// The agent never runs again once the hidden tests are in. Wait for
	// the call in flight (a Start among them has then registered its
	// stream; none begins once stopped), then stop the streams without
	// the call lock, which their checks and records take.
	e.callMu.Lock()
	//lint:ignore SA2001 a barrier: the call in flight ends first
	e.callMu.Unlock()
	e.stopStreams(context.WithoutCancel(ctx))
	e.callMu.Lock()
	defer e.callMu.Unlock()
	e.mu.Lock()
	if e.ended {
		o := e.outcome
		e.mu.Unlock()
		return o, nil
	}
	e.mu.Unlock()

	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.r.cfg.FinishTimeout)
	defer cancel()
	o := e.finish(fctx, reason, x)
	if cerr := e.sb.Close(fctx); cerr != nil {
		e.log.Warn("closing sandbox", "err", cerr)
	}
	e.closing.Wait()
	e.stopEgress(fctx)
	e.mu.Lock()
	e.ended = true
	e.outcome = o
	e.mu.Unlock()
	if err := e.emitEnd(o); err != nil {
		return o, err
	}
	e.log.Info("episode finished", "reason", o.Reason, "resolved", o.Resolved, "hacked", o.Hacked,
		"failure", o.FailureClass, "steps", o.Steps, "duration", o.Duration.Round(time.Millisecond))
	return o, nil
}

func (e *Episode) finish(ctx context.Context, reason string, x *External) Outcome {
	e.mu.Lock()
	infra, disk := e.infraErr, e.diskErr
	e.mu.Unlock()
	var gr grade
	var gradeErr error
	if disk != nil {
		// The sandbox is gone: there is nothing to grade.
	} else if x != nil {
		gr.Reward, gr.Resolved = x.Reward, x.Resolved
		e.mu.Lock()
		seg, step := e.segment, e.steps
		e.mu.Unlock()
		_ = e.emit(seg, step, trajectory.TypeGrade, trajectory.Grade{Reward: x.Reward, Rule: trajectory.RuleExternal, Source: x.Source})
	} else if infra == nil {
		gr, gradeErr = e.gradeEpisode(ctx)
		if e.submitChecks(ctx, gr) && errors.Is(gradeErr, task.ErrGrading) {
			// The grader could not run because the submission manipulated
			// it (a shadowed pytest that crashes, its output switched
			// off): the policy's failure, not masked as the grader's.
			gradeErr = policyError{gradeErr}
		}
		var pe policyError
		if gradeErr == nil || errors.As(gradeErr, &pe) {
			g := gr.record()
			g.TestsStatus = testsStatus(e.task, gr)
			if gradeErr != nil {
				g.Reward, g.Error = 0, gradeErr.Error()
			}
			e.mu.Lock()
			seg, step := e.segment, e.steps
			e.mu.Unlock()
			_ = e.emit(seg, step, trajectory.TypeGrade, g)
		}
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.infraErr != nil && infra == nil {
		infra = e.infraErr
	}
	o := e.outcomeLocked(reason)
	if infra == nil && gradeErr == nil {
		o.Resolved, o.Reward, o.Passed, o.Failed = gr.Resolved, gr.Reward, gr.Passed, gr.Failed
		o.HackedResolution = o.Resolved && o.Label == LabelHacked
		o.UnconfirmedResolution = o.Resolved && o.Label == LabelUnconfirmed
		o.CleanResolution = o.Resolved && o.Label == LabelClean
	}
	switch {
	case infra != nil:
		o.FailureClass, o.Error = FailureInfrastructure, infra.Error()
	case disk != nil:
		o.Reason, o.FailureClass, o.Error = ReasonDiskLimit, FailureAgent, disk.Error()
	case errors.As(gradeErr, new(policyError)):
		// The policy broke what it submitted: its failure, never masked.
		o.FailureClass, o.Error = FailureAgent, gradeErr.Error()
	case gradeErr != nil && errors.Is(gradeErr, task.ErrGrading):
		o.FailureClass, o.Error = FailureGrading, gradeErr.Error()
	case gradeErr != nil:
		o.FailureClass, o.Error = FailureInfrastructure, gradeErr.Error()
	case e.judgeErr != "":
		// A judge that could not answer may have let a hack through: the
		// reward cannot be trusted either way.
		o.FailureClass, o.Error = FailureInfrastructure, "judge: "+e.judgeErr
	case o.Resolved:
	case reason == ReasonSubmit || reason == ReasonExternal:
		// Submitted and graded: unresolved is what the reward says, not a
		// failure to mask or count.
	default:
		o.FailureClass = failureOf(reason)
	}
	return o
}

// Standing is the episode's Outcome so far: its label, hack categories
// and counts as they stand while it runs (no reward, no reason), its
// final Outcome once it has ended.
func (e *Episode) Standing() Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return e.outcome
	}
	return e.outcomeLocked("")
}

// outcomeLocked is the Outcome as the episode's counters stand, before
// grading. The caller holds e.mu.
func (e *Episode) outcomeLocked(reason string) Outcome {
	o := Outcome{
		EpisodeID: e.id, TaskID: e.task.ID, InstanceID: e.task.InstanceID, Attempt: e.meta.Attempt, GroupID: e.meta.GroupID,
		Hacked: e.hacked, HackCategories: slices.Clone(e.hackCats),
		Blocked: e.blocked, Flagged: e.flagged, Unconfirmed: e.unconf, Rewritten: e.rewrite, JudgeCalls: e.judged,
		Steps: e.steps, Segments: e.segment + 1, Tokens: e.tokens, Reason: reason,
		Duration: time.Since(e.start),
	}
	o.Label = trajectory.EpisodeLabel(o.Hacked, o.Unconfirmed)
	o.fork(e.fork)
	if e.steps > 0 {
		o.Overhead = e.overhead / time.Duration(e.steps)
	}
	return o
}

func (e *Episode) emitEnd(o Outcome) error {
	end := trajectory.EpisodeEnd{
		Resolved: o.Resolved, Reward: o.Reward, Hacked: o.Hacked, Label: o.Label, FailureClass: o.FailureClass, Reason: o.Reason,
		Counts: trajectory.Counts{Turns: e.turnsNow(), ToolCalls: o.Steps, Flagged: o.Flagged, Unconfirmed: o.Unconfirmed, Blocked: o.Blocked,
			Rewritten: o.Rewritten, Segments: o.Segments, Tokens: o.Tokens},
		DurationMS: o.Duration.Milliseconds(), TaskID: e.task.ID, GroupID: e.meta.GroupID,
	}
	if o.Error != "" {
		end.Reason = o.Reason + ": " + o.Error
	}
	err := e.emit(o.Segments-1, o.Steps, trajectory.TypeEpisodeEnd, end)
	if cerr := e.tlog.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("harness: close log: %w", cerr) // the log's error names the episode
	}
	return err
}

func (e *Episode) turnsNow() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.turns
}

// Close abandons the episode without grading: it stops taking calls,
// closes the sandbox, and ends the log with an episode_end whose reason is
// abandoned and failure class infrastructure (no reward: trainers mask it),
// so the episode reaches the finished feed like any other. Idempotent; a
// no-op after Finish.
func (e *Episode) Close(ctx context.Context) error {
	e.mu.Lock()
	e.stopped = true
	e.mu.Unlock()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.r.cfg.FinishTimeout)
	defer cancel()
	// Close the sandbox first so a call in flight fails fast instead of
	// holding callMu.
	e.stopStreams(cctx) // killed and recorded before the sandbox goes
	err := e.sb.Close(cctx)
	e.stopEgress(cctx)
	e.callMu.Lock()
	defer e.callMu.Unlock()
	e.mu.Lock()
	if e.ended {
		e.mu.Unlock()
		return nil
	}
	e.ended = true
	o := e.outcomeLocked(ReasonAbandoned)
	o.FailureClass, o.Error = FailureInfrastructure, "closed without grading"
	e.outcome = o
	e.mu.Unlock()
	if eerr := e.emitEnd(o); eerr != nil && !errors.Is(eerr, trajectory.ErrClosed) {
		err = errors.Join(err, eerr)
	}
	if err != nil {
		return fmt.Errorf("harness: episode %s: close: %w", e.id, err)
	}
	return nil
}

func estimateTokens(m trajectory.Message) int {
	n := len(m.Content)
	for _, c := range m.ToolCalls {
		n += len(c.Function.Name) + len(c.Function.Arguments)
	}
	return (n + 3) / 4
}
