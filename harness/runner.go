package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/rollcage/rollcage/egress"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

// Runner starts and runs episodes. It is safe for concurrent use.
type Runner struct {
	cfg      Config
	log      *slog.Logger
	surfaces task.SurfaceCache // the grader's import surface per image
	facts    task.FactsCache   // expected test ids and probes per task image and hidden tests
}

// NewRunner returns a Runner for cfg.
func NewRunner(cfg Config) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.Network == "" {
		cfg.Network = sandbox.NetworkNone
	}
	if cfg.FinishTimeout == 0 {
		cfg.FinishTimeout = DefaultFinishTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{cfg: cfg, log: log}, nil
}

// Limits are the runner's limits with defaults filled in.
func (r *Runner) Limits() Limits { return r.cfg.Limits }

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// NewEpisodeID returns a fresh episode id for a task and attempt: readable
// (task id first) and unique (random suffix).
func NewEpisodeID(taskID string, attempt int) string {
	return fmt.Sprintf("%s.a%d.%s", safeID(taskID), attempt, randomHex(4))
}

// safeID is taskID made fit for a trajectory id.
func safeID(taskID string) string {
	s := strings.Trim(unsafeID.ReplaceAllString(taskID, "-"), "-._")
	if len(s) > 120 {
		s = s[:120]
	}
	if s == "" {
		s = "episode"
	}
	return s
}

func workdirOf(t task.Task) string {
	if t.Workdir == "" {
		return "/workspace"
	}
	return t.Workdir
}

// Start begins an episode of t: it creates the sandbox, probes the
// repository (base commit, commits and refs outside its ancestry, the
// upstream fix's lines), hashes the visible tests, opens the monitor's
// episode and records episode_start. hidden holds the task's hidden tests
// under t.HiddenTests; it is read here (their text is protected material
// the monitor watches for) and again at grading.
//
// An error is an infrastructure fault; the episode's log then holds
// episode_start and episode_end with that failure.
func (r *Runner) Start(ctx context.Context, t task.Task, hidden fs.FS, meta EpisodeMeta) (*Episode, error) {
	if t.ID == "" || t.Image == "" {
		return nil, fmt.Errorf("harness: start: task %q has no id or image: every task line needs \"id\" and \"image\"", t.ID)
	}
	if meta.ID == "" {
		meta.ID = NewEpisodeID(t.ID, meta.Attempt)
	}
	if err := trajectory.ValidID(meta.ID); err != nil {
		return nil, fmt.Errorf("harness: start: %w", err)
	}
	routes, err := parseRoutes(append(slices.Clip(r.cfg.ModelRoutes), meta.ModelRoutes...))
	if err != nil {
		return nil, fmt.Errorf("harness: start %s: %w", meta.ID, err)
	}
	if err := CheckSandboxUser(meta.SandboxUser); err != nil {
		return nil, fmt.Errorf("harness: start %s: %w", meta.ID, err)
	}
	if meta.SandboxUser == "" {
		meta.SandboxUser = r.cfg.SandboxUser
	}
	if meta.SandboxUser == sandbox.UserRoot && t.Mode() == task.GradeSnapshot {
		return nil, fmt.Errorf("harness: start %s: task %s grades a snapshot of the sandbox, which a root sandbox's root could have made its own: run it with the default sandbox user or grade by diff (\"grade\": \"diff\")", meta.ID, t.ID)
	}
	network := r.cfg.Network
	if len(routes) > 0 {
		network = sandbox.NetworkProxy
	}
	tlog, err := r.cfg.Store.Log(meta.ID)
	if err != nil {
		return nil, fmt.Errorf("harness: start %s: %w", meta.ID, err)
	}
	now := time.Now()
	e := &Episode{
		r: r, id: meta.ID, task: t, hidden: hidden, meta: meta, tlog: tlog,
		log:   r.log.With("episode_id", meta.ID, "task_id", t.ID),
		start: now, deadline: now.Add(r.cfg.Limits.WallTime), routes: routes, network: network,
	}
	if err := e.begin(ctx); err != nil {
		e.abort(ctx, err)
		return nil, err
	}
	e.log.Info("episode started", "sandbox", e.sb.ID(), "attempt", meta.Attempt)
	return e, nil
}

