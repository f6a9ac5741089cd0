package harness

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// grade is what the harness keeps of a grading: the verdict of the hidden
// tests and what was graded.
type grade struct {
	Resolved                        bool
	Reward                          float64
	Passed, Failed, Errors, Skipped int
	ExitCode                        int
	Summary                         string
	Duration                        time.Duration

	// Rule is the reward rule; Statuses, Probes, Integrity and Tampered
	// are a watched grading's (task.Result).
	Rule      string
	Statuses  map[string]task.Status
	Probes    []task.ProbeResult
	Integrity string
	Tampered  bool
	// Cases and CasesFailed count the differential cases.
	Cases, CasesFailed int
	// VerifierInSubmission: a task's own verifier decided, on the
	// submitted filesystem (gradeVerifier).
	VerifierInSubmission bool

	Mode     string
	Disk     sandbox.DiskGuard // what held the grading sandbox's disk limit
	Sub      task.Submission
	Findings []task.Finding
	Phases   trajectory.GradePhases
}

// record is the grade event of g.
func (g grade) record() trajectory.Grade {
	rec := trajectory.Grade{Reward: g.Reward, Passed: g.Passed, Failed: g.Failed, Errors: g.Errors, Skipped: g.Skipped,
		ExitCode: g.ExitCode, Summary: g.Summary, ProtectedIntact: true, DurationMS: g.Duration.Milliseconds(),
		Mode: g.Mode, DiffSHA256: g.Sub.SHA256, DiffBytes: len(g.Sub.Diff), Phases: g.Phases, Survivors: g.Sub.Survivors,
		Rule: g.Rule, Integrity: g.Integrity, Tampered: g.Tampered, Dropped: task.BesideSource(g.Sub),
		Cases: g.Cases, CasesFailed: g.CasesFailed, VerifierInSubmission: g.VerifierInSubmission, Disk: string(g.Disk)}
	if len(g.Statuses) > 0 {
		rec.Statuses = map[string]string{}
		for id, s := range g.Statuses {
			rec.Statuses[id] = string(s)
		}
	}
	for _, p := range g.Probes {
		var st []string
		for _, s := range p.Statuses {
			st = append(st, string(s))
		}
		rec.Probes = append(rec.Probes, trajectory.GradeProbe{Test: p.Test, MustFail: p.MustFail, Statuses: st, OK: p.OK})
	}
	for _, f := range g.Sub.Files {
		rec.Files = append(rec.Files, trajectory.GradedFile{Path: f.Path, Status: f.Status})
	}
	for _, f := range g.Findings {
		if f.Category == rules.CatTampering {
			rec.ProtectedIntact = false
			rec.Changed = append(rec.Changed, f.File)
		}
	}
	return rec
}

// policyError is a grading that could not happen because of what the
// policy did (a repository it broke, a diff that does not apply): reward
// 0, failure class agent. It hides task.ErrGrading from errors.Is.
type policyError struct{ err error }

func (e policyError) Error() string { return e.err.Error() }

// infraError hides task.ErrGrading from errors.Is: the grader was fine,
// the sandbox was not.
type infraError struct{ err error }

func (e infraError) Error() string { return e.err.Error() }

func isSandboxFault(err error) bool {
	for _, s := range []error{sandbox.ErrClosed, sandbox.ErrUnavailable, sandbox.ErrAgent, sandbox.ErrImageMissing} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// classify sorts a grading error: the policy's (task.ErrSubmission), the
// sandbox's (infrastructure), the grader's (task.ErrGrading) or ctx's.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, task.ErrSubmission):
		return policyError{err}
	case isSandboxFault(err):
		return infraError{err}
	}
	return err
}

// imageIDer is a sandbox that knows the id of its image (sandbox/docker's).
type imageIDer interface {
	ImageID(ctx context.Context) (string, error)
}

// diskGuard is what holds sb to its disk limit, "" when its backend does
// not say.
func diskGuard(sb sandbox.Sandbox) sandbox.DiskGuard {
	if d, ok := sb.(sandbox.DiskGuarder); ok {
		return d.DiskGuard()
	}
	return ""
}

// imageRemover is a backend that can remove an image it made by Snapshot.
type imageRemover interface {
	RemoveImage(ctx context.Context, ref string) error
}

