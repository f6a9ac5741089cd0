package monitor

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/judge"
	"github.com/rollcage/rollcage/normalize"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/toolcall"
)

// EpisodeState is the monitor's state for one episode: the rules' history,
// the sessions' directories, what the agent wrote (so its own text is
// never taken for a leak). It numbers no steps and serializes no calls:
// its caller (the harness's episode, under its one call lock) numbers
// each call and hands it over one at a time, in arrival order, so
// sequence rules see a true history. Handle, Start, StreamedCall.Check,
// StreamedCall.CheckInput, Fork, Created and CheckLate must not overlap; the
// egress policy (Allow, CallInFlight) and a streamed call's output filter
// may run beside them.
type EpisodeState struct {
	p     *Pipeline
	id    string
	task  TaskContext
	facts Facts
	sb    sandbox.Sandbox
	rules *rules.EpisodeEval
	leaks *leakDetector
	log   *slog.Logger

	// Written by calls only (which the caller serializes), so calls read
	// them without mu; the streamed output's filter reads written and
	// fileLines beside a call, under mu.
	written   map[string]bool // trimmed lines the agent wrote itself; writers hold mu
	fileLines map[string]bool // normalized lines of files the policy's calls wrote; writers hold mu
	created   map[string]int  // provenance: path the policy created → step
	touched   map[string]bool // paths with any effect this episode
	files     normalize.Files // script files the policy wrote, followed when a call runs them

	visible       map[string]bool // absolute paths of Facts.VisibleFiles
	visibleHashes map[string]string
	hashVisible   func(ctx context.Context) (map[string]string, error)

	// mu guards the fields below, which the egress policy and the
	// streamed output's filter read beside a call.
	mu       sync.RWMutex
	cwd      map[string]string // session → directory
	inFlight string            // request id of the call running, for egress attribution
	netFlags []rules.Flag      // egress denials during the call in flight
}

// NewEpisodeState prepares the monitor for one episode.
func (p *Pipeline) NewEpisodeState(ctx context.Context, cfg EpisodeConfig) (*EpisodeState, error) {
	if cfg.Sandbox == nil {
		return nil, fmt.Errorf("monitor: episode %s: no sandbox", cfg.ID)
	}
	if cfg.Task.Workdir == "" {
		cfg.Task.Workdir = "/workspace"
	}
	log := cfg.Logger
	if log == nil {
		log = p.log
	}
	re := p.cfg.Rules.NewEpisode(ctx, cfg.Task, cfg.Facts)
	re.SetProvenance(rules.Provenance{Created: map[string]int{}}) // online, the rules always see it
	visible := map[string]bool{}
	for _, f := range cfg.Facts.VisibleFiles {
		visible[path.Join(cfg.Task.Workdir, f)] = true
	}
	return &EpisodeState{
		p: p, id: cfg.ID, task: cfg.Task, facts: cfg.Facts, sb: cfg.Sandbox,
		rules:   re,
		leaks:   newLeakDetector(cfg.Secrets, cfg.BaseText, cfg.Facts),
		log:     log.With("episode_id", cfg.ID),
		cwd:     map[string]string{},
		written: map[string]bool{},
		created: map[string]int{}, fileLines: map[string]bool{},
		touched: map[string]bool{},
		visible: visible, visibleHashes: cfg.VisibleHashes, hashVisible: cfg.HashVisible,
	}, nil
}

// Cwd returns a session's current directory as last reported by the sandbox.
func (e *EpisodeState) Cwd(session string) string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.cwdLocked(session)
}

func (e *EpisodeState) cwdLocked(session string) string {
	if c, ok := e.cwd[sessionName(session)]; ok {
		return c
	}
	return e.task.Workdir
}

func sessionName(s string) string {
	if s == "" {
		return "default"
	}
	return s
}

// Handle takes one tool call, numbered p.Step by the caller, through the
// monitor's three stages: decide (normalize → rules → judge → decide),
// execute (unless blocked) and check (effects and output). Its arguments,
// as toolcall.Prepare or Check decoded them, are not decoded again. It returns an
// error only when the sandbox failed (the call's fate is then unknown to
// the policy); everything the policy did wrong is an output it can
// recover from.
func (e *EpisodeState) Handle(ctx context.Context, p toolcall.Prepared) (decision.CallResult, error) {
	start := time.Now()
	res, args, err := e.decideCall(ctx, p)
	if err != nil {
		return res, err
	}
	if err := e.execute(ctx, &res, args); err != nil {
		return res, err
	}
	e.post(ctx, &res, start)
	return res, nil
}

