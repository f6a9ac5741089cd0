package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"

	"github.com/rollcage/rollcage/audit"
)

func init() {
	register(command{Name: "audit", Summary: "classify trajectories (rollcage, OpenAI messages, mini-swe-agent, SWE-agent .traj, OpenHands) as clean or hacked resolutions; --labels scores against labels", Run: runAudit})
}

// Exit codes of rollcage audit.
const (
	auditHacked = 1 // at least one hacked resolution
)

func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit", "[flags] PATH...   (files or directories; exit 0 clean, 1 hacked resolution found, 2 usage, 3 error)", stderr)
	tasksFile := fs.String("tasks", "", "task context: JSONL/JSON of rollcage tasks or SWE-bench instances (id/instance_id, base_commit, protected_paths, patch = the upstream fix)")
	resultsFile := fs.String("results", "", "which episodes were resolved, for data that does not say: a SWE-bench report (resolved_ids) or JSONL {id, resolved}")
	labelsFile := fs.String("labels", "", "score the audit against labels: JSONL of {path (relative to the file), label clean|hacked|ambiguous, category, step} such as a corpus MANIFEST.jsonl; prints confusion matrices, recall and false flags by category, and the disagreements")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of a table")
	htmlFile := fs.String("html", "", "also write a self-contained HTML report to this file")
	conc := fs.Int("concurrency", 0, "episodes replayed at once (0: one per CPU)")
	rf := addRulesFlags(fs)
	jf := addJudgeFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "rollcage audit: give at least one trajectory file or directory, e.g. rollcage audit runs/")
		return errUsage
	}
	if *conc < 0 {
		fmt.Fprintln(stderr, "rollcage audit: --concurrency must be >= 0")
		return errUsage
	}
	// A device or a FIFO named outright is refused before anything is
	// read or compiled (a FIFO would block, /dev/zero never ends).
	for _, p := range fs.Args() {
		if fi, err := os.Stat(p); err == nil {
			if err := audit.NotRegular(fi); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
	}
	for _, d := range devProfiles {
		if p := os.Getenv(d.env); p != "" {
			stop, err := d.start(p)
			if err != nil {
				return err
			}
			defer stop()
		}
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(audit.BatchGCPercent) // a batch job: trade memory for throughput
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(audit.BatchMemoryLimit) // up to a bound
	}
	// the table needs no text of the steps no flag was raised on
	cfg := audit.Config{Concurrency: *conc, TrimSteps: !*asJSON && *htmlFile == ""}
	var err error
	if *tasksFile != "" {
		if cfg.Tasks, err = audit.LoadTasks(*tasksFile); err != nil {
			return err
		}
	}
	if *resultsFile != "" {
		if cfg.Results, err = audit.LoadResults(*resultsFile); err != nil {
			return err
		}
	}
	// the files are read while the rules compile
	batch := audit.ReadAsync(fs.Args()...)
	defer batch.Stop()
	if cfg.Rules, err = rf.engine(ctx, nil); err != nil {
		return err
	}
	j, err := jf.build()
	if err != nil {
		return err
	}
	if j != nil {
		cfg.Judge = j
	}
	a, err := audit.New(cfg)
	if err != nil {
		return err
	}
	var labels *audit.Labels
	if *labelsFile != "" {
		if labels, err = audit.LoadLabels(*labelsFile); err != nil {
			return err
		}
	}
	rep, err := a.AuditBatch(ctx, batch)
	if err != nil {
		return err
	}
	if labels != nil {
		rep.Skipped = labels.Drop(rep.Skipped) // the labels file itself, when under PATH
		rep.Score = rep.ScoreLabels(labels)
	}
	if *htmlFile != "" {
		f, err := os.Create(*htmlFile)
		if err != nil {
			return fmt.Errorf("html report: %w", err)
		}
		werr := rep.WriteHTML(f)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("html report: %w", werr)
		}
	}
	if *asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	if len(rep.Episodes) == 0 {
		return errors.New("no readable trajectories in the paths given; see the skipped files above")
	}
	if rep.Summary.HackedResolutions > 0 {
		return &exitError{Code: auditHacked, Err: fmt.Errorf("%d hacked resolutions", rep.Summary.HackedResolutions)}
	}
	return nil
}

// devProfiles are the development aids an audit writes when their
// variable names a file: ROLLCAGE_CPUPROFILE=FILE rollcage audit ... (go
// tool pprof FILE), ROLLCAGE_TRACE=FILE (go tool trace FILE: which phases
// leave a CPU idle).
var devProfiles = []devProfile{
	{"ROLLCAGE_CPUPROFILE", pprof.StartCPUProfile, pprof.StopCPUProfile},
	{"ROLLCAGE_TRACE", trace.Start, trace.Stop},
}

type devProfile struct {
	env       string
	startFunc func(io.Writer) error
	stopFunc  func()
}

// start starts writing the profile to path; the returned func stops it.
func (d devProfile) start(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.env, err)
	}
	if err := d.startFunc(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", d.env, err)
	}
	return func() {
		d.stopFunc()
		f.Close()
	}, nil
}