// gradeEpisode grades the submission hermetically: it kills every process
// of the sandbox user in the episode's sandbox, takes the repository's
// change against the base commit (as the sandbox user, git hardened),
// inspects it, and runs the hidden tests in a fresh sandbox from the
// episode's image (diff mode: the change applied; snapshot mode: a
// snapshot of the episode's filesystem with the canary decoys removed)
// with no canary and no process of the policy. The episode's sandbox never
// sees the hidden tests.
func (e *Episode) gradeEpisode(ctx context.Context) (g grade, err error) {
	t := e.task
	g.Mode = t.Mode()
	start := time.Now()
	defer func() { g.Duration = time.Since(start) }()
	phase := func(since time.Time) int64 { return time.Since(since).Milliseconds() }

	t0 := time.Now()
	survivors, late, err := task.StopUser(ctx, e.sb)
	g.Phases.KillMS = phase(t0)
	if err != nil {
		return g, classify(fmt.Errorf("harness: episode %s: grade: %w", e.id, err))
	}
	e.checkLate(ctx, late)
	t0 = time.Now()
	sub, err := e.takeSubmission(ctx)
	sub.Survivors = survivors
	g.Sub = sub
	g.Phases.DiffMS = phase(t0)
	if err != nil {
		return g, classify(fmt.Errorf("harness: episode %s: grade: %w", e.id, err))
	}

	image := e.image
	if len(t.ImageHidden) > 0 {
		// The sealed image is without the hidden tests: grade on the
		// task image, which has them (the change is against the same
		// base commit).
		image = t.Image
	}
	if g.Mode == task.GradeSnapshot {
		t0 = time.Now()
		ref := "rollcage/grade-snapshot:" + unsafeID.ReplaceAllString(e.id, "-")
		id, err := sandbox.Snapshot(ctx, e.sb, ref)
		g.Phases.SnapshotMS = phase(t0)
		if err != nil {
			return g, classify(fmt.Errorf("harness: episode %s: grade: snapshot: %w", e.id, err))
		}
		image = id
		if rm, ok := e.r.cfg.Backend.(imageRemover); ok {
			defer func() {
				if err := rm.RemoveImage(context.WithoutCancel(ctx), ref); err != nil {
					e.log.Warn("removing the grading snapshot", "image", ref, "err", err)
				}
			}()
		}
	}

	t0 = time.Now()
	gsb, err := e.r.cfg.Backend.Create(ctx, sandbox.Spec{
		Image: image, EpisodeID: e.id, Workdir: workdirOf(t), Network: sandbox.NetworkNone,
		Lease: e.r.cfg.Lease, Limits: e.r.cfg.SandboxLimits, // no canaries, no labels, no proxy
	})
	g.Phases.SandboxMS = phase(t0)
	if err != nil {
		return g, infraError{fmt.Errorf("harness: episode %s: grade: fresh sandbox: %w", e.id, err)}
	}
	g.Disk = diskGuard(gsb)
	// Closed beside the episode's sandbox, after the outcome is known:
	// teardown is not on the grading's path. Finish waits for it.
	e.closing.Add(1)
	defer func() {
		go func() {
			defer e.closing.Done()
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := gsb.Close(cctx); err != nil {
				e.log.Warn("closing the grading sandbox", "err", err)
			}
		}()
	}()

	t0 = time.Now()
	key := image
	if id, ok := e.sb.(imageIDer); ok {
		if k, err := id.ImageID(ctx); err == nil {
			key = k
		}
	}
	surf, err := e.r.surfaces.Get(ctx, gsb, t, key)
	g.Phases.SurfaceMS = phase(t0)
	if err != nil {
		return g, classify(fmt.Errorf("harness: episode %s: grade: %w", e.id, err))
	}
	g.Findings = task.Inspect(t, sub, surf)
	if lit, err := task.HiddenLiterals(e.hidden, t); err == nil {
		g.Findings = append(g.Findings, task.SpecialCasing(sub, lit, e.known)...)
	} else {
		e.log.Warn("reading the hidden tests' literals", "err", err)
	}

	t0 = time.Now()
	if g.Mode == task.GradeSnapshot {
		err = removeDecoys(ctx, gsb, e.canaries)
		if err == nil {
			err = task.PurgeBytecode(ctx, gsb, t)
		}
	} else {
		err = task.ApplySubmission(ctx, gsb, t, sub)
	}
	g.Phases.ApplyMS = phase(t0)
	if err != nil {
		return g, classify(fmt.Errorf("harness: episode %s: grade: %w", e.id, err))
	}

	if t.RewardFile != "" {
		return e.gradeVerifier(ctx, gsb, surf, g)
	}
	t0 = time.Now()
	if t.RewardRule() == task.RewardSummary {
		r, err := task.Grade(ctx, gsb, t, e.hidden)
		g.Phases.TestsMS = phase(t0)
		g.setResult(r, err)
		return g, classify(err)
	}
	facts, err := e.facts(ctx)
	g.Phases.FactsMS = phase(t0)
	if err != nil {
		return g, classify(fmt.Errorf("harness: episode %s: grade: %w", e.id, err))
	}
	w := task.Watch{Facts: facts, Surface: surf, Changed: map[string]bool{}}
	for _, f := range sub.Files {
		w.Changed[f.Path] = true
	}
	if g.Mode == task.GradeSnapshot {
		w.Home = "/nonexistent" // the policy's own home came along in the snapshot
	}
	t0 = time.Now()
	r, err := task.GradeWatched(ctx, gsb, t, e.hidden, w)
	g.Phases.TestsMS = phase(t0)
	g.Findings = append(g.Findings, r.Findings...)
	if errors.Is(err, task.ErrRunCut) {
		// Whose failure a cut run is: the hidden tests on the base commit,
		// under the same limits, in a fresh sandbox.
		t0 = time.Now()
		base, berr := e.gradeBase(ctx, facts)
		g.Phases.RerunMS = phase(t0)
		switch {
		case berr == nil && base.Completed:
			err = policyError{fmt.Errorf("harness: episode %s: grade: %w; the hidden tests finish on the base commit, so the run's end is the solution's", e.id, err)}
		case berr != nil && !errors.Is(berr, task.ErrRunCut):
			err = berr
		default:
			err = fmt.Errorf("harness: episode %s: grade: %w: %w; the base commit's run does not finish either", e.id, task.ErrGrading, err)
		}
	}
	g.setResult(r, err)
	if pe, ok := err.(policyError); ok {
		return g, pe
	}
	return g, classify(err)
}