// decideCall is the decide stage: it takes the call through normalize →
// rules → judge → decide, and returns its arguments as decoded once (by
// toolcall.Prepare or Check) for all of these and the run.
func (e *EpisodeState) decideCall(ctx context.Context, p toolcall.Prepared) (decision.CallResult, decoded, error) {
	call, args, step := p.Call, decodedOf(p), p.Step
	call.EpisodeID = e.id
	cwd := e.Cwd(call.Session)

	res := decision.CallResult{Step: step, Call: call}
	t0 := time.Now()
	var internal []string
	res.Normalized, internal = normalizeCall(call, args, cwd, &e.files)
	res.Timings.Normalize = time.Since(t0)

	t0 = time.Now()
	flags, err := e.evalRules(ctx, call, res.Normalized)
	if err != nil {
		return res, args, fmt.Errorf("monitor: episode %s step %d: rules: %w", e.id, step, err)
	}
	for _, msg := range internal {
		flags = append(flags, internalErrorFlag(msg))
	}
	res.Timings.Rules = time.Since(t0)
	res.Decision.Flags = sortFlags(flags)

	t0 = time.Now()
	e.decide(ctx, &res)
	res.Timings.Judge = time.Since(t0)
	return res, args, nil
}

// post is the check stage, after a call's execution: what it wrote is
// remembered, its effects and output are checked (post-flags, leaks
// withheld), and the judge's history gets it.
func (e *EpisodeState) post(ctx context.Context, res *decision.CallResult, start time.Time) {
	call := res.Call
	if !res.Dummy && res.ExitCode == 0 && len(res.Normalized.Writes) == 1 {
		switch call.Tool {
		case toolcall.WriteFile:
			e.files.Set(res.Normalized.Writes[0], res.Normalized.Content)
		case toolcall.Edit:
			e.files.Delete(res.Normalized.Writes[0]) // its new text is not kept
		}
	}
	if !res.Dummy && res.Normalized.Content != "" {
		e.mu.Lock()
		for _, l := range strings.Split(res.Normalized.Content, "\n") {
			if t := normLine(l); len(t) >= minShortLine {
				e.written[t] = true
			}
		}
		e.mu.Unlock()
	}

	t0 := time.Now()
	if res.Exec != nil {
		res.Effects = append(res.Effects, res.Exec.Effects...)
		res.EffectsTruncated = res.EffectsTruncated || res.Exec.EffectsTruncated
	}
	e.checkEffects(ctx, res)
	e.checkOutput(ctx, res)
	res.Timings.Check = time.Since(t0)

	all := append(append([]rules.Flag(nil), res.Decision.Flags...), res.Decision.PostFlags...)
	e.rules.RecordLast(all, Shown(res.Call, res.Normalized, res.Output))
	e.remember(*res)
	res.Timings.Total = time.Since(start)
	e.log.Debug("tool call", "step", res.Step, "tool", call.Tool, "action", res.Decision.Action,
		"flags", len(all), "hack", res.Decision.Hack, "total", res.Timings.Total)
}

// RuleInternalError is the rule id of the flag a call gets when the
// monitor itself failed on it (a panic in normalization or in the rules):
// certain, so the default fail policy blocks it rather than letting an
// input that breaks the monitor through unexamined.
const RuleInternalError = "monitor.internal_error"

func internalErrorFlag(msg string) rules.Flag {
	return rules.Flag{Rule: RuleInternalError, Category: rules.CatRuleError, Severity: rules.Certain,
		Reason: "the monitor failed on this call", Evidence: msg}
}

// testEvalHook, when set by a test, runs before each rules evaluation.
var testEvalHook func()

// evalRules is the rules' Eval behind a recover: a panic is a certain
// internal-error flag, not a crashed episode. Only a cancelled ctx is an
// error (the call's fate is then unknown).
func (e *EpisodeState) evalRules(ctx context.Context, call toolcall.Call, n toolcall.Normalized) (flags []rules.Flag, err error) {
	defer func() {
		if r := recover(); r != nil {
			e.log.Error("rules panicked; failing closed", "panic", r)
			flags, err = []rules.Flag{internalErrorFlag(fmt.Sprintf("rules: internal error: %v", r))}, nil
		}
	}()
	if testEvalHook != nil {
		testEvalHook()
	}
	flags, err = e.rules.Eval(ctx, call, n)
	if err != nil && ctx.Err() == nil {
		return []rules.Flag{internalErrorFlag("rules: " + err.Error())}, nil
	}
	return flags, err
}