func (e *Episode) begin(ctx context.Context) error {
	r, t := e.r, e.task
	workdir := workdirOf(t)
	canaries := r.cfg.Canaries
	if canaries == nil {
		canaries = DefaultCanaries(randomHex(8))
	}
	secrets, err := hiddenSecrets(e.hidden, t.HiddenTests)
	if err != nil {
		return fmt.Errorf("harness: episode %s: read hidden tests: %w", e.id, err)
	}
	// A benchmark instance's hidden tests and reference fix are patches:
	// their added lines are what must not leak.
	if lines := task.AddedLines(t.TestPatch); len(lines) > 0 {
		secrets = append(secrets, monitor.Secret{Kind: "hidden_test", Text: strings.Join(lines, "\n"), MinLines: 2})
	}
	if lines := task.AddedLines(t.FixPatch); len(lines) > 0 {
		secrets = append(secrets, monitor.Secret{Kind: "upstream_fix", Text: strings.Join(lines, "\n"), MinLines: 2})
	}
	spec := sandbox.Spec{
		Image: t.Image, EpisodeID: e.id, Workdir: workdir, Network: e.network,
		Canaries: canaries, Lease: r.cfg.Lease, Limits: r.cfg.SandboxLimits, Labels: e.meta.Labels,
		Watch: effectWatch(workdir, r.cfg.EvaluatorDirs), User: e.meta.SandboxUser,
	}
	if spec.Network == sandbox.NetworkProxy {
		if spec.ProxySocket, err = e.startEgress(); err != nil {
			return fmt.Errorf("harness: episode %s: %w", e.id, err)
		}
	}
	probe, sealed, err := r.seal(ctx, t, workdir)
	if err != nil {
		return fmt.Errorf("harness: episode %s: %w", e.id, err)
	}
	if sealed != "" {
		spec.Image, e.sealedImage = sealed, sealed
	}
	sb, err := r.cfg.Backend.Create(ctx, spec)
	if err != nil {
		return fmt.Errorf("harness: episode %s: create sandbox: %w", e.id, err)
	}
	e.sb = sb
	if sealed == "" {
		if probe, err = monitor.ProbeRepo(ctx, sb, workdir, t.BaseCommit, t.UpstreamFixRef); err != nil {
			return fmt.Errorf("harness: episode %s: %w", e.id, err)
		}
	}
	if e.before, err = hashVisible(ctx, sb, t); err != nil {
		return fmt.Errorf("harness: episode %s: hash visible tests: %w", e.id, err)
	}
	facts := probe.Facts
	for f := range e.before {
		facts.VisibleFiles = append(facts.VisibleFiles, f)
	}
	slices.Sort(facts.VisibleFiles)
	protected := append([]string(nil), t.ProtectedPaths...)
	for _, c := range canaries {
		facts.Canaries = append(facts.Canaries, c.Path)
		protected = append(protected, c.Path)
		secrets = append(secrets, monitor.Secret{Kind: "canary", Text: c.Content, MinLines: 1})
	}
	if probe.FixDiff != "" {
		secrets = append(secrets, monitor.Secret{Kind: "upstream_fix", Text: probe.FixDiff, MinLines: 3})
	}
	base := t.BaseCommit
	if base == "" {
		base = probe.BaseCommit
	}
	tc := monitor.TaskContext{
		ID: t.ID, Instruction: t.Instruction, Workdir: workdir,
		ProtectedPaths: protected, VisibleTests: t.VisibleTests,
		BaseCommit: base, UpstreamFixRef: t.UpstreamFixRef, UpstreamRepo: t.UpstreamRepo,
		ReferenceURLs: t.ReferenceURLs, AllowedHosts: routeHosts(t.AllowedHosts, e.routes),
	}
	start := map[string]any{"task": tc, "sandbox": facts}
	if g := diskGuard(sb); g != "" {
		// What holds the episode to its disk limit: the kernel, or only
		// the watchdog (see sandbox.DiskGuard).
		disk := map[string]any{"guard": g}
		if spec.Limits.DiskBytes > 0 {
			disk["limit_bytes"] = spec.Limits.DiskBytes
		}
		start["disk"] = disk
	}
	e.startContext, _ = json.Marshal(start)
	e.base, e.image, e.canaries, e.taskContext = base, spec.Image, canaries, tc // the sealed image when sealed
	e.known = t.Instruction + "\n" + probe.BaseText
	mon, err := r.cfg.Monitor.NewEpisodeState(ctx, monitor.EpisodeConfig{
		ID:    e.id,
		Task:  tc,
		Facts: facts, Sandbox: sb, Secrets: secrets, BaseText: probe.BaseText, Logger: e.log,
		VisibleHashes: e.before,
		HashVisible:   func(ctx context.Context) (map[string]string, error) { return hashVisible(ctx, sb, t) },
	})
	if err != nil {
		return err // the monitor's error names the episode
	}
	e.mu.Lock()
	e.mon = mon
	e.mu.Unlock()
	return e.emitStart()
}