// setResult keeps what the grader's Result says.
func (g *grade) setResult(r task.Result, err error) {
	g.Resolved = err == nil && r.Reward >= 1
	g.Reward, g.Passed, g.Failed, g.Errors, g.Skipped = r.Reward, r.Passed, r.Failed, r.Errors, r.Skipped
	g.ExitCode = r.ExitCode
	g.Rule, g.Statuses, g.Probes, g.Integrity, g.Tampered = r.Rule, r.Statuses, r.Probes, r.Integrity, r.Tampered
	g.Cases, g.CasesFailed = r.Cases, r.CasesFailed
	switch r.Rule {
	case task.RewardSummary:
		g.Summary = lastLine(r.Output)
	case task.RewardStatuses:
		g.Summary = fmt.Sprintf("%d of %d tests reported with their expected status (%d passed, %d failed, %d errors)", r.Matched, len(r.Statuses), r.Passed, r.Failed, r.Errors)
	case task.RewardVerifier:
		g.Summary = fmt.Sprintf("verifier reward %g; %d tests reported passed, %d failed, %d errors, %d skipped", r.Reward, r.Passed, r.Failed, r.Errors, r.Skipped)
	default:
		g.Summary = fmt.Sprintf("%d of %d expected passed, %d failed, %d errors, %d skipped", r.Passed, len(r.Statuses), r.Failed, r.Errors, r.Skipped)
	}
}

// facts are the task's expected ids, probes and differential cases,
// derived once per image and hidden tests in a sandbox of the task's own
// (unsealed) image, where the reference fix is reachable or applied,
// never the episode's.
func (e *Episode) facts(ctx context.Context) (task.Facts, error) {
	t := e.task
	key, err := task.FactsKey(t, t.Image, e.hidden)
	if err != nil {
		return task.Facts{}, fmt.Errorf("%w: %w", task.ErrGrading, err)
	}
	return e.r.facts.Get(ctx, key, func(ctx context.Context) (task.Facts, error) {
		if !t.FactsNeedSandbox() {
			return task.Derive(ctx, nil, t, e.hidden, task.Surface{}) // the instance declares its ids
		}
		sb, err := e.r.cfg.Backend.Create(ctx, sandbox.Spec{
			Image: t.Image, EpisodeID: e.id + "-facts", Workdir: workdirOf(t), Network: sandbox.NetworkNone,
			Lease: e.r.cfg.Lease, Limits: e.r.cfg.SandboxLimits,
		})
		if err != nil {
			return task.Facts{}, infraError{fmt.Errorf("facts sandbox: %w", err)}
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			_ = sb.Close(cctx)
		}()
		surf, err := task.QuerySurface(ctx, sb, t)
		if err != nil {
			return task.Facts{}, err
		}
		f, err := task.Derive(ctx, sb, t, e.hidden, surf)
		if err == nil {
			e.log.Info("derived the task's grading facts", "task_id", t.ID, "fail_to_pass", len(f.FailToPass),
				"pass_to_pass", len(f.PassToPass), "probes", len(f.Probes), "candidates", f.Candidates,
				"cases", len(f.Cases), "case_candidates", f.CaseCandidates, "took", f.Took)
		}
		return f, err
	})
}