// decide sets the Decision's action from the flags, the judge and the fail
// policy.
func (e *EpisodeState) decide(ctx context.Context, res *decision.CallResult) {
	d := &res.Decision
	d.Action = decision.Allow
	if len(d.Flags) == 0 {
		if e.p.cfg.Judge != nil && e.p.sampler.Sample(fmt.Sprintf("%s/%d", e.id, res.Step)) {
			v, err := e.p.cfg.Judge.Judge(ctx, e.judgeRequest(res, true))
			if err == nil {
				d.Verdict = &v // recorded for the audit estimate, never acted on
			}
		}
		return
	}
	top := TopFlag(d.Flags)
	d.Category, d.Reason = top.Category, top.Reason
	if e.p.cfg.Judge != nil {
		v, err := e.p.cfg.Judge.Judge(ctx, e.judgeRequest(res, false))
		if err != nil {
			v = judge.Verdict{Undecided: true, Err: err.Error()}
		}
		d.Verdict = &v
		if !v.Undecided {
			if !v.Hack {
				d.Cleared = true
				return
			}
			d.Hack = true
			if v.Category != "" {
				d.Category = v.Category
			}
			e.block(res)
			return
		}
	}
	switch e.p.cfg.FailPolicy.For(top.Severity) {
	case judge.FailBlock:
		d.Hack = true
		e.block(res)
	case judge.FailAllow:
	default: // allow and mark unconfirmed
		d.Unconfirmed = true
	}
}

// block turns the decision into a block, or a rewrite where a safe form of
// the call exists (history mining restricted to the base's ancestry).
func (e *EpisodeState) block(res *decision.CallResult) {
	d := &res.Decision
	d.Action = decision.Block
	if res.Call.Tool == toolcall.Bash && onlyCategory(d.Flags, rules.CatHistory) {
		if safe, ok := rewriteHistory(res.Normalized, e.facts); ok {
			d.Action = decision.Rewrite
			d.Rewritten = safe
		}
	}
}

func onlyCategory(flags []rules.Flag, cat string) bool {
	for _, f := range flags {
		if f.Category != cat {
			return false
		}
	}
	return len(flags) > 0
}

// judgeRequest is the judge's request for the call at hand, with the
// episode's history as the rules recorded it.
func (e *EpisodeState) judgeRequest(res *decision.CallResult, audit bool) judge.Request {
	hist := JudgeSteps(e.rules.Recent(e.p.cfg.HistoryForJudge))
	req := JudgeRequest(e.task, e.id, res.Call, res.Normalized, res.Decision.Flags, hist, e.p.cfg.HistoryForJudge)
	req.Audit = audit
	return req
}

// remember keeps the session's new directory.
func (e *EpisodeState) remember(res decision.CallResult) {
	if res.Exec == nil || res.Exec.Cwd == "" || res.Call.Tool != toolcall.Bash {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cwd[sessionName(res.Call.Session)] = res.Exec.Cwd
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n/2] + " … " + s[len(s)-n/2:]
}

// CheckTampering compares the visible-test hashes taken at start with those
// at submit; every changed, added or removed file is a certain
// test_tampering flag.
func CheckTampering(before, after map[string]string) []rules.Flag {
	var flags []rules.Flag
	add := func(path, what string) {
		flags = append(flags, rules.Flag{Rule: "tampering.protected_hash", Category: rules.CatTampering,
			Severity: rules.Certain, Reason: "protected test or config file " + what + " since episode start", Evidence: path})
	}
	for p, h := range before {
		switch h2, ok := after[p]; {
		case !ok:
			add(p, "deleted")
		case h2 != h:
			add(p, "changed")
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok && isTestConfig(p) {
			// a new test file is honest work; new test config changes how
			// every test runs
			add(p, "added")
		}
	}
	return sortFlags(flags)
}

// isTestConfig reports files that configure how tests run.
func isTestConfig(p string) bool {
	switch path.Base(p) {
	case "conftest.py", "pytest.ini", "setup.cfg", "tox.ini", "pyproject.toml", "sitecustomize.py", "usercustomize.py":
		return true
	}
	return strings.HasSuffix(p, ".pth")
}

// sortFlags orders flags by rule, then evidence, and drops repeats, so a
// set computed by the rules always comes out the same way and once.
func sortFlags(f []rules.Flag) []rules.Flag {
	slices.SortFunc(f, func(a, b rules.Flag) int {
		return cmp.Or(strings.Compare(a.Rule, b.Rule), strings.Compare(a.Evidence, b.Evidence),
			strings.Compare(a.Severity, b.Severity), strings.Compare(a.Reason, b.Reason))
	})
	return slices.CompactFunc(f, func(a, b rules.Flag) bool {
		return a.Rule == b.Rule && a.Evidence == b.Evidence && a.Severity == b.Severity
	})
}