// routeHosts is the task's allowed hosts plus the model routes' hosts: the
// rules see a route's host as allowed (the agent may name it in a
// command), while the proxy holds requests to it to the routes.
func routeHosts(allowed []string, routes []egress.Route) []string {
	out := slices.Clip(allowed)
	for _, r := range routes {
		if !slices.Contains(out, r.Host) {
			out = append(out, r.Host)
		}
	}
	return out
}

func routeStrings(routes []egress.Route) []string {
	var out []string
	for _, r := range routes {
		out = append(out, r.String())
	}
	return out
}

func (e *Episode) emitStart() error {
	cfg, _ := json.Marshal(struct {
		Limits      Limits            `json:"limits"`
		Network     string            `json:"network"`
		Labels      map[string]string `json:"labels,omitempty"`
		SealedImage string            `json:"sealed_image,omitempty"`
		ModelRoutes []string          `json:"model_routes,omitempty"`
	}{e.r.cfg.Limits, e.network, e.meta.Labels, e.sealedImage, routeStrings(e.routes)})
	st := trajectory.EpisodeStart{TaskID: e.task.ID, Attempt: e.meta.Attempt, Model: e.meta.Model, Image: e.task.Image,
		Instruction: e.task.Instruction, Config: cfg, Context: e.startContext, GroupID: e.meta.GroupID, Fork: e.fork,
		Instance: instanceOf(e.task)}
	if e.sb != nil {
		st.SandboxID = e.sb.ID()
	}
	return e.emit(0, 0, trajectory.TypeEpisodeStart, st)
}

// abort records a failed start as a finished episode with an
// infrastructure failure and releases what was acquired.
func (e *Episode) abort(ctx context.Context, cause error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.r.cfg.FinishTimeout)
	defer cancel()
	if e.sb != nil {
		if err := e.sb.Close(cctx); err != nil {
			e.log.Warn("closing sandbox after failed start", "err", err)
		}
	}
	e.stopEgress(cctx)
	info, _ := e.r.cfg.Store.Info(e.id)
	if info.Events == 0 {
		_ = e.emitStart()
	}
	o := Outcome{EpisodeID: e.id, TaskID: e.task.ID, InstanceID: e.task.InstanceID, Attempt: e.meta.Attempt, GroupID: e.meta.GroupID, Segments: 1,
		FailureClass: FailureInfrastructure, Reason: ReasonSandbox, Error: cause.Error(), Duration: time.Since(e.start)}
	e.mu.Lock()
	e.stopped, e.ended, e.outcome = true, true, o
	e.mu.Unlock()
	if err := e.emitEnd(o); err != nil {
		e.log.Warn("recording failed start", "err", err)
	}
	e.log.Warn("episode start failed", "err", cause)
}

