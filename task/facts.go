package task

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// Reward rules of a Task (field "reward").
const (
	// RewardTests: reward 1 only when every expected test id is reported
	// passed, with known-answer probes and the test framework watched
	// from inside. The default.
	RewardTests = "tests"
	// RewardSummary: the old rule, pytest's summary line (exit 0, no
	// failures, at least one pass). Forgeable by the solution's code;
	// the grade event says so.
	RewardSummary = "summary"
)

// RewardRule is t's reward rule with the default applied.
func (t Task) RewardRule() string {
	if t.Reward == "" {
		return RewardTests
	}
	return t.Reward
}

// Facts are what grading knows of a task before any submission, derived
// once per task image and hidden tests by running the hidden tests on the
// base commit and with the reference fix (each twice, to drop flaky ids).
type Facts struct {
	// FailToPass and PassToPass are the expected ids (canonical node ids):
	// failing on the base commit and passing with the fix, and passing on
	// both. Reward 1 needs every one reported passed.
	FailToPass []string `json:"fail_to_pass"`
	PassToPass []string `json:"pass_to_pass"`
	// Probes are the perturbed known-answer probes that failed in every
	// derivation run; Literal says the literal probes behave on this task
	// (its runner collects test_* functions of the hidden test files).
	Probes  []Probe `json:"probes,omitempty"`
	Literal bool    `json:"literal"`
	// Cases are the differential cases kept of CaseCandidates tried
	// (cases.go): the reference fix's outputs at perturbed call sites.
	Cases          []Probe `json:"cases,omitempty"`
	CaseCandidates int     `json:"case_candidates,omitempty"`
	// Declared: the ids came from the task, not from a derivation.
	Declared bool `json:"declared,omitempty"`
	// Candidates counts the perturbed probes tried; Flaky the ids whose
	// status changed between repeated runs (dropped).
	Candidates int           `json:"candidates"`
	Flaky      []string      `json:"flaky,omitempty"`
	Took       time.Duration `json:"took_ns"`
}

// Expected returns every expected id.
func (f Facts) Expected() []string {
	return append(slices.Clone(f.FailToPass), f.PassToPass...)
}

// FactsCache derives Facts once per key (the task image's id and the
// hidden tests' hash). Safe for concurrent use; concurrent callers of one
// key wait for one derivation.
type FactsCache struct {
	mu sync.Mutex
	m  map[string]*factsEntry // guarded by mu
}

type factsEntry struct {
	done  chan struct{}
	facts Facts
	err   error
}

// Get returns the Facts of key, calling derive when they are not cached.
// A failed derivation is not cached.
func (c *FactsCache) Get(ctx context.Context, key string, derive func(context.Context) (Facts, error)) (Facts, error) {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*factsEntry{}
	}
	e, ok := c.m[key]
	if !ok {
		e = &factsEntry{done: make(chan struct{})}
		c.m[key] = e
		c.mu.Unlock()
		e.facts, e.err = derive(ctx)
		if e.err != nil {
			c.mu.Lock()
			delete(c.m, key)
			c.mu.Unlock()
		}
		close(e.done)
		return e.facts, e.err
	}
	c.mu.Unlock()
	select {
	case <-e.done:
		return e.facts, e.err
	case <-ctx.Done():
		return Facts{}, ctx.Err()
	}
}

// FactsKey is the cache key of t's facts on the image with id imageID.
func FactsKey(t Task, imageID string, hidden fs.FS) (string, error) {
	var h string
	if t.TestPatch != "" || len(t.ExpectedStatus) > 0 {
		// Declared ids: the key is what declares them (the image's own
		// hidden tests are in imageID), and what the differential cases
		// depend on besides: the reference fix, and whether they are
		// derived at all.
		sum := sha256.Sum256([]byte(t.TestPatch + "\x00" + strings.Join(t.FailToPass, "\x00") + "\x00" + strings.Join(t.PassToPass, "\x00") +
			"\x00" + t.FixPatch + "\x00" + strconv.FormatBool(t.FactsNeedSandbox())))
		h = hex.EncodeToString(sum[:])
	} else {
		var err error
		if h, err = HiddenHash(hidden, t.HiddenTests); err != nil {
			return "", err
		}
	}
	return imageID + "\x00" + h + "\x00" + t.Workdir + "\x00" + t.TestCommand + "\x00" + t.BaseCommit + "\x00" + t.UpstreamFixRef, nil
}

// derivation repeats: each state's run is repeated this often.
const deriveRepeats = 2

