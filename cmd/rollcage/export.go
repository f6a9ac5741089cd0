package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

func init() {
	register(command{Name: "export", Summary: "export finished episodes as training samples per segment or turn (messages JSONL, Parquet), as ATIF trajectories, or as SWE-bench's report.json", Run: runExport})
}

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("export", "[--format messages|parquet|atif|swebench-report] [--granularity segment|turn] [--prefix mask|once] [--hacked-reward 0] [--unconfirmed mask|zero|raw] [--auxiliary] [--tasks FILE] [--attempt N] [--out FILE] DIR", stderr)
	format := fs.String("format", trajectory.FormatMessages, "messages (JSONL, one sample per line), parquet, atif (JSONL, one ATIF trajectory per line), or swebench-report (SWE-bench's report.json of the graded instances; needs --tasks)")
	tasksFile := fs.String("tasks", "", "with swebench-report: the task file of the run, whose instances give FAIL_TO_PASS and PASS_TO_PASS")
	attempt := fs.Int("attempt", 0, "with swebench-report: the attempt whose episodes are reported (report.json has one entry per instance)")
	granularity := fs.String("granularity", trajectory.GranularitySegment, "segment (one sample per chain of turns whose prompts only grew) or turn (one per model turn); messages and parquet only")
	prefix := fs.String("prefix", trajectory.PrefixMask, "a forked episode's prefix shared with its parent: mask (kept in the child's samples, loss mask 0) or once (left out of the child's; the parent's samples have it); messages and parquet only")
	hackedReward := fs.Float64("hacked-reward", 0, "training_reward of a hacked episode's samples (e.g. -1 to penalise); reward keeps the raw one")
	unconfirmed := fs.String("unconfirmed", trajectory.UnconfirmedMask, "training_reward of an unconfirmed episode (a flagged call no judge decided): mask (null until a judge's verdict is recorded), zero or raw")
	auxiliary := fs.Bool("auxiliary", false, "export auxiliary model calls too (marked by the client's "+trajectory.AuxiliaryHeader+" header, or sent without the episode's tools or system prompt), as samples marked auxiliary; left out by default")
	out := fs.String("out", "", "output file (default: stdout for messages; required for parquet)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		fmt.Fprintln(stderr, "rollcage export: give one DIR: a trajectory store, or a run's --out directory")
		return errUsage
	}
	bad := func(format string, a ...any) error {
		fmt.Fprintf(stderr, "rollcage export: "+format+"\n", a...)
		return errUsage
	}
	switch *format {
	case trajectory.FormatMessages, trajectory.FormatParquet, trajectory.FormatATIF:
	case formatSWEBenchReport:
		if *tasksFile == "" {
			return bad("--format swebench-report needs --tasks FILE: the task file of the run, for each instance's FAIL_TO_PASS and PASS_TO_PASS")
		}
	default:
		return bad("--format %q: use messages, parquet, atif or swebench-report", *format)
	}
	if *granularity != trajectory.GranularitySegment && *granularity != trajectory.GranularityTurn {
		return bad("--granularity %q: use segment or turn", *granularity)
	}
	if *prefix != trajectory.PrefixMask && *prefix != trajectory.PrefixOnce {
		return bad("--prefix %q: use mask or once", *prefix)
	}
	policy := trajectory.RewardPolicy{Hacked: *hackedReward, Unconfirmed: *unconfirmed}
	if err := policy.Validate(); err != nil {
		return bad("--hacked-reward %v --unconfirmed %q: %v", *hackedReward, *unconfirmed, err)
	}
	dir := fs.Arg(0)
	// A run's output directory holds the store in trajectories/.
	if st, err := os.Stat(filepath.Join(dir, "trajectories")); err == nil && st.IsDir() {
		dir = filepath.Join(dir, "trajectories")
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("%s is not a directory: give the trajectory directory (e.g. out/demo or a run's --out)", fs.Arg(0))
	}
	var w io.Writer = stdout
	if *out == "" && *format == trajectory.FormatParquet {
		return bad("--out is required for parquet: Parquet is binary; name a file")
	}
	var f *os.File
	if *out != "" {
		var err error
		if f, err = os.Create(*out); err != nil {
			return err
		}
		w = f
	}
	// One bad log costs its own samples, not the directory's.
	skip := func(path string, err error) {
		fmt.Fprintf(stderr, "rollcage export: warning: skipped %s: %v\n", path, err)
	}
	var err error
	if *format == formatSWEBenchReport {
		var tasks []task.Task
		if tasks, _, err = task.LoadFile(*tasksFile); err == nil {
			var n int
			n, err = swebenchReport(ctx, dir, tasks, *attempt, w)
			if err == nil {
				fmt.Fprintf(stderr, "%d instances in the report\n", n)
			}
		}
	} else {
		var auxTurns, auxEpisodes int
		leftOut := func(string, int) {}
		if !*auxiliary {
			leftOut = func(_ string, n int) { auxTurns += n; auxEpisodes++ }
		}
		err = trajectory.Export(ctx, dir, w, trajectory.ExportOptions{Format: *format, Granularity: *granularity, Prefix: *prefix, Skip: skip, Reward: policy,
			Auxiliary: *auxiliary, LeftOut: leftOut})
		if auxTurns > 0 {
			fmt.Fprintf(stderr, "rollcage export: left out %d auxiliary model turns of %d episodes (not the episodes' conversations): --auxiliary exports them\n", auxTurns, auxEpisodes)
		}
	}
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(*out)
		}
	}
	return err
}
