package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/redteam"
	"github.com/rollcage/rollcage/task"
)

func init() {
	register(command{Name: "redteam", Summary: "replay the red-team suite (new hack spellings and honest look-alikes) and print per-family figures", Run: runRedteam})
}

func runRedteam(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("redteam", "[--concurrency N] [--out DIR] [--only TASK] [--scripts DIR] [--json] [--no-seal] [judge flags]", stderr)
	sf := addSuiteFlags(fs, "redteam")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	dir := fs.String("scripts", "", "replay the scripts under this directory (TASK/NAME.json, each with a family) instead of the suite, e.g. redteam/testdata/heldout")
	if err := parse(fs, args); err != nil {
		return err
	}
	load := demo.RedteamScripts
	if *dir != "" {
		load = func() ([]task.Script, error) { return scriptsIn(*dir) }
	}
	s, err := sf.open(ctx, load, stderr)
	if err != nil {
		return err
	}
	defer s.env.close()
	env, ef := s.env, sf.envFlags
	start := time.Now()
	rep, err := redteam.Run(ctx, redteam.Config{
		Runner: env.runner, Backend: env.backend, Store: env.store,
		Tasks: s.tasks, Hidden: s.hidden, Scripts: s.scripts, Concurrency: *ef.conc,
		Progress: func(done, total int) { progress(stderr, start, done, total) },
	})
	fmt.Fprintln(stderr)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printRedteam(stdout, rep)
		fmt.Fprintf(stdout, "\n%d episodes in %s on %s; trajectories in %s\n", len(rep.Results), time.Since(start).Round(time.Second), sealNote(*ef.noSeal), env.store.Dir())
	}
	var missed []string
	for _, g := range rep.Goals {
		if !g.Met {
			missed = append(missed, fmt.Sprintf("%s: %s, want %s", g.Name, g.Got, g.Want))
		}
	}
	if len(missed) > 0 {
		return &exitError{Code: 1, Err: fmt.Errorf("goals missed: %s", strings.Join(missed, "; "))}
	}
	return nil
}

// scriptsIn loads red-team scripts from a directory laid out as the
// suite's (TASK/NAME.json); every script needs a family.
func scriptsIn(dir string) ([]task.Script, error) {
	ss, err := task.LoadScripts(os.DirFS(dir), ".")
	if err != nil {
		return nil, fmt.Errorf("--scripts %s: %w", dir, err)
	}
	if len(ss) == 0 {
		return nil, fmt.Errorf("--scripts %s: no scripts (TASK/NAME.json) under it", dir)
	}
	for _, s := range ss {
		if s.Family == "" {
			return nil, fmt.Errorf("--scripts %s: script %s/%s: field \"family\" is required", dir, s.Task, s.Name)
		}
	}
	return ss, nil
}

func printRedteam(w io.Writer, rep redteam.Report) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "family\tepisodes\tresolved\tobtained\tlabelled\tunconfirmed\tmissed\terrors\t")
	hack := func(f redteam.Family) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", f.Family, f.Episodes, f.Resolved, f.Obtained, f.Labelled, f.Unconfirmed, f.Episodes-f.Errors-f.Labelled-f.Unconfirmed, f.Errors)
	}
	for _, f := range rep.Families {
		if f.Kind == task.KindHack {
			hack(f)
		}
	}
	hack(rep.Hacks)
	fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t")
	fmt.Fprintln(tw, "honest family\tepisodes\tresolved\tcalls blocked\tcalled hacked\tunconfirmed\t\terrors\t")
	honest := func(f redteam.Family) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t\t%d\t\n", f.Family, f.Episodes, f.Resolved, f.Blocked, f.Labelled, f.Unconfirmed, f.Errors)
	}
	for _, f := range rep.Families {
		if f.Kind != task.KindHack {
			honest(f)
		}
	}
	honest(rep.Honest)
	tw.Flush()
	fmt.Fprintln(w)
	for _, r := range rep.Results {
		switch {
		case r.Error != "":
			fmt.Fprintf(w, "error     %s/%s: %s\n", r.Task, r.Script, r.Error)
		case len(r.Obtained) > 0:
			fmt.Fprintf(w, "obtained  %s/%s (%s): %s\n", r.Task, r.Script, r.Family, strings.Join(r.Obtained, "; "))
		}
		switch {
		case r.Kind == task.KindHack && !r.Labelled && r.Error == "":
			state := "missed"
			if r.Unconfirmed {
				state = "flagged, unconfirmed"
			}
			fmt.Fprintf(w, "unlabelled %s/%s (%s): %s\n", r.Task, r.Script, r.Family, state)
		case r.Kind != task.KindHack && (r.Labelled || r.Blocked > 0 || r.Unconfirmed):
			fmt.Fprintf(w, "honest    %s/%s (%s): hacked=%v blocked=%d unconfirmed=%v\n", r.Task, r.Script, r.Family, r.Labelled, r.Blocked, r.Unconfirmed)
		}
	}
	fmt.Fprintln(w)
	for _, g := range rep.Goals {
		mark := "✓"
		if !g.Met {
			mark = "✗"
		}
		fmt.Fprintf(w, "%s %s: %s (goal %s)\n", mark, g.Name, g.Got, g.Want)
	}
}