// Derive takes t's facts in sb, a sandbox from the task's own (unsealed)
// image where the reference fix is reachable: it installs the grading
// kit, finds the probe candidates of the hidden tests, and runs the
// hidden tests with every candidate on the base commit and with the fix.
// A task that declares its expected ids keeps them; the runs then only
// choose the probes. A test-patch task (the SWE-bench family) is run only
// for its differential cases, and only when it has a reference fix and
// its tests run under pytest (FactsNeedSandbox); sb may be nil when it
// does not.
func Derive(ctx context.Context, sb sandbox.Sandbox, t Task, hidden fs.FS, surf Surface) (Facts, error) {
	t = t.withDefaults()
	start := time.Now()
	var f Facts
	fail := func(err error) (Facts, error) {
		return f, fmt.Errorf("derive the facts of %s: %w", t.ID, err)
	}
	if t.TestPatch != "" || len(t.ExpectedStatus) > 0 {
		// The SWE-bench family and R2E-Gym declare their ids; a test
		// patch with a reference fix, run under pytest, adds
		// differential cases (no perturbed probes are derived for it).
		if len(t.FailToPass) == 0 {
			return fail(fmt.Errorf("the instance names no FAIL_TO_PASS ids: %w", ErrGrading))
		}
		f = Facts{FailToPass: slices.Clone(t.FailToPass), PassToPass: slices.Clone(t.PassToPass), Declared: true}
		if t.FactsNeedSandbox() {
			if err := installKit(ctx, sb, surf); err != nil {
				return fail(err)
			}
			var err error
			if f.Cases, f.CaseCandidates, err = derivePatchCases(ctx, sb, t, surf); err != nil {
				return fail(err)
			}
		}
		f.Took = time.Since(start)
		return f, nil
	}
	if t.UpstreamFixRef == "" && len(t.FailToPass) == 0 {
		return fail(fmt.Errorf("the task names no expected test ids and no reference fix: declare fail_to_pass and pass_to_pass, set upstream_fix_ref, or set \"reward\": \"summary\": %w", ErrGrading))
	}
	if err := installKit(ctx, sb, surf); err != nil {
		return fail(err)
	}
	files, err := hiddenFiles(hidden, t.HiddenTests)
	if err != nil {
		return fail(fmt.Errorf("%w: %w", ErrGrading, err))
	}
	cands, err := probeCandidates(ctx, sb, t, surf, files)
	if err != nil {
		return fail(err)
	}
	f.Candidates = len(cands)
	probes := append(cands, literalProbes()...)
	rw, err := rewriteTests(files, probes)
	if err != nil {
		return fail(fmt.Errorf("%w: %w", ErrGrading, err))
	}
	if err := copyTests(ctx, sb, t, rw.files); err != nil {
		return fail(err)
	}
	runState := func(ref string) ([]derivRun, error) {
		if err := checkout(ctx, sb, t, ref); err != nil {
			return nil, err
		}
		var out []derivRun
		for range deriveRepeats {
			r, err := watchedRun(ctx, sb, t, testPaths(t, rw.files), GradeTimeout, "")
			if err != nil {
				return nil, err
			}
			if r.Forged || !r.Hello || !r.End {
				return nil, fmt.Errorf("the hidden tests did not run to the end at %s under the grading kit (records: hello %t, end %t, forged %t; exit %d %s): %s: %w",
					ref, r.Hello, r.End, r.Forged, r.Exec.ExitCode, r.Exec.Stopped, lastLine(r.Exec.Output), ErrGrading)
			}
			st, _ := statuses(r.Records)
			res := derivRun{st: map[string]Status{}, probes: map[string][]Status{}}
			for id, s := range st {
				orig, p := rw.restoreID(id)
				if p != nil {
					name := nameOf(id)
					res.probes[name] = append(res.probes[name], s)
					continue
				}
				res.st[canonicalID(t, orig)] = s
			}
			out = append(out, res)
		}
		return out, nil
	}
	base := t.BaseCommit
	if base == "" {
		// The image's HEAD, as an id: HEAD moves with the checkouts below.
		if base, err = headCommit(ctx, sb, t); err != nil {
			return fail(err)
		}
	}
	onBase, err := runState(base)
	if err != nil {
		return fail(err)
	}
	var onFix []derivRun
	if t.UpstreamFixRef != "" {
		if onFix, err = runState(t.UpstreamFixRef); err != nil {
			return fail(err)
		}
	}
	all := append(slices.Clone(onBase), onFix...)

	// Probes: kept when every instance failed (must-pass: passed) in
	// every run.
	litFail, litPass := false, false
	for fresh, p := range rw.probe {
		ok := true
		for _, r := range all {
			st := r.probes[fresh]
			if len(st) == 0 {
				ok = false
			}
			for _, s := range st {
				want := s == StatusFailed
				if !p.MustFail {
					want = s == StatusPassed
				}
				ok = ok && want
			}
		}
		switch {
		case p.Test == "" && p.MustFail:
			litFail = ok
		case p.Test == "":
			litPass = ok
		case ok:
			f.Probes = append(f.Probes, p)
		}
	}
	f.Literal = litFail && litPass
	f.Probes = completeChains(f.Probes, cands)
	sort.Slice(f.Probes, func(i, j int) bool {
		a, b := f.Probes[i], f.Probes[j]
		return a.File+a.Test < b.File+b.Test || a.File+a.Test == b.File+b.Test && a.Step < b.Step
	})

	if len(t.FailToPass) > 0 {
		f.FailToPass, f.PassToPass, f.Declared = slices.Clone(t.FailToPass), slices.Clone(t.PassToPass), true
	} else {
		ids := map[string]bool{}
		for _, r := range all {
			for id := range r.st {
				ids[id] = true
			}
		}
		for _, id := range slices.Sorted(maps.Keys(ids)) {
			b, bOK := same(onBase, id)
			x, xOK := same(onFix, id)
			if !bOK || !xOK {
				f.Flaky = append(f.Flaky, id)
				continue
			}
			switch {
			case b != StatusPassed && x == StatusPassed:
				f.FailToPass = append(f.FailToPass, id)
			case b == StatusPassed && x == StatusPassed:
				f.PassToPass = append(f.PassToPass, id)
			}
		}
		if len(f.FailToPass) == 0 {
			return fail(fmt.Errorf("no hidden test fails on the base commit and passes with the fix %s (base %v, fix %v): %w", t.UpstreamFixRef, onBase[0].st, onFix[0].st, ErrGrading))
		}
	}
	if t.UpstreamFixRef != "" {
		if err := copyTests(ctx, sb, t, files); err != nil {
			return fail(err)
		}
		at := func(ctx context.Context, fix bool) error {
			if fix {
				return checkout(ctx, sb, t, t.UpstreamFixRef)
			}
			return checkout(ctx, sb, t, base)
		}
		f.Cases, f.CaseCandidates, err = deriveCases(ctx, sb, t, surf, caseSite{tests: testPaths(t, files), dir: t.HiddenTestsDest, at: at})
		if err != nil {
			return fail(err)
		}
	}
	// Leave the repository at the base for whoever looks next.
	if err := checkout(ctx, sb, t, base); err != nil {
		return fail(err)
	}
	f.Took = time.Since(start)
	return f, nil
}

