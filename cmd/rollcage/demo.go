package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

func init() {
	register(command{Name: "demo", Summary: "replay the embedded demo suite (clean, no-op and hacked scripts) through Docker and the monitor", Run: runDemo})
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", "[--policy replay] [--concurrency N] [--out DIR] [--only TASK] [--no-seal] [judge flags]", stderr)
	policy := fs.String("policy", "replay", "policy: replay (the suite's scripted trajectories)")
	sf := addSuiteFlags(fs, "demo")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *policy != "replay" {
		return fmt.Errorf("--policy %q: the demo replays its scripts; use --policy replay (or 'rollcage run' for a model)", *policy)
	}
	s, err := sf.open(ctx, demo.Scripts, stderr)
	if err != nil {
		return err
	}
	defer s.env.close()
	env, ef, scripts := s.env, sf.envFlags, s.scripts

	start := time.Now()
	rows := harness.ReplayAll(ctx, env.runner, s.byID, s.hidden, scripts, *ef.conc, func(done int) {
		progress(stderr, start, done, len(scripts))
	})
	fmt.Fprintln(stderr)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	for i := range rows {
		if rows[i].Err == nil {
			rows[i].Err = harness.Expect(rows[i].Script, rows[i].Outcome)
		}
	}

	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "task\tscript\tkind\tflagged\tblocked\trewritten\treward\tresolution\tcaught\tok\t")
	wrong := 0
	for _, r := range rows {
		res := "-"
		switch {
		case r.Outcome.HackedResolution:
			res = "hacked"
		case r.Outcome.UnconfirmedResolution:
			res = "unconfirmed" // flagged, run: no judge to decide
		case r.Outcome.CleanResolution:
			res = "clean"
		}
		caught := ""
		switch {
		case r.Outcome.Hacked:
			caught = strings.Join(r.Outcome.HackCategories, ",")
		case r.Outcome.Unconfirmed > 0:
			caught = fmt.Sprintf("flagged ×%d, unconfirmed", r.Outcome.Unconfirmed)
		}
		mark := "✓"
		if r.Err != nil {
			mark, wrong = "✗", wrong+1
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%g\t%s\t%s\t%s\t\n", r.Script.Task, r.Script.Name, r.Script.Kind, r.Outcome.Flagged, r.Outcome.Blocked, r.Outcome.Rewritten, r.Outcome.Reward, res, caught, mark)
	}
	tw.Flush()
	for _, r := range rows {
		if r.Err != nil {
			fmt.Fprintf(stdout, "✗ %v\n", r.Err)
		}
	}
	fmt.Fprintf(stdout, "\n%d episodes in %s on %s; trajectories in %s\n", len(rows), time.Since(start).Round(time.Second), sealNote(*ef.noSeal), env.store.Dir())
	if wrong > 0 {
		return &exitError{Code: 1, Err: fmt.Errorf("%d of %d rows are not what they must be", wrong, len(rows))}
	}
	return nil
}

// suiteFlags are the flags of the commands that replay an embedded suite
// (demo, redteam): the environment's, and --only.
type suiteFlags struct {
	*envFlags
	only stringList
}

// addSuiteFlags adds them to fs; the trajectories go to out/NAME by default.
func addSuiteFlags(fs *flag.FlagSet, name string) *suiteFlags {
	f := &suiteFlags{envFlags: addEnvFlags(fs, 4, filepath.Join("out", name), "directory for the episodes' trajectories")}
	fs.Var(&f.only, "only", "run only this task id (repeatable)")
	return f
}

// suite is a loaded suite (the tasks --only keeps) and the environment
// its episodes run in.
type suite struct {
	tasks   []task.Task
	byID    map[string]task.Task
	hidden  fs.FS
	scripts []task.Script
	env     *env
}

// open checks the flags, loads the suite with the scripts load returns
// and opens the environment; the caller closes s.env.
func (f *suiteFlags) open(ctx context.Context, load func() ([]task.Script, error), stderr io.Writer) (suite, error) {
	if err := f.check(); err != nil {
		return suite{}, err
	}
	var s suite
	var err error
	if s.tasks, s.byID, s.hidden, s.scripts, err = loadSuite(load, f.only); err != nil {
		return suite{}, err
	}
	if s.env, err = newEnv(ctx, f.options(*f.out, stderr)); err != nil {
		return suite{}, err
	}
	return s, nil
}

// progress rewrites the terminal line of w with the episodes done of
// total and the time since start.
func progress(w io.Writer, start time.Time, done, total int) {
	fmt.Fprintf(w, "\r\033[K%d/%d episodes  %s", done, total, time.Since(start).Round(time.Second))
}