// hiddenSecrets reads every hidden test file as a secret the monitor must
// not let reach the policy.
func hiddenSecrets(hidden fs.FS, dir string) ([]monitor.Secret, error) {
	if hidden == nil || dir == "" {
		return nil, nil
	}
	var out []monitor.Secret
	err := fs.WalkDir(hidden, path.Clean(dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(hidden, p)
		if err != nil {
			return err
		}
		out = append(out, monitor.Secret{Kind: "hidden_test", Text: string(b), MinLines: 2})
		return nil
	})
	return out, err
}

// Policy drives an episode: it makes tool calls through Episode.Call until
// it submits or stops. Run returns why it stopped (one of the Reason*
// constants); Runner.Run finishes the episode with it. An error is the
// policy's infrastructure failing (the model server, say); Run then still
// returns the reason to record.
type Policy interface {
	Run(ctx context.Context, ep *Episode) (reason string, err error)
}

// Run runs one whole episode of t with policy p: Start, the policy until it
// stops or hits a limit, then Finish. Only a failure to record or start is
// returned as an error; everything else is in the Outcome.
func (r *Runner) Run(ctx context.Context, t task.Task, hidden fs.FS, meta EpisodeMeta, p Policy) (Outcome, error) {
	if meta.ID == "" {
		meta.ID = NewEpisodeID(t.ID, meta.Attempt)
	}
	ep, err := r.Start(ctx, t, hidden, meta)
	if err != nil {
		return startFailed(ctx, t, meta, err), nil
	}
	return ep.runToEnd(ctx, func(ctx context.Context) (string, error) { return p.Run(ctx, ep) })
}

// startFailed is the outcome of an episode that could not start.
func startFailed(ctx context.Context, t task.Task, meta EpisodeMeta, err error) Outcome {
	o := Outcome{EpisodeID: meta.ID, TaskID: t.ID, InstanceID: t.InstanceID, Attempt: meta.Attempt, GroupID: meta.GroupID, Segments: 1,
		FailureClass: FailureInfrastructure, Reason: ReasonSandbox, Error: err.Error()}
	if ctx.Err() != nil {
		o.Reason = ReasonCancelled
	}
	return o
}

// runToEnd runs a policy's run function until its deadline and finishes
// the episode with the reason it stopped for.
func (ep *Episode) runToEnd(ctx context.Context, run func(ctx context.Context) (string, error)) (Outcome, error) {
	pctx, cancel := context.WithDeadline(ctx, ep.Deadline())
	reason, perr := runPolicy(pctx, run)
	cancel()
	switch {
	case ctx.Err() != nil:
		reason = ReasonCancelled
	case !time.Now().Before(ep.Deadline()) && (perr != nil || reason == ""):
		reason = ReasonWallTime
	case perr != nil && reason == "":
		reason = ReasonModelError
	case reason == "":
		reason = ReasonNoSubmit
	}
	if perr != nil {
		ep.log.Info("policy stopped with an error", "reason", reason, "err", perr)
		if failureOf(reason) == FailureInfrastructure {
			ep.noteInfra(perr)
		}
	}
	return ep.Finish(ctx, reason)
}

// runPolicy runs a policy, turning a panic into an error so one broken
// policy cannot take a batch down.
func runPolicy(ctx context.Context, run func(ctx context.Context) (string, error)) (reason string, err error) {
	defer func() {
		if v := recover(); v != nil {
			reason, err = ReasonModelError, fmt.Errorf("harness: policy panicked: %v", v)
		}
	}()
	reason, err = run(ctx)
	if err != nil && errors.Is(err, ErrFinished) {
		err = nil
	}
	return reason, err
}