// same is id's status in every run of rs, and whether it was the same.
func same(rs []derivRun, id string) (Status, bool) {
	var s Status
	for i, r := range rs {
		got := r.st[id]
		if got == "" {
			got = StatusMissing
		}
		if i > 0 && got != s {
			return s, false
		}
		s = got
	}
	return s, true
}

// derivRun is one derivation run: the statuses of the hidden tests by
// canonical id, and of each probe's instances by its fresh name.
type derivRun struct {
	st     map[string]Status
	probes map[string][]Status
}

// headCommit is the commit id of the workdir's HEAD in sb.
func headCommit(ctx context.Context, sb sandbox.Sandbox, t Task) (string, error) {
	script := "cd " + shellQuote(t.Workdir) + " && " + gitHarden + " rev-parse --verify -q HEAD^{commit}"
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Session: submitSession, Command: cleanEnv("/nonexistent") + " " + shellQuote(script), Timeout: submitTimeout})
	if err != nil {
		return "", fmt.Errorf("resolve HEAD: %w", err)
	}
	id := strings.TrimSpace(res.Output)
	if res.ExitCode != 0 || !hexRE.MatchString(id) {
		return "", fmt.Errorf("resolve HEAD of %s (exit %d): %s: set base_commit: %w", t.Workdir, res.ExitCode, lastLine(res.Output), ErrGrading)
	}
	return id, nil
}