// loadSuite loads the embedded demo tasks and the scripts load returns,
// keeping only the tasks of only (all when empty).
func loadSuite(load func() ([]task.Script, error), only []string) ([]task.Task, map[string]task.Task, fs.FS, []task.Script, error) {
	tasks, hidden, err := demo.Tasks()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	scripts, err := load()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	byID := map[string]task.Task{}
	for _, t := range tasks {
		byID[t.ID] = t
	}
	if scripts, err = onlyTasks(scripts, byID, only); err != nil {
		return nil, nil, nil, nil, err
	}
	return tasks, byID, hidden, scripts, nil
}

func onlyTasks(scripts []task.Script, byID map[string]task.Task, only []string) ([]task.Script, error) {
	if len(only) == 0 {
		return scripts, nil
	}
	for _, id := range only {
		if _, ok := byID[id]; !ok {
			return nil, fmt.Errorf("--only %q: no such demo task; the tasks are %s", id, strings.Join(sortedKeys(byID), ", "))
		}
	}
	return slices.DeleteFunc(scripts, func(s task.Script) bool { return !slices.Contains(only, s.Task) }), nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// env is the wiring shared by demo and run: sandbox backend, rules, judge,
// monitor, trajectory store, runner.
type env struct {
	backend backend
	store   *trajectory.Store
	runner  *harness.Runner
}

// envFlags are the flags of the commands that run episodes here (demo,
// redteam, run): how many at once, where they are recorded, the sandbox
// backend, sealing, the judge and the rules.
type envFlags struct {
	conc    *int
	out     *string
	verbose *bool
	noSeal  *bool
	backend *backendFlags
	judge   *judgeFlags
	rules   *rulesFlags
}

// addEnvFlags adds them to fs, with the command's default concurrency
// and output directory.
func addEnvFlags(fs *flag.FlagSet, conc int, out, outHelp string) *envFlags {
	return &envFlags{
		conc:    fs.Int("concurrency", conc, "episodes running at once"),
		out:     fs.String("out", out, outHelp),
		verbose: fs.Bool("v", false, "log episode lifecycle to stderr"),
		noSeal:  addSealFlag(fs),
		backend: addBackendFlag(fs),
		judge:   addJudgeFlags(fs),
		rules:   addRulesFlags(fs),
	}
}

// check refuses a concurrency that runs nothing.
func (f *envFlags) check() error {
	if *f.conc < 1 {
		return fmt.Errorf("--concurrency %d: use 1 or more", *f.conc)
	}
	return nil
}

// options are newEnv's options from the flags, the trajectories stored
// in storeDir.
func (f *envFlags) options(storeDir string, stderr io.Writer) envOptions {
	return envOptions{storeDir: storeDir, rules: f.rules, judge: f.judge, verbose: *f.verbose, stderr: stderr, noSeal: *f.noSeal, backend: f.backend}
}

type envOptions struct {
	storeDir string
	rules    *rulesFlags
	judge    *judgeFlags
	limits   harness.Limits
	disk     int64         // per-sandbox disk limit in bytes; 0: the backend's default
	backend  *backendFlags // --backend and its flags
	network  string
	routes   []string // model routes of every episode
	user     string   // sandbox user of every episode (harness.Config.SandboxUser)
	verbose  bool
	noSeal   bool
	stderr   io.Writer
}

func newEnv(ctx context.Context, o envOptions) (*env, error) {
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(o.stderr, &slog.HandlerOptions{Level: level}))
	// The store first: a directory another process owns is refused
	// before anything is built or started.
	st, err := trajectory.OpenStore(ctx, trajectory.Config{Dir: o.storeDir, Logger: log})
	if err != nil {
		return nil, err
	}
	r, be, err := o.runner(ctx, st, log)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &env{backend: be, store: st, runner: r}, nil
}

// runner builds the monitor, the sandbox backend and the runner that
// records into st.
func (o envOptions) runner(ctx context.Context, st *trajectory.Store, log *slog.Logger) (*harness.Runner, backend, error) {
	eng, err := o.rules.engine(ctx, log)
	if err != nil {
		return nil, nil, err
	}
	mcfg := monitor.Config{Rules: eng, FailPolicy: o.judge.policy, Logger: log}
	j, err := o.judge.build()
	if err != nil {
		return nil, nil, err
	}
	if j != nil { // a nil *judge.OpenAI in the interface would not be nil
		mcfg.Judge = j
	}
	mon, err := monitor.New(mcfg)
	if err != nil {
		return nil, nil, err
	}
	be, err := openBackend(ctx, backendOptions{flags: o.backend, log: log, limits: sandbox.Limits{DiskBytes: o.disk}})
	if err != nil {
		return nil, nil, err
	}
	r, err := harness.NewRunner(harness.Config{Backend: be, Monitor: mon, Store: st, Limits: o.limits, Network: o.network, ModelRoutes: o.routes, SandboxUser: o.user, Seal: !o.noSeal, Logger: log})
	if err != nil {
		be.Close(context.WithoutCancel(ctx))
		return nil, nil, err
	}
	return r, be, nil
}

func (e *env) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return errors.Join(e.store.Close(), e.backend.Close(ctx))
}