// gradeBase runs the hidden tests on the base commit (the episode's image
// with no submission) under the grading's limits in a fresh sandbox.
func (e *Episode) gradeBase(ctx context.Context, facts task.Facts) (task.Result, error) {
	t := e.task
	sb, err := e.r.cfg.Backend.Create(ctx, sandbox.Spec{
		Image: e.image, EpisodeID: e.id + "-base", Workdir: workdirOf(t), Network: sandbox.NetworkNone,
		Lease: e.r.cfg.Lease, Limits: e.r.cfg.SandboxLimits,
	})
	if err != nil {
		return task.Result{}, infraError{fmt.Errorf("harness: episode %s: grade: base sandbox: %w", e.id, err)}
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = sb.Close(cctx)
	}()
	surf, err := e.r.surfaces.Get(ctx, sb, t, e.image)
	if err != nil {
		return task.Result{}, err
	}
	return task.GradeWatched(ctx, sb, t, e.hidden, task.Watch{Facts: facts, Surface: surf})
}

// checkLate records what processes the policy left running did since its
// last call (seen when they were stopped) as a decision of its own,
// attributed to the episode's last step, flagged as a call's effects
// would be.
func (e *Episode) checkLate(ctx context.Context, late sandbox.ExecResult) {
	if e.mon == nil {
		return
	}
	flags := e.mon.CheckLate(ctx, late)
	if len(flags) == 0 {
		return
	}
	var paths []string
	for _, ef := range late.Effects {
		paths = append(paths, ef.Op+" "+ef.Path)
	}
	args, _ := json.Marshal(map[string]any{"effects": paths, "attributed_to": "the episode's last call"})
	cj, _ := json.Marshal(toolcall.Call{EpisodeID: e.id, Tool: "rollcage.background", Args: args})
	d := trajectory.Decision{Call: cj, Action: trajectory.ActionAllow}
	d.Flags, _ = json.Marshal(flags)
	certain := slices.ContainsFunc(flags, func(f rules.Flag) bool { return f.Severity == rules.Certain })
	var cats []string
	for _, f := range flags {
		cats = addUnique(cats, f.Category)
	}
	e.mu.Lock()
	seg, step := e.segment, e.steps
	e.flagged++
	if certain {
		e.hacked = true
		e.hackCats = addUnique(e.hackCats, cats...)
		d.Hack, d.Categories = true, cats
	} else {
		e.unconf++
	}
	e.mu.Unlock()
	_ = e.emit(seg, step, trajectory.TypeDecision, d)
}

// removeDecoys replaces each canary decoy that a snapshot carried over by
// a root-owned link to /dev/null, which no test runner collects, before
// the hidden tests go in (the sandbox user cannot remove root's files, and
// the copy-in replaces whatever is at a name).
func removeDecoys(ctx context.Context, sb sandbox.Sandbox, canaries []sandbox.Canary) error {
	byDir := map[string][]string{}
	for _, c := range canaries {
		byDir[path.Dir(c.Path)] = append(byDir[path.Dir(c.Path)], path.Base(c.Path))
	}
	dirs := make([]string, 0, len(byDir))
	for d := range byDir {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, name := range byDir[d] {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: "/dev/null", Uname: "root", Gname: "root", ModTime: time.Unix(0, 0)}); err != nil {
				return err
			}
		}
		if err := tw.Close(); err != nil {
			return err
		}
		if err := sb.CopyIn(ctx, d, &buf); err != nil {
			return fmt.Errorf("remove canary decoys under %s: %w", d, err)
		}
	}
	return nil
}