// checkout puts the workdir at ref, as the sandbox user, git hardened.
func checkout(ctx context.Context, sb sandbox.Sandbox, t Task, ref string) error {
	script := "cd " + shellQuote(t.Workdir) + " && " + gitHarden + " reset -q --hard " + shellQuote(ref) + " 2>&1 && " + gitHarden + " clean -qfdx 2>&1"
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Session: submitSession, Command: cleanEnv("/nonexistent") + " " + shellQuote(script), Timeout: submitTimeout})
	if err != nil {
		return fmt.Errorf("check out %s: %w", ref, err)
	}
	if res.ExitCode != 0 || res.Stopped != "" {
		return fmt.Errorf("check out %s (exit %d%s): %s: %w", ref, res.ExitCode, res.Stopped, lastLine(res.Output), ErrGrading)
	}
	return nil
}

// hiddenFiles reads the regular files under dir of fsys, by name
// relative to dir.
func hiddenFiles(fsys fs.FS, dir string) (map[string][]byte, error) {
	if fsys == nil {
		return nil, fmt.Errorf("hidden tests: no file system given")
	}
	out := map[string][]byte{}
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		out[strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hidden tests %s: %w", dir, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("hidden tests %s: no files", dir)
	}
	return out, nil
}

// copyTests copies files to t.HiddenTestsDest, root-owned and read-only
// for the sandbox user.
func copyTests(ctx context.Context, sb sandbox.Sandbox, t Task, files map[string][]byte) error {
	var tf []tarFile
	dirs := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		for d := path.Dir(name); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			tf = append(tf, tarFile{d + "/", nil, 0o755, 0})
		}
		tf = append(tf, tarFile{name, files[name], 0o644, 0})
	}
	sort.SliceStable(tf, func(i, j int) bool {
		return strings.Count(tf[i].name, "/") < strings.Count(tf[j].name, "/") && strings.HasSuffix(tf[i].name, "/")
	})
	if err := sb.CopyIn(ctx, t.HiddenTestsDest, strings.NewReader(string(tarFiles(tf)))); err != nil {
		return fmt.Errorf("copy hidden tests to %s: %w", t.HiddenTestsDest, err)
	}
	return nil
}

// testPaths are the absolute paths of the Python test files of files.
func testPaths(t Task, files map[string][]byte) []string {
	var out []string
	for name := range files {
		if strings.HasSuffix(name, ".py") {
			out = append(out, path.Join(t.HiddenTestsDest, name))
		}
	}
	sort.Strings(out)
	return out
}

// probeCandidates runs the kit's probe finder over the hidden test files
// in sb (they are copied in first) with an isolated interpreter.
func probeCandidates(ctx context.Context, sb sandbox.Sandbox, t Task, surf Surface, files map[string][]byte) ([]Probe, error) {
	if err := copyTests(ctx, sb, t, files); err != nil {
		return nil, err
	}
	if err := sb.CopyIn(ctx, surf.Stdlib, strings.NewReader(string(tarFiles([]tarFile{{"rollcage_cases.py", kitCases, 0o644, 0}})))); err != nil {
		return nil, fmt.Errorf("install the probe finder: %w", err)
	}
	paths := testPaths(t, files)
	var args []string
	for _, p := range paths {
		if isTestFile(p) {
			args = append(args, shellQuote(p))
		}
	}
	if len(args) == 0 {
		return nil, nil
	}
	py := interpreter(t.TestCommand)
	script := "cd / && exec " + shellQuote(py) + " -I -S " + shellQuote(path.Join(surf.Stdlib, "rollcage_cases.py")) + " probes " + strings.Join(args, " ")
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Session: submitSession, Command: cleanEnv("/nonexistent") + " " + shellQuote(script), Timeout: time.Minute, MaxOutput: 4 << 20})
	if err != nil {
		return nil, fmt.Errorf("find probe candidates: %w", err)
	}
	if res.ExitCode != 0 || res.Truncated {
		return nil, fmt.Errorf("find probe candidates: exit %d: %s: %w", res.ExitCode, lastLine(res.Output), ErrGrading)
	}
	var out []Probe
	sc := bufio.NewScanner(strings.NewReader(res.Output))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var c struct {
			File, Test, Source, Error string
			Step, Stride              int
		}
		if json.Unmarshal(sc.Bytes(), &c) != nil || c.Error != "" || c.Source == "" {
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(c.File, path.Clean(t.HiddenTestsDest)), "/")
		out = append(out, Probe{File: rel, Test: c.Test, Source: c.Source, MustFail: true, Step: c.Step, Stride: c.Stride})
	}
	return out, nil
}

// HiddenHash is the sha256 of the hidden tests under dir of fsys: every
// file's name and content.
func HiddenHash(fsys fs.FS, dir string) (string, error) {
	files, err := hiddenFiles(fsys, dir)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%d:%s\x00%d:", len(name), name, len(files[name]))
		h.Write(files[name])
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