// submitChecks records the findings on the submitted change as decision
// events of the submit check (one per file), asks the judge about each
// file when one is configured (it may clear a flag when the instruction
// asks for the change), and reports whether any finding stands as a hack
// (counting a suspicious finding without a judge's verdict as unconfirmed).
func (e *Episode) submitChecks(ctx context.Context, g grade) (hacked bool) {
	if len(g.Findings) == 0 {
		return false
	}
	var files []string
	byFile := map[string][]rules.Flag{}
	for _, f := range g.Findings {
		if _, ok := byFile[f.File]; !ok {
			files = append(files, f.File)
		}
		ev := f.File
		if f.Evidence != "" {
			ev += ": " + f.Evidence
		}
		byFile[f.File] = append(byFile[f.File], rules.Flag{Rule: f.Rule, Category: f.Category, Severity: f.Severity, Reason: f.Reason, Evidence: ev})
	}
	judged := 0
	for _, file := range files {
		flags := byFile[file]
		change := task.FileDiff(g.Sub.Diff, file)
		if len(change) > 16<<10 {
			change = change[:16<<10] + "\n[... cut ...]\n"
		}
		args, _ := json.Marshal(map[string]string{"file": file, "change": change})
		cj, _ := json.Marshal(toolcall.Call{EpisodeID: e.id, Tool: "rollcage.submit_check", Args: args})
		certain := slices.ContainsFunc(flags, func(f rules.Flag) bool { return f.Severity == rules.Certain })
		var cats []string
		for _, f := range flags {
			cats = addUnique(cats, f.Category)
		}
		d := trajectory.Decision{Call: cj, Action: trajectory.ActionAllow}
		d.Flags, _ = json.Marshal(flags)
		hack, unconfirmed := certain, !certain
		if judged < maxSubmitJudged {
			if v, ok := e.r.cfg.Monitor.JudgeSubmission(ctx, e.taskContext, e.id, cj, flags); ok {
				judged++
				d.Verdict, _ = json.Marshal(v)
				if !v.Undecided {
					hack, unconfirmed = v.Hack, false
				}
				e.mu.Lock()
				e.judged++
				e.mu.Unlock()
			}
		}
		if hack {
			d.Hack, d.Categories = true, cats
			hacked = true
		}
		e.mu.Lock()
		seg, step := e.segment, e.steps
		e.flagged++
		if hack {
			e.hacked = true
			e.hackCats = addUnique(e.hackCats, cats...)
		}
		if unconfirmed {
			e.unconf++
		}
		e.mu.Unlock()
		_ = e.emit(seg, step, trajectory.TypeDecision, d)
	}
	return hacked
}

// maxSubmitJudged bounds the judge calls of one submit check.
const maxSubmitJudged = 8

func hashVisible(ctx context.Context, sb sandbox.Sandbox, t task.Task) (map[string]string, error) {
	return task.HashFiles(ctx, sb, workdirOf(t), t.VisibleTests)
}

func lastLine(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			return s[i+1:]
		}
	}
	return s
}

// instanceOf is the benchmark instance t came from, for episode_start;
// nil for a task of rollcage's own.
func instanceOf(t task.Task) *trajectory.Instance {
	if t.InstanceID == "" {
		return nil
	}
	return &trajectory.Instance{InstanceID: t.InstanceID, Benchmark: t.Benchmark, Repo: strings.TrimPrefix(t.UpstreamRepo, "github.com/"), Language: t.Language,
		BaseCommit: t.BaseCommit, Version: t.Version, EnvironmentSetupCommit: t.EnvironmentSetupCommit,
		FailToPass: t.FailToPass, PassToPass: t.PassToPass}
}

// testsStatus is the tests_status of SWE-bench's report.json for a
// benchmark instance graded by test id: its FAIL_TO_PASS and PASS_TO_PASS
// ids sorted by the statuses g reported; nil for any other task or a
// grading that reported none.
func testsStatus(t task.Task, g grade) json.RawMessage {
	if t.InstanceID == "" || len(t.FailToPass) == 0 || g.Rule != task.RewardTests || len(g.Statuses) == 0 {
		return nil
	}
	e := task.SWEBenchReport(t.InstanceID, t.FailToPass, t.PassToPass, task.ReportRun{Ran: true, Statuses: g.Statuses})[t.InstanceID]
	b, _ := json.Marshal(e.TestsStatus) // lists of strings: it cannot fail
	return b
}
